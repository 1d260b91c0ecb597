"""Conversion between ctxoffload messages and the Bedrock Converse format (Strands Agents).

Strands keeps its history in Converse messages: `{"role": "user" | "assistant", "content":
[...]}` where each block is a one-key dict, `{"text": ...}`, `{"image": {"format": "png",
"source": {"bytes": b"..."}}}`, `{"document": {"format": "pdf", "name": ..., "source":
{"bytes": ...}}}`, `{"toolUse": {"toolUseId", "name", "input"}}`, `{"toolResult":
{"toolUseId", "content": [text | json | image | document], "status"}}`,
`{"reasoningContent": {"reasoningText": {"text", "signature"}}}`.

Mapping: text -> `TextBlock`; image / document -> `DataBlock` with a base64 source (raw
`bytes` are encoded, so the payload can be offloaded to data/ and written as JSON);
toolUse -> `ToolCallBlock`; toolResult -> `ToolResultBlock` (a `json` item becomes a text
item holding the JSON, `status: "error"` is `is_error`); reasoningText -> `ThinkingBlock`.
Any other block (cachePoint, guardContent, video, citations, redacted reasoning) is kept
verbatim in the message's hints and put back at its place, as with the other formats
(`Msg.metadata["converse"]`, `block.converse`), so `to_converse(from_converse(m)) == m`.
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .._depth import MAX_DEPTH, copied, json_text, load_json
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
from ..text import data_line
from ._shared import (
    block_hint,
    check_depth,
    check_msg,
    extra_keys,
    hinted,
    read_parts,
    with_unknown,
)

__all__ = ["BLOCK_KEYS", "from_converse", "is_converse", "to_converse"]

FMT: Literal["converse"] = "converse"
BLOCK_KEYS = frozenset(
    {
        "text",
        "image",
        "document",
        "video",
        "toolUse",
        "toolResult",
        "reasoningContent",
        "cachePoint",
        "guardContent",
        "citationsContent",
    }
)
"""The keys of the Converse content blocks; a block is a dict with exactly one of them."""
_DOCUMENT_TYPES = {
    "pdf": "application/pdf",
    "csv": "text/csv",
    "doc": "application/msword",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xls": "application/vnd.ms-excel",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "html": "text/html",
    "txt": "text/plain",
    "md": "text/markdown",
    "json": "application/json",
}
_DOCUMENT_FORMATS = {media: fmt for fmt, media in _DOCUMENT_TYPES.items()}


def is_converse(data: Mapping[str, Any]) -> bool:
    """Whether a message dict is in the Converse format: one-key blocks without a `type`.

    (OpenAI parts and Anthropic blocks always carry `type`, so `{"text": "hi"}` is Converse.)

    Args:
        data: a message dict.
    """
    content = data.get("content")
    if not isinstance(content, list) or not content:
        return False
    return all(
        isinstance(b, Mapping) and "type" not in b and len(b) == 1 and next(iter(b)) in BLOCK_KEYS
        for b in content
    )


def _hinted(hint: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments that attach `hint` to a new block (none when it is empty)."""
    return hinted(FMT, hint)


def _hint(block: Any) -> dict[str, Any]:
    return block_hint(block, FMT)


def _payload(source: Any, where: str) -> tuple[str, bool] | None:
    """The base64 text of a Converse `source`, and whether it was raw bytes; None if elsewhere."""
    if not isinstance(source, Mapping) or "bytes" not in source or len(source) != 1:
        return None
    raw = source["bytes"]
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(raw)).decode("ascii"), True
    if isinstance(raw, str):
        try:
            base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidContent(
                f"{where}.source.bytes is a string that is not base64: pass the raw bytes"
            ) from None
        return raw, False
    raise InvalidContent(f"{where}.source.bytes is a {type(raw).__name__}: pass bytes")


def _data_from(kind: str, body: Any, where: str) -> DataBlock | None:
    if not isinstance(body, Mapping) or not isinstance(body.get("format"), str):
        return None
    payload = _payload(body.get("source"), f"{where}.{kind}")
    if payload is None:
        return None  # an s3Location or another source: kept verbatim
    data, was_bytes = payload
    fmt = body["format"]
    if kind == "image":
        media_type = f"image/{fmt.lower()}"
    else:
        media_type = _DOCUMENT_TYPES.get(fmt.lower(), f"application/{fmt.lower()}")
    name = body.get("name") if isinstance(body.get("name"), str) else None
    extra = extra_keys(body, ("format", "source", "name"))
    hint: dict[str, Any] = {"as": kind, "format": fmt}
    if not was_bytes:
        hint["base64"] = True
    if "name" in body and name is None:
        extra["name"] = copy.deepcopy(body["name"])
    if extra:
        hint["keys"] = extra
    return DataBlock(
        source=Base64Source(media_type=media_type, data=data), name=name, **_hinted(hint)
    )


