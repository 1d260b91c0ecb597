"""Conversion between ctxoffload messages and the OpenAI chat / Anthropic messages formats.

Mapping (OpenAI chat completions):

- `system` / `developer` / `user` / `assistant` messages -> `Msg` of that role (`developer`
  becomes `system`); `content` parts `text`, `image_url`, `input_audio` and `file` (with
  `file_data`) become `TextBlock` / `DataBlock`; assistant `tool_calls` become
  `ToolCallBlock`s whose `input` is the parsed `arguments` (arguments that are not a JSON
  object are kept as `{"_raw_arguments": "<the string>"}`).
- `tool` messages -> `Msg(role="tool", content=[ToolResultBlock(...)])`; the tool name, which
  the OpenAI format does not carry, is taken from the matching earlier tool call.

Mapping (Anthropic messages): the `system` argument becomes a leading system `Msg`; `text`,
`thinking`, `image` / `document` (base64 or url source), `tool_use` and `tool_result` blocks
map to the block of the same meaning. Tool results stay in the user message that holds them.

Exact round trips. `to_openai(from_openai(x)) == x` and `to_anthropic(from_anthropic(m, s)) ==
(s, m)` for well-formed input (`s` a string or None). Whatever the message model has no field
for is stashed, and put back on the way out, under a key named for the format:

- `Msg.metadata["openai"]` / `Msg.metadata["anthropic"]`: a dict with `keys` (message keys the
  model has no field for, e.g. mini-swe-agent's `extra` or Anthropic's `usage`, merged back
  verbatim), `content` (OpenAI only: `"list"`, `"null"`, `"absent"` or `"empty"` when the
  content had a form the default output would not give) and `unknown` (`[index, part]` pairs
  for content parts with no ctxoffload block, e.g. `refusal` or `redacted_thinking`,
  re-inserted at their index).
- the same key as an extra field on a block (`block.openai`, `block.anthropic`): `keys` (merged
  into the block's default output, e.g. `detail` or `cache_control`), `drop` (keys the original
  did not have), `as` (the part type when it is not the default for the media type),
  `arguments` / `arguments_raw` (how a tool call's JSON arguments were spelled), `file_data`
  (`"raw"`: a file part without a data: URL) and `unknown` (tool_result content items).

The hints describe the message as it was read. Those that depend on the content (raw
arguments, the content form, the part type) are used only while they still fit it, so an
edited message converts sensibly; the other format's hints are never used.
"""

from __future__ import annotations

import copy
import html
import json
import mimetypes
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ._depth import MAX_DEPTH, STORE_DEPTH, too_deep
from .exceptions import InvalidContent
from .messages import (
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

__all__ = ["from_anthropic", "from_openai", "to_anthropic", "to_msg", "to_msgs", "to_openai"]

_Format = Literal["openai", "anthropic", "converse"]
_Hint = dict[str, Any]

_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
_OPENAI_MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})
_RAW_ARGUMENTS = "_raw_arguments"
# Every spelling of JSON arguments seen from providers that json.dumps can reproduce; the
# first is what to_openai writes for a tool call that did not come from OpenAI.
_ARGUMENT_STYLES: dict[str, dict[str, Any]] = {
    "default": {"ensure_ascii": False},
    "ascii": {"ensure_ascii": True},
    "compact": {"ensure_ascii": False, "separators": (",", ":")},
    "compact_ascii": {"ensure_ascii": True, "separators": (",", ":")},
}
_AUDIO_MEDIA_TYPES = {"mp3": "audio/mpeg", "wav": "audio/wav"}
_AUDIO_FORMATS = {"audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/wav": "wav", "audio/x-wav": "wav"}
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)

_OURS_BLOCK_TYPES = frozenset({"text", "thinking", "data", "tool_call", "tool_result"})
_OPENAI_PART_TYPES = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_BLOCK_TYPES = frozenset(
    {"tool_use", "image", "document", "thinking", "redacted_thinking", "server_tool_use"}
)
_OPENAI_ONLY_KEYS = frozenset({"tool_calls", "tool_call_id", "function_call", "refusal", "audio"})


# --- hints -----------------------------------------------------------------------------------


def _msg_hint(msg: Msg, fmt: _Format) -> _Hint:
    hint = msg.metadata.get(fmt)
    return hint if isinstance(hint, dict) else {}


def _block_hint(block: BaseModel, fmt: _Format) -> _Hint:
    hint = (block.model_extra or {}).get(fmt)
    return hint if isinstance(hint, dict) else {}


