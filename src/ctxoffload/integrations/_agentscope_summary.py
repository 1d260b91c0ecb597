"""An AgentScope chat model as a ctxoffload `ChatModel` (DESIGN §18).

AgentScope 2.x's chat models (`ChatModelBase`: `OpenAIChatModel`, `AnthropicChatModel`,
`DashScopeChatModel`, ...) take AgentScope `Msg`s and format them for their provider
themselves, with the formatter each holds. So the adapter hands the model AgentScope `Msg`s,
shaped as an AgentScope agent keeps its context: an assistant message holds its text, its
`ToolCallBlock`s (arguments as JSON text) and then the `ToolResultBlock`s answering them.

A summary (`_ask`) is asked through AgentScope's structured output
(`generate_structured_output`: a forced call of one tool whose schema is the summary's), the
parsed object handed back as JSON; a model that gives no structured output
(`StructuredOutputError` after each of AgentScope's strategies) is asked once more for text,
with the request's JSON instructions, its reply read by ctxoffload's parser. Anything else the
model raises goes to the summariser as it is (an overflow is halved there).

`ctxoffload eval`'s read mode (`_ask_with_tools`) calls the model with the tools in the JSON
schema function form AgentScope's `Toolkit` gives its model (`tools=`): its `ToolCallBlock`s
come back as ctxoffload's, ids kept. A model built with `stream=True` returns a stream, which is
read to its end (AgentScope's own accumulation): nothing of it reaches a console or a user. The
model is called directly, never through an agent, so no middleware or memory of one sees it.
"""

from __future__ import annotations

