"""A smolagents `Model` as the model that writes a run's summaries (DESIGN §18).

`summary_model=` of `OffloadingStepCallbacks` takes what smolagents calls a model: a `Model`
(`InferenceClientModel`, `LiteLLMModel`, `OpenAIModel`, `TransformersModel`, one of the user's
own). It is asked with `generate(messages, response_format=...)`, smolagents' structured
output (a JSON schema), and, where the model refuses it (smolagents' `ValueError` "does not
support structured outputs"), with the request's JSON instructions, its reply parsed by
ctxoffload. `generate` is called directly, on a worker thread (it is synchronous): never
`generate_stream`, no step, no log line of the agent's, so the summary is neither shown nor
kept in the agent's memory; its `token_usage` is the answer's usage.

`ctxoffload eval`'s read mode asks `generate(messages, tools_to_call_from=[...])`, the tools
as smolagents `Tool`s it never runs, and the conversation as a `ToolCallingAgent` meets its
own: an assistant's calls as a `TOOL_CALL` message ("Calling tools:" and the calls), their
results as a `TOOL_RESPONSE` ("Observation:" and the outputs), which the model class sends as
smolagents sends every step (its API models: an assistant turn and a user turn of text; they
send no tool message, nor an assistant's tool calls). Unlike the agent, which must call a tool
at every step, the model is left free to answer in text (`tool_choice="auto"`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._doors.doors import DOORS
from .._doors.summary_replies import (
    HostSummaryModel,
    call_input,
    schema_for_host,
    summary_reply,
    usage_of,
)
from .._loop import off_loop_long
from .._overflow import is_context_overflow
from ..compression import Summary
from ..messages import Block, Msg, TextBlock, ToolCallBlock, ToolResultBlock
from ..model import ChatModel, ModelResponse, Usage
from ._smolagents_steps import MEMORY, MODELS, SMOLAGENTS

__all__ = ["TAKES", "SmolagentsSummaryModel", "smolagents_summary_model"]

TAKES = "a smolagents Model (InferenceClientModel(...), LiteLLMModel(...), the agent's model)"
"""What `summary_model=` of the callbacks takes, as its refusal says it."""


class SmolagentsSummaryModel(HostSummaryModel):
    """A smolagents `Model` as a `ChatModel` that writes summaries.

    Args:
        model: the smolagents model.
        window: the callbacks' configured window (smolagents' models declare none).
    """

    door = DOORS["smolagents"].name  # the record says the summary came through it
    asks_with_tools = True  # `tools_to_call_from`: ctxoffload eval's read mode

    def __init__(self, model: Any, window: int | None) -> None:
        self.model = model
        super().__init__(str(getattr(model, "model_id", None) or type(model).__name__), window)

    async def _ask(
        self, system: str, turns: list[tuple[str, str]], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """Ask the model once (on a worker thread), not streamed, with `response_schema` as
        smolagents' `response_format`."""
        role = MODELS.MessageRole
        chat = [_message(role.SYSTEM, system)] if system else []
        chat += [
            _message(role.ASSISTANT if said == "assistant" else role.USER, text)
            for said, text in turns
        ]
        response_format = None
        if response_schema is not None:
            response_format = {
                "type": "json_schema",
                "json_schema": {
                    "name": "summary",
                    "schema": response_schema,
                    # Strict where every field is required and none other allowed (ours).
                    "strict": schema_for_host(response_schema) is Summary,
                },
            }
        answer = await off_loop_long(self._generate, chat, response_format)
        return summary_reply(_text(answer.content), _usage(answer))

    async def _ask_with_tools(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """The model's reply to `messages` (as a `ToolCallingAgent` meets its steps) with
        `tools` as smolagents `Tool`s; its text and tool calls (ids kept) as ctxoffload's."""
        offered = [_OfferedTool(tool["function"]) for tool in tools]
        answer = await off_loop_long(
            self.model.generate,
            _as_steps(messages),
            tools_to_call_from=offered,
            tool_choice="auto",  # smolagents asks "required": its agent answers by a call
        )
        said = _text(answer.content)
        blocks: list[Block] = [TextBlock(text=said)] if said else []
        blocks += [
            ToolCallBlock(
                id=str(call.id), name=call.function.name, input=call_input(call.function.arguments)
            )
            for call in answer.tool_calls or ()
        ]
        return ModelResponse(message=Msg(role="assistant", content=blocks), usage=_usage(answer))

    def _generate(self, chat: list[Any], response_format: dict[str, Any] | None) -> Any:
        """smolagents' `generate`; without `response_format` where the model refuses it."""
        if response_format is not None:
            try:
                return self.model.generate(chat, response_format=response_format)
            except ValueError as exc:  # smolagents' "does not support structured outputs"
                if is_context_overflow(exc):
                    raise  # the summariser halves the request: no second call of it
        return self.model.generate(chat)


class _OfferedTool(SMOLAGENTS.Tool):  # type: ignore[misc]
    """A tool offered to the model by its JSON schema (OpenAI's `function`), never run by
    smolagents: ctxoffload runs the calls itself. Its `inputs` are smolagents' form of the
    schema's properties, an optional one `nullable` (smolagents marks the others required)."""

    skip_forward_signature_validation = True  # `forward` takes whatever the schema says
    output_type = "string"

    def __init__(self, function: dict[str, Any]) -> None:
        super().__init__()
        parameters = function.get("parameters") or {}
        required = set(parameters.get("required") or ())
        self.name = function["name"]
        self.description = function.get("description") or ""
        self.inputs = {
            key: {
                **schema,
                "type": schema.get("type", "any"),
                "description": schema.get("description", ""),
                **({} if key in required else {"nullable": True}),
            }
            for key, schema in (parameters.get("properties") or {}).items()
        }

    def forward(self, **arguments: Any) -> Any:
        raise RuntimeError(f"ctxoffload runs {self.name}'s calls itself")


def _as_steps(messages: Sequence[Msg]) -> list[Any]:
    """`messages` as smolagents' `ChatMessage`s, as an agent's memory renders its steps
    (`ActionStep.to_messages`): an assistant's text, then its calls as one `TOOL_CALL`
    message; a tool message's results as one `TOOL_RESPONSE` observation."""
    role = MODELS.MessageRole
    chat: list[Any] = []
    for msg in messages:
        if msg.role == "tool":
            outputs = [_output(result) for result in msg.tool_results]
            chat.append(_message(role.TOOL_RESPONSE, "Observation:\n" + "\n".join(outputs)))
            continue
        text = msg.text
        if text:
            kind = {"system": role.SYSTEM, "assistant": role.ASSISTANT}.get(msg.role, role.USER)
            chat.append(_message(kind, text))
        if msg.tool_calls:
            calls = [MEMORY.ToolCall(c.name, c.input, c.id).dict() for c in msg.tool_calls]
            chat.append(_message(role.TOOL_CALL, "Calling tools:\n" + str(calls)))
    return chat


def _output(result: ToolResultBlock) -> str:
    """A tool's output as its observation's text (its text parts; a data part has none)."""
    if isinstance(result.output, str):
        return result.output
    return "".join(part.text for part in result.output if isinstance(part, TextBlock))


def _usage(answer: Any) -> Usage | None:
    """The tokens smolagents reported for the answer (`token_usage`)."""
    usage = answer.token_usage
    return usage_of(getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None))


def _message(role: Any, text: str) -> Any:
    return MODELS.ChatMessage(role=role, content=[{"type": "text", "text": text}])


def _text(content: Any) -> str:
    """A smolagents answer's content as text: a string, or its text parts joined."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def smolagents_summary_model(model: object, window: int | None) -> ChatModel | None:
    """`model` as the summary `ChatModel` (the callbacks' adapter, `SummaryWriter`): a
    smolagents `Model`; None for anything else."""
    return SmolagentsSummaryModel(model, window) if isinstance(model, MODELS.Model) else None