def _hinted(fmt: _Format, hint: _Hint) -> dict[str, Any]:
    """Keyword arguments that attach `hint` to a new block, or none when it is empty."""
    return {fmt: hint} if hint else {}


def _extra_keys(value: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    known = frozenset(known)
    return {k: copy.deepcopy(v) for k, v in value.items() if k not in known}


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _apply(out: dict[str, Any], hint: _Hint) -> dict[str, Any]:
    keys = hint.get("keys")
    if isinstance(keys, Mapping):
        out = _merge(out, keys)
    drop = hint.get("drop")
    if isinstance(drop, list):
        for key in drop:
            out.pop(key, None)
    return out


def _with_unknown(items: list[Any], hint: _Hint) -> list[Any]:
    """`items` with the verbatim parts recorded in `hint["unknown"]` put back at their index."""
    unknown = hint.get("unknown")
    if not isinstance(unknown, list):
        return items
    out = list(items)
    for entry in unknown:
        if isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[0], int):
            out.insert(min(entry[0], len(out)), copy.deepcopy(entry[1]))
    return out


def _reference_line(name: str | None, source: URLSource) -> str:
    """The `<data .../>` line that stands for a payload the target format takes no URL for."""
    attrs = [f"url='{html.escape(source.url, quote=True)}'"]
    if name:
        attrs.append(f"name='{html.escape(name, quote=True)}'")
    if source.media_type:
        attrs.append(f"media_type='{html.escape(source.media_type, quote=True)}'")
    return f"<data {' '.join(attrs)}/>"


def _text_block(part: Mapping[str, Any], fmt: _Format, where: str) -> TextBlock:
    text = part.get("text")
    if not isinstance(text, str):
        raise InvalidContent(
            f"{where} is a text part whose 'text' is {type(text).__name__}: make it a string"
        )
    keys = _extra_keys(part, ("type", "text"))
    return TextBlock(text=text, **_hinted(fmt, {"keys": keys} if keys else {}))


def _data_block(
    source: Base64Source | URLSource,
    name: str | None,
    fmt: _Format,
    kind: str,
    hint: _Hint,
) -> DataBlock:
    """A DataBlock, recording the part type `kind` only when it is not the default."""
    block = DataBlock(source=source, name=name)
    default = _openai_kind(block) if fmt == "openai" else _anthropic_kind(block)
    if kind != default:
        hint["as"] = kind
    if not hint:
        return block
    return DataBlock(source=source, name=name, **_hinted(fmt, hint))


# --- OpenAI ----------------------------------------------------------------------------------


def _audio_media_type(audio_format: str) -> str:
    return _AUDIO_MEDIA_TYPES.get(audio_format, f"audio/{audio_format}")


def _audio_format(media_type: str) -> str:
    return _AUDIO_FORMATS.get(media_type, media_type.partition("/")[2] or media_type)


def _openai_kind(block: DataBlock) -> str:
    media_type = block.source.media_type
    if media_type is None or media_type.startswith("image/"):
        return "image_url"
    if isinstance(block.source, URLSource):
        return "reference"
    return "input_audio" if media_type.startswith("audio/") else "file"


def _source_from_url(url: str) -> Base64Source | URLSource:
    match = _DATA_URL.fullmatch(url)
    if match is None:
        return URLSource(url=url)
    return Base64Source(media_type=match.group(1), data=match.group(2))


