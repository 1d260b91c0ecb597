"""A pydantic-ai `Model` as the model that writes ctxoffload's summaries.

`summary_writer` is the pydantic-ai door's `SummaryWriter`: its `summary_model` is a pydantic-ai
`Model` or a model name (`"anthropic:claude-haiku-4-5"`, resolved by pydantic-ai's own
`infer_model` when the capability is built, as pydantic-ai's `Agent` resolves one), and left
out, the run's own model writes them. The summary is asked for as pydantic-ai asks for an
agent's structured output: one request (`pydantic_ai.direct.model_request`) whose only tool is
an output tool taking the summary's five fields, text not allowed. The request is made outside
any agent run, so no run's history, usage or messages hold it, and uninstrumented, so it opens
no span in the user's traces.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from .._doors.doors import DOORS
from .._doors.summaries import SummaryWriter
from .._doors.summary_replies import HostSummaryModel, summary_reply, unresolved, usage_of
from ..messages import Msg
from ..model import ModelResponse, Usage
from ._model_name import model_name_of
from ._pydantic_ai_messages import from_pydantic_ai, to_pydantic_ai

__all__ = ["PydanticAISummaryModel", "summary_writer"]

_models: Any = importlib.import_module("pydantic_ai.models")
_direct: Any = importlib.import_module("pydantic_ai.direct")
_ToolDefinition: Any = importlib.import_module("pydantic_ai.tools").ToolDefinition
_instrumented: Any = importlib.import_module("pydantic_ai.models.instrumented")
_messages: Any = importlib.import_module("pydantic_ai.messages")

TAKES = "a pydantic-ai Model or model name ('anthropic:claude-haiku-4-5')"
"""What the pydantic-ai door takes as `summary_model`, in its refusal's words."""

OUTPUT_TOOL = "ctxoffload_summary"
"""The name of the output tool the summary model is asked to call with the five fields."""


def summary_writer(given: object, context_window: int | None) -> SummaryWriter:
    """The pydantic-ai door's `SummaryWriter` for its `summary_model` argument.

    Args:
        given: `summary_model` as the user gave it.
        context_window: the config's window, the summary model's when its profile has none.

    Raises:
        ConfigError: `given` is none of what the door takes, or a name `infer_model` cannot
            resolve (an unknown provider, its package missing, its key unset), with
            pydantic-ai's reason.
    """

    def adapt(model: object) -> PydanticAISummaryModel | None:
        if isinstance(model, str):
            name = model
            try:
                model = _models.infer_model(name)
            except Exception as exc:  # UserError, ImportError, a provider's key error
                raise unresolved(name, "pydantic-ai's infer_model", TAKES, exc) from None
        if not isinstance(model, _models.Model):
            return None
        return PydanticAISummaryModel(model, context_window)

    return SummaryWriter(given, adapt=adapt, takes=TAKES)


class PydanticAISummaryModel(HostSummaryModel):
    """A pydantic-ai `Model` in ctxoffload's `ChatModel` protocol, for summaries only.

    Args:
        model: the pydantic-ai model (an instrumented one is called through what it wraps).
        context_window: the window to assume when the model's profile declares none.
    """

    door = DOORS["pydantic-ai"].name  # the record says the summary came through it
    asks_with_tools = True  # function tools in the request: ctxoffload eval's read mode

    def __init__(self, model: Any, context_window: int | None = None) -> None:
        while isinstance(model, _instrumented.InstrumentedModel):
            model = model.wrapped  # its spans would show the summary as the agent's request
        self.model = model
        name = model_name_of(model) or type(model).__name__
        super().__init__(name, _declared_window(model), context_window)

    async def _ask_messages(
        self, messages: Sequence[Msg], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """Ask the model with the messages as pydantic-ai's (`to_pydantic_ai`), in one
        uninstrumented request whose only tool is an output tool taking the five fields."""
        parameters = _models.ModelRequestParameters()
        if response_schema is not None:
            output = _ToolDefinition(
                name=OUTPUT_TOOL,
                description="Give the summary of the conversation, one field each.",
                parameters_json_schema=response_schema,
                kind="output",
            )
            parameters = _models.ModelRequestParameters(
                output_mode="tool", output_tools=[output], allow_text_output=False
            )
        reply = await _direct.model_request(
            self.model,
            to_pydantic_ai(messages),
            model_request_parameters=parameters,
            instrument=False,
        )
        return summary_reply(_answer_of(reply), _usage(reply))

    async def _ask_with_tools(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """The model's reply to `messages` in one uninstrumented request offering `tools` as
        pydantic-ai's function tools, its calls as ctxoffload's (`from_pydantic_ai`)."""
        definitions = [
            _ToolDefinition(
                name=tool["function"]["name"],
                description=tool["function"].get("description") or "",
                parameters_json_schema=tool["function"].get("parameters") or {},
            )
            for tool in tools
        ]
        reply = await _direct.model_request(
            self.model,
            to_pydantic_ai(messages),
            model_request_parameters=_models.ModelRequestParameters(function_tools=definitions),
            instrument=False,
        )
        (message,) = from_pydantic_ai([reply])
        return ModelResponse(message=message, usage=_usage(reply))


def _answer_of(reply: Any) -> object:
    """The arguments of the output tool's call, else the reply's text (for the parser)."""
    texts: list[str] = []
    for part in reply.parts:
        if isinstance(part, _messages.ToolCallPart):
            arguments = part.args_as_dict()
            if arguments:
                return arguments
        elif isinstance(part, _messages.TextPart):
            texts.append(part.content)
    return "".join(texts)


def _declared_window(model: Any) -> int | None:
    """The window the model's profile declares (`context_window`, newer pydantic-ai)."""
    try:
        window = getattr(model.profile, "context_window", None)
    except Exception:  # a router (FallbackModel) has no profile of its own
        return None
    return window if isinstance(window, int) and window > 0 else None


def _usage(reply: Any) -> Usage | None:
    usage = getattr(reply, "usage", None)
    if usage is None:
        return None
    return usage_of(
        getattr(usage, "input_tokens", None),
        getattr(usage, "output_tokens", None),
        getattr(usage, "cache_read_tokens", None),
    )
