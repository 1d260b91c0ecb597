"""LlamaIndex `ChatMessage` objects <-> ctxoffload `Msg` objects.

One `ChatMessage` is one `Msg`: its role (LlamaIndex's "developer" a system message,
"chatbot" and "model" an assistant's, "function" a tool's), its text and media blocks, the tool
calls an assistant made (LlamaIndex's `ToolCallBlock` blocks, or OpenAI's `tool_calls` in
`additional_kwargs`, as the OpenAI integration keeps them), a tool message's result with the
call id it answers (`additional_kwargs["tool_call_id"]`). A block ctxoffload has no block for
(a citation, audio without a URL) is read as a short text naming it. The way back keeps the
original `ChatMessage` wherever a projection left it as it was.
"""

from __future__ import annotations

import base64
import importlib
import json
from collections.abc import Sequence
from typing import Any

from ..exceptions import ConfigError
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
from ._message_ids import message_id

__all__ = ["INSTALL_HINT", "from_llama_index", "message_text", "read_message", "to_llama_index"]

INSTALL_HINT = "LlamaIndex is not installed: pip install 'ctxoffload[llama-index]'"

try:
    _types: Any = importlib.import_module("llama_index.core.base.llms.types")
except ImportError as exc:  # pragma: no cover - exercised where LlamaIndex is absent
    raise ConfigError(INSTALL_HINT) from exc

_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


def from_llama_index(messages: Sequence[Any]) -> list[Msg]:
    """ctxoffload messages for LlamaIndex `ChatMessage` objects, one each, oldest first; each id is
    `<position>.0.<digest>` (where it came from, and what it says)."""
    names: dict[str, str] = {}
    return [read_message(position, message, names) for position, message in enumerate(messages)]


def read_message(position: int, message: Any, names: dict[str, str] | None = None) -> Msg:
    """The `Msg` of the `ChatMessage` at `position` of a history.

    Args:
        names: the tool calls of the history read so far, by call id: a tool message that
            names no tool (LlamaIndex's agents write none) is named by its call's, and the
            calls of this message are added.
    """
    role = _ROLES.get(str(getattr(message.role, "value", message.role)), "user")
    kwargs = message.additional_kwargs or {}
    known = names if names is not None else {}
    blocks: list[Block]
    if role == "tool":
        call_id = str(kwargs.get("tool_call_id") or f"call-{position}")
        name = str(kwargs.get("name") or kwargs.get("tool_name") or known.get(call_id, ""))
        blocks = [ToolResultBlock(id=call_id, name=name, output=message_text(message))]
    else:
        blocks = [block for item in message.blocks for block in _blocks(item, position)]
        if role == "assistant":
            blocks += _openai_calls(kwargs.get("tool_calls"), position)
        known.update((b.id, b.name) for b in blocks if isinstance(b, ToolCallBlock) and b.name)
    return Msg(role=role, content=blocks, id=message_id(position, 0, blocks))  # type: ignore[arg-type]


def to_llama_index(msgs: Sequence[Msg]) -> list[Any]:
    """LlamaIndex `ChatMessage` objects for ctxoffload messages (a summary, a message made anew):
    text, media and tool calls as blocks, a tool result as a tool message naming its call."""
    out: list[Any] = []
    for msg in msgs:
        blocks = [TextBlock(text=msg.content)] if isinstance(msg.content, str) else msg.content
        results = [block for block in blocks if isinstance(block, ToolResultBlock)]
        for result in results:
            out.append(
                _types.ChatMessage(
                    role="tool",
                    content=_output_text(result),
                    additional_kwargs={"tool_call_id": result.id, "name": result.name},
                )
            )
        others = [_block_of(block) for block in blocks if not isinstance(block, ToolResultBlock)]
        if others or not results:
            out.append(_types.ChatMessage(role=msg.role, blocks=[b for b in others if b]))
    return out


def message_text(message: Any) -> str:
    """The text a `ChatMessage`'s text blocks say, joined as LlamaIndex joins them."""
    return "\n".join(block.text for block in message.blocks if isinstance(block, _types.TextBlock))


def _blocks(item: Any, position: int) -> list[Block]:
    kind = getattr(item, "block_type", None)
    if kind == "text":
        return [TextBlock(text=item.text)]
    if kind == "thinking":
        return [ThinkingBlock(thinking=item.content or "")]
    if kind == "tool_call":
        return [_call(item.tool_call_id, item.tool_name, item.tool_kwargs, position)]
    if kind in ("image", "audio", "video", "document"):
        return [_media(item, kind)]
    if kind == "cache":
        return []  # a provider's cache mark: no content
    return [TextBlock(text=f"[{kind or type(item).__name__}]")]


def _media(item: Any, kind: str) -> Block:
    media_type = (
        getattr(item, f"{kind}_mimetype", None)
        or getattr(item, "format", None)
        or "application/octet-stream"
    )
    url = getattr(item, "url", None)
    if url:
        return DataBlock(source=URLSource(url=str(url), media_type=media_type))
    data = getattr(item, kind if kind != "document" else "data", None)
    if isinstance(data, bytes) and data:
        # LlamaIndex keeps the bytes base64-encoded once resolved; either way they are
        # carried as base64.
        try:
            base64.b64decode(data, validate=True)
            encoded = data.decode("ascii")
        except ValueError:
            encoded = base64.b64encode(data).decode("ascii")
        return DataBlock(source=Base64Source(media_type=media_type, data=encoded))
    path = getattr(item, "path", None)
    return TextBlock(text=f"[{kind} {path}]" if path else f"[{kind}]")


def _call(call_id: Any, name: Any, arguments: Any, position: int) -> ToolCallBlock:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            arguments = {"arguments": arguments}
    if not isinstance(arguments, dict):
        arguments = {"arguments": arguments}
    return ToolCallBlock(id=str(call_id or f"call-{position}"), name=str(name), input=arguments)


def _openai_calls(calls: Any, position: int) -> list[Block]:
    """OpenAI's `tool_calls` (objects or dicts), as the OpenAI integration keeps them."""
    out: list[Block] = []
    for number, call in enumerate(calls or ()):
        get = call.get if isinstance(call, dict) else lambda key, c=call: getattr(c, key, None)
        function = get("function")
        fget = (
            function.get
            if isinstance(function, dict)
            else lambda key, f=function: getattr(f, key, None)
        )
        call_id = get("id") or get("tool_id") or f"call-{position}.{number}"
        name = fget("name") if function is not None else get("tool_name")
        arguments = fget("arguments") if function is not None else get("tool_kwargs")
        out.append(_call(call_id, name or "", arguments, position))
    return out


def _block_of(block: Block) -> Any:
    if isinstance(block, TextBlock):
        return _types.TextBlock(text=block.text)
    if isinstance(block, ThinkingBlock):
        return _types.ThinkingBlock(content=block.thinking)
    if isinstance(block, ToolCallBlock):
        return _types.ToolCallBlock(
            tool_call_id=block.id, tool_name=block.name, tool_kwargs=block.input
        )
    if isinstance(block, DataBlock):
        if isinstance(block.source, URLSource):
            return _types.ImageBlock(url=block.source.url, image_mimetype=block.source.media_type)
        return _types.ImageBlock(
            image=block.source.data.encode("ascii"), image_mimetype=block.source.media_type
        )
    return None


def _output_text(block: ToolResultBlock) -> str:
    if isinstance(block.output, str):
        return block.output
    return "".join(item.text for item in block.output if isinstance(item, TextBlock))