def _openai_part_to_block(part: Any, where: str) -> TextBlock | DataBlock | None:
    """The block for one OpenAI content part; None for a part kept verbatim in a hint."""
    if not isinstance(part, Mapping):
        return None
    kind = part.get("type")
    if kind == "text":
        return _text_block(part, "openai", where)
    if kind == "image_url":
        inner = part.get("image_url")
        if not isinstance(inner, Mapping) or not isinstance(inner.get("url"), str):
            raise InvalidContent(
                f"{where} is an image_url part without image_url.url: use "
                "{'type': 'image_url', 'image_url': {'url': 'https://... or data:...'}}"
            )
        keys = _extra_keys(part, ("type", "image_url"))
        if inner_keys := _extra_keys(inner, ("url",)):
            keys["image_url"] = inner_keys
        source = _source_from_url(inner["url"])
        return _data_block(source, None, "openai", "image_url", {"keys": keys} if keys else {})
    if kind == "input_audio":
        inner = part.get("input_audio")
        if not (
            isinstance(inner, Mapping)
            and isinstance(inner.get("data"), str)
            and isinstance(inner.get("format"), str)
        ):
            raise InvalidContent(
                f"{where} is an input_audio part without string input_audio.data and .format: "
                "use {'type': 'input_audio', 'input_audio': {'data': '<base64>', 'format': 'wav'}}"
            )
        audio_format = inner["format"]
        source = Base64Source(media_type=_audio_media_type(audio_format), data=inner["data"])
        keys = _extra_keys(part, ("type", "input_audio"))
        inner_keys = _extra_keys(inner, ("data", "format"))
        if _audio_format(source.media_type) != audio_format:
            inner_keys["format"] = audio_format
        if inner_keys:
            keys["input_audio"] = inner_keys
        return _data_block(source, None, "openai", "input_audio", {"keys": keys} if keys else {})
    if kind == "file":
        inner = part.get("file")
        if not isinstance(inner, Mapping) or not isinstance(inner.get("file_data"), str):
            return None  # a file_id reference holds no bytes: kept verbatim
        filename = inner.get("filename")
        name = filename if isinstance(filename, str) else None
        hint: _Hint = {}
        match = _DATA_URL.fullmatch(inner["file_data"])
        if match is not None:
            source = Base64Source(media_type=match.group(1), data=match.group(2))
        else:
            # Raw base64 without the data: prefix; the media type is a guess from the name.
            guessed = mimetypes.guess_type(name)[0] if name else None
            source = Base64Source(
                media_type=guessed or "application/octet-stream", data=inner["file_data"]
            )
            hint["file_data"] = "raw"
        keys = _extra_keys(part, ("type", "file"))
        if inner_keys := _extra_keys(
            inner, ("file_data", "filename") if name is not None else ("file_data",)
        ):
            keys["file"] = inner_keys
        if keys:
            hint["keys"] = keys
        return _data_block(source, name, "openai", "file", hint)
    return None


def _data_to_openai(block: DataBlock) -> dict[str, Any]:
    hint = _block_hint(block, "openai")
    source = block.source
    kind = hint.get("as")
    if kind not in ("image_url", "input_audio", "file") or (
        kind != "image_url" and isinstance(source, URLSource)
    ):
        kind = _openai_kind(block)  # no hint, or one that no longer fits the source
    if isinstance(source, URLSource):
        if kind != "image_url":
            # Chat completions take a URL only for images: name the reference in text, so the
            # model still knows the content exists and where to read it.
            return {"type": "text", "text": _reference_line(block.name, source)}
        part: dict[str, Any] = {"type": "image_url", "image_url": {"url": source.url}}
    elif kind == "image_url":
        url = f"data:{source.media_type};base64,{source.data}"
        part = {"type": "image_url", "image_url": {"url": url}}
    elif kind == "input_audio":
        audio = {"data": source.data, "format": _audio_format(source.media_type)}
        part = {"type": "input_audio", "input_audio": audio}
    else:
        if hint.get("file_data") == "raw":
            file_data = source.data
        else:
            file_data = f"data:{source.media_type};base64,{source.data}"
        file: dict[str, Any] = {"file_data": file_data}
        if block.name is not None:
            file["filename"] = block.name
        part = {"type": "file", "file": file}
    return _apply(part, hint)


def _block_to_openai_part(block: Block) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return _apply({"type": "text", "text": block.text}, _block_hint(block, "openai"))
    if isinstance(block, DataBlock):
        return _data_to_openai(block)
    return None  # thinking has no place in the OpenAI chat format


def _check_depth(message: Mapping[str, Any], where: str) -> None:
    # Conversion copies and walks values recursively: refuse what nests too deeply first.
    if too_deep(message, STORE_DEPTH):
        raise InvalidContent(
            f"{where} is nested deeper than {STORE_DEPTH} levels (or contains itself): "
            "flatten it, or pass deeply nested data as JSON text"
        )


def _parse_arguments(raw: str) -> tuple[dict[str, Any], _Hint]:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # json.loads recurses: very deep JSON stops it
        return {_RAW_ARGUMENTS: raw}, {}
    # Kept as the text the model sent when too deep to store or render (see _depth).
    if not isinstance(value, dict) or too_deep(value, MAX_DEPTH):
        return {_RAW_ARGUMENTS: raw}, {}
    if set(value) != {_RAW_ARGUMENTS}:
        for style, options in _ARGUMENT_STYLES.items():
            if json.dumps(value, **options) == raw:
                return value, ({} if style == "default" else {"arguments": style})
    # Whitespace, number spelling or key collisions json.dumps cannot reproduce.
    return value, {"arguments_raw": raw}


