"""OpenAI Responses-API input items <-> ctxoffload messages, one item to one `Msg`.

The Responses API (and the OpenAI Agents SDK, which keeps its history in it, and Codex, which
logs it) has no chat turns: a conversation is a flat list of items, each a `message`, a
`function_call`, a `function_call_output`, a `reasoning` item or another kind. Each item
becomes one `Msg` so that a host's items map back one to one. What ctxoffload has no model
for (a reasoning item, whose encrypted content only its provider reads, a web search call,
...) is kept opaque: an assistant `Msg` with no content whose metadata holds the item, given
back unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from .._depth import MAX_DEPTH, STORE_DEPTH, depth_error, json_text, load_json, text_form
from ..exceptions import InvalidContent
from ..messages import (
    Base64Source,
    Block,
    DataBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
)
from ._shared import arguments_text, check_depth

__all__ = ["ITEM_KEY", "from_responses", "to_responses"]

ITEM_KEY = "responses_item"
"""The `Msg.metadata` key of an item kept opaque."""

_ROLES = {"developer": "system", "system": "system", "user": "user", "assistant": "assistant"}


def from_responses(
    items: Sequence[Any], *, where_of: Callable[[int], str] | None = None
) -> list[Msg]:
    """ctxoffload messages for Responses-API input items, one `Msg` per item, oldest first.

    Args:
        items: input items as dicts (`TResponseInputItem`) or the SDK's pydantic objects.
        where_of: how an error names the item at an index (a transcript's reader names its
            line); `items[i]` by default.

    Raises:
        InvalidContent: an item is not a dict or an SDK object, nests deeper than a message
            may (108 levels), or has a call id or name that is no string, named by its index.

    Returns:
        One `Msg` per item: a message's role and parts (`input_text` / `output_text` as
        text, `input_image` as an image), a `function_call` as a tool call, a
        `function_call_output` as a tool result named by its call; any other item opaque
        (see the module).
        A `developer` message is a system `Msg` with `metadata["role"]`.
    """
    names: dict[str, str] = {}  # call id -> tool name, so an output names its tool
    out: list[Msg] = []
    for index, item in enumerate(items):
        where = f"items[{index}]" if where_of is None else where_of(index)
        fields = _as_dict(item, where)
        if fields.get("type") == "function_call":
            names[str(fields.get("call_id"))] = str(fields.get("name", ""))
        out.append(_msg(fields, names, where))
    return out


def to_responses(msgs: Sequence[Msg]) -> list[dict[str, Any]]:
    """Responses-API input items for ctxoffload messages: a `Msg`'s text and images as one
    `message` item, each tool call a `function_call`, each tool result a
    `function_call_output`, an opaque item as it was."""
    out: list[dict[str, Any]] = []
    for i, msg in enumerate(msgs):
        if ITEM_KEY in msg.metadata:
            out.append(dict(msg.metadata[ITEM_KEY]))
            continue
        role = str(msg.metadata.get("role", msg.role))
        blocks: list[Block] = (
            [TextBlock(text=msg.content)] if isinstance(msg.content, str) else msg.content
        )
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for block in blocks:
            if isinstance(block, ToolCallBlock):
                calls.append(_function_call(block, f"msgs[{i}]"))
            elif isinstance(block, ToolResultBlock):
                calls.append(_function_call_output(block))
            elif isinstance(block, (TextBlock, DataBlock)):
                parts.append(_part(block, role))
            else:  # thinking a model wrote to the user: text, so nothing is lost
                parts.append(_part(TextBlock(text=block.thinking), role))
        # A turn's text comes before its calls, as a Responses-API model answers.
        if parts and msg.role != "tool":
            out.append({"type": "message", "role": role, "content": parts})
        out.extend(calls)
    return out


def _as_dict(item: Any, where: str) -> dict[str, Any]:
    """An item as a dict, refused (InvalidContent naming it) when it is no item or nests
    deeper than a message may (`_depth.STORE_DEPTH`): reading it copies and walks it."""
    if isinstance(item, BaseModel):
        try:
            item = item.model_dump(exclude_unset=True)
        except ValueError:  # pydantic's "Maximum serialization depth exceeded"
            raise depth_error(where, STORE_DEPTH) from None
    if not isinstance(item, Mapping):
        raise InvalidContent(
            f"{where} is a {type(item).__name__}: pass Responses-API input items, as dicts "
            "or the openai SDK's objects"
        )
    check_depth(item, where)
    return dict(item)


def _string(
    item: Mapping[str, Any],
    key: str,
    where: str,
    default: str | None = None,
    expected: str = "a string",
) -> str:
    """`item[key]`, refused (InvalidContent in one line) when it is no string."""
    value = item.get(key, default)
    if isinstance(value, str):
        return value
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    held = "nothing" if value is None else f"a {type(value).__name__} ({shown})"
    raise InvalidContent(
        f"{where}: the {item.get('type')} item's {key} holds {held}, where {expected} belongs"
    )


def _msg(item: dict[str, Any], names: Mapping[str, str], where: str) -> Msg:
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message" and item.get("role") in _ROLES:
        role = item["role"]
        metadata = {"role": role} if role == "developer" else {}
        content = item.get("content", "")
        parts = content if isinstance(content, list) else [content]
        blocks: str | list[Block] = (
            content if isinstance(content, str) else [_block(part) for part in parts]
        )
        return Msg(role=_ROLES[role], content=blocks, metadata=metadata)  # type: ignore[arg-type]
    if kind == "function_call":
        arguments = item.get("arguments") or "{}"
        if not isinstance(arguments, str):
            arguments = text_form(arguments)
        try:
            # Kept as the text the model sent when not JSON, or deeper than a tool's
            # arguments may be (`_depth`), as the chat format keeps them.
            parsed = load_json(arguments, MAX_DEPTH)
        except ValueError:
            parsed = None
        call_input = parsed if isinstance(parsed, dict) else {"_raw": arguments}
        call = ToolCallBlock(
            id=_string(item, "call_id", where),
            name=_string(item, "name", where, default=""),
            input=call_input,
        )
        return Msg(role="assistant", content=[call])
    if kind == "function_call_output":
        output = item.get("output", "")
        if not isinstance(output, (str, list)):
            _string(item, "output", where, expected="a string or a list of parts")
        call_id = _string(item, "call_id", where)
        result = ToolResultBlock(
            id=call_id,
            name=names.get(call_id, ""),
            output=output if isinstance(output, str) else [_block(part) for part in output],
        )
        return Msg(role="tool", content=[result])
    return Msg(role="assistant", content=[], metadata={ITEM_KEY: item})


def _block(part: Any) -> TextBlock | DataBlock:
    if not isinstance(part, Mapping):  # a bare string or value where a part belongs: its text
        return TextBlock(text=part if isinstance(part, str) else json_text(part))
    kind = part.get("type")
    if kind in ("input_text", "output_text"):
        return TextBlock(text=str(part.get("text", "")))
    if kind == "refusal":
        return TextBlock(text=str(part.get("refusal", "")))
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        url: str = part["image_url"]
        if url.startswith("data:") and ";base64," in url:
            media_type, data = url[len("data:") :].split(";base64,", 1)
            return DataBlock(source=Base64Source(media_type=media_type, data=data))
        return DataBlock(source=URLSource(url=url))
    # A file, or an image by file id: its JSON as text, so the model still sees it.
    return TextBlock(text=json_text(dict(part), ensure_ascii=False))


def _part(block: TextBlock | DataBlock, role: str) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "output_text" if role == "assistant" else "input_text", "text": block.text}
    source = block.source
    url = (
        f"data:{source.media_type};base64,{source.data}"
        if isinstance(source, Base64Source)
        else source.url
    )
    return {"type": "input_image", "image_url": url}


def _function_call(block: ToolCallBlock, where: str) -> dict[str, Any]:
    arguments = block.input.get("_raw") if set(block.input) == {"_raw"} else None
    return {
        "type": "function_call",
        "call_id": block.id,
        "name": block.name,
        "arguments": arguments or arguments_text(block, where, ensure_ascii=False),
    }


def _function_call_output(block: ToolResultBlock) -> dict[str, Any]:
    output: str | list[dict[str, Any]] = (
        block.output
        if isinstance(block.output, str)
        else [_part(part, "user") for part in block.output]
    )
    return {"type": "function_call_output", "call_id": block.id, "output": output}