def _item_from(item: Any, where: str) -> TextBlock | DataBlock | None:
    if not isinstance(item, Mapping) or len(item) != 1:
        return None
    ((kind, body),) = item.items()
    if kind == "text" and isinstance(body, str):
        return TextBlock(text=body)
    if kind == "json":
        try:
            text = json_text(body, exact=True, ensure_ascii=False)
        except (TypeError, ValueError):  # a value JSON has no form for
            return None
        return TextBlock(text=text, **_hinted({"as": "json"}))
    if kind in ("image", "document"):
        return _data_from(kind, body, where)
    return None


def _block_from(block: Any, where: str, names: dict[str, str]) -> Block | None:
    if not isinstance(block, Mapping) or len(block) != 1:
        return None
    ((kind, body),) = block.items()
    if kind in ("text", "image", "document"):
        return _item_from(block, where)
    if kind == "toolUse" and isinstance(body, Mapping):
        call_id, name, arguments = body.get("toolUseId"), body.get("name"), body.get("input")
        if not (isinstance(call_id, str) and isinstance(name, str)):
            raise InvalidContent(
                f"{where} is a toolUse without string 'toolUseId' and 'name': use "
                "{'toolUse': {'toolUseId': 'tooluse_...', 'name': 'tool', 'input': {...}}}"
            )
        names[call_id] = name
        extra = extra_keys(body, ("toolUseId", "name", "input"))
        hint: dict[str, Any] = {"keys": extra} if extra else {}
        if not isinstance(arguments, Mapping):
            hint["input"] = copy.deepcopy(arguments)
            arguments = {}
        return ToolCallBlock(
            id=call_id,
            name=name,
            input=copy.deepcopy(dict(arguments)),
            **_hinted(hint),
        )
    if kind == "toolResult" and isinstance(body, Mapping):
        call_id = body.get("toolUseId")
        if not isinstance(call_id, str):
            raise InvalidContent(f"{where} is a toolResult without a string 'toolUseId'")
        content = body.get("content")
        status = body.get("status")
        result_hint: dict[str, Any] = {}
        if status not in ("success", "error"):
            result_hint["status"] = copy.deepcopy(status) if "status" in body else None
        items: list[TextBlock | DataBlock] = read_parts(
            content if isinstance(content, list) else [],
            _item_from,
            f"{where}.toolResult.content",
            result_hint,
        )
        extra = extra_keys(body, ("toolUseId", "content", "status"))
        if "content" in body and not isinstance(content, list):
            extra["content"] = copy.deepcopy(content)
        if extra:
            result_hint["keys"] = extra
        return ToolResultBlock(
            id=call_id,
            name=names.get(call_id, ""),
            output=items,
            is_error=status == "error",
            **_hinted(result_hint),
        )
    if kind == "reasoningContent" and isinstance(body, Mapping):
        reasoning = body.get("reasoningText")
        if (
            len(body) == 1
            and isinstance(reasoning, Mapping)
            and isinstance(reasoning.get("text"), str)
        ):
            signature = reasoning.get("signature")
            if set(reasoning) <= {"text", "signature"} and (
                signature is None or isinstance(signature, str)
            ):
                return ThinkingBlock(thinking=reasoning["text"], signature=signature)
    return None


def _message_from(message: Any, where: str, names: dict[str, str]) -> Msg:
    if not isinstance(message, Mapping):
        raise InvalidContent(f"{where} is a {type(message).__name__}, not a Converse message")
    check_depth(message, where)  # reading it copies its values, which recurses
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise InvalidContent(
            f"{where} has role {role!r}: Converse messages are 'user' or 'assistant' (the "
            "system prompt is passed apart)"
        )
    content = message.get("content")
    if not isinstance(content, list):
        raise InvalidContent(
            f"{where}.content is a {type(content).__name__}: Converse content is a list"
        )
    hint: dict[str, Any] = {}
    blocks: list[Block] = read_parts(
        content, lambda block, at: _block_from(block, at, names), f"{where}.content", hint
    )
    extra = extra_keys(message, ("role", "content"))
    if extra:
        hint["keys"] = extra
    return Msg(role=role, content=blocks, metadata={FMT: hint} if hint else {})


def from_converse(
    messages: Sequence[Mapping[str, Any]], system: Sequence[Mapping[str, Any]] | str | None = None
) -> list[Msg]:
    """Read Converse messages (a Strands `agent.messages`) as `Msg` objects, oldest first.

    Args:
        messages: the Converse messages.
        system: the system prompt, as a string or Converse system blocks (`[{"text": ...}]`);
            becomes a leading system `Msg`.

    Raises:
        InvalidContent: a message or block is malformed.
    """
    names: dict[str, str] = {}
    out: list[Msg] = []
    if isinstance(system, str):
        out.append(Msg(role="system", content=system))
    elif system:
        texts = [b.get("text") for b in system if isinstance(b, Mapping)]
        if not all(isinstance(t, str) for t in texts) or len(texts) != len(system):
            raise InvalidContent("system holds blocks other than text: pass [{'text': ...}]")
        out.append(Msg(role="system", content="\n".join(str(t) for t in texts)))
    for i, message in enumerate(messages):
        out.append(_message_from(message, f"messages[{i}]", names))
    return out


