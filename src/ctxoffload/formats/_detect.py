"""Any message, in any format: detection, `to_msg`, `to_msgs`, and the readers the workspace
and the compressor use for what callers hand them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ..exceptions import InvalidContent
from ..messages import Msg, ToolResultBlock
from ._shared import check_depth
from .anthropic import message_from_anthropic
from .converse import is_converse, message_from_converse
from .openai import OPENAI_ONLY_KEYS, message_from_openai

__all__ = ["read_messages", "read_tool_result", "to_msg", "to_msgs"]

_OURS_BLOCK_TYPES = frozenset({"text", "thinking", "data", "tool_call", "tool_result"})
_OPENAI_PART_TYPES = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_BLOCK_TYPES = frozenset(
    {
        "tool_use",
        "image",
        "document",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "compaction",  # server-side compaction (formats/provider_compaction.py)
    }
)


def _content_blocks(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = data.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping)]


def _is_ours(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    return kind in ("data", "tool_call") or (
        kind == "tool_result" and "id" in block and "tool_use_id" not in block
    )


def _shaped_like_ours(data: Mapping[str, Any]) -> bool:
    """Whether a dumped foreign model has our Msg's shape (role, text or our block types)."""
    if data.get("role") not in ("system", "user", "assistant", "tool"):
        return False
    if OPENAI_ONLY_KEYS & set(data) or data.get("type") == "message":
        return False
    content = data.get("content")
    if isinstance(content, str):
        return True
    if not isinstance(content, list):
        return False
    return all(
        isinstance(b, Mapping)
        and b.get("type") in _OURS_BLOCK_TYPES
        and (b.get("type") != "tool_result" or _is_ours(b))
        for b in content
    )


def _detect(data: Mapping[str, Any]) -> Literal["ours", "openai", "anthropic", "converse"]:
    if is_converse(data):
        return "converse"
    blocks = _content_blocks(data)
    if any(_is_ours(b) for b in blocks):
        return "ours"
    if {"id", "timestamp", "metadata"} <= set(data) and _shaped_like_ours(data):
        return "ours"  # a ctxoffload Msg as written to context.jsonl
    if OPENAI_ONLY_KEYS & set(data) or data.get("role") in ("tool", "system", "developer"):
        return "openai"
    types = {b.get("type") for b in blocks}
    if types & _OPENAI_PART_TYPES:
        return "openai"
    if types & _ANTHROPIC_BLOCK_TYPES or "tool_result" in types or data.get("type") == "message":
        return "anthropic"
    return "openai"  # text only: both formats read the same


def _validate_ours(data: Mapping[str, Any], where: str, kind: str) -> Msg:
    # Foreign models may spell "not set" as None where our fields have defaults.
    clean = {
        k: v for k, v in data.items() if not (k in ("id", "metadata", "timestamp") and v is None)
    }
    try:
        return Msg.model_validate(clean)
    except ValidationError as exc:
        raise InvalidContent(
            f"{where} ({kind}) is shaped like a ctxoffload message but does not validate: "
            f"{exc.errors()[0].get('loc')}: {exc.errors()[0].get('msg')}; fix that field or "
            "pass an OpenAI or Anthropic message dict"
        ) from None


def _coerce(obj: Any, where: str, names: dict[str, str]) -> Msg:
    if isinstance(obj, Msg):
        return obj
    kind: str
    if isinstance(obj, BaseModel):
        try:
            data: Mapping[str, Any] = obj.model_dump(mode="json")
        except ValueError as exc:  # pydantic's "Maximum serialization depth exceeded", ...
            raise InvalidContent(
                f"{where} ({type(obj).__name__}) cannot be read as JSON ({exc}): flatten deeply "
                "nested values, or pass an OpenAI or Anthropic message dict"
            ) from None
        if _shaped_like_ours(data):
            kind = "ours"
        else:
            # Any other model (an OpenAI / Anthropic SDK message) is read as its SDK would
            # send it: only the fields that were set, not every default None.
            data = obj.model_dump(mode="json", exclude_unset=True)
            kind = _detect(data)
    elif isinstance(obj, Mapping):
        data = obj
        kind = _detect(data)
    else:
        raise InvalidContent(
            f"{where} is a {type(obj).__name__}: pass a ctxoffload Msg, an OpenAI or Anthropic "
            "message dict, or a pydantic model shaped like Msg"
        )
    # Telling the format apart reads only the top of the message: each reader below refuses
    # what nests too deeply before it walks the message, and so does this one for ours.
    if kind == "anthropic":
        return message_from_anthropic(data, where, names)
    if kind == "converse":
        return message_from_converse(data, where, names)
    if kind == "openai":
        return message_from_openai(data, where, names)
    check_depth(data, where)
    msg = _validate_ours(data, where, type(obj).__name__)
    names.update((c.id, c.name) for c in msg.tool_calls)
    for result in msg.tool_results:
        if not result.name and result.id in names:
            result.name = names[result.id]
    return msg


