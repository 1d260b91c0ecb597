"""The OpenAI chat completions format: `from_openai` and `to_openai`.

Mapping

- `system` / `developer` / `user` / `assistant` messages -> `Msg` of that role (`developer`
  becomes `system`); `content` parts `text`, `image_url`, `input_audio` and `file` (with
  `file_data`) become `TextBlock` / `DataBlock`; assistant `tool_calls` become
  `ToolCallBlock` objects whose `input` is the parsed `arguments` (arguments that are not a JSON
  object are kept as `{"_raw_arguments": "<the string>"}`).
- `tool` messages -> `Msg(role="tool", content=[ToolResultBlock(...)])`; the tool name, which
  the OpenAI format does not carry, is taken from the matching earlier tool call.


Round trips: `to_openai(from_openai(x)) == x` for well-formed input; what the message model has
no field for is kept in the hints described in `formats/_shared.py`.
"""

from __future__ import annotations

import copy
import json
import mimetypes
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .._depth import MAX_DEPTH, RAW_ARGUMENTS, copied, load_json
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
from ..text import data_line
from ._shared import (
    Hint,
    apply,
    arguments_text,
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

__all__ = ["from_openai", "message_from_openai", "to_openai"]

_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
_OPENAI_MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})
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
# Keys only an OpenAI message has: a message with one of them is read as OpenAI's.
OPENAI_ONLY_KEYS = frozenset({"tool_calls", "tool_call_id", "function_call", "refusal", "audio"})
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)


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
        return text_block(part, "openai", where)
    if kind == "image_url":
        inner = part.get("image_url")
        if not isinstance(inner, Mapping) or not isinstance(inner.get("url"), str):
            raise InvalidContent(
                f"{where} is an image_url part without image_url.url: use "
                "{'type': 'image_url', 'image_url': {'url': 'https://... or data:...'}}"
            )
        keys = extra_keys(part, ("type", "image_url"))
        if inner_keys := extra_keys(inner, ("url",)):
            keys["image_url"] = inner_keys
        source = _source_from_url(inner["url"])
        return data_block(
            source, None, "openai", "image_url", {"keys": keys} if keys else {}, _openai_kind
        )
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
        keys = extra_keys(part, ("type", "input_audio"))
        inner_keys = extra_keys(inner, ("data", "format"))
        if _audio_format(source.media_type) != audio_format:
            inner_keys["format"] = audio_format
        if inner_keys:
            keys["input_audio"] = inner_keys
        return data_block(
            source, None, "openai", "input_audio", {"keys": keys} if keys else {}, _openai_kind
        )
    if kind == "file":
        inner = part.get("file")
        if not isinstance(inner, Mapping) or not isinstance(inner.get("file_data"), str):
            return None  # a file_id reference holds no bytes: kept verbatim
        filename = inner.get("filename")
        name = filename if isinstance(filename, str) else None
        hint: Hint = {}
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
        keys = extra_keys(part, ("type", "file"))
        if inner_keys := extra_keys(
            inner, ("file_data", "filename") if name is not None else ("file_data",)
        ):
            keys["file"] = inner_keys
        if keys:
            hint["keys"] = keys
        return data_block(source, name, "openai", "file", hint, _openai_kind)
    return None


def _data_to_openai(block: DataBlock) -> dict[str, Any]:
    hint = block_hint(block, "openai")
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
            return {"type": "text", "text": data_line(source.url, block.name, source.media_type)}
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
    return apply(part, hint)


def _block_to_openai_part(block: Block) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return apply({"type": "text", "text": block.text}, block_hint(block, "openai"))
    if isinstance(block, DataBlock):
        return _data_to_openai(block)
    return None  # thinking has no place in the OpenAI chat format


def _parse_arguments(raw: str) -> tuple[dict[str, Any], Hint]:
    try:
        # Kept as the text the model sent when not JSON, or too deep to store or render.
        value = load_json(raw, MAX_DEPTH)
    except ValueError:
        return {RAW_ARGUMENTS: raw}, {}
    if not isinstance(value, dict):
        return {RAW_ARGUMENTS: raw}, {}
    if set(value) != {RAW_ARGUMENTS}:
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
    hint: Hint = {}
    keys = extra_keys(call, ("id", "type", "function"))
    fn_keys = extra_keys(function, ("name", "arguments"))
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
        id=call_id, name=function["name"], input=tool_input, **hinted("openai", hint)
    )


def _arguments_to_openai(block: ToolCallBlock, hint: Hint, where: str) -> Any:
    raw = hint.get("arguments_raw")
    if isinstance(raw, str):
        try:
            if load_json(raw, MAX_DEPTH) == block.input:
                return raw
        except ValueError:  # edited into text that is not JSON, or nested too deeply
            pass
    if hint.get("arguments") == "object":
        return copied(block.input, f"the input of tool call {block.id!r}")
    if set(block.input) == {RAW_ARGUMENTS} and isinstance(block.input[RAW_ARGUMENTS], str):
        return block.input[RAW_ARGUMENTS]
    style = hint.get("arguments")
    options = _ARGUMENT_STYLES.get(style if isinstance(style, str) else "default")
    return arguments_text(block, where, **(options or _ARGUMENT_STYLES["default"]))


def _call_to_openai(block: ToolCallBlock, where: str) -> dict[str, Any]:
    hint = block_hint(block, "openai")
    function = {"name": block.name, "arguments": _arguments_to_openai(block, hint, where)}
    return apply({"id": block.id, "type": "function", "function": function}, hint)


