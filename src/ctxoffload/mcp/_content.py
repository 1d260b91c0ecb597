"""MCP content and ctxoffload's tool results, each read as the other.

A wrapped server's `CallToolResult` becomes one `ToolResultBlock` for the engine to measure and
store: text as text, images, audio and embedded bytes as `DataBlock`s (the workspace puts their
bytes in data/), an embedded text resource as its text under a line naming it, a resource link
as a line, and `structuredContent` as its JSON unless a text block already holds that JSON (the
spec asks servers to send both). A result the engine cut goes back as one text block: its head
and the notice naming the file. The proxy's own read-back tools answer with text and images,
sent as MCP text and image content.
"""

from __future__ import annotations

import json
from typing import Any

from ..messages import Base64Source, DataBlock, TextBlock, ToolResultBlock

__all__ = ["cut_result", "output_content", "result_block"]

_OCTETS = "application/octet-stream"


def result_block(result: Any, call_id: str, name: str) -> ToolResultBlock:
    """A wrapped server's `CallToolResult` as one tool result: text alone as a string (so
    its tokens are counted as the text's own), several parts as a list."""
    parts: list[TextBlock | DataBlock] = [_part(content) for content in result.content]
    structured = result.structured_content
    if structured is not None and not any(_holds_json(p, structured) for p in parts):
        parts.append(TextBlock(text=json.dumps(structured, ensure_ascii=False, indent=2)))
    alone = parts[0] if len(parts) == 1 else None
    output: str | list[TextBlock | DataBlock] = (
        alone.text if isinstance(alone, TextBlock) else parts
    )
    return ToolResultBlock(id=call_id, name=name, output=output, is_error=bool(result.is_error))


def cut_result(types: Any, original: Any, kept: ToolResultBlock) -> Any:
    """The `CallToolResult` the client gets for a result the engine stored and cut: one text
    block (the head and the notice), the original's error flag and `_meta`; its
    `structuredContent` is in the file, not here."""
    text = (
        kept.output
        if isinstance(kept.output, str)
        else "\n".join(p.text for p in kept.output if isinstance(p, TextBlock))
    )
    fields: dict[str, Any] = {"content": [types.TextContent(text=text)], "is_error": kept.is_error}
    if original.meta is not None:
        fields["_meta"] = original.meta
    return types.CallToolResult(**fields)


def output_content(types: Any, output: str | list[TextBlock | DataBlock]) -> list[Any]:
    """A read-back tool's output as MCP content: text, and images as image content."""
    if isinstance(output, str):
        return [types.TextContent(text=output)]
    content: list[Any] = []
    for part in output:
        if isinstance(part, TextBlock):
            content.append(types.TextContent(text=part.text))
        elif isinstance(part.source, Base64Source):
            media_type = part.source.media_type
            kind = types.AudioContent if media_type.startswith("audio/") else types.ImageContent
            content.append(kind(data=part.source.data, mime_type=media_type))
        else:
            content.append(
                types.TextContent(text=f"[{part.media_type or 'data'}: {part.source.url}]")
            )
    return content


def _part(content: Any) -> TextBlock | DataBlock:
    """One MCP content block as a ctxoffload block."""
    kind = getattr(content, "type", None)
    if kind == "text":
        return TextBlock(text=content.text)
    if kind in ("image", "audio"):
        return DataBlock(source=Base64Source(media_type=content.mime_type, data=content.data))
    if kind == "resource":
        resource = content.resource
        uri = str(resource.uri)
        if getattr(resource, "blob", None) is not None:
            media_type = resource.mime_type or _OCTETS
            return DataBlock(
                source=Base64Source(media_type=media_type, data=resource.blob), name=uri
            )
        media = f" ({resource.mime_type})" if resource.mime_type else ""
        return TextBlock(text=f"[resource {uri}{media}]\n{resource.text}")
    if kind == "resource_link":
        title = f" {content.name}" if getattr(content, "name", None) else ""
        return TextBlock(text=f"[resource link {content.uri}{title}]")
    # A kind a newer protocol added: kept whole, as its JSON.
    dumped = content.model_dump(mode="json", by_alias=True, exclude_none=True)
    return TextBlock(text=json.dumps(dumped, ensure_ascii=False))


def _holds_json(part: TextBlock | DataBlock, value: Any) -> bool:
    """Whether a text block is `value` as JSON (the copy servers send beside structured
    content)."""
    if not isinstance(part, TextBlock) or not part.text.lstrip().startswith(("{", "[")):
        return False
    try:
        return bool(json.loads(part.text) == value)
    except (ValueError, RecursionError):
        return False
