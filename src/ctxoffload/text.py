"""The text of a message, and of the `<data .../>` line that stands for a binary payload.

One home for every audience that shows or matches a message as text. There are two texts,
named by audience, built from one walk over the message's blocks (`_parts`):

- `message_lines`: what a person or an agent reads and searches. The agent's Read, Grep and
  retrieval tool show a context.jsonl line as these lines and match them; `ctxoffload cat`,
  `grep`, `watch` and `show` print the same lines, so `ctxoffload grep` finds exactly the
  lines the agent's Grep finds (`matching_lines` is the rule both apply). Every string the
  model saw is on a line of its own, unescaped, split at its real newlines: a tool call's
  `print("FAILURE: disk")` is found by a literal search for it.
- `transcript_entry`: what the summary model is sent for one message, between role tags.

and one `data_line`, the line that stands for a binary payload in a tool_result file, a
preview, a message converted to a format that takes no URL for it, and the text whose tokens
are counted for it.

And the one rule for the wrappers ctxoffload puts around text a tool, a model or a web page
wrote (the summary's tags, the artifact index, the transcript sent to the summary model,
placeholders, notices): `defuse` makes such text unable to close or fake any of them, and
`tagged` writes a wrapper with it.

Light on purpose: no pydantic. It reads a message as ctxoffload's own `Msg` (attributes) or
as the JSON a context.jsonl line holds, in any format the workspace stores (ctxoffload's own,
OpenAI chat, Anthropic messages, Bedrock Converse, a framework's dump); what it does not
recognise it shows as its strings.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import sys
from collections.abc import Callable, Iterator, Mapping

from ._depth import json_text, load_json

# `typing`, `re` (with `enum`) and `html` are not imported here: `ctxoffload grep` decodes a
# context.jsonl through this module and needs none of them, and they cost ~12 ms of its
# start-up. The wrappers' patterns are compiled when `defuse` first runs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from typing import Any

    from .messages import Msg

__all__ = [
    "CLEARED_MARK",
    "MAX_DECODED_LINE_BYTES",
    "SUBAGENT_FILES_MARK",
    "SUBAGENT_MARK",
    "TRUNCATION_MARKER",
    "WRAPPER_MARKS",
    "WRAPPER_TAGS",
    "data_line",
    "decode_log_line",
    "defuse",
    "is_jsonl",
    "matching_lines",
    "message_lines",
    "message_text",
    "tagged",
    "transcript_entry",
]

MAX_DECODED_LINE_BYTES = 16 << 20
"""Log lines longer than this are shown and searched as they are, not decoded: decoding would
hold several copies of one line in memory at once."""

# Values that say what a part is rather than what it says: not shown as text.
_LABEL_KEYS = frozenset(
    {
        "role",
        "name",
        "type",
        "id",
        "tool_call_id",
        "tool_use_id",
        "toolUseId",
        "timestamp",
        "created_at",
        "signature",
    }
)


# -- the wrappers around text others wrote ---------------------------------------------------

TRUNCATION_MARKER = "<<<TRUNCATED>>>"
"""The marker that starts the notice in a truncated tool result; the notice names the file
holding the whole result and how to read the rest."""
CLEARED_MARK = "[cleared: "
"""How a placeholder left by `ClearToolUses` begins."""

WRAPPER_TAGS = (
    "context_summary",
    "artifact_index",
    "conversation",
    "system-reminder",
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
)
"""The tags ctxoffload writes around text others wrote: the summary (the default template's),
the artifact index, the transcript sent to the summary model and its messages (by role), a
truncation's reminder. No text others wrote may open or close one of them (`defuse`)."""
SUBAGENT_MARK = "[sub-agent "
"""How the line begins that follows a sub-agent's answer in its parent's context, naming the
session it worked in."""
SUBAGENT_FILES_MARK = "[what it stored, to read back:]"
"""The line before the files a sub-agent hands back to its parent."""

WRAPPER_MARKS = (
    TRUNCATION_MARKER,
    CLEARED_MARK,
    "--- preview ---",
    "--- end of preview ---",
    SUBAGENT_MARK,
    SUBAGENT_FILES_MARK,
)
"""The other marks ctxoffload writes around or after text others wrote: a truncation's
marker, a cleared output's placeholder, an offloaded result's preview, what a sub-agent
hands back."""

_TAG = r"</?([A-Za-z][\w-]*)>"
# A mark's words and signs (`[`, `cleared`, `:`): blanks may stand between any two.
_MARK_PIECE = r"\w+|[^\w\s]"


def _mark_pattern(mark: str) -> str:
    """`mark` in any spacing: `[ cleared:`, `<<< TRUNCATED >>>`, `--- end of preview---`."""
    import re

    return r"\s*".join(re.escape(piece) for piece in re.findall(_MARK_PIECE, mark))


@functools.lru_cache(maxsize=64)
def _defuse_pattern(delimiters: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for every wrapper of ctxoffload and each of `delimiters`: a tag in any
    case and spacing (`</ Artifact_Index >`, `<user name="x">`), another mark in any case
    and spacing (`[ Cleared:`, `<<< truncated >>>`)."""
    import re

    tags = set(WRAPPER_TAGS)
    marks = set(WRAPPER_MARKS)
    for delimiter in delimiters:
        found = re.fullmatch(_TAG, delimiter.strip())
        if found is not None:
            tags.add(found.group(1))
        elif delimiter:
            marks.add(delimiter)
    names = "|".join(re.escape(t) for t in sorted(tags, key=len, reverse=True))
    spaced = (_mark_pattern(m) for m in sorted(marks, key=len, reverse=True))
    literal = "|".join(p for p in spaced if p)
    # A name followed by a letter, a digit, `_` or `-` is another tag (`<tool_call>`). The
    # blanks after `/` are read only once a `/` is there: two optional runs side by side
    # (`\s*/?\s*`) are tried at every split of one run, O(n²) on `<` and a megabyte of blanks.
    return re.compile(rf"<(?=\s*(?:/\s*)?(?:{names})(?![\w-]))|{literal}", re.IGNORECASE)


def _defused(match: re.Match[str]) -> str:
    text = match.group()
    first = text[:1]
    return ("&lt;" if first == "<" else f"&#{ord(first)};") + text[1:]


def defuse(text: str, *delimiters: str) -> str:
    """`text` unable to close or fake a wrapper ctxoffload writes around it: THE rule for
    text a tool, a model or a web page wrote, wherever ctxoffload wraps it.

    Each tag of `WRAPPER_TAGS` (opening or closing, in any case and spacing), each mark of
    `WRAPPER_MARKS` and each of `delimiters` (a tag such as `</summary>` stands for that
    tag in any form; anything else is matched in any case, with any blanks or none between
    its words and signs: `[ Cleared:` for `[cleared: `) has its first character written
    as an HTML character reference: `</artifact_index>` becomes `&lt;/artifact_index>`,
    `]` becomes `&#93;`. Nothing else changes: the text keeps its lines, and the original
    stays byte for byte in the file the wrapper names.

    Args:
        text: what a tool, a model or a web page wrote.
        delimiters: the wrapper's own delimiters, when they are not ctxoffload's fixed ones
            (a `summary_template`'s tags, a placeholder's closing `]`).
    """
    pattern = _defuse_pattern(delimiters)
    return pattern.sub(_defused, text)


def tagged(name: str, text: str) -> str:
    """`<name>`, the text through `defuse`, `</name>`, each on lines of their own.

    Args:
        name: the tag's name (`artifact_index`).
        text: what goes inside; text others wrote in it cannot close or fake the tag.
    """
    return f"<{name}>\n{defuse(text, f'<{name}>')}\n</{name}>"


def data_line(url: str, name: str | None, media_type: str | None) -> str:
    """The one line that stands for a binary payload.

    Attribute values are HTML-escaped (a quote in a file name cannot end the attribute); an
    attribute without a value is left out.
    """
    from html import escape

    attrs = [f"url='{escape(url, quote=True)}'"]
    if name:
        attrs.append(f"name='{escape(name, quote=True)}'")
    if media_type:
        attrs.append(f"media_type='{escape(media_type, quote=True)}'")
    return f"<data {' '.join(attrs)}/>"


def is_jsonl(name: str) -> bool:
    """Whether a file or reference name is a JSON Lines log (context.jsonl, events.jsonl)."""
    return name.endswith(".jsonl")


# -- one walk over a message ----------------------------------------------------------------
#
# `_parts` turns a message into a flat sequence of typed parts, whatever its format:
#   ("text", text)                               text the model saw or wrote
#   ("thinking", text)                           visible reasoning
#   ("call", name, id, arguments)                a tool call; arguments a JSON value
#   ("result", name, id, is_error, items)        a tool result; items are parts too
#   ("data", url or None, name, media_type, n)   a payload: its URL, or n base64 characters
#   ("other", value)                             anything else, shown as its strings


_MAPPING: dict[type, bool] = {dict: True}
"""Whether each type met is a `Mapping`, looked up without the ABC check (a fifth of a
message's text when it is a model object). Emptied when a class is registered with an ABC
(`abc.get_cache_token` changes; checked once a message) and past 256 types (classes made at
run time are not held forever)."""
_MAPPING_TOKEN = [abc.get_cache_token()]


def _check_mapping_cache() -> None:
    token = abc.get_cache_token()
    if token != _MAPPING_TOKEN[0] or len(_MAPPING) > 256:
        _MAPPING.clear()
        _MAPPING[dict] = True
        _MAPPING_TOKEN[0] = token


def _is_mapping(value: Any) -> bool:
    kind = type(value)
    known = _MAPPING.get(kind)
    if known is None:
        known = _MAPPING[kind] = isinstance(value, Mapping)
    return known


def _get(value: Any, key: str, default: Any = None) -> Any:
    """`value[key]` for a dict, `value.key` for a model object."""
    if _is_mapping(value):
        return value.get(key, default)
    return getattr(value, key, default)


def _content_of(value: Any) -> Any:
    return _get(value, "content")


def _parts(message: Any) -> Iterator[tuple[Any, ...]]:
    content = _content_of(message)
    if isinstance(content, str):
        if content:
            yield ("text", content)
    elif isinstance(content, list):
        for block in content:
            yield from _block_parts(block)
    elif content is not None:
        yield ("other", content)
    # OpenAI: tool calls beside the content (a `Msg`'s `tool_calls` are its blocks, above).
    calls = message.get("tool_calls") if _is_mapping(message) else None
    if isinstance(calls, list):
        for call in calls:
            function = _get(call, "function") or {}
            arguments = _get(function, "arguments")
            if isinstance(arguments, str):
                # Arguments that are not JSON (or nest too deeply) are shown as written.
                with contextlib.suppress(ValueError):
                    arguments = load_json(arguments)
            yield ("call", _get(function, "name"), _get(call, "id"), arguments)


def _block_parts(block: Any) -> Iterator[tuple[Any, ...]]:
    kind = _get(block, "type")
    if kind == "text" or (kind is None and isinstance(_get(block, "text"), str)):
        yield ("text", _get(block, "text") or "")
    elif kind == "thinking":
        yield ("thinking", _get(block, "thinking") or "")
    elif kind == "redacted_thinking":
        yield ("thinking", "(redacted)")
    elif kind in ("tool_call", "tool_use"):
        yield ("call", _get(block, "name"), _get(block, "id"), _get(block, "input"))
    elif kind == "tool_result":
        if _is_mapping(block) and "tool_use_id" in block:  # Anthropic's
            output, call_id = block.get("content"), block["tool_use_id"]
        else:  # ctxoffload's own, as a model or as its JSON
            output, call_id = _get(block, "output"), _get(block, "id")
        items = [("text", output)] if isinstance(output, str) else list(_items(output))
        yield ("result", _get(block, "name"), call_id, bool(_get(block, "is_error")), items)
    elif kind in ("data", "image", "document"):
        yield _data_part(_get(block, "source"), _get(block, "name"))
    elif kind == "image_url":
        yield _data_part({"url": _get(_get(block, "image_url") or {}, "url")}, None)
    elif kind == "input_audio":
        audio = _get(block, "input_audio") or {}
        yield _data_part({"url": _get(audio, "url"), "data": _get(audio, "data")}, None)
    elif kind == "file":
        file = _get(block, "file") or {}
        data = _get(file, "file_data")
        placed = isinstance(data, str) and data.startswith(("/", "file://", "http://", "https://"))
        source = {"url": data} if placed else {"data": data}
        yield _data_part(source, _get(file, "filename"))
    elif kind is None and _is_mapping(block) and len(block) == 1:
        yield from _converse_parts(block)
    else:
        yield ("other", block)


def _items(output: Any) -> Iterator[tuple[Any, ...]]:
    if isinstance(output, list):
        for item in output:
            yield from _block_parts(item)
    elif output is not None:
        yield ("other", output)


def _data_part(source: Any, name: Any) -> tuple[Any, ...]:
    url = _get(source, "url")
    if isinstance(url, str) and url.startswith("data:"):
        url = None  # an inline data: URL is a payload, not a place
    data = _get(source, "data")
    size = len(data) if isinstance(data, str) else 0
    media_type = _get(source, "media_type")
    return ("data", url if isinstance(url, str) else None, name, media_type, size)


def _converse_parts(block: Mapping[str, Any]) -> Iterator[tuple[Any, ...]]:
    """A Bedrock Converse block: a dict with one key saying what it is."""
    ((key, body),) = block.items()
    if key == "toolUse":
        yield ("call", _get(body, "name"), _get(body, "toolUseId"), _get(body, "input"))
    elif key == "toolResult":
        items = list(_items(_get(body, "content")))
        error = _get(body, "status") == "error"
        yield ("result", None, _get(body, "toolUseId"), error, items)
    elif key == "reasoningContent":
        yield ("thinking", _get(_get(body, "reasoningText") or {}, "text") or "")
    elif key == "json":
        yield ("text", json_text(body, ensure_ascii=False))
    elif key in ("image", "document"):
        yield ("data", None, _get(body, "name"), _get(body, "format"), 0)
    else:
        yield ("other", block)


# -- what people and agents read and search --------------------------------------------------


def message_lines(message: Any) -> list[str]:
    """A message as the lines people and agents read and search.

    A header (`[role]`, then ` name` when the message has one), then, for each block: its
    text split at newlines; `(thinking) ` before each line of visible reasoning;
    `-> tool call NAME (id ID)` with one line per argument (`  key: value`, a string value
    unescaped and split at its newlines, nested keys joined with dots); `<- tool result NAME
    (id ID):` (` (error)` before the colon for a failed call) with the output's lines; a
    payload as its `data_line` (`(inline base64, N chars)` where it has no URL yet).

    Args:
        message: a `Msg`, or the JSON value of a message in any format the workspace stores.
            A value with no `role` is shown as its strings, without a header.
    """
    pieces = _pieces(message)
    # (Each piece split at its newlines, one after another, is the pieces joined by newlines
    # split at them: two calls in C, not a loop over the pieces in Python. No piece, no line.)
    return "\n".join(pieces).split("\n") if pieces else []


def message_text(message: Any) -> str:
    """`message_lines` joined by newlines, built without splitting the message's texts: what
    the artifact index scans, in one string."""
    return "\n".join(_pieces(message))


def _pieces(message: Any) -> list[str]:
    """`message_lines` before the split: texts that may hold newlines, whose lines, in
    order, are the message's lines (splitting a text at its newlines and joining the lines
    again gives back the text, so both shapes come from this one walk)."""
    if type(message) is dict:
        # A message as most logs store it (`{"role": ..., "content": "..."}`): its pieces
        # as the walk below gives them, without the walk (a third of a log search's time).
        role, content = message.get("role"), message.get("content")
        if (
            type(role) is str
            and type(content) is str
            and message.get("tool_call_id") is None
            and not isinstance(message.get("tool_calls"), list)
        ):
            name = message.get("name")
            header = f"[{role}]" + (f" {name}" if isinstance(name, str) and name else "")
            return [header, content] if content else [header]
    _check_mapping_cache()
    # (The message model is not imported here: `ctxoffload grep` reads context.jsonl through
    # this module without it. A `Msg` exists only once its module is loaded.)
    model = sys.modules.get("ctxoffload.messages")
    if model is not None and type(message) is model.Msg:
        own = _msg_pieces(message, model)
        if own is not None:
            return own
    out: list[str] = []
    role = _get(message, "role")
    if not isinstance(role, str):
        _strings(message, out, None)
        return out
    name = _get(message, "name")
    out.append(f"[{role}]" + (f" {name}" if isinstance(name, str) and name else ""))
    if _is_mapping(message) and message.get("tool_call_id") is not None:  # OpenAI's
        out.append(f"<- tool result {name or '?'} (id {message['tool_call_id']}):")
    for part in _parts(message):
        _part_pieces(part, out)
    return out


def _msg_pieces(message: Msg, model: Any) -> list[str] | None:
    """`_pieces` of a `Msg` whose content is a text or a list of ctxoffload's own text, tool
    call and string tool result blocks (nearly every message a compaction scans), read by
    attribute, without the walk that takes any host's shape: half the time. None for any
    other message, which the walk reads. Each block's part is the one `_block_parts` gives
    (the same reads, tested against it), rendered by `_part_pieces`."""
    role, content = getattr(message, "role", None), getattr(message, "content", None)
    if type(role) is not str:
        return None
    name = getattr(message, "name", None)
    out = [f"[{role}]" + (f" {name}" if isinstance(name, str) and name else "")]
    if type(content) is str:
        if content:
            out.append(content)
        return out
    if type(content) is not list:
        return None
    for block in content:
        kind, tag = type(block), getattr(block, "type", None)
        if kind is model.TextBlock and tag == "text":
            out.append(str(getattr(block, "text", None) or ""))
        elif kind is model.ToolCallBlock and tag == "tool_call":
            name, call_id = getattr(block, "name", None), getattr(block, "id", None)
            _part_pieces(("call", name, call_id, getattr(block, "input", None)), out)
        elif kind is model.ToolResultBlock and tag == "tool_result":
            output = getattr(block, "output", None)
            if not isinstance(output, str):
                return None
            name, call_id = getattr(block, "name", None), getattr(block, "id", None)
            error = bool(getattr(block, "is_error", None))
            _part_pieces(("result", name, call_id, error, [("text", output)]), out)
        else:
            return None
    return out


def _part_pieces(part: tuple[Any, ...], out: list[str]) -> None:
    kind = part[0]
    if kind == "text":
        out.append(str(part[1]))
    elif kind == "thinking":
        out.extend(f"(thinking) {line}" for line in str(part[1]).split("\n"))
    elif kind == "call":
        _, name, call_id, arguments = part
        out.append(f"-> tool call {name} (id {call_id})")
        _argument_pieces(arguments, "", out)
    elif kind == "result":
        _, name, call_id, is_error, items = part
        out.append(f"<- tool result {name or '?'} (id {call_id}){' (error)' if is_error else ''}:")
        for item in items:
            _part_pieces(item, out)
    elif kind == "data":
        _, url, name, media_type, size = part
        where = url if url is not None else f"(inline base64, {size:,} chars)"
        # A name or media type that is not text (`"name": true` in a stored line) says nothing.
        name = name if isinstance(name, str) else None
        media_type = media_type if isinstance(media_type, str) else None
        out.append(data_line(where, name, media_type))
    else:
        _strings(part[1], out, None)


def _leaves(
    value: Any, key: Any, child_key: Callable[[Any, Any, bool], Any]
) -> Iterator[tuple[Any, Any]]:
    """Each leaf of `value` in order (an empty dict or list is one), with its key:
    `child_key(parent_key, name_or_index, is_mapping)`. Walked without recursion, as a host's
    value may nest thousands of levels deep; a dict or list met again inside itself is
    passed over (a value shared by two fields is shown under both)."""
    open_ids: set[int] = set()
    stack: list[Any] = [(value, key)]
    while stack:
        entry = stack.pop()
        if isinstance(entry, int):  # the end of a dict or list: it may appear again
            open_ids.discard(entry)
            continue
        value, key = entry
        if not isinstance(value, (Mapping, list)) or not value:
            yield key, value
            continue
        if id(value) in open_ids:
            continue
        open_ids.add(id(value))
        stack.append(id(value))
        children = (
            [(item, child_key(key, name, True)) for name, item in value.items()]
            if isinstance(value, Mapping)
            else [(item, child_key(key, index, False)) for index, item in enumerate(value)]
        )
        stack.extend(reversed(children))  # popped in order


def _argument_key(key: str, name: Any, is_mapping: bool) -> str:
    if not is_mapping:
        return f"{key}[{name}]"
    return f"{key}.{name}" if key else str(name)


def _argument_pieces(value: Any, key: str, out: list[str]) -> None:
    """One line per leaf of a tool call's arguments: `  key.sub[0]: value` (a string value's
    later lines follow as they are)."""
    if type(value) is dict and value and all(type(leaf) is str for leaf in value.values()):
        # Nearly every tool call's arguments (`{"command": "..."}`): one level of strings,
        # whose leaves are its items in order, without the walk that guards against depth
        # and cycles.
        for name, leaf in value.items():
            path = _argument_key(key, name, True)
            out.append(f"  {path}: {leaf}" if path else f"  {leaf}")
        return
    for path, leaf in _leaves(value, key, _argument_key):
        if isinstance(leaf, str):
            out.append(f"  {path}: {leaf}" if path else f"  {leaf}")
        elif path or leaf not in (None, {}, []):
            shown = json_text(leaf, ensure_ascii=False)
            out.append(f"  {path}: {shown}" if path else f"  {shown}")


def _strings(value: Any, out: list[str], label: str | None) -> None:
    """Every string a value holds, in order, but those that label a part (the key a string
    is under, or its list's)."""
    for key, leaf in _leaves(value, label, _label_key):
        if isinstance(leaf, str) and leaf and key not in _LABEL_KEYS:
            out.append(leaf)


def _label_key(label: Any, name: Any, is_mapping: bool) -> Any:
    return name if is_mapping else label


def decode_log_line(line: str) -> list[str] | None:
    """The `message_lines` of one line of a JSONL log, or None when it is not shown decoded.

    None for a line that is not a JSON object or list (a torn last line), is longer than
    `MAX_DECODED_LINE_BYTES`, or nests deeper than any workspace writes (`_depth.load_json`).

    Args:
        line: one line of the log, without its newline.
    """
    if len(line) > MAX_DECODED_LINE_BYTES:
        return None
    first = line[:1]  # (nearly every line begins with its bracket: no strip, no tuple)
    if first != "{" and first != "[" and not line.lstrip().startswith(("{", "[")):
        return None
    try:
        value = load_json(line)
    except ValueError:  # not JSON, or nested deeper than any workspace writes
        return None
    return message_lines(value)


_FEW_LINES = 4


def matching_lines(
    line: str,
    matches: Callable[[str], bool],
    *,
    any_line: Callable[[str], bool] | None = None,
) -> tuple[list[str], list[int]]:
    """THE rule for searching a JSONL log, which the agent's Grep and `ctxoffload grep` apply.

    A log line matches when one of its decoded lines matches; failing that, when the raw
    JSON line does (a pattern such as `"role": "tool"`), and then it is shown raw.

    Args:
        line: one line of the log, without its newline.
        matches: whether one line of text matches.
        any_line: whether some line of a text of many lines (joined by "\\n") may match:
            False only when none does (the pattern with `^` and `$` at every line end,
            `_search.log.log_line_judge`). One search of a message's whole text then stands for
            a search of each of its lines, which costs more than the decoding where a
            message has hundreds of lines and none matches.

    Returns:
        The lines to show for this log line (decoded, or `[line]` when shown raw) and the
        indexes of those that match; no indexes when it does not match.
    """
    decoded = decode_log_line(line)
    # (A message of a few lines is judged line by line at once: the whole text's search
    # would cost more than it saves.)
    if decoded is not None and (
        any_line is None or len(decoded) <= _FEW_LINES or any_line("\n".join(decoded))
    ):
        # (A loop: a list comprehension is a function of its own, made and called for each
        # log line, 8% of the instructions judging a message of two lines, callgrind.)
        hits = []
        for number, text in enumerate(decoded):
            if matches(text):
                hits.append(number)
        if hits:
            return decoded, hits
    if matches(line):
        return [line], [0]
    return (decoded if decoded is not None else [line]), []


# -- what the summary model is sent ---------------------------------------------------------


def transcript_entry(message: Any, char_cap: int) -> tuple[str, float]:
    """One message as the summary model reads it, and the share of its text kept.

    `<role>`, the message's text, `[calls tool NAME (id ID) with {arguments}]`,
    `[result of NAME (id ID) (error)]` and its output, `[media/type name]` for a payload,
    `</role>`; visible reasoning is left out (the text carries what matters). Past
    `char_cap` characters the text is cut, with a line saying how much more the context log
    keeps. The text goes through `defuse`: it cannot close its message, open another or close the
    conversation around it.
    """
    _check_mapping_cache()
    role = _get(message, "role")
    parts: list[str] = []
    for part in _parts(message):
        parts.extend(_transcript_part(part))
    text = defuse("\n".join(parts), f"<{role}>")
    kept = 1.0
    if len(text) > char_cap:
        omitted = len(text) - char_cap
        kept = char_cap / len(text)
        text = text[:char_cap] + f"\n[... {omitted:,} more characters, kept in the context log]"
    return f"<{role}>\n{text}\n</{role}>", kept


def _transcript_part(part: tuple[Any, ...]) -> list[str]:
    kind = part[0]
    if kind == "text":
        return [str(part[1])]
    if kind == "call":
        _, name, call_id, arguments = part
        return [f"[calls tool {name} (id {call_id}) with {json_text(arguments)}]"]
    if kind == "result":
        _, name, call_id, is_error, items = part
        output = "\n".join(
            str(item[1]) if item[0] == "text" else f"[{item[3] or 'data'}]"
            for item in items
            if item[0] in ("text", "data")
        )
        flag = " (error)" if is_error else ""
        return [f"[result of {name or 'tool'} (id {call_id}){flag}]\n{output}"]
    if kind == "data":
        _, _, name, media_type, _ = part
        return [f"[{media_type or 'data'} {name or ''}]".replace(" ]", "]")]
    if kind == "other":
        strings: list[str] = []
        _strings(part[1], strings, None)
        return strings
    return []  # thinking: private reasoning