def _is_plain_text(part: Any) -> bool:
    return (
        isinstance(part, Mapping)
        and set(part) == {"type", "text"}
        and part["type"] == "text"
        and isinstance(part["text"], str)
    )


def message_from_openai(message: Any, where: str, names: dict[str, str]) -> Msg:
    """Convert one OpenAI chat completions message, as `from_openai` does for each.

    Args:
        message: the message dict.
        where: how errors name the message (`messages[3]`).
        names: tool call id -> tool name, shared across one list of messages: the calls of
            an assistant message are added, and a tool message takes its tool's name from
            it.

    Returns:
        The message.

    Raises:
        InvalidContent: as `from_openai`.
    """
    message = check_message(message, where)
    if "role" not in message:
        raise InvalidContent(f"{where} has no 'role': add one of {', '.join(_OPENAI_ROLES)}")
    role = message["role"]
    if role not in _OPENAI_ROLES:
        raise InvalidContent(
            f"{where} has role {role!r}, which the OpenAI chat format does not have: use one of "
            f"{', '.join(_OPENAI_ROLES)}"
        )
    hint: Hint = {}
    keys = extra_keys(message, _OPENAI_MESSAGE_KEYS)
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
        else:
            output = result_output(content, _openai_part_to_block, where, hint)
        result = ToolResultBlock(id=call_id, name=names.get(call_id) or name or "", output=output)
        if keys:
            hint["keys"] = keys
        return Msg(role="tool", content=[result], name=name, metadata=hinted("openai", hint))

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
        blocks.extend(read_parts(content, _openai_part_to_block, f"{where}.content", hint))
        if not content or (len(content) == 1 and _is_plain_text(content[0])):
            hint["content"] = "list"  # the default output would be a string
    else:
        raise bad_content(where, content)
    if keys:
        hint["keys"] = keys
    metadata = hinted("openai", hint)
    if text is not None and not calls:
        return Msg(role=role, content=text, name=name, metadata=metadata)
    if text is not None:
        blocks.append(TextBlock(text=text))
    blocks.extend(calls)
    return Msg(role=role, content=blocks, name=name, metadata=metadata)


_ABSENT = object()  # marks a key to leave out, where None would be written as null


def _openai_content(parts: list[Any], role: str, hint: Hint) -> Any:
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


def _result_to_openai(result: ToolResultBlock, hint: Hint) -> dict[str, Any]:
    content: Any
    if isinstance(result.output, str):
        content = result.output
        if content == "" and hint.get("content") == "null":
            content = None
        elif content == "" and hint.get("content") == "absent":
            content = _ABSENT
    else:
        parts = [_block_to_openai_part(b) for b in result.output]
        content = with_unknown([p for p in parts if p is not None], hint)
    out: dict[str, Any] = {"role": "tool", "tool_call_id": result.id}
    if content is not _ABSENT:
        out["content"] = content
    return out


def _msg_to_openai(msg: Msg, where: str) -> list[dict[str, Any]]:
    hint = msg_hint(msg, "openai")
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
        return [apply(out, hint)]

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
        tool_msgs = [apply(t, {"keys": hint.get("keys")}) for t in tool_msgs]
        if parts:
            tool_msgs.append({"role": "user", "content": _openai_content(parts, "user", {})})
        return tool_msgs

    tool_msgs = [_result_to_openai(r, {}) for r in results]
    if results and not parts and not calls:
        return tool_msgs
    parts = with_unknown(parts, hint)
    out = {"role": msg.role}
    content = _openai_content(parts, msg.role, hint)
    if content is not _ABSENT:
        out["content"] = content
    if msg.name is not None:
        out["name"] = msg.name
    if calls:
        out["tool_calls"] = calls
    main = apply(out, hint)
    # Tool results answer an earlier assistant turn, so they come before a user's own words,
    # and after an assistant's (whose calls they might answer).
    return [main, *tool_msgs] if msg.role == "assistant" else [*tool_msgs, main]


def to_openai(msgs: Sequence[Msg]) -> list[dict[str, Any]]:
    """Convert messages to the OpenAI chat completions format.

    Each `ToolResultBlock` becomes its own `tool` message (a Msg holding several results gives
    several tool messages; results held by a user Msg come before its remaining content). A
    result whose output holds images becomes a content list with `image_url` parts: whether a
    provider accepts images in tool messages is provider-dependent. `ThinkingBlock` objects are
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
        where = f"msgs[{i}]"
        out.extend(_msg_to_openai(check_msg(msg, where), where))
    return out


def from_openai(messages: Sequence[Mapping[str, Any]]) -> list[Msg]:
    """Convert OpenAI chat completions messages to ctxoffload messages.

    One Msg per message. Tool results get their tool name from the matching earlier tool call
    in the same list. Whatever the message model has no field for is kept in
    `Msg.metadata["openai"]` and block `openai` fields, so `to_openai` gives the input back.

    Args:
        messages: OpenAI message dicts (`role`, `content`, `tool_calls`, `tool_call_id`, ...).

    Returns:
        The messages as `Msg` objects, in order.

    Raises:
        InvalidContent: a message has no role, an unknown role, a tool message has no
            `tool_call_id`, or a part or tool call is malformed.
    """
    check_messages(messages, "from_openai")
    names: dict[str, str] = {}
    return [message_from_openai(m, f"messages[{i}]", names) for i, m in enumerate(messages)]