def to_msg(obj: Any) -> Msg:
    """Coerce one message to a `Msg`.

    Accepts a `Msg` (returned as is), an OpenAI or Anthropic message dict (the format is
    detected from its keys and block types; text-only messages read the same in both), a
    ctxoffload Msg as JSON, or a pydantic model: one shaped like our Msg (AgentScope 2.x style:
    role, content of text / data / tool_call / tool_result blocks) is validated from its
    `model_dump(mode="json")`; any other (e.g. an OpenAI SDK message) is dumped with only the
    fields that were set, as the SDKs send it, and read as a dict.

    Args:
        obj: the message.

    Returns:
        The message as a `Msg`. A tool result's name stays empty when the call is not known;
        `to_msgs` fills it from earlier messages.

    Raises:
        InvalidContent: the object is not a message or is malformed.
    """
    return _coerce(obj, "message", {})


def to_msgs(objs: Iterable[Any]) -> list[Msg]:
    """Coerce messages to `Msg` objects, like `to_msg` for each, formats may be mixed.

    An OpenAI `tool` message and an Anthropic user message holding tool_result blocks both
    work; tool result names are filled from the tool calls of earlier messages in `objs`.

    Args:
        objs: the messages, oldest first.

    Returns:
        One `Msg` per message; `Msg` objects given are returned as is, not copied.

    Raises:
        InvalidContent: an item is not a message or is malformed.
    """
    if isinstance(objs, (Mapping, BaseModel, str, bytes)):
        raise InvalidContent(
            f"to_msgs takes an iterable of messages, got one {type(objs).__name__}: wrap it in a "
            "list, or use to_msg"
        )
    names: dict[str, str] = {}
    out: list[Msg] = []
    for i, obj in enumerate(objs):
        msg = _coerce(obj, f"objs[{i}]", names)
        if msg is obj:
            names.update((c.id, c.name) for c in msg.tool_calls)
        out.append(msg)
    return out


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def read_messages(messages: Any, *, caller: str) -> list[Msg]:
    """`messages` as `Msg` objects, for an API that takes what the workspace takes.

    ctxoffload `Msg` objects are returned as they are (not copied); OpenAI and Anthropic message
    dicts and pydantic messages are converted with `to_msgs`.

    Args:
        messages: a list of messages in any format `to_msgs` reads.
        caller: the API's name, for the error message.

    Raises:
        InvalidContent: in one line naming `caller` and `to_msgs`, for anything `to_msgs`
            cannot read.
    """
    if isinstance(messages, (str, bytes, Mapping, BaseModel)) or not isinstance(messages, Iterable):
        raise InvalidContent(
            f"{caller} takes a list of messages, got one {type(messages).__name__}: pass a "
            "list of ctxoffload Msgs or OpenAI / Anthropic message dicts (see ctxoffload.to_msgs)"
        )
    items = list(messages)
    if all(isinstance(m, Msg) for m in items):
        return items
    try:
        return to_msgs(items)
    except InvalidContent as exc:
        raise InvalidContent(
            f"{caller} takes what ctxoffload.to_msgs takes (ctxoffload Msgs, OpenAI or "
            f"Anthropic message dicts) and could not read these: {_one_line(exc)}"
        ) from None


def read_tool_result(result: Any, *, caller: str) -> ToolResultBlock:
    """One tool result as a `ToolResultBlock`, from any shape the workspace takes.

    Accepted: a `ToolResultBlock` (returned as is), our block as a dict or a foreign pydantic
    block of the same shape (AgentScope's), an OpenAI `tool` message, an Anthropic
    `tool_result` block or a user message holding exactly one, or a `Msg` holding exactly
    one result.

    Args:
        result: the tool result.
        caller: the API's name, for the error message.

    Raises:
        InvalidContent: in one line naming `caller` and `to_msgs`, for anything else.
    """
    if isinstance(result, ToolResultBlock):
        return result
    try:
        if isinstance(result, BaseModel) and not isinstance(result, Msg):
            # A foreign block (AgentScope's ToolResultBlock, say) is read as its dict; any
            # other model (an SDK message) goes to to_msg as it is.
            dumped = result.model_dump(mode="json")
            if dumped.get("type") == "tool_result":
                result = dumped
        if isinstance(result, Mapping) and result.get("type") == "tool_result":
            if "tool_use_id" in result:  # an Anthropic block: read it inside its message
                result = {"role": "user", "content": [result]}
            else:
                return ToolResultBlock.model_validate(dict(result))
        results = to_msg(result).tool_results
    except (InvalidContent, ValidationError, ValueError) as exc:
        raise InvalidContent(
            f"{caller} takes one tool result in a shape ctxoffload.to_msgs reads (a "
            "ToolResultBlock, an OpenAI tool message, an Anthropic tool_result block) and could "
            f"not read this {type(result).__name__}: {_one_line(exc)}"
        ) from None
    if len(results) != 1:
        raise InvalidContent(
            f"{caller} takes one tool result, and this {type(result).__name__} holds "
            f"{len(results)} (read with ctxoffload.to_msgs): pass the results one at a time"
        )
    return results[0]
