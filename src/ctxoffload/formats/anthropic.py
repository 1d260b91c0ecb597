"""The Anthropic messages format: `from_anthropic` and `to_anthropic`.

`thinking`, `image` / `document` (base64 or url source), `tool_use` and `tool_result` blocks
map to the block of the same meaning. Tool results stay in the user message that holds them.


Round trips: `to_anthropic(from_anthropic(m, s)) == (s, m)` for well-formed input (`s` a string
or None); what the message model has no field for is kept in the hints described in
`formats/_shared.py`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from .._depth import copied
from ..exceptions import InvalidContent
from ..messages import (
    Base64Source,
    Block,
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
)
from ._shared import (
    Hint,
    apply,
    bad_content,
    block_hint,
    check_message,
    check_messages,
    check_msg,
    data_block,
    extra_keys,
    hinted,
    msg_hint,
    read_parts,
    result_output,
    text_block,
    with_unknown,
)

__all__ = ["from_anthropic", "message_from_anthropic", "to_anthropic"]


def _anthropic_kind(block: DataBlock) -> str:
    media_type = block.source.media_type
    return "image" if media_type is None or media_type.startswith("image/") else "document"


def _anthropic_data_block(block: Mapping[str, Any], kind: str) -> DataBlock | None:
    source = block.get("source")
    if not isinstance(source, Mapping):
        return None
    parsed: Base64Source | URLSource
    if (
        source.get("type") == "base64"
        and isinstance(source.get("media_type"), str)
        and isinstance(source.get("data"), str)
    ):
        parsed = Base64Source(media_type=source["media_type"], data=source["data"])
        source_known: tuple[str, ...] = ("type", "media_type", "data")
    elif source.get("type") == "url" and isinstance(source.get("url"), str):
        parsed, source_known = URLSource(url=source["url"]), ("type", "url")
    else:
        return None  # file ids, text and content sources: kept verbatim
    keys = extra_keys(block, ("type", "source"))
    if source_keys := extra_keys(source, source_known):
        keys["source"] = source_keys
    return data_block(
        parsed, None, "anthropic", kind, {"keys": keys} if keys else {}, _anthropic_kind
    )


def _anthropic_item(item: Any, where: str) -> TextBlock | DataBlock | None:
    """A text / image / document block; None for anything else."""
    if not isinstance(item, Mapping):
        return None
    kind = item.get("type")
    if kind == "text":
        return text_block(item, "anthropic", where)
    if kind in ("image", "document"):
        return _anthropic_data_block(item, str(kind))
    return None


def _anthropic_to_block(block: Any, where: str, names: dict[str, str]) -> Block | None:
    """The ctxoffload block for one Anthropic content block; None to keep it verbatim."""
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == "thinking":
        thinking = block.get("thinking")
        if not isinstance(thinking, str):
            raise InvalidContent(f"{where} is a thinking block without a string 'thinking'")
        signature = block.get("signature")
        keys = extra_keys(block, ("type", "thinking", "signature"))
        if "signature" in block and not isinstance(signature, str):
            keys["signature"], signature = copy.deepcopy(signature), None
        hint = {"keys": keys} if keys else {}
        return ThinkingBlock(thinking=thinking, signature=signature, **hinted("anthropic", hint))
    if kind == "tool_use":
        call_id, name, tool_input = block.get("id"), block.get("name"), block.get("input")
        if not (isinstance(call_id, str) and isinstance(name, str)):
            raise InvalidContent(
                f"{where} is a tool_use block without string 'id' and 'name': use "
                "{'type': 'tool_use', 'id': 'toolu_...', 'name': 'tool', 'input': {...}}"
            )
        if not isinstance(tool_input, Mapping):
            raise InvalidContent(
                f"{where} (tool_use {call_id!r}) has input {type(tool_input).__name__}: "
                "Anthropic tool input is a JSON object"
            )
        names[call_id] = name
        keys = extra_keys(block, ("type", "id", "name", "input"))
        return ToolCallBlock(
            id=call_id,
            name=name,
            input=copy.deepcopy(dict(tool_input)),
            **hinted("anthropic", {"keys": keys} if keys else {}),
        )
    if kind == "tool_result":
        return _anthropic_result(block, where, names)
    return _anthropic_item(block, where)


def _anthropic_result(
    block: Mapping[str, Any], where: str, names: dict[str, str]
) -> ToolResultBlock:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise InvalidContent(
            f"{where} is a tool_result without a string 'tool_use_id' (got {call_id!r}): set it "
            "to the id of the tool_use block it answers"
        )
    hint: Hint = {}
    keys = extra_keys(block, ("type", "tool_use_id", "content", "is_error"))
    content = block.get("content")
    output: str | list[TextBlock | DataBlock] = ""
    if "content" not in block:
        hint["drop"] = ["content"]
    elif content is None:
        keys["content"] = None
    else:
        output = result_output(content, _anthropic_item, where, hint)
    is_error = block.get("is_error")
    if "is_error" in block and is_error is not True:
        keys["is_error"] = copy.deepcopy(is_error)  # false (or junk) written out explicitly
    if keys:
        hint["keys"] = keys
    return ToolResultBlock(
        id=call_id,
        name=names.get(call_id, ""),
        output=output,
        is_error=is_error is True,
        **hinted("anthropic", hint),
    )


def message_from_anthropic(message: Any, where: str, names: dict[str, str]) -> Msg:
    """Convert one Anthropic message, as `from_anthropic` does for each.

    Args:
        message: the message dict.
        where: how errors name the message (`messages[3]`).
        names: tool use id -> tool name, shared across one list of messages: the tool_use
            blocks of an assistant message are added, and a tool_result block takes its
            tool's name from it.

    Returns:
        The message.

    Raises:
        InvalidContent: as `from_anthropic`.
    """
    message = check_message(message, where)
    if "role" not in message:
        raise InvalidContent(f"{where} has no 'role': add 'user' or 'assistant'")
    role = message["role"]
    if role not in ("user", "assistant"):
        raise InvalidContent(
            f"{where} has role {role!r}: Anthropic messages are 'user' or 'assistant'; pass the "
            "system prompt as system=..., and tool results as tool_result blocks in a user message"
        )
    if "content" not in message:
        raise InvalidContent(f"{where} has no 'content': add a string or a list of blocks")
    content = message["content"]
    hint: Hint = {}
    if keys := extra_keys(message, ("role", "content")):
        hint["keys"] = keys
    if isinstance(content, str):
        return Msg(role=role, content=content, metadata=hinted("anthropic", hint))
    if not isinstance(content, list):
        raise bad_content(where, content)
    blocks: list[Block] = read_parts(
        content, lambda item, at: _anthropic_to_block(item, at, names), f"{where}.content", hint
    )
    return Msg(role=role, content=blocks, metadata=hinted("anthropic", hint))


def _item_to_anthropic(block: TextBlock | DataBlock) -> dict[str, Any]:
    hint = block_hint(block, "anthropic")
    if isinstance(block, TextBlock):
        return apply({"type": "text", "text": block.text}, hint)
    source = block.source
    if isinstance(source, Base64Source):
        src = {"type": "base64", "media_type": source.media_type, "data": source.data}
    else:
        src = {"type": "url", "url": source.url}
    kind = hint.get("as")
    if kind not in ("image", "document"):
        kind = _anthropic_kind(block)
    return apply({"type": kind, "source": src}, hint)


def _block_to_anthropic(block: Block) -> dict[str, Any]:
    hint = block_hint(block, "anthropic")
    if isinstance(block, (TextBlock, DataBlock)):
        return _item_to_anthropic(block)
    if isinstance(block, ThinkingBlock):
        out: dict[str, Any] = {"type": "thinking", "thinking": block.thinking}
        if block.signature is not None:
            out["signature"] = block.signature
        return apply(out, hint)
    if isinstance(block, ToolCallBlock):
        return apply(
            {
                "type": "tool_use",
                "id": block.id,
                "name": block.name,
                "input": copied(block.input, f"the input of tool call {block.id!r}"),
            },
            hint,
        )
    out = {"type": "tool_result", "tool_use_id": block.id}
    if isinstance(block.output, str):
        out["content"] = block.output
    else:
        out["content"] = with_unknown([_item_to_anthropic(b) for b in block.output], hint)
    if block.is_error:
        out["is_error"] = True
    return apply(out, hint)


def _add_tool_results(out: list[dict[str, Any]], blocks: list[dict[str, Any]]) -> None:
    """Append tool_result blocks, joining the previous message when it holds only results."""
    last = out[-1] if out else None
    if (
        last is not None
        and last.get("role") == "user"
        and isinstance(last.get("content"), list)
        and last["content"]
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in last["content"])
    ):
        last["content"].extend(blocks)
    else:
        out.append({"role": "user", "content": blocks})


def to_anthropic(msgs: Sequence[Msg]) -> tuple[str | None, list[dict[str, Any]]]:
    """Convert messages to the Anthropic messages format.

    System messages, wherever they are, are joined (blank line between) into the returned
    system prompt; they must hold only text. A `tool` Msg becomes tool_result blocks in a user
    message; consecutive tool results are merged into one user message, because Anthropic
    wants all results of one assistant turn in the next user turn. No other messages are
    merged. Tool results held by an assistant Msg move to a user message after it. `Msg.name`
    has no Anthropic field and is dropped.

    Args:
        msgs: ctxoffload messages, oldest first.

    Returns:
        `(system, messages)`: the system prompt (None without system messages) and the message
        dicts; hints stored by `from_anthropic` make its round trip exact.

    Raises:
        InvalidContent: a system message holds something other than text.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for i, msg in enumerate(msgs):
        where = f"msgs[{i}]"
        msg = check_msg(msg, where)
        if msg.role == "system":
            if isinstance(msg.content, str):
                system.append(msg.content)
                continue
            texts: list[str] = []
            results: list[dict[str, Any]] = []
            for block in msg.content:
                if isinstance(block, TextBlock):
                    texts.append(block.text)
                elif isinstance(block, ToolResultBlock):
                    results.append(_block_to_anthropic(block))
                else:
                    raise InvalidContent(
                        f"{where} is a system message holding a {type(block).__name__}: the "
                        "Anthropic system prompt is text only; move it to a user message"
                    )
            system.append("\n".join(texts))
            if results:
                _add_tool_results(out, results)
            continue
        if msg.role == "tool":
            blocks = (
                [{"type": "text", "text": msg.content}]
                if isinstance(msg.content, str)
                else [_block_to_anthropic(b) for b in msg.content]
            )
            _add_tool_results(out, blocks)
            continue
        hint = msg_hint(msg, "anthropic")
        moved: list[dict[str, Any]] = []
        content: str | list[Any]
        if isinstance(msg.content, str):
            content = msg.content
        else:
            kept: list[dict[str, Any]] = []
            for block in msg.content:
                converted = _block_to_anthropic(block)
                if msg.role == "assistant" and isinstance(block, ToolResultBlock):
                    moved.append(converted)
                else:
                    kept.append(converted)
            content = with_unknown(kept, hint)
        out.append(apply({"role": msg.role, "content": content}, hint))
        if moved:
            _add_tool_results(out, moved)
    return ("\n\n".join(system) if system else None), out