def _openai_call_to_block(call: Any, where: str) -> ToolCallBlock:
    if not isinstance(call, Mapping):
        raise InvalidContent(
            f"{where} is a {type(call).__name__}: a tool call is "
            "{'id': ..., 'type': 'function', 'function': {'name': ..., 'arguments': '{...}'}}"
        )
    if "type" in call and call["type"] != "function":
        raise InvalidContent(
            f"{where} has type {call['type']!r}: only 'function' tool calls convert; "
            "turn it into a function call or leave it out"
        )
    call_id, function = call.get("id"), call.get("function")
    if not isinstance(call_id, str):
        raise InvalidContent(f"{where} has id {call_id!r}: give every tool call a string id")
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise InvalidContent(
            f"{where} has no function.name: use {{'function': {{'name': 'tool', 'arguments': "
            "'{...}'}}"
        )
    if "arguments" not in function:
        raise InvalidContent(
            f"{where} has no function.arguments: pass the arguments as a JSON string ('{{}}')"
        )
    arguments = function["arguments"]
    hint: _Hint = {}
    keys = _extra_keys(call, ("id", "type", "function"))
    fn_keys = _extra_keys(function, ("name", "arguments"))
    if isinstance(arguments, str):
        tool_input, hint = _parse_arguments(arguments)
    elif isinstance(arguments, Mapping):
        tool_input, hint = copy.deepcopy(dict(arguments)), {"arguments": "object"}
    else:
        tool_input = {}
        fn_keys["arguments"] = copy.deepcopy(arguments)
    if fn_keys:
        keys["function"] = fn_keys
    if keys:
        hint["keys"] = keys
    if "type" not in call:
        hint["drop"] = ["type"]
    return ToolCallBlock(
        id=call_id, name=function["name"], input=tool_input, **_hinted("openai", hint)
    )


def _arguments_to_openai(block: ToolCallBlock, hint: _Hint, where: str) -> Any:
    raw = hint.get("arguments_raw")
    if isinstance(raw, str):
        try:
            if json.loads(raw) == block.input:
                return raw
        except ValueError:
            pass
    if hint.get("arguments") == "object":
        return copy.deepcopy(block.input)
    if set(block.input) == {_RAW_ARGUMENTS} and isinstance(block.input[_RAW_ARGUMENTS], str):
        return block.input[_RAW_ARGUMENTS]
    style = hint.get("arguments")
    options = _ARGUMENT_STYLES.get(style if isinstance(style, str) else "default")
    try:
        return json.dumps(block.input, **(options or _ARGUMENT_STYLES["default"]))
    except (TypeError, ValueError) as exc:
        raise InvalidContent(
            f"{where} tool call {block.id!r} has input that is not JSON ({exc}): "
            "use only JSON values (str, int, float, bool, None, list, dict) in ToolCallBlock.input"
        ) from None


def _call_to_openai(block: ToolCallBlock, where: str) -> dict[str, Any]:
    hint = _block_hint(block, "openai")
    function = {"name": block.name, "arguments": _arguments_to_openai(block, hint, where)}
    return _apply({"id": block.id, "type": "function", "function": function}, hint)


def _openai_parts(parts: list[Any], where: str) -> tuple[list[TextBlock | DataBlock], list[Any]]:
    blocks: list[TextBlock | DataBlock] = []
    unknown: list[Any] = []
    for j, part in enumerate(parts):
        block = _openai_part_to_block(part, f"{where}[{j}]")
        if block is None:
            unknown.append([j, copy.deepcopy(part)])
        else:
            blocks.append(block)
    return blocks, unknown


def _is_plain_text(part: Any) -> bool:
    return (
        isinstance(part, Mapping)
        and set(part) == {"type", "text"}
        and part["type"] == "text"
        and isinstance(part["text"], str)
    )


def _bad_content(where: str, content: Any) -> InvalidContent:
    return InvalidContent(
        f"{where}.content is a {type(content).__name__}: use a string or a list of content parts"
    )


