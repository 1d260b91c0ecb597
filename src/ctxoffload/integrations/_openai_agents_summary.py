"""An OpenAI Agents SDK `Model` as the model that writes ctxoffload's summaries.

`summary_writer` is the door's `SummaryWriter`: its `summary_model` is an SDK `Model` or a
model name, and left out, the agent's own model (where the filter sees it: the agent's
`model`, or the model given to `wrap`) writes them. A name is routed as the SDK's default
provider routes it (`MultiProvider`: a bare name or `openai/...` to OpenAI, `litellm/...` to
LiteLLM): checked when the door is built, without a key, since the SDK builds an `Agent` of a
name without one too, and resolved at the first summary, when the key is read. The model is
asked through the SDK's output schema (`get_response(..., output_schema=...)`, a strict JSON
schema where the summary's is one) with tracing disabled for the call, outside any run: no
span, no item of the run's, no session write holds it.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from typing import Any

from .._doors.doors import DOORS
from .._doors.summaries import SummaryWriter
from .._doors.summary_replies import HostSummaryModel, summary_reply, unresolved, usage_of
from ..exceptions import ConfigError
from ..formats.responses import from_responses, to_responses
from ..messages import Msg, TextBlock
from ..model import ModelResponse, Usage
from ._openai_agents_items import INSTALL_HINT, as_item

__all__ = ["AgentsSummaryModel", "summary_writer"]


TAKES = "an OpenAI Agents SDK Model or model name ('gpt-4.1-mini', 'litellm/...')"
"""What the door takes as `summary_model`, in its refusal's words."""