def from_anthropic(
    messages: Sequence[Mapping[str, Any]],
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> list[Msg]:
    """Convert Anthropic messages (and the system prompt) to ctxoffload messages.

    The system prompt, when given, becomes a leading system Msg. One Msg per message; a user
    message holding tool_result blocks stays one user Msg with `ToolResultBlock` objects, whose tool
    names come from the matching earlier tool_use. Whatever the message model has no field
    for is kept in `Msg.metadata["anthropic"]` and block `anthropic` fields, so `to_anthropic`
    gives the input back (a system prompt given as blocks comes back as their joined text).

    Args:
        messages: Anthropic message dicts (`role` user or assistant, `content`).
        system: the system prompt, as a string or a list of text blocks.

    Returns:
        The messages as `Msg` objects, in order.

    Raises:
        InvalidContent: a message has no role, a role other than user / assistant, no
            content, or a malformed block.
    """
    check_messages(messages, "from_anthropic")
    out: list[Msg] = []
    if isinstance(system, str):
        out.append(Msg(role="system", content=system))
    elif system is not None:
        blocks: list[Block] = []
        for j, item in enumerate(system):
            if not isinstance(item, Mapping) or item.get("type") != "text":
                raise InvalidContent(
                    f"system[{j}] is not a text block: an Anthropic system prompt is a string "
                    "or a list of {'type': 'text', 'text': ...} blocks"
                )
            blocks.append(text_block(item, "anthropic", f"system[{j}]"))
        out.append(Msg(role="system", content=blocks))
    names: dict[str, str] = {}
    out.extend(message_from_anthropic(m, f"messages[{i}]", names) for i, m in enumerate(messages))
    return out