def message_from_converse(message: Mapping[str, Any], where: str, names: dict[str, str]) -> Msg:
    """One Converse message (used by `to_msgs` when it detects the format)."""
    return _message_from(message, where, names)


def _data_to(block: DataBlock) -> dict[str, Any]:
    hint = _hint(block)
    source = block.source
    if isinstance(source, URLSource):
        # Offloaded: Converse takes no URL, so the model gets a line naming the file.
        return {"text": data_line(source.url, block.name, source.media_type)}
    media = source.media_type.split(";", 1)[0].strip().lower()
    kind = hint.get("as") or ("image" if media.startswith("image/") else "document")
    fmt = hint.get("format") or (
        media.split("/", 1)[1]
        if kind == "image"
        else _DOCUMENT_FORMATS.get(media, media.split("/")[-1])
    )
    payload: Any = source.data if hint.get("base64") else base64.b64decode(source.data)
    body: dict[str, Any] = {"format": fmt}
    if block.name is not None:
        body["name"] = block.name
    elif kind == "document":
        body["name"] = "document"
    body["source"] = {"bytes": payload}
    keys = hint.get("keys")
    if isinstance(keys, Mapping):
        body.update(copy.deepcopy(dict(keys)))
    return {kind: body}


def _item_to(block: TextBlock | DataBlock) -> dict[str, Any]:
    if isinstance(block, DataBlock):
        return _data_to(block)
    if _hint(block).get("as") == "json":
        try:
            return {"json": load_json(block.text, MAX_DEPTH)}
        except ValueError:
            pass  # edited into something that is not JSON, or too deep for a value: as text
    return {"text": block.text}


def _block_to(block: Block) -> dict[str, Any]:
    hint = _hint(block)
    if isinstance(block, (TextBlock, DataBlock)):
        return _item_to(block)
    if isinstance(block, ThinkingBlock):
        reasoning: dict[str, Any] = {"text": block.thinking}
        if block.signature is not None:
            reasoning["signature"] = block.signature
        return {"reasoningContent": {"reasoningText": reasoning}}
    if isinstance(block, ToolCallBlock):
        body: dict[str, Any] = {
            "toolUseId": block.id,
            "name": block.name,
            "input": copy.deepcopy(hint["input"])
            if "input" in hint and not block.input
            else copied(block.input, f"the input of tool call {block.id!r}"),
        }
        body.update(copy.deepcopy(hint.get("keys") or {}))
        return {"toolUse": body}
    items = (
        [{"text": block.output}]
        if isinstance(block.output, str)
        else [_item_to(b) for b in block.output]
    )
    result: dict[str, Any] = {"toolUseId": block.id, "content": with_unknown(items, hint)}
    if "status" in hint and not block.is_error:
        if hint["status"] is not None:
            result["status"] = copy.deepcopy(hint["status"])
    else:
        result["status"] = "error" if block.is_error else "success"
    result.update(copy.deepcopy(hint.get("keys") or {}))
    return {"toolResult": result}


def to_converse(msgs: Sequence[Msg]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Convert messages to the Converse format: `(system blocks, messages)`.

    System messages become the system blocks (`[{"text": ...}]`); a `tool` Msg (read from
    OpenAI) becomes toolResult blocks in a user message, joined with the results before it.
    Image and document payloads are written as raw bytes, as Strands holds them; an offloaded
    payload (a URL source) becomes a text line naming its file.

    Args:
        msgs: ctxoffload messages (convert others with `to_msgs` first).

    Returns:
        The system blocks and the messages, as Strands' `Agent(system_prompt=...)` and
        `agent.messages` take them.

    Raises:
        InvalidContent: an item is not a `Msg`, or a system message holds more than text.
    """
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for i, msg in enumerate(msgs):
        msg = check_msg(msg, f"msgs[{i}]")
        found = msg.metadata.get(FMT)
        hint: dict[str, Any] = found if isinstance(found, dict) else {}
        blocks = (
            [{"text": msg.content}]
            if isinstance(msg.content, str)
            else [_block_to(b) for b in msg.content]
        )
        if msg.role == "system":
            if not all(set(b) == {"text"} for b in blocks):
                raise InvalidContent(
                    f"msgs[{i}] is a system message holding more than text: Converse system "
                    "blocks are text"
                )
            system.extend(blocks)
            continue
        if msg.role == "tool":
            last = out[-1] if out else None
            if (
                last is not None
                and last["role"] == "user"
                and all("toolResult" in b for b in last["content"])
            ):
                last["content"].extend(blocks)
            else:
                out.append({"role": "user", "content": blocks})
            continue
        message: dict[str, Any] = {"role": msg.role, "content": with_unknown(blocks, hint)}
        message.update(copy.deepcopy(hint.get("keys") or {}))
        out.append(message)
    return system, out