def _sdk(module: str) -> Any:
    """A module of the SDK, imported on first use: importing the door imports none of it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(INSTALL_HINT) from exc


def summary_writer(given: object, context_window: int | None) -> SummaryWriter:
    """The door's `SummaryWriter` for its `summary_model` argument.

    Args:
        given: `summary_model` as the user gave it.
        context_window: the config's window, the summary model's.

    Raises:
        ConfigError: `given` is none of what the door takes, or a name the SDK's default
            provider cannot route (an unknown prefix, LiteLLM's not installed), with the
            SDK's reason.
    """

    def adapt(model: object) -> AgentsSummaryModel | None:
        if isinstance(model, str):
            _check_routable(model)
            return AgentsSummaryModel(sys.intern(model), context_window)
        if not isinstance(model, _sdk("agents.models.interface").Model):
            return None
        return AgentsSummaryModel(model, context_window)

    return SummaryWriter(given, adapt=adapt, takes=TAKES)


def _check_routable(name: str) -> None:
    """Route `name` as the SDK's default provider would, with a placeholder key (no client
    is used, no request made): a name it cannot route is refused with its reason."""
    try:
        if not name.strip():
            raise ValueError("the name is empty")
        provider = _sdk("agents.models.multi_provider").MultiProvider
        provider(openai_api_key="placeholder").get_model(name)
    except Exception as exc:  # UserError (an unknown prefix), ImportError (LiteLLM's)
        raise unresolved(name, "the SDK's default provider", TAKES, exc) from None


class AgentsSummaryModel(HostSummaryModel):
    """An SDK `Model` (or a model name, resolved at its first call) in ctxoffload's
    `ChatModel` protocol, for summaries only.

    Args:
        model: the SDK model, or its name for the SDK's default provider.
        context_window: the window of the model (the config's), for the summary's chunks.
    """

    door = DOORS["openai-agents"].name  # the record says the summary came through it
    asks_with_tools = True  # function tools in the request: ctxoffload eval's read mode

    def __init__(self, model: Any, context_window: int | None = None) -> None:
        self._model = model
        name = model if isinstance(model, str) else getattr(model, "model", None)
        super().__init__(name if isinstance(name, str) else type(model).__name__, context_window)

    def _resolved(self) -> Any:
        if isinstance(self._model, str):
            # The key is read now, as a run of an agent with this name would read it.
            self._model = (
                _sdk("agents.models.multi_provider").MultiProvider().get_model(self._model)
            )
        return self._model

    async def _ask(
        self, system: str, turns: list[tuple[str, str]], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """Ask the model with the SDK's output schema, its tracing disabled, outside any run."""
        items = [{"role": role, "content": text} for role, text in turns]
        schema = _schema_class()(response_schema) if response_schema is not None else None
        reply = await self._resolved().get_response(
            system or None,
            items,
            _sdk("agents").ModelSettings(),
            [],
            schema,
            [],
            _sdk("agents.models.interface").ModelTracing.DISABLED,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        )
        return summary_reply(_text_of(reply), _usage(reply))

    async def _ask_with_tools(self, messages: Any, tools: Any) -> ModelResponse:
        """The model's reply to `messages` (as Responses input items) with `tools` offered as
        the SDK's function tools, outside any run and untraced; its calls as ctxoffload's."""
        system = "\n\n".join(m.text for m in messages if m.role == "system" and m.text)
        items = [_plain(item) for item in to_responses([m for m in messages if m.role != "system"])]
        offered = [
            _sdk("agents").FunctionTool(
                name=tool["function"]["name"],
                description=tool["function"].get("description") or "",
                params_json_schema=tool["function"].get("parameters") or {},
                on_invoke_tool=_run_elsewhere,
                strict_json_schema=False,
            )
            for tool in tools
        ]
        reply = await self._resolved().get_response(
            system or None,
            items,
            _sdk("agents").ModelSettings(),
            offered,
            None,
            [],
            _sdk("agents.models.interface").ModelTracing.DISABLED,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        )
        said = from_responses([as_item(item) for item in getattr(reply, "output", None) or ()])
        blocks = [
            block
            for msg in said
            for block in (
                msg.content if isinstance(msg.content, list) else [TextBlock(text=msg.content)]
            )
        ]
        return ModelResponse(message=Msg(role="assistant", content=blocks), usage=_usage(reply))


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    """An assistant's text item as the SDK takes it from any model's input (its Chat
    Completions converter refuses `output_text` parts outside a `message` item)."""
    parts = item.get("content")
    if item.get("role") != "assistant" or not isinstance(parts, list):
        return item
    if not all(isinstance(p, dict) and p.get("type") == "output_text" for p in parts):
        return item
    return {**item, "content": "".join(str(p.get("text") or "") for p in parts)}


async def _run_elsewhere(context: Any, arguments: str) -> str:
    """A function tool's call is run by its asker (`ctxoffload eval`), never by the SDK."""
    raise RuntimeError("ctxoffload runs this tool's calls itself")


@functools.cache
def _schema_class() -> Any:
    """The SDK output schema of a summary (made on first use: the SDK is imported then)."""

    class SummarySchema(_sdk("agents.agent_output").AgentOutputSchemaBase):  # type: ignore[misc]
        """The summary's JSON schema as the SDK's output schema: strict where the schema can
        be (every property required, no other allowed: the default `Summary` schema is)."""

        def __init__(self, schema: dict[str, Any]) -> None:
            self._schema = schema

        def is_plain_text(self) -> bool:
            return False

        def name(self) -> str:
            return str(self._schema.get("title") or "Summary")

        def json_schema(self) -> dict[str, Any]:
            return self._schema

        def is_strict_json_schema(self) -> bool:
            properties = self._schema.get("properties")
            return (
                isinstance(properties, dict)
                and self._schema.get("additionalProperties") is False
                and set(self._schema.get("required", ())) == set(properties)
            )

        def validate_json(self, json_str: str) -> Any:
            return json.loads(json_str)  # ctxoffload's parser checks the fields

    return SummarySchema


def _text_of(reply: Any) -> str:
    """The text of the reply's message items (the JSON the output schema asked for)."""
    texts: list[str] = []
    for item in getattr(reply, "output", None) or ():
        for part in getattr(item, "content", None) or ():
            text = getattr(part, "text", None)
            if isinstance(text, str):
                texts.append(text)
    return "".join(texts)


def _usage(reply: Any) -> Usage | None:
    usage = getattr(reply, "usage", None)
    if usage is None:
        return None
    details = getattr(usage, "input_tokens_details", None)
    return usage_of(
        getattr(usage, "input_tokens", None),
        getattr(usage, "output_tokens", None),
        getattr(details, "cached_tokens", None),
    )
