"""MCP content and ctxoffload's tool results, each read as the other.

A wrapped server's `CallToolResult` becomes one `ToolResultBlock` for the engine to measure and
store: text as text, images, audio and embedded bytes as `DataBlock`s (the workspace puts their
bytes in data/), an embedded text resource as its text under a line naming it, a resource link
as a line, and `structuredContent` once: left out where the text already says it (the spec
asks servers to send both; `repeats` says when they do), else as its JSON under a line that
labels it. A result the engine cut goes back as one text block: its head and the notice naming
the file; one whose payloads were stored (`payloads_to_store`) goes back with a line naming
each stored file in its place. The proxy's own read-back tools answer with text and images,
sent as MCP text and image content.
"""

from __future__ import annotations

import json
from typing import Any

from ..messages import Base64Source, DataBlock, TextBlock, ToolResultBlock

__all__ = [
    "STRUCTURED_LABEL",
    "cut_result",
    "output_content",
    "passed_result",
    "payload_size",
    "repeats",
    "result_block",
]

_OCTETS = "application/octet-stream"

STRUCTURED_LABEL = "[structuredContent]"
"""The line above a result's `structuredContent` where its text does not already say it."""

_JSON_STARTS = tuple('{["-0123456789tfn')


def result_block(result: Any, call_id: str, name: str) -> ToolResultBlock:
    """A wrapped server's `CallToolResult` as one tool result: text alone as a string (so
    its tokens are counted as the text's own), several parts as a list."""
    parts: list[TextBlock | DataBlock] = [_part(content) for content in result.content]
    structured = result.structured_content
    if structured is not None and not repeats(parts, structured):
        dumped = json.dumps(structured, ensure_ascii=False, indent=2)
        parts.append(TextBlock(text=f"{STRUCTURED_LABEL}\n{dumped}"))
    alone = parts[0] if len(parts) == 1 else None
    output: str | list[TextBlock | DataBlock] = (
        alone.text if isinstance(alone, TextBlock) else parts
    )
    return ToolResultBlock(id=call_id, name=name, output=output, is_error=bool(result.is_error))


def repeats(parts: list[TextBlock | DataBlock], structured: Any) -> bool:
    """Whether a result's content already says its `structuredContent`, so that storing
    both would store it twice.

    It does where a text block is the structured value as JSON (what the spec asks servers
    to send beside it), and where the text blocks are the value a server wrapped as
    `{"result": value}` (the Python SDK's MCPServer, and FastMCP before it, wrap what a
    tool returns that is not an object: a `str` becomes one text block, a list one block per
    item, a number its JSON).
    """
    texts = [p.text for p in parts if isinstance(p, TextBlock)]
    if not texts:
        return False
    if any(_is_json_of(text, structured) for text in texts):
        return True
    if len(texts) != len(parts):
        return False  # an image or a payload beside the text: not the same value
    values = [structured]
    if isinstance(structured, dict) and list(structured) == ["result"]:
        values.append(structured["result"])
    return any(_texts_say(texts, value) for value in values)


def _texts_say(texts: list[str], value: Any) -> bool:
    """Whether `texts` are `value` as a server renders it into text blocks."""
    if len(texts) == 1 and _says(texts[0], value):
        return True
    return (
        isinstance(value, list)
        and len(value) == len(texts)
        and all(_says(text, item) for text, item in zip(texts, value, strict=True))
    )


def _says(text: str, value: Any) -> bool:
    """Whether one text block is `value`: the string itself, or its JSON."""
    return text == value if isinstance(value, str) else _is_json_of(text, value)


def _is_json_of(text: str, value: Any) -> bool:
    """Whether `text` is `value` as JSON (any spacing, any order of keys)."""
    if not text.lstrip().startswith(_JSON_STARTS):
        return False
    try:
        return _canonical(json.loads(text)) == _canonical(value)
    except (ValueError, TypeError, RecursionError):
        return False


def _canonical(value: Any) -> str:
    """`value` as one JSON text, its keys sorted: compared as text, `true` is not `1` and `1`
    is not `1.0` (Python's `==` holds each pair equal, and the value the text does not say
    would be lost)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def payload_size(part: DataBlock) -> int:
    """The decoded size of an inline payload, from its base64's length (nothing decoded)."""
    if not isinstance(part.source, Base64Source):
        return 0
    data = part.source.data
    length = len(data) - data.count("\n") - data.count("\r")
    return length * 3 // 4 - data.rstrip("\r\n")[-2:].count("=")


def passed_result(types: Any, original: Any, replaced: dict[int, str]) -> Any:
    """The `CallToolResult` the client gets for a result whose payloads at `replaced` were
    stored: each of them a text block (the line naming its file), the rest as it came."""
    content = [
        types.TextContent(text=replaced[index]) if index in replaced else item
        for index, item in enumerate(original.content)
    ]
    return original.model_copy(update={"content": content})


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
