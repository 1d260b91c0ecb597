"""LangChain messages <-> ctxoffload `Msg`, through OpenAI-shaped dicts.

LangChain's own `convert_to_openai_messages` / `convert_to_messages` and ctxoffload's
`to_msgs` / `to_openai` meet at the OpenAI chat format, so neither side's model is
re-implemented here. The round trip keeps roles, text, tool calls, tool_call_id and name, but
not a LangChain message's `id`, `status`, `artifact` or `response_metadata`: the id is carried
as the `Msg`'s id, and a message whose content is only replaced is rebuilt from the original
LangChain object (`model_copy`), so the rest survives. An AI message's tool calls whose
arguments are plain JSON values are read from them as they are (`_with_calls`): the same `Msg`
as the round trip, without writing each call's arguments out as JSON text to parse them back.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Sequence
from typing import Any

from .._depth import RAW_ARGUMENTS
from ..exceptions import ConfigError
from ..formats import to_msgs, to_openai
from ..messages import Msg, ToolCallBlock
from ._call_arguments import openai_call_with

__all__ = ["from_langchain", "message_key", "to_langchain", "with_content_of"]

INSTALL_HINT = "LangChain is not installed: pip install 'ctxoffload[langchain]'"

# LangChain is imported with this module: `ctxoffload.integrations.langchain` imports it only
# on first use of a name that needs it.
try:
    _messages: Any = importlib.import_module("langchain_core.messages")
except ImportError as exc:  # pragma: no cover - exercised where LangChain is absent
    raise ConfigError(INSTALL_HINT) from exc


def message_key(message: Any) -> str:
    """A LangChain message's name across calls: its id (LangGraph's `add_messages` gives
    every message one), else a hash of its OpenAI form (a host that builds messages itself)."""
    if isinstance(message.id, str) and message.id:
        return str(message.id)
    openai = _messages.convert_to_openai_messages(message)
    text = json.dumps(openai, sort_keys=True, default=str, ensure_ascii=False)
    return "sha256-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def from_langchain(messages: Sequence[Any]) -> list[Msg]:
    """ctxoffload messages for LangChain messages, one `Msg` each, oldest first.

    Args:
        messages: LangChain `BaseMessage` objects (`HumanMessage`, `AIMessage`,
            `ToolMessage`, `SystemMessage`).

    Returns:
        One `Msg` per message, whose `id` is the LangChain message's id (or, for a message
        without one, a hash of its content), so a projection maps back to the originals.
    """
    out: list[Msg] = []
    for message in messages:
        key = message_key(message)
        calls = _plain_calls(message)
        if calls is None:
            (msg,) = to_msgs([_messages.convert_to_openai_messages(message)])
            out.append(msg.model_copy(update={"id": key}))
        else:
            out.append(_with_calls(message, calls, key))
    return out


def _with_calls(message: Any, calls: list[dict[str, Any]], key: str) -> Msg:
    """The `Msg` of an AI message with text content whose tool calls' arguments are plain
    JSON values (`calls`, copied): what `to_msgs` makes of LangChain's OpenAI form of it
    (`convert_to_openai_messages`: the role, name, refusal and text, and each call), without
    writing each call's arguments as JSON text to parse them back (a file's whole text, for
    a call that writes one). The calls go through with empty arguments; each block then
    takes its call's."""
    openai: dict[str, Any] = {"role": "assistant"}
    if message.name:
        openai["name"] = message.name
    openai["tool_calls"] = [
        {"type": "function", "id": c["id"], "function": {"name": c["name"], "arguments": "{}"}}
        for c in message.tool_calls
    ]
    if message.additional_kwargs.get("refusal"):
        openai["refusal"] = message.additional_kwargs["refusal"]
    openai["content"] = message.content
    (msg,) = to_msgs([openai])
    given = iter(calls)
    content = [
        b.model_copy(update={"input": next(given)}) if isinstance(b, ToolCallBlock) else b
        for b in msg.content
    ]
    return msg.model_copy(update={"content": content, "id": key})