def _from_openai_message(message: Any, where: str, names: dict[str, str]) -> Msg:
    if not isinstance(message, Mapping):
        raise InvalidContent(
            f"{where} is a {type(message).__name__}, not a message: pass dicts like "
            "{'role': 'user', 'content': 'hi'}"
        )
    _check_depth(message, where)
    if "role" not in message:
        raise InvalidContent(f"{where} has no 'role': add one of {', '.join(_OPENAI_ROLES)}")
    role = message["role"]
    if role not in _OPENAI_ROLES:
        raise InvalidContent(
            f"{where} has role {role!r}, which the OpenAI chat format does not have: use one of "
            f"{', '.join(_OPENAI_ROLES)}"
        )
    hint: _Hint = {}
    keys = _extra_keys(message, _OPENAI_MESSAGE_KEYS)
    name = message.get("name")
    if "name" in message and not isinstance(name, str):
        keys["name"], name = copy.deepcopy(name), None
    if role == "developer":
        keys["role"], role = "developer", "system"

    content = message.get("content")
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str):
            raise InvalidContent(
                f"{where} is a tool message without a string 'tool_call_id' (got {call_id!r}): "
                "set it to the id of the assistant tool call it answers"
            )
        output: str | list[TextBlock | DataBlock]
        if "content" not in message or content is None:
            output = ""
            hint["content"] = "absent" if "content" not in message else "null"
        elif isinstance(content, str):
            output = content
        elif isinstance(content, list):
            output, unknown = _openai_parts(content, f"{where}.content")
            if unknown:
                hint["unknown"] = unknown
        else:
            raise _bad_content(where, content)
        result = ToolResultBlock(id=call_id, name=names.get(call_id) or name or "", output=output)
        if keys:
            hint["keys"] = keys
        return Msg(role="tool", content=[result], name=name, metadata=_hinted("openai", hint))

    if "tool_call_id" in message:
        keys["tool_call_id"] = copy.deepcopy(message["tool_call_id"])
    raw_calls = message.get("tool_calls")
    calls: list[ToolCallBlock] = []
    if isinstance(raw_calls, list) and raw_calls:
        calls = [
            _openai_call_to_block(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(raw_calls)
        ]
        names.update((c.id, c.name) for c in calls)
    elif "tool_calls" in message:
        keys["tool_calls"] = copy.deepcopy(raw_calls)

    blocks: list[Block] = []
    text: str | None = None
    if "content" not in message or content is None:
        # The default output for no content is null for an assistant, "" for anyone else.
        if "content" not in message:
            hint["content"] = "absent"
        elif role != "assistant":
            hint["content"] = "null"
    elif isinstance(content, str):
        text = content
        if content == "" and calls:
            # No empty TextBlock: Anthropic rejects empty text blocks, and OpenAI-compatible
            # models often answer tool calls with content "".
            text, hint["content"] = None, "empty"
    elif isinstance(content, list):
        parsed, unknown = _openai_parts(content, f"{where}.content")
        blocks.extend(parsed)
        if unknown:
            hint["unknown"] = unknown
        if not content or (len(content) == 1 and _is_plain_text(content[0])):
            hint["content"] = "list"  # the default output would be a string
    else:
        raise _bad_content(where, content)
    if keys:
        hint["keys"] = keys
    metadata = _hinted("openai", hint)
    if text is not None and not calls:
        return Msg(role=role, content=text, name=name, metadata=metadata)
    if text is not None:
        blocks.append(TextBlock(text=text))
    blocks.extend(calls)
    return Msg(role=role, content=blocks, name=name, metadata=metadata)


_ABSENT = object()  # marks a key to leave out, where None would be written as null


def _openai_content(parts: list[Any], role: str, hint: _Hint) -> Any:
    """The `content` value for `parts`; `_ABSENT` when the key is to be left out."""
    form = hint.get("content")
    if form == "list":
        return parts
    if not parts and form == "null":
        return None
    if not parts and form == "absent":
        return _ABSENT
    if not parts and form == "empty":
        return ""
    if not parts:
        return None if role == "assistant" else ""
    if len(parts) == 1 and _is_plain_text(parts[0]):
        return parts[0]["text"]
    return parts


def _result_to_openai(result: ToolResultBlock, hint: _Hint) -> dict[str, Any]:
    content: Any
    if isinstance(result.output, str):
        content = result.output
        if content == "" and hint.get("content") == "null":
            content = None
        elif content == "" and hint.get("content") == "absent":
            content = _ABSENT
    else:
        parts = [_block_to_openai_part(b) for b in result.output]
        content = _with_unknown([p for p in parts if p is not None], hint)
    out: dict[str, Any] = {"role": "tool", "tool_call_id": result.id}
    if content is not _ABSENT:
        out["content"] = content
    return out


def _msg_to_openai(msg: Msg, where: str) -> list[dict[str, Any]]:
    hint = _msg_hint(msg, "openai")
    if isinstance(msg.content, str):
        if msg.role == "tool":
            raise InvalidContent(
                f"{where} has role 'tool' but plain text content: OpenAI tool messages need a "
                "tool_call_id, so put the output in a ToolResultBlock"
            )
        content: Any = msg.content
        if content == "" and hint.get("content") in ("null", "absent"):
            content = None if hint["content"] == "null" else _ABSENT
        out: dict[str, Any] = {"role": msg.role}
        if content is not _ABSENT:
            out["content"] = content
        if msg.name is not None:
            out["name"] = msg.name
        return [_apply(out, hint)]

    calls = [_call_to_openai(b, where) for b in msg.content if isinstance(b, ToolCallBlock)]
    results = [b for b in msg.content if isinstance(b, ToolResultBlock)]
    parts = [
        part
        for b in msg.content
        if not isinstance(b, (ToolCallBlock, ToolResultBlock))
        and (part := _block_to_openai_part(b)) is not None
    ]
    if msg.role == "tool":
        if not results:
            raise InvalidContent(
                f"{where} has role 'tool' but no ToolResultBlock: OpenAI tool messages need a "
                "tool_call_id, so put the output in a ToolResultBlock"
            )
        # The message-level hints were read from one tool message: they fit only when this
        # Msg still holds exactly one result.
        tool_msgs = [_result_to_openai(r, hint if len(results) == 1 else {}) for r in results]
        for tool_msg in tool_msgs:
            if msg.name is not None:
                tool_msg["name"] = msg.name
        tool_msgs = [_apply(t, {"keys": hint.get("keys")}) for t in tool_msgs]
        if parts:
            tool_msgs.append({"role": "user", "content": _openai_content(parts, "user", {})})
        return tool_msgs

    tool_msgs = [_result_to_openai(r, {}) for r in results]
    if results and not parts and not calls:
        return tool_msgs
    parts = _with_unknown(parts, hint)
    out = {"role": msg.role}
    content = _openai_content(parts, msg.role, hint)
    if content is not _ABSENT:
        out["content"] = content
    if msg.name is not None:
        out["name"] = msg.name
    if calls:
        out["tool_calls"] = calls
    main = _apply(out, hint)
    # Tool results answer an earlier assistant turn, so they come before a user's own words,
    # and after an assistant's (whose calls they might answer).
    return [main, *tool_msgs] if msg.role == "assistant" else [*tool_msgs, main]


def to_openai(msgs: Sequence[Msg]) -> list[dict[str, Any]]:
    """Convert messages to the OpenAI chat completions format.

    Each `ToolResultBlock` becomes its own `tool` message (a Msg holding several results gives
    several tool messages; results held by a user Msg come before its remaining content). A
    result whose output holds images becomes a content list with `image_url` parts: whether a
    provider accepts images in tool messages is provider-dependent. `ThinkingBlock`s are
    dropped, since the format has no place for them, and so is `is_error`. A `DataBlock` with
    an image becomes an `image_url` part (a data: URL or the source URL), base64 audio an
    `input_audio` part, other base64 media (PDF, ...) a `file` part; audio or files that are
    only a URL become a text part `<data url='...' media_type='...'/>` naming the reference.

    Args:
        msgs: ctxoffload messages, oldest first.

    Returns:
        The OpenAI message dicts; hints stored by `from_openai` make its round trip exact.

    Raises:
        InvalidContent: a message cannot be expressed, e.g. role `tool` without a result.
    """
    out: list[dict[str, Any]] = []
    for i, msg in enumerate(msgs):
        if not isinstance(msg, Msg):
            raise InvalidContent(
                f"msgs[{i}] is a {type(msg).__name__}, not a Msg: convert it with to_msgs first"
            )
        out.extend(_msg_to_openai(msg, f"msgs[{i}]"))
    return out


def from_openai(messages: Sequence[Mapping[str, Any]]) -> list[Msg]:
    """Convert OpenAI chat completions messages to ctxoffload messages.

    One Msg per message. Tool results get their tool name from the matching earlier tool call
    in the same list. Whatever the message model has no field for is kept in
    `Msg.metadata["openai"]` and block `openai` fields, so `to_openai` gives the input back.

    Args:
        messages: OpenAI message dicts (`role`, `content`, `tool_calls`, `tool_call_id`, ...).

    Returns:
        The messages as `Msg`s, in order.

    Raises:
        InvalidContent: a message has no role, an unknown role, a tool message has no
            `tool_call_id`, or a part or tool call is malformed.
    """
    if isinstance(messages, (Mapping, str, bytes)):
        raise InvalidContent(
            f"from_openai takes a list of messages, got a {type(messages).__name__}: wrap one "
            "message in a list, or use to_msg"
        )
    names: dict[str, str] = {}
    return [_from_openai_message(m, f"messages[{i}]", names) for i, m in enumerate(messages)]


# --- Anthropic -------------------------------------------------------------------------------


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
    keys = _extra_keys(block, ("type", "source"))
    if source_keys := _extra_keys(source, source_known):
        keys["source"] = source_keys
    return _data_block(parsed, None, "anthropic", kind, {"keys": keys} if keys else {})


def _anthropic_item(item: Any, where: str) -> TextBlock | DataBlock | None:
    """A text / image / document block; None for anything else."""
    if not isinstance(item, Mapping):
        return None
    kind = item.get("type")
    if kind == "text":
        return _text_block(item, "anthropic", where)
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
        keys = _extra_keys(block, ("type", "thinking", "signature"))
        if "signature" in block and not isinstance(signature, str):
            keys["signature"], signature = copy.deepcopy(signature), None
        hint = {"keys": keys} if keys else {}
        return ThinkingBlock(thinking=thinking, signature=signature, **_hinted("anthropic", hint))
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
        keys = _extra_keys(block, ("type", "id", "name", "input"))
        return ToolCallBlock(
            id=call_id,
            name=name,
            input=copy.deepcopy(dict(tool_input)),
            **_hinted("anthropic", {"keys": keys} if keys else {}),
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
    hint: _Hint = {}
    keys = _extra_keys(block, ("type", "tool_use_id", "content", "is_error"))
    content = block.get("content")
    output: str | list[TextBlock | DataBlock] = ""
    if "content" not in block:
        hint["drop"] = ["content"]
    elif content is None:
        keys["content"] = None
    elif isinstance(content, str):
        output = content
    elif isinstance(content, list):
        items: list[TextBlock | DataBlock] = []
        unknown: list[Any] = []
        for j, item in enumerate(content):
            parsed = _anthropic_item(item, f"{where}.content[{j}]")
            if parsed is None:
                unknown.append([j, copy.deepcopy(item)])
            else:
                items.append(parsed)
        output = items
        if unknown:
            hint["unknown"] = unknown
    else:
        raise _bad_content(where, content)
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
        **_hinted("anthropic", hint),
    )


def _from_anthropic_message(message: Any, where: str, names: dict[str, str]) -> Msg:
    if not isinstance(message, Mapping):
        raise InvalidContent(
            f"{where} is a {type(message).__name__}, not a message: pass dicts like "
            "{'role': 'user', 'content': 'hi'}"
        )
    _check_depth(message, where)
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
    hint: _Hint = {}
    if keys := _extra_keys(message, ("role", "content")):
        hint["keys"] = keys
    if isinstance(content, str):
        return Msg(role=role, content=content, metadata=_hinted("anthropic", hint))
    if not isinstance(content, list):
        raise _bad_content(where, content)
    blocks: list[Block] = []
    unknown: list[Any] = []
    for j, item in enumerate(content):
        block = _anthropic_to_block(item, f"{where}.content[{j}]", names)
        if block is None:
            unknown.append([j, copy.deepcopy(item)])
        else:
            blocks.append(block)
    if unknown:
        hint["unknown"] = unknown
    return Msg(role=role, content=blocks, metadata=_hinted("anthropic", hint))


def _item_to_anthropic(block: TextBlock | DataBlock) -> dict[str, Any]:
    hint = _block_hint(block, "anthropic")
    if isinstance(block, TextBlock):
        return _apply({"type": "text", "text": block.text}, hint)
    source = block.source
    if isinstance(source, Base64Source):
        src = {"type": "base64", "media_type": source.media_type, "data": source.data}
    else:
        src = {"type": "url", "url": source.url}
    kind = hint.get("as")
    if kind not in ("image", "document"):
        kind = _anthropic_kind(block)
    return _apply({"type": kind, "source": src}, hint)


def _block_to_anthropic(block: Block) -> dict[str, Any]:
    hint = _block_hint(block, "anthropic")
    if isinstance(block, (TextBlock, DataBlock)):
        return _item_to_anthropic(block)
    if isinstance(block, ThinkingBlock):
        out: dict[str, Any] = {"type": "thinking", "thinking": block.thinking}
        if block.signature is not None:
            out["signature"] = block.signature
        return _apply(out, hint)
    if isinstance(block, ToolCallBlock):
        return _apply(
            {
                "type": "tool_use",
                "id": block.id,
                "name": block.name,
                "input": copy.deepcopy(block.input),
            },
            hint,
        )
    out = {"type": "tool_result", "tool_use_id": block.id}
    if isinstance(block.output, str):
        out["content"] = block.output
    else:
        out["content"] = _with_unknown([_item_to_anthropic(b) for b in block.output], hint)
    if block.is_error:
        out["is_error"] = True
    return _apply(out, hint)


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
        if not isinstance(msg, Msg):
            raise InvalidContent(
                f"{where} is a {type(msg).__name__}, not a Msg: convert it with to_msgs first"
            )
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
        hint = _msg_hint(msg, "anthropic")
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
            content = _with_unknown(kept, hint)
        out.append(_apply({"role": msg.role, "content": content}, hint))
        if moved:
            _add_tool_results(out, moved)
    return ("\n\n".join(system) if system else None), out


def from_anthropic(
    messages: Sequence[Mapping[str, Any]],
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> list[Msg]:
    """Convert Anthropic messages (and the system prompt) to ctxoffload messages.

    The system prompt, when given, becomes a leading system Msg. One Msg per message; a user
    message holding tool_result blocks stays one user Msg with `ToolResultBlock`s, whose tool
    names come from the matching earlier tool_use. Whatever the message model has no field
    for is kept in `Msg.metadata["anthropic"]` and block `anthropic` fields, so `to_anthropic`
    gives the input back (a system prompt given as blocks comes back as their joined text).

    Args:
        messages: Anthropic message dicts (`role` user or assistant, `content`).
        system: the system prompt, as a string or a list of text blocks.

    Returns:
        The messages as `Msg`s, in order.

    Raises:
        InvalidContent: a message has no role, a role other than user / assistant, no
            content, or a malformed block.
    """
    if isinstance(messages, (Mapping, str, bytes)):
        raise InvalidContent(
            f"from_anthropic takes a list of messages, got a {type(messages).__name__}: wrap "
            "one message in a list, or use to_msg"
        )
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
            blocks.append(_text_block(item, "anthropic", f"system[{j}]"))
        out.append(Msg(role="system", content=blocks))
    names: dict[str, str] = {}
    out.extend(_from_anthropic_message(m, f"messages[{i}]", names) for i, m in enumerate(messages))
    return out


# --- any message -----------------------------------------------------------------------------


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
    if _OPENAI_ONLY_KEYS & set(data) or data.get("type") == "message":
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
    from ._converse import is_converse

    if is_converse(data):
        return "converse"
    blocks = _content_blocks(data)
    if any(_is_ours(b) for b in blocks):
        return "ours"
    if {"id", "timestamp", "metadata"} <= set(data) and _shaped_like_ours(data):
        return "ours"  # a ctxoffload Msg as written to context.jsonl
    if _OPENAI_ONLY_KEYS & set(data) or data.get("role") in ("tool", "system", "developer"):
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
        _check_depth(data, where)
        if _shaped_like_ours(data):
            kind = "ours"
        else:
            # Any other model (an OpenAI / Anthropic SDK message) is read as its SDK would
            # send it: only the fields that were set, not every default None.
            data = obj.model_dump(mode="json", exclude_unset=True)
            kind = _detect(data)
    elif isinstance(obj, Mapping):
        _check_depth(obj, where)
        data = obj
        kind = _detect(data)
    else:
        raise InvalidContent(
            f"{where} is a {type(obj).__name__}: pass a ctxoffload Msg, an OpenAI or Anthropic "
            "message dict, or a pydantic model shaped like Msg"
        )
    if kind == "anthropic":
        return _from_anthropic_message(data, where, names)
    if kind == "converse":
        from ._converse import message_from_converse

        return message_from_converse(data, where, names)
    if kind == "openai":
        return _from_openai_message(data, where, names)
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
    """Coerce messages to `Msg`s, like `to_msg` for each, formats may be mixed.

    An OpenAI `tool` message and an Anthropic user message holding tool_result blocks both
    work; tool result names are filled from the tool calls of earlier messages in `objs`.

    Args:
        objs: the messages, oldest first.

    Returns:
        One `Msg` per message; `Msg`s given are returned as is, not copied.

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
    """`messages` as `Msg`s, for an API that takes what the workspace takes.

    ctxoffload `Msg`s are returned as they are (not copied); OpenAI and Anthropic message
    dicts and pydantic messages are converted with `to_msgs`.

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