import importlib
import json
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
from ..exceptions import ConfigError
from ..messages import (
    Block,
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..model import ChatModel, ModelResponse, Usage
from ._model_name import model_name_of

__all__ = ["INSTALL_HINT", "AgentScopeSummaryModel", "agentscope_summary_model"]

INSTALL_HINT = "AgentScope is not installed: pip install 'ctxoffload[agentscope]'"

try:
    _model: Any = importlib.import_module("agentscope.model")
    _message: Any = importlib.import_module("agentscope.message")
    _StructuredOutputError: Any = importlib.import_module(
        "agentscope.exception"
    ).StructuredOutputError
except ImportError as exc:  # pragma: no cover - exercised where AgentScope is absent
    raise ConfigError(INSTALL_HINT) from exc


class AgentScopeSummaryModel(HostSummaryModel):
    """An AgentScope chat model (`ChatModelBase`) as a `ChatModel`.

    Args:
        model: the AgentScope chat model.
        window: the configured window, for a model whose `context_size` is no window.
    """

    door = DOORS["agentscope"].name  # the record says the summary came through it
    asks_with_tools = True  # `tools=` of the model's own call: ctxoffload eval's read mode

    def __init__(self, model: Any, window: int | None = None) -> None:
        self.model = model
        name = model_name_of(model) or type(model).__name__
        super().__init__(name, getattr(model, "context_size", None), window)

    async def _ask(
        self, system: str, turns: list[tuple[str, str]], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """Ask through AgentScope's structured output where a schema is given, else (or
        where the model gives none) for text, its reply read by ctxoffload's parser."""
        asked = [_said("system", system)] if system else []
        asked += [_said(role, text) for role, text in turns]
        if response_schema is not None:
            try:
                answer = await self.model.generate_structured_output(
                    asked, structured_model=schema_for_host(response_schema)
                )
            except _StructuredOutputError:
                pass  # no structured output from this model: its text, parsed by ctxoffload
            else:
                return summary_reply(answer.content, _usage(answer.usage))
        reply = await self._called(asked, None)
        return summary_reply(_text(reply), _usage(reply.usage))

    async def _ask_with_tools(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """The model's reply to `messages` (as AgentScope `Msg`s) with `tools` offered as its
        `tools=` schemas: its text and its tool calls, ids kept, as a ctxoffload message."""
        reply = await self._called(to_agentscope(messages), [_copied(tool) for tool in tools])
        blocks: list[Block] = []
        if said := _text(reply):
            blocks.append(TextBlock(text=said))
        blocks += [
            ToolCallBlock(id=str(block.id), name=str(block.name), input=call_input(block.input))
            for block in reply.content
            if isinstance(block, _message.ToolCallBlock)
        ]
        message = Msg(role="assistant", content=blocks)
        return ModelResponse(message=message, usage=_usage(reply.usage))

    async def _called(self, asked: list[Any], tools: list[dict[str, Any]] | None) -> Any:
        """The model's whole `ChatResponse` to `asked`: its answer, or, where the model
        streams, the last of its stream (AgentScope's accumulated response)."""
        answer = await self.model(asked, tools=tools)
        if isinstance(answer, _model.ChatResponse):
            return answer
        whole = None
        async for chunk in answer:
            whole = chunk
        if whole is None:  # a stream that yielded nothing: an empty reply
            return _model.ChatResponse(content=[], is_last=True)
        return whole


def to_agentscope(messages: Sequence[Msg]) -> list[Any]:
    """ctxoffload's messages as AgentScope `Msg`s, as an AgentScope agent keeps them: a tool
    message's results go into the assistant message whose calls they answer (AgentScope's
    formatters send each as its provider's tool result)."""
    out: list[Any] = []
    for msg in messages:
        given = msg.content
        blocks = given if isinstance(given, list) else [TextBlock(text=given)] if given else []
        if msg.role == "system":
            out.append(_said("system", msg.text))
        elif msg.role == "user":
            kept = [_block(b) for b in blocks if isinstance(b, (TextBlock, DataBlock))]
            out.append(_message.Msg(name=msg.name or "user", role="user", content=kept))
        elif msg.role == "tool" and out and out[-1].role == "assistant":
            out[-1].content.extend(_block(b) for b in blocks)
        else:
            kept = [_block(b) for b in blocks]
            out.append(_message.Msg(name=msg.name or "assistant", role="assistant", content=kept))
    return out


def _said(role: str, text: str) -> Any:
    """An AgentScope `Msg` of one text, its sender named for its role."""
    return _message.Msg(name=role, role=role, content=[_message.TextBlock(text=text)])


def _block(block: Block) -> Any:
    """One of ctxoffload's content blocks as AgentScope's."""
    if isinstance(block, ToolCallBlock):
        arguments = json.dumps(block.input, ensure_ascii=False)
        return _message.ToolCallBlock(id=block.id, name=block.name, input=arguments)
    if isinstance(block, ToolResultBlock):
        output = (
            block.output if isinstance(block.output, str) else [_block(b) for b in block.output]
        )
        state = "error" if block.is_error else "success"
        return _message.ToolResultBlock(id=block.id, name=block.name, output=output, state=state)
    if isinstance(block, ThinkingBlock):
        return _message.ThinkingBlock(thinking=block.thinking)
    if isinstance(block, DataBlock):
        source = block.source.model_dump()
        # AgentScope names every source's media type; a URL of ours may not.
        source["media_type"] = source.get("media_type") or "application/octet-stream"
        return _message.DataBlock(source=source, name=block.name)
    return _message.TextBlock(text=getattr(block, "text", "") or "")


def _copied(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool's schema in the function form AgentScope's models take (OpenAI's), a copy the
    model may change (its formatters flatten a schema's references)."""
    function = tool["function"]
    return {
        "type": "function",
        "function": {
            "name": function["name"],
            "description": function.get("description") or "",
            "parameters": function.get("parameters") or {"type": "object", "properties": {}},
        },
    }


def _text(reply: Any) -> str:
    """The text of a `ChatResponse` (its thinking left out)."""
    return "".join(b.text for b in reply.content if isinstance(b, _message.TextBlock))


def _usage(usage: Any) -> Usage | None:
    """The tokens a `ChatUsage` reports, None where the model reported none."""
    if usage is None:
        return None
    return usage_of(
        getattr(usage, "input_tokens", None),
        getattr(usage, "output_tokens", None),
        getattr(usage, "cache_input_tokens", None),
    )


def agentscope_summary_model(model: object, window: int | None) -> ChatModel | None:
    """`model` as a `ChatModel` when it is an AgentScope chat model (`ChatModelBase`), else
    None.

    Args:
        model: what was given as the model.
        window: the configured window, for a model whose `context_size` is no window.
    """
    if isinstance(model, _model.ChatModelBase):
        return AgentScopeSummaryModel(model, window)
    return None