def _plain_calls(message: Any) -> list[dict[str, Any]] | None:
    """A copy of the arguments of each of an AI message's tool calls, when the message is
    one `_with_calls` converts as the OpenAI round trip would: text content, tool calls with
    string ids and names, none invalid, and arguments that are JSON already (string keys,
    no tuples, not deeply nested), which the round trip gives back equal.
    None for every other message."""
    tool_calls = getattr(message, "tool_calls", None)
    if (
        not isinstance(message, _messages.AIMessage)
        or not tool_calls
        or getattr(message, "invalid_tool_calls", None)
        or not isinstance(message.content, str)
    ):
        return None
    out: list[dict[str, Any]] = []
    for call in tool_calls:
        args = call.get("args")
        if not (isinstance(call.get("id"), str) and isinstance(call.get("name"), str)):
            return None
        if type(args) is not dict or set(args) == {RAW_ARGUMENTS}:
            return None
        copied = _plain_copy(args, _PLAIN_DEPTH)
        if copied is None:
            return None
        out.append(copied)
    return out


# Arguments nested deeper go the OpenAI way (`to_msgs` keeps too deep a value as its text).
_PLAIN_DEPTH = 32


def _plain_copy(value: Any, depth: int) -> Any:
    """A copy of `value` when it is made of JSON's own types only (exactly: no subclass,
    whose JSON text may differ), within `depth` levels; None otherwise."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if depth <= 0:
        return None
    if kind is dict:
        copy: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                return None
            inner = _plain_copy(item, depth - 1)
            if inner is None and item is not None:
                return None
            copy[key] = inner
        return copy
    if kind is list:
        items: list[Any] = []
        for item in value:
            inner = _plain_copy(item, depth - 1)
            if inner is None and item is not None:
                return None
            items.append(inner)
        return items
    return None


def to_langchain(msgs: Sequence[Msg]) -> list[Any]:
    """LangChain messages for ctxoffload messages (a `Msg` holding several tool results
    becomes one `ToolMessage` each), with each `Msg`'s id as the message id."""
    out: list[Any] = []
    for msg in msgs:
        converted = _messages.convert_to_messages(to_openai([msg]))
        for index, message in enumerate(converted):
            suffix = f"-{index}" if len(converted) > 1 else ""
            out.append(message.model_copy(update={"id": f"{msg.id}{suffix}"}))
    return out


def with_content_of(original: Any, msg: Msg) -> list[Any]:
    """`[original]` (a LangChain message) with the content `msg` holds for it, and the
    arguments of its tool calls where `msg` cut them (a call that wrote a whole file),
    everything else (ids, status, artifact, the calls' names) kept; `to_langchain([msg])`
    where the kind of message differs."""
    converted = _messages.convert_to_messages(to_openai([msg]))
    if len(converted) == 1 and converted[0].type == original.type:
        update: dict[str, Any] = {"content": converted[0].content}
        calls = getattr(original, "tool_calls", None)
        if calls:
            calls_now = getattr(converted[0], "tool_calls", [])
            update.update(_with_arguments(original, update["content"], calls_now))
        return [original.model_copy(update=update)]
    return to_langchain([msg])


def _with_arguments(original: Any, content: Any, converted: list[dict[str, Any]]) -> dict[str, Any]:
    """The fields of an AIMessage (whose content becomes `content`) to update so that its
    calls carry `converted`'s arguments (by call id): `tool_calls`, and the provider's own
    copy of them where the message keeps one (`additional_kwargs["tool_calls"]`, OpenAI's;
    `tool_use` parts of its content, Anthropic's). Nothing when no argument changed."""
    arguments = {call["id"]: call["args"] for call in converted if call.get("id")}
    if all(arguments.get(c.get("id"), c["args"]) == c["args"] for c in original.tool_calls):
        return {}
    update: dict[str, Any] = {
        "tool_calls": [
            {**call, "args": arguments.get(call.get("id"), call["args"])}
            for call in original.tool_calls
        ]
    }
    raw = original.additional_kwargs.get("tool_calls")
    if isinstance(raw, list):
        update["additional_kwargs"] = {
            **original.additional_kwargs,
            "tool_calls": [openai_call_with(item, arguments) for item in raw],
        }
    if isinstance(content, list):
        update["content"] = [_part_with(part, arguments) for part in content]
    return update


def _part_with(part: Any, arguments: dict[str, Any]) -> Any:
    """A content part; a `tool_use` part with the arguments `arguments` holds for its id."""
    if isinstance(part, dict) and part.get("type") == "tool_use" and part.get("id") in arguments:
        return {**part, "input": arguments[part["id"]]}
    return part
