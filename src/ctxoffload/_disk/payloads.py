"""Turning what callers hand us into what goes to an offloader, and tool output into text.

Callers pass ctxoffload messages, OpenAI / Anthropic dicts, or foreign pydantic models. For
the context log each becomes its own JSON with inline base64 payloads moved to data/; for a
tool result, the whole output becomes text, with each binary block as one `<data .../>` line.

Both workspaces use this (only the `StoreData` function, where bytes go, differs), and so
does truncation: the head it keeps in the context is rendered by the same
`render_tool_output` as the file, which is why line numbers in the two always agree. It
sits outside `workspace/` because `compression` must not depend on a workspace.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, from_json

from .._depth import (
    RAW_ARGUMENTS,
    STORE_DEPTH,
    TooDeep,
    depth_error,
    load_json,
    text_form,
    too_deep,
)
from ..exceptions import InvalidContent
from ..messages import Block, DataBlock, Msg, TextBlock, ToolCallBlock, ToolResultBlock, URLSource
from ..text import data_line
from .layout import MARK, UNSTORED_MARK
from .paths import path_to_file_url
from .rows import TextRow

__all__ = [
    "StoreData",
    "ToolOutput",
    "as_message_list",
    "context_rows",
    "count_lines",
    "decode_base64",
    "externalize",
    "message_json",
    "offload_block",
    "render_tool_output",
    "sniff_media_type",
    "storable_message",
    "tool_output_of",
]

StoreData = Callable[[bytes, "str | None"], str]
"""Stores raw bytes with a media type and returns the reference to them."""

logger = logging.getLogger("ctxoffload")

_AUDIO_FORMATS = {"wav": "audio/wav", "mp3": "audio/mpeg", "flac": "audio/flac", "ogg": "audio/ogg"}


# URL-safe base64 spells '+' and '/' as '-' and '_'.
_URL_SAFE = str.maketrans("-_", "+/")


def decode_base64(data: str, *, what: str) -> bytes:
    """Decode base64 tolerantly, naming `what` in the error.

    Accepted: the standard and the URL-safe alphabet (or a mix), missing `=` padding, and
    whitespace anywhere (line-wrapped MIME base64).

    Raises:
        InvalidContent: `data` is not base64 in any of those spellings; nothing was written.
    """
    try:
        # Fast path: almost every payload is standard, padded and unwrapped, and touching a
        # multi-MB string before trying it would cost more than the decoding itself.
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        pass
    compact = "".join(data.split()).translate(_URL_SAFE)
    unpadded = compact.rstrip("=")
    try:
        return base64.b64decode(unpadded + "=" * (-len(unpadded) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        shown = compact[:32] + ("..." if len(compact) > 32 else "")
        raise InvalidContent(
            f"{what} is not valid base64 ({exc}; data starts {shown!r}): pass the bytes "
            "base64-encoded, or a URL source instead"
        ) from None


# Magic numbers of the binary formats a tool most often returns, longest prefixes first.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"\x1f\x8b", "application/gzip"),
)


def sniff_media_type(data: bytes) -> str:
    """The media type of binary data from its magic number; `application/octet-stream` else."""
    for magic, media_type in _MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] in (b"WEBP", b"WAVE"):
        return "image/webp" if data[8:12] == b"WEBP" else "audio/wav"
    return "application/octet-stream"


def count_lines(data: bytes | str) -> int:
    """Lines in `data` as `wc -l` counts them, plus a last line without its newline."""
    if isinstance(data, bytes):
        ends_open = bool(data) and not data.endswith(b"\n")
        return data.count(b"\n") + ends_open
    ends_open = bool(data) and not data.endswith("\n")
    return data.count("\n") + ends_open


def _split_data_url(value: str) -> tuple[str | None, str] | None:
    """`data:<media type>;base64,<data>` -> (media type, data); None for anything else."""
    if not value.startswith("data:"):
        return None
    head, sep, data = value.partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    media_type = head[len("data:") : -len(";base64")].split(";", 1)[0] or None
    return media_type, data


def file_url(reference: str) -> str:
    """A reference as a URL: an absolute path as its percent-encoded `file://` URL
    (`path_to_file_url`, which `read_reference` decodes); other references (memory://,
    s3://) are URLs already. For block fields whose class demands a URL (AgentScope's
    `URLSource.url` is pydantic's `AnyUrl`); everything meant for file tools keeps the path."""
    return path_to_file_url(reference) if reference.startswith("/") else reference


def externalize(
    value: Any,
    store: StoreData,
    *,
    where: str = "content",
    depth: int = 0,
    url_form: Callable[[str], str] | None = None,
) -> Any:
    """A copy of a JSON value with every inline base64 payload stored and replaced.

    Recognised payloads: a `{"type": "base64", "data": ..., "media_type": ...}` source (ours,
    Anthropic's, AgentScope's) becomes `{"type": "url", "url": <ref>, "media_type": ...}`; a
    `data:<type>;base64,...` string (OpenAI image_url / file_data) becomes the reference; an
    OpenAI `input_audio` `{"data", "format"}` gets `"url"` in place of `"data"`.

    Args:
        value: the JSON value.
        store: where payload bytes go.
        where: the value's place, for error messages.
        depth: how deep `value` already is inside the message or block being stored.
        url_form: how a reference is written into a `{"type": "url", "url": ...}` source
            (`file_url` for foreign classes whose URL field must be a URL); as is by default.

    Raises:
        InvalidContent: a payload is not valid base64, or the value nests deeper than
            `STORE_DEPTH` levels in all.
    """
    if isinstance(value, str):
        split = _split_data_url(value)
        if split is None:
            return value
        media_type, data = split
        return store(decode_base64(data, what=f"data URL at {where}"), media_type)
    if not isinstance(value, (list, dict)):
        return value
    depth += 1
    if depth > STORE_DEPTH:
        raise depth_error(where, STORE_DEPTH)
    if isinstance(value, list):
        return [
            externalize(v, store, where=f"{where}[{i}]", depth=depth, url_form=url_form)
            for i, v in enumerate(value)
        ]
    if value.get("type") == "base64" and isinstance(value.get("data"), str):
        media_type = value.get("media_type")
        raw = decode_base64(value["data"], what=f"base64 source at {where}")
        out = {
            k: externalize(v, store, where=f"{where}.{k}", depth=depth, url_form=url_form)
            for k, v in value.items()
            if k != "data"
        }
        out["type"] = "url"
        ref = store(raw, media_type if isinstance(media_type, str) else None)
        out["url"] = url_form(ref) if url_form is not None else ref
        return out
    result: dict[str, Any] = {}
    for key, item in value.items():
        if key == "input_audio" and isinstance(item, dict) and isinstance(item.get("data"), str):
            fmt = item.get("format")
            media_type = _AUDIO_FORMATS.get(fmt, f"audio/{fmt}") if isinstance(fmt, str) else None
            raw = decode_base64(item["data"], what=f"input_audio at {where}")
            audio = {
                k: externalize(
                    v, store, where=f"{where}.{key}.{k}", depth=depth + 1, url_form=url_form
                )
                for k, v in item.items()
                if k != "data"
            }
            audio["url"] = store(raw, media_type)
            result[key] = audio
        else:
            result[key] = externalize(
                item, store, where=f"{where}.{key}", depth=depth, url_form=url_form
            )
    return result


def _as_json(obj: Any, *, where: str) -> Any:
    """The JSON value of one message or block, as the caller's own type would serialise it.

    Raises:
        InvalidContent: the object has no JSON form, or nests deeper than `STORE_DEPTH`.
    """
    if isinstance(obj, BaseModel):
        # The model's own JSON (aliases, custom serialisers and all), parsed back so that
        # payloads can be replaced inside it.
        try:
            return load_json(obj.model_dump_json(), STORE_DEPTH)
        except PydanticSerializationError:
            pass
        except TooDeep:  # under pydantic's own limit (255), but deeper than a message may be
            raise depth_error(where, STORE_DEPTH) from None
        # JSON text cannot hold a lone surrogate (text a tool decoded with surrogateescape)
        # but a Python str can: take the model's JSON values and let dumps_line escape them.
        try:
            return obj.model_dump(mode="json")
        except ValueError as exc:
            if "depth" in str(exc):  # pydantic: "Maximum serialization depth exceeded"
                raise depth_error(where, STORE_DEPTH) from None
            raise InvalidContent(
                f"{where} is a {type(obj).__name__} that cannot be serialised to JSON ({exc}): "
                "pass text, or binary payloads as base64"
            ) from None
    if isinstance(obj, Mapping):
        # json recurses in C and would raise RecursionError past ~1,000 levels.
        if too_deep(obj, STORE_DEPTH):
            raise depth_error(where, STORE_DEPTH)
        try:
            return json.loads(json.dumps(obj))
        except (TypeError, ValueError) as exc:
            raise InvalidContent(
                f"{where} is a dict that is not JSON-serialisable ({exc}): pass plain JSON "
                "values, a ctxoffload Msg, or a pydantic model"
            ) from None
    raise InvalidContent(
        f"{where} is a {type(obj).__name__}; pass a ctxoffload Msg, an OpenAI or Anthropic "
        "message dict, or a pydantic model"
    )


def as_message_list(msgs: Any) -> list[Any]:
    """`msgs` as a list: a single message (a Msg, dict or model) is taken as a list of one."""
    if isinstance(msgs, (BaseModel, Mapping, str, bytes)):
        return [msgs]
    return list(msgs)


# Text that every payload `externalize` replaces contains one of these: a base64 source's
# `"type": "base64"`, a data URL's start, an OpenAI `input_audio` part. Looked for in one
# pass (three `in` tests took 28 ms over 20 MB of JSON, the search 11 ms); each starts with
# a quote, so the search stops only at quotes.
_PAYLOAD_MARKS = (b'"base64"', b'"data:', b'"input_audio"')
_PAYLOAD_MARK = re.compile(b"|".join(re.escape(mark) for mark in _PAYLOAD_MARKS))


class JsonRow(dict):  # type: ignore[type-arg]
    """A row parsed from a model's own JSON text, kept as `json_text`.

    The context log's line for it is that text: `row_line_and_key` uses it instead of
    serialising the row again (pydantic-core writes parsed values back byte for byte).
    """

    __slots__ = ("json_text",)

    json_text: str


def _without_payloads(model: BaseModel) -> Any:
    """The JSON value of a model that holds no inline payload and nests shallowly, or None.

    The common case (text, tool calls, results already offloaded) needs neither the walk
    that replaces payloads nor the depth walk: no payload mark in the JSON text means
    nothing to replace, and fewer opening brackets than `STORE_DEPTH` bound the depth.
    A ctxoffload `Msg` comes back as a `TextRow` (its JSON is its line, and nothing reads
    the value), another model as a `JsonRow`. None sends the caller down the full path.
    """
    raw = _model_json(model)
    if raw is None or _PAYLOAD_MARK.search(raw) is not None:
        return None
    if not _fields_shallow(model) and _deeper(raw):
        return None
    if type(model) is Msg and not model.model_extra and isinstance(model.id, str) and model.id:
        return TextRow(raw, model.id)
    return _json_row(raw)


_JSON_LEAVES = frozenset({str, int, float, bool, type(None)})


def _fields_shallow(model: BaseModel) -> bool:
    """Whether a ctxoffload `Msg` of texts, tool calls and text tool results surely nests
    within `STORE_DEPTH`, told from its fields instead of its JSON text (`_deeper` counts the
    brackets of every text, twice over a long output): the message, its content list and a
    block are three levels, and only its metadata and a call's input nest further, checked
    here (plain dicts, lists and scalars only). False for any other message: `_deeper`."""
    if type(model) is not Msg or model.model_extra or not _within(model.metadata):
        return False
    content = model.content
    if isinstance(content, str):
        return True
    for block in content:
        kind = type(block)  # (exactly: a subclass may declare fields of any depth)
        if kind is TextBlock:
            shallow = True
        elif kind is ToolCallBlock:
            shallow = _within(cast(ToolCallBlock, block).input)
        else:
            shallow = kind is ToolResultBlock and type(cast(ToolResultBlock, block).output) is str
        if not shallow or cast(BaseModel, block).__pydantic_extra__:
            return False
    return True


_WALKED = 1_000
"""The most values `_within` looks at: a field holding more (a long list of numbers) is left to
the text's brackets, which cost less than a walk of it in Python."""


def _within(value: Any, limit: int = STORE_DEPTH - 3) -> bool:
    """Whether `value`, a dict of a message's field, holds only dicts, lists and JSON scalars
    (what pydantic writes as they are) nested at most `limit` levels (the dict one), in at
    most `_WALKED` values."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    walked = 0
    while stack:
        item, level = stack.pop()
        if level > limit:
            return False
        children = item.values() if type(item) is dict else item if type(item) is list else None
        if children is None:
            return False
        walked += len(children)
        if walked > _WALKED:
            return False
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, level + 1))
            elif kind not in _JSON_LEAVES:
                return False
    return True


def _shallow(model: BaseModel) -> JsonRow | None:
    """The JSON value of a model that nests shallowly, its payloads left inline (a message
    stored where nothing is moved out: the session's record, state.json), or None for the
    full path: what `_as_json` makes of it, without the depth walk over the value."""
    raw = _model_json(model)
    if raw is None or _deeper(raw):
        return None
    return _json_row(raw)


def _model_json(model: BaseModel) -> bytes | None:
    """`model_dump_json` without its decode (the bytes are what a line holds); None when
    pydantic cannot write it (a lone surrogate, a value of no JSON type, too deep)."""
    try:
        raw: bytes = model.__pydantic_serializer__.to_json(model)
    except (PydanticSerializationError, ValueError, RecursionError):
        return None
    return raw


_NOT_STRUCTURAL = bytes(b for b in range(256) if b not in b'[]{}"')


def _deeper(raw: bytes) -> bool:
    """Whether JSON text may nest deeper than `STORE_DEPTH` (it may say yes wrongly, never no).

    It cannot when it holds fewer opening brackets. A long message (a tool message of
    100,000 results) holds far more, and its depth is then bounded from its brackets alone,
    in a few passes over bytes rather than a walk over the parsed value: escaped quotes and
    backslashes dropped, every quote left then opens or closes a string; the brackets inside
    strings dropped; then each pass deletes every `[]` and `{}`, which takes at most two
    levels off, so text emptied in `passes` passes nests at most `2 * passes` deep.
    """
    if raw.count(b"{") + raw.count(b"[") <= STORE_DEPTH:
        return False
    text = raw
    if b"\\" in text:
        # An escape is a backslash and the character after it: pairs of backslashes first,
        # then every backslash left escapes the character after it, a quote among them.
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    # Two quotes side by side with nothing structural between them: a string without
    # brackets, or the end of one and the start of the next; either way dropping them
    # leaves every later quote opening or closing what it did.
    text = text.translate(None, _NOT_STRUCTURAL).replace(b'""', b"")
    if b'"' in text:
        text = b"".join(text.split(b'"')[::2])  # (what is left between quotes is in strings)
    passes = 0
    while text:
        shorter = text.replace(b"[]", b"").replace(b"{}", b"")
        passes += 1
        if len(shorter) == len(text) or 2 * passes > STORE_DEPTH:
            return True
        text = shorter
    return False


def _json_row(raw: bytes) -> JsonRow:
    """The value of a model's JSON text, which keeps the text (`JsonRow`).

    pydantic-core's parser: the same values as json.loads from pydantic's own output (it
    has no NaN or lone surrogate), in a third of the time; its nesting limit (~200) is above
    the STORE_DEPTH that `_deeper` bounds."""
    row = JsonRow(from_json(raw))
    row.json_text = raw.decode()
    return row


def message_json(msg: Any, store: StoreData | None, *, where: str) -> Any:
    """The JSON value written to context.jsonl for one message.

    Args:
        msg: the message.
        store: where inline payloads go; None leaves them inline (only the depth is checked).
        where: the message's place, for error messages.

    Raises:
        InvalidContent: the message cannot be stored as its own JSON.
    """
    if isinstance(msg, BaseModel):
        fast = _without_payloads(msg) if store is not None else _shallow(msg)
        if fast is not None:
            return fast
    value = _as_json(msg, where=where)
    if store is None:
        if too_deep(value, STORE_DEPTH):
            raise depth_error(where, STORE_DEPTH)
        return value
    # A foreign model's line must load back with its own class, whose URL field may demand
    # a URL (AgentScope's does); ctxoffload's own messages keep the plain path.
    foreign = isinstance(msg, BaseModel) and not isinstance(msg, Msg)
    return externalize(value, store, where=where, url_form=file_url if foreign else None)


UNSTORED = UNSTORED_MARK
"""`metadata["ctxoffload"]["kind"]` of a stand-in for a message that could not be stored."""


def _note(what: str, problem: str) -> str:
    return f"[ctxoffload: {what} could not be stored as JSON ({problem}); its text form follows]"


def _block_stand_in(block: Block, problem: str) -> Block:
    """A block that can be stored, holding the text form of one that cannot."""
    if isinstance(block, ToolCallBlock):
        # The form a model's unparseable arguments take (see formats/openai.py), so the call keeps
        # its id and stays paired with its result.
        return ToolCallBlock(
            id=block.id, name=block.name, input={RAW_ARGUMENTS: text_form(block.input)}
        )
    if isinstance(block, ToolResultBlock):
        text = f"{_note('this tool output', problem)}\n{text_form(block.output)}"
        return ToolResultBlock(id=block.id, name=block.name, output=text, is_error=block.is_error)
    return TextBlock(text=f"{_note(f'a {block.type} block', problem)}\n{text_form(block)}")


def _repaired_msg(msg: Msg, problem: str, store: StoreData | None, where: str) -> Msg:
    """`msg` with each part that cannot be stored replaced by its text form."""

    def problem_with(value: Any, at: str) -> str | None:
        try:
            message_json(value, store, where=at)
        except InvalidContent as exc:
            return str(exc)
        return None

    content: str | list[Block] = msg.content
    if isinstance(msg.content, list):
        content = []
        for i, block in enumerate(msg.content):
            block_problem = problem_with(block, f"{where}.content[{i}]")
            content.append(
                block if block_problem is None else _block_stand_in(block, block_problem)
            )
    extra = msg.model_extra or {}
    metadata: dict[str, Any] = {}
    if problem_with({"metadata": msg.metadata, **extra}, f"{where}.metadata") is not None:
        metadata["unstored_fields"] = text_form({"metadata": msg.metadata, **extra})
        extra = {}
    else:
        metadata.update(msg.metadata)
    metadata[MARK] = {"kind": UNSTORED, "error": problem}
    name = msg.name if isinstance(msg.name, str) else None
    return Msg(
        role=msg.role,
        content=content,
        name=name,
        id=msg.id,
        timestamp=msg.timestamp,
        metadata=metadata,
        **extra,
    )


_KEPT_FIELDS = ("role", "id", "name", "tool_call_id", "tool_use_id", "timestamp")


def _flat_stand_in(msg: Any, problem: str) -> dict[str, Any]:
    """A message of plain text standing in for one that cannot be stored."""
    fields: dict[str, Any] = {}
    try:
        fields = dict(msg) if isinstance(msg, (Mapping, BaseModel)) else {}
    except Exception:  # a foreign mapping whose iteration fails
        fields = {}
    out = {k: fields[k] for k in _KEPT_FIELDS if isinstance(fields.get(k), str)}
    out["content"] = f"{_note('this message', problem)}\n{text_form(msg)}"
    out["metadata"] = {MARK: {"kind": UNSTORED, "error": problem}}
    return out


def storable_message(msg: Any, store: StoreData | None, *, where: str) -> tuple[Any, str | None]:
    """The JSON value to store for one message, and what was wrong with it, if anything.

    A message that cannot be stored as its own JSON (nested too deeply, a value with no
    JSON form, a payload that is not base64) is not refused: a stand-in is returned that
    keeps its role and id, says what was wrong in `metadata["ctxoffload"]` (kind
    `"unstored"`), and holds its text form (see `text_form`). A ctxoffload `Msg` is repaired
    part by part: good blocks stay as they are, a bad tool call keeps its id and name with
    its input as JSON text under `_raw_arguments`, a bad tool result keeps its id with its
    output as text. Anything else becomes one message of text.

    Raises:
        InvalidContent: `msg` is not a message at all (not a Msg, dict or pydantic model).
        OffloadError: storing a payload failed (a disk error, not a content problem).
    """
    if not isinstance(msg, (BaseModel, Mapping)):
        return _as_json(msg, where=where), None  # raises: not a message
    try:
        return message_json(msg, store, where=where), None
    except InvalidContent as exc:
        problem = str(exc)
    if isinstance(msg, Msg):
        try:
            return message_json(_repaired_msg(msg, problem, store, where), store, where=where), (
                problem
            )
        except InvalidContent:
            pass
    return _flat_stand_in(msg, problem), problem


def context_rows(msgs: Sequence[Any], store: StoreData) -> list[Any]:
    """The JSON values a batch of messages adds to context.jsonl, one per message.

    Every message gets one row: its own JSON, or a stand-in (see `storable_message`) when
    it cannot be stored, so one bad message never stops the rest of the batch. Each
    stand-in is logged as a warning.

    Args:
        msgs: the messages, oldest first.
        store: where inline payloads go.

    Raises:
        InvalidContent: an item is not a message at all; nothing was stored.
    """
    for i, msg in enumerate(msgs):
        if not isinstance(msg, (BaseModel, Mapping)):
            _as_json(msg, where=f"msgs[{i}]")  # raises, naming the item
    rows: list[Any] = []
    for i, msg in enumerate(msgs):
        value, problem = storable_message(msg, store, where=f"msgs[{i}]")
        if problem is not None:
            logger.warning("stored a stand-in for a message that cannot be stored: %s", problem)
        rows.append(value)
    return rows


def offload_block(block: Any, store: StoreData) -> Any:
    """Store a block's inline payload and return the same kind of block pointing at it."""
    if isinstance(block, DataBlock):
        src = block.source
        if isinstance(src, URLSource):
            return block
        raw = decode_base64(src.data, what="DataBlock source")
        ref = store(raw, src.media_type)
        return block.model_copy(update={"source": URLSource(url=ref, media_type=src.media_type)})
    if isinstance(block, BaseModel):
        dumped = _as_json(block, where="block")
        replaced = externalize(dumped, store, where="block", url_form=file_url)
        if replaced == dumped:
            return block
        try:
            return type(block).model_validate(replaced)
        except ValidationError:
            pass
        # A foreign URL source class may not take media_type: retry without it.
        source = replaced.get("source")
        if isinstance(source, dict):
            slim = {**replaced, "source": {k: v for k, v in source.items() if k != "media_type"}}
            try:
                return type(block).model_validate(slim)
            except ValidationError as exc:
                raise InvalidContent(
                    f"{type(block).__name__} cannot take a URL source after offloading: {exc}"
                ) from None
        raise InvalidContent(f"{type(block).__name__} has no 'source' that can point at data/")
    if isinstance(block, Mapping):
        return externalize(_as_json(block, where="block"), store, where="block")
    raise InvalidContent(
        f"offload_data_block got a {type(block).__name__}; pass a DataBlock, an OpenAI / "
        "Anthropic content part dict, or a pydantic block with a base64 source"
    )


@dataclass
class ToolOutput:
    """A tool result reduced to what the tool_result file needs."""

    tool_id: str
    name: str
    output: Any  # str, bytes, or a list of JSON content parts


def _bytes_output(tool_result: Any) -> ToolOutput | None:
    """A tool result whose output is raw bytes (a non-UTF-8 file, say), kept byte for byte.

    JSON cannot hold such bytes, so this is looked up before the result is serialised.
    """
    if not isinstance(tool_result, (Mapping, BaseModel)):
        return None
    fields = dict(tool_result)
    for id_key, output_key in (
        ("tool_call_id", "content"),
        ("tool_use_id", "content"),
        ("id", "output"),
    ):
        output = fields.get(output_key)
        if fields.get(id_key) is not None and isinstance(output, bytes):
            return ToolOutput(str(fields[id_key]), str(fields.get("name") or ""), output)
    return None


def tool_output_of(tool_result: Any) -> ToolOutput:
    """Find the id, tool name and output in any supported tool-result shape.

    Raises:
        InvalidContent: the object is not a tool result this package understands.
    """
    if isinstance(tool_result, ToolResultBlock):
        output: Any = tool_result.output
        if isinstance(output, list):
            try:
                output = [b.model_dump(mode="json") for b in output]
            except ValueError as exc:
                if "depth" in str(exc):  # pydantic: "Maximum serialization depth exceeded"
                    raise depth_error("tool_result.output", STORE_DEPTH) from None
                raise InvalidContent(f"tool_result.output cannot be serialised: {exc}") from None
        return ToolOutput(tool_result.id, tool_result.name, output)
    if isinstance(tool_result, Msg):
        results = tool_result.tool_results
        if len(results) != 1:
            raise InvalidContent(
                f"a Msg passed as a tool result must hold exactly one ToolResultBlock, this one "
                f"holds {len(results)}: pass the blocks one at a time"
            )
        return tool_output_of(results[0])
    raw = _bytes_output(tool_result)
    if raw is not None:
        return raw
    data = _as_json(tool_result, where="tool_result")
    if not isinstance(data, dict):
        raise InvalidContent(f"tool_result must be an object, got {type(data).__name__}")
    if "tool_call_id" in data:  # OpenAI tool message
        return ToolOutput(
            str(data["tool_call_id"]), str(data.get("name") or ""), data.get("content", "")
        )
    if "tool_use_id" in data:  # Anthropic tool_result block
        return ToolOutput(str(data["tool_use_id"]), "", data.get("content", ""))
    if "id" in data and "output" in data:  # ours or AgentScope's ToolResultBlock
        return ToolOutput(str(data["id"]), str(data.get("name") or ""), data["output"])
    raise InvalidContent(
        "tool_result has none of 'tool_call_id' (OpenAI), 'tool_use_id' (Anthropic) or "
        f"'id' + 'output' (ctxoffload / AgentScope); keys were {sorted(data)[:10]}"
    )


def _part_text(part: Any, store: StoreData, where: str, urls: list[str]) -> str:
    """One content part of a tool output as text; binary parts are stored first, and the URL
    of each `<data .../>` line written is added to `urls`."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return json.dumps(part, ensure_ascii=False)
    kind = part.get("type")
    if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
        return str(part["text"])
    stored = externalize(part, store, where=where)
    source = stored.get("source") if isinstance(stored.get("source"), dict) else None
    image_url = stored.get("image_url")
    audio = stored.get("input_audio")
    file = stored.get("file")
    if source is not None and isinstance(source.get("url"), str):
        url = source["url"]
        line = data_line(url, stored.get("name"), source.get("media_type"))
    elif isinstance(image_url, dict) and isinstance(image_url.get("url"), str):
        url, line = image_url["url"], data_line(image_url["url"], None, None)
    elif isinstance(audio, dict) and isinstance(audio.get("url"), str):
        media_type = _AUDIO_FORMATS.get(str(audio.get("format")))
        url, line = audio["url"], data_line(audio["url"], None, media_type)
    elif isinstance(file, dict) and isinstance(file.get("file_data"), str):
        url, line = file["file_data"], data_line(file["file_data"], file.get("filename"), None)
    else:
        # Anything else is kept whole, as JSON, rather than dropped.
        return json.dumps(stored, ensure_ascii=False)
    urls.append(url)
    return line


def _encode_text(text: str) -> bytes:
    # surrogateescape gives back the original bytes of text decoded with it (a tool that read
    # a non-UTF-8 file that way); surrogatepass keeps any other lone surrogate, byte-exact.
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def render_tool_output(output: Any, store: StoreData, urls: list[str] | None = None) -> bytes:
    """The whole text of a tool output, as the tool_result file holds it.

    Text is written as is; bytes are written as given; a list of parts becomes one part per
    line group, separated by newlines, each binary part stored in data/ and shown as one
    `<data url='...' name='...' media_type='...'/>` line.

    Args:
        output: the tool's output.
        store: where payloads go.
        urls: given, the URL of each `<data .../>` line written for a block is added to it:
            the references ctxoffload wrote, which the tool_result event records (the same
            line in the output's text is text, and reaches no file: `_scope.py`).

    Raises:
        InvalidContent: a payload is not base64, or the output nests deeper than
            `STORE_DEPTH` levels.
    """
    if isinstance(output, bytes):
        return output
    if isinstance(output, str):
        return _encode_text(output)
    if output is None:
        return b""
    # json and externalize recurse: refuse what nests too deeply before either runs.
    if too_deep(output, STORE_DEPTH):
        raise depth_error("the tool output", STORE_DEPTH)
    if isinstance(output, list):
        found: list[str] = [] if urls is None else urls
        texts = [_part_text(p, store, f"output[{i}]", found) for i, p in enumerate(output)]
        return _encode_text("\n".join(texts))
    return _encode_text(json.dumps(output, ensure_ascii=False, indent=2))
