"""Reading a summary model's reply, in the shapes models really write it.

A model asked for the five fields as JSON answers, most of the time, with the object alone.
The rest of the time it writes prose around it ("Here is the summary:" ... "Let me know if
..."), puts it in a fence (```json or bare), writes several objects (an example, then the
summary), gives a list or a number where text belongs, leaves a field out, writes the fields
as markdown headings or XML-ish tags instead, opens with a `<think>` block, or stops at its
token limit in the middle of the object. `read_summary` reads each of these, field by field:
a field that arrived is kept, one that did not is reported missing (the caller fills it from
the extractive summary), and nothing that arrived is thrown away for one that did not.

The work is bounded on a hostile reply (ten megabytes, 100,000 nested brackets, a megabyte of
backslashes: a few seconds at most): the text read is at most `MAX_REPLY_CHARS`; an object
is read by one loop over tokens with its own stack (no recursion; nesting deeper than
`MAX_DEPTH` ends the object there) within a budget of tokens for the whole reply; a few
objects are first tried as strict JSON at C speed; the lines and tags looked at as headings
are counted; and the regular expressions are written so that they do not backtrack.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._depth import MAX_DEPTH
from ._summary_model import SUMMARY_FIELDS, Summary

__all__ = [
    "CUT_NOTE",
    "MAX_REPLY_CHARS",
    "SummaryReply",
    "is_refusal",
    "parse_summary",
    "read_summary",
    "refuses",
]

MAX_REPLY_CHARS = 16_000_000
"""The most characters of a reply read: far more than any model's output limit writes. A
longer reply is read from its start, as one cut off there (each field is cut to the summary's
budget afterwards in any case)."""

CUT_NOTE = " […the reply was cut off here]"
"""Ends a field the reply stopped in the middle of: what arrived of it is kept, so marked."""


@dataclass(frozen=True)
class SummaryReply:
    """What a summary model's reply gave.

    Attributes:
        fields: the fields that arrived, as text (a list joined as lines, a number or an
            object written out), in `SUMMARY_FIELDS` order; a field cut off ends with
            `CUT_NOTE`.
        shape: how the reply was written: "json" (the reply is the object alone), "prose"
            (an object with text or a fence around it), "cut" (an object the reply stopped
            inside), "headings" (markdown headings or labels), "tags"
            (`<task_overview>...</task_overview>`).
        cut: the fields the reply stopped in the middle of (kept, marked).
    """

    fields: dict[str, str]
    shape: str
    cut: tuple[str, ...] = ()

    @property
    def missing(self) -> tuple[str, ...]:
        """The fields the reply did not give (or gave empty), in `SUMMARY_FIELDS` order."""
        return tuple(name for name in SUMMARY_FIELDS if name not in self.fields)

    def summary(self, fill: Summary | None = None) -> Summary:
        """The `Summary`: the fields that arrived, each missing one taken from `fill`.

        Raises:
            ValueError: a field is missing and there is no `fill`.
        """
        if self.missing and fill is None:
            raise ValueError(f"the reply has no {', '.join(self.missing)}")
        values = {
            name: self.fields[name] if name in self.fields else str(getattr(fill, name))
            for name in SUMMARY_FIELDS
        }
        return Summary(**values)


def parse_summary(text: str, fill: Summary | None = None) -> Summary:
    """A summary model's reply as a `Summary` (see `read_summary` for what is read), each
    missing field taken from `fill`.

    Raises:
        ValueError: no field of the summary in the reply, every field empty, a refusal, or a
            field missing and no `fill`.
    """
    return read_summary(text).summary(fill)


def read_summary(text: str) -> SummaryReply:
    """The fields a summary model's reply gives, read field by field from any shape it is
    written in (see the module docstring).

    When the reply holds several candidates (two objects, an object and headings), the one
    that gives the most fields is read, and a field it lacks is taken from the next best.

    Raises:
        ValueError: no field of the summary in the reply (every field empty or missing), or
            every field only refuses or apologises (`is_refusal`): the caller asks again.
    """
    reply = _clean(text[:MAX_REPLY_CHARS])
    budget = _Budget(_TOKENS)
    candidates = [*_objects(reply, budget), _tagged(reply), _headed(reply)]
    found = [c for c in candidates if c is not None and c.fields]
    if not found:
        raise ValueError("the reply holds no field of the summary (neither JSON nor headings)")
    found.sort(key=lambda c: c.rank(), reverse=True)
    best = found[0]
    fields = dict(best.fields)
    cut = set(best.cut)
    for other in found[1:]:
        for name, value in other.fields.items():
            if name not in fields:
                fields[name] = value
                cut.update({name} & set(other.cut))
    ordered = {name: fields[name] for name in SUMMARY_FIELDS if name in fields}
    padded = Summary(**{name: ordered.get(name, "") for name in SUMMARY_FIELDS})
    if refuses(padded):
        raise ValueError("the summary only refuses or apologises")
    return SummaryReply(ordered, best.shape, tuple(n for n in SUMMARY_FIELDS if n in cut))


# -- refusals ----------------------------------------------------------------------------------

# A refusal opens with an apology or goes straight to "I can't"; both end in a refusal verb
# aimed at the request. A field that says this and little else (a sentence or two, no more
# than `_REFUSAL_MAX_CHARS`) refuses; a field that quotes an apology among facts does not.
_REFUSAL = re.compile(
    r"""^\W*
    (?:(?:i['’]?m|i\s+am|we\s+are|we['’]re)\s+(?:so\s+|very\s+|truly\s+)?sorry
      |sorry|i\s+apologi[sz]e|we\s+apologi[sz]e|my\s+apologies|apologies
      |unfortunately)?
    [\s,.!:;—–-]*(?:but\s+)?
    (?:as\s+an\s+ai[^,.]*[,.]?\s*)?
    (?:i|we)\s*
    (?:(?:can['’]?t|cannot|can\s+not|won['’]?t|will\s+not|am\s+not\s+able\s+to
         |['’]m\s+not\s+able\s+to|am\s+unable\s+to|['’]m\s+unable\s+to)
       \s*(?:help|assist|comply|provide|fulfil|fulfill|continue|summari[sz]e|complete
         |process|engage|respond|share|do\s+(?:that|this|so))\b
      |(?:must|have\s+to)\s+decline|do\s+not\s+feel\s+comfortable
      |don['’]t\s+feel\s+comfortable)
    """,
    re.IGNORECASE | re.VERBOSE,
)
_REFUSAL_MAX_CHARS = 300
_EMPTY_FIELD = re.compile(r"^\W*(?:none|n/?a|nothing|-)?\W*$", re.IGNORECASE)


def is_refusal(text: str) -> bool:
    """Whether `text` only refuses or apologises, as a summary model declining the task does.

    The rule: the text is short (at most 300 characters) and opens with a refusal ("I can't
    help with that", "I am unable to ...", "I cannot comply ..."), optionally after an
    apology ("I'm sorry, but ...", "I apologize, but ...", "Unfortunately, ..."). A text that
    mentions an apology among facts, starts with one and goes on about something else
    ("Sorry, the build is broken: ..."), or is longer, is not a refusal.
    """
    stripped = text.strip()
    if not stripped or len(stripped) > _REFUSAL_MAX_CHARS:
        return False
    return _REFUSAL.match(stripped) is not None


def refuses(summary: Summary) -> bool:
    """Whether every field of `summary` is empty, "none", or a refusal, and one refuses."""
    values = [str(getattr(summary, name)) for name in Summary.model_fields]
    # Only a short value can be empty: the pattern is not run over a long one.
    meaningful = [v for v in values if len(v) > 60 or not _EMPTY_FIELD.match(v)]
    return bool(meaningful) and all(is_refusal(v) for v in meaningful)


# -- the reply's text --------------------------------------------------------------------------

# A reasoning model's thinking, before its answer (Qwen, DeepSeek: `<think>`; some prompts ask
# Claude for `<thinking>`): drafts of the object may be in it. An unclosed one at the start
# is all thinking (the reply stopped in it).
_THINKING = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_THINKING_END = {
    name: re.compile(f"</{name}>", re.IGNORECASE) for name in ("think", "thinking", "reasoning")
}
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    """The reply without its thinking, NUL characters or lone surrogates (text that did not
    come from UTF-8, which nothing downstream could write).

    Each thinking block runs to its closing tag, searched for from where it opens, so a
    reply of unclosed tags is one pass. One left open at the start is all thinking (the
    reply stopped in it); one left open later is text.
    """
    text = _LONE_SURROGATE.sub("\ufffd", text.replace("\x00", ""))
    kept: list[str] = []
    at = 0
    while (opened := _THINKING.search(text, at)) is not None:
        closed = _THINKING_END[opened.group(1).lower()].search(text, opened.end())
        if closed is None:
            if not "".join(kept).strip() and not text[at : opened.start()].strip():
                return ""
            break
        kept.append(text[at : opened.start()])
        at = closed.end()
    kept.append(text[at:])
    return " ".join(kept)


_CAMEL = re.compile(r"([a-z])([A-Z])")
_SEPARATORS = re.compile(r"[\W_]+")
# Every spelling of a field has one of these words: a line or key without one is passed over
# at C speed.
_FIELD_WORD = re.compile(r"task|current|important|next|context", re.IGNORECASE)


def field_name(key: str) -> str | None:
    """The summary field `key` names, in any spelling: `task_overview`, `Task overview`,
    `TASK-OVERVIEW`, `taskOverview`, `Next steps:`; None for any other key."""
    if len(key) > 60 or _FIELD_WORD.search(key) is None:
        return None
    spaced = _CAMEL.sub(r"\1_\2", key.strip())
    name = _SEPARATORS.sub("_", spaced).strip("_").lower()
    return name if name in SUMMARY_FIELDS else None


# A value a model copies from the schema or an example rather than writes: not a field.
_PLACEHOLDER = re.compile(r"\A\W*(?:string|str|text|\.\.\.|…|<[^<>]{0,40}>)?\W*\Z", re.IGNORECASE)


def _field_text(value: str) -> str | None:
    """A field's text, stripped, without NUL characters or lone surrogates (which no record
    can hold); None when it says nothing (empty, a placeholder)."""
    value = _LONE_SURROGATE.sub("\ufffd", value.replace("\x00", "")).strip()
    return None if len(value) <= 60 and _PLACEHOLDER.match(value) else value


@dataclass
class _Candidate:
    """The fields one part of the reply gives (an object, the headings, the tags)."""

    fields: dict[str, str]
    shape: str
    cut: tuple[str, ...] = ()
    whole: bool = True

    def rank(self) -> tuple[int, int, bool, int]:
        """More fields first, then fewer cut off, then an object or tags over headings (whose
        lines may be an object's, quotes and all), then more text."""
        return (
            len(self.fields),
            -len(self.cut),
            self.shape != "headings",
            sum(len(v) for v in self.fields.values()),
        )


# -- JSON objects anywhere in the reply --------------------------------------------------------


_TOKENS = 100_000
"""The most JSON tokens read leniently in one reply, over all its objects: a summary has a few
hundred; a reply of nothing but brackets stops here (about a second of work) instead of
going on for minutes."""


class _Budget:
    """Tokens left to read leniently over the whole reply (`_TOKENS`)."""

    def __init__(self, tokens: int) -> None:
        self.left = tokens

    def spend(self) -> bool:
        self.left -= 1
        return self.left >= 0


class _Cut(Exception):
    """The reply ended inside the object."""


class _Broken(Exception):
    """The object stops being JSON here (`at`)."""

    def __init__(self, at: int) -> None:
        super().__init__(at)
        self.at = at


class _Literal(str):
    """A number, `true`, `false` as written: text, not a string the model quoted."""


# Each pattern matches in one pass without backtracking: a string is runs of plain characters
# between escapes (`"[^"\\]*(?:\\.[^"\\]*)*"`), so a megabyte of backslashes is one scan.
_SPACE = re.compile(r"\s*")
_DOUBLE = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"', re.DOTALL)
_SINGLE = re.compile(r"'([^'\\]*(?:\\.[^'\\]*)*)'", re.DOTALL)
_DOUBLE_OPEN = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)', re.DOTALL)
_SINGLE_OPEN = re.compile(r"'([^'\\]*(?:\\.[^'\\]*)*)", re.DOTALL)
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_WORD = re.compile(r"[A-Za-z_$][\w$]*")
# The end of a string the reply stopped in: a `\u` escape with fewer than four digits, or the
# first half of a surrogate pair whose second did not arrive (`\ud83d`, `\ud83d\ude`).
_HALF_ESCAPE = re.compile(
    r"(?<!\\)((?:\\\\)*)"
    r"(?:\\u[dD][89abAB][0-9a-fA-F]{2}(?:\\u[0-9a-fA-F]{0,3})?|\\u[0-9a-fA-F]{0,3})\Z"
)
_OBJECT_START = re.compile(r"\{(?=\s*[\"'}A-Za-z_$])")
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_LITERALS = {"true": "true", "false": "false", "True": "true", "False": "false"}
_NULLS = ("null", "None", "undefined")
_AFTER_STRING = ",}]:"
_MORE_QUOTES = 16
"""The most quotes a string reaches past when a model left its own quotes unescaped
(`"ran "make" twice"`): enough for a sentence, bounded for a hostile reply."""


def _unescape(body: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] == "u" and len(code) == 5:
            return chr(int(code[1:], 16))
        return _ESCAPES.get(code, code)

    if "\\" not in body:
        text = body
    else:
        try:  # the common case, at C speed
            text = json.loads(f'"{body}"', strict=False)
        except ValueError:  # an escape JSON has not (`\'`, `\d`): read one by one
            text = _ESCAPE.sub(one, body)
    # `\ud83d\ude00` pairs become the one character they spell; a lone one, U+FFFD.
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").replace("\x00", "")


def _string(text: str, at: int, budget: _Budget) -> tuple[str, int]:
    """The string opening at `at` and where it ends.

    Raises:
        _Cut: the reply ends inside it (`_Cut.args[0]`: what arrived, unescaped).
    """
    double = text[at] == '"'
    found = (_DOUBLE if double else _SINGLE).match(text, at)
    if found is None:
        partial = (_DOUBLE_OPEN if double else _SINGLE_OPEN).match(text, at)
        body = partial.group(1) if partial is not None else ""
        body = _HALF_ESCAPE.sub(r"\1", body)
        raise _Cut(_unescape(body))
    end = found.end()
    if double:
        # A quote the model left unescaped ends the string too early: what follows it is no
        # `,` `}` `]` `:`. Reach to a later quote that is followed by one, if one is near;
        # with no later quote at all, the reply ended inside the string.
        probe = end
        for _ in range(_MORE_QUOTES):
            if not budget.spend():
                break
            after = _SPACE.match(text, probe).end()  # type: ignore[union-attr]
            if after >= len(text) or text[after] in _AFTER_STRING:
                end = probe
                break
            further = _DOUBLE.match(text, probe - 1)
            if further is None:
                raise _Cut(_unescape(text[at + 1 :]))
            probe = further.end()
        return _unescape(text[at + 1 : end - 1]), end
    return _unescape(found.group(1)), end


class _Frame:
    """An object or array being read: its container, and for an object the key of the value
    expected next."""

    __slots__ = ("container", "key")

    def __init__(self, container: dict[str, Any] | list[Any]) -> None:
        self.container = container
        self.key: str | None = None


def _read_object(text: str, start: int, budget: _Budget) -> tuple[_Candidate | None, int]:
    """The fields of the JSON object (leniently read) opening at `start`, and where reading
    stopped: its end, or where it stopped being JSON.

    Lenient as models are: single quotes, unquoted keys, trailing commas, Python's `True` and
    `None`, raw newlines in strings. A member of the object is kept as soon as its value is
    whole; when the reply ends inside a value, what arrived of it is kept, marked as cut.
    """
    root: dict[str, Any] = {}
    stack = [_Frame(root)]
    state = "key"  # key, colon, value, comma
    at = start + 1
    cut: str | None = None
    whole = True
    end = len(text)
    try:
        while True:
            if not budget.spend():
                raise _Broken(at)
            at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
            if at >= len(text):
                raise _Cut("")
            char = text[at]
            frame = stack[-1]
            is_object = isinstance(frame.container, dict)
            if state == "key":
                if char in "}]":
                    state, at = "comma", at  # a trailing comma, or an empty container
                    continue
                if not is_object:
                    state = "value"
                    continue
                if char in "\"'":
                    frame.key, at = _string(text, at, budget)
                else:
                    word = _WORD.match(text, at)
                    if word is None:
                        raise _Broken(at)
                    frame.key, at = word.group(), word.end()
                state = "colon"
            elif state == "colon":
                if char != ":":
                    raise _Broken(at)
                at += 1
                state = "value"
            elif state == "value":
                value: Any
                if char in "{[":
                    child: dict[str, Any] | list[Any] = {} if char == "{" else []
                    _put(frame, child)
                    if len(stack) >= MAX_DEPTH:
                        raise _Broken(at)
                    stack.append(_Frame(child))
                    at += 1
                    state = "key"
                    continue
                if char in "\"'":
                    try:
                        value, at = _string(text, at, budget)
                    except _Cut as partial:
                        _put(frame, str(partial.args[0]))
                        raise
                elif (number := _NUMBER.match(text, at)) is not None:
                    value, at = _Literal(number.group()), number.end()
                    if at >= len(text):
                        _put(frame, value)
                        raise _Cut("")  # the number may have gone on
                elif (word := _WORD.match(text, at)) is not None and (
                    word.group() in _LITERALS or word.group() in _NULLS
                ):
                    name = word.group()
                    value = _Literal(_LITERALS[name]) if name in _LITERALS else None
                    at = word.end()
                else:
                    raise _Broken(at)
                _put(frame, value)
                if len(stack) == 1:
                    frame.key = None  # the member is whole
                state = "comma"
            else:  # comma
                if char == ",":
                    at += 1
                    state = "key"
                elif char in "}]":
                    if (char == "}") != is_object:
                        raise _Broken(at)
                    stack.pop()
                    at += 1
                    if not stack:
                        end = at
                        break
                    if len(stack) == 1:
                        stack[0].key = None  # the member is whole
                    state = "comma"
                else:
                    raise _Broken(at)
    except _Cut:
        cut, whole = stack[0].key, False
    except _Broken as broken:
        end = broken.at
        if len(stack) > 1 and stack[0].key is not None:
            # The member being read stopped being JSON: it is not whole, so it is not kept.
            root.pop(stack[0].key, None)
    found = _candidate(root, "prose", cut)
    if found is not None:
        found.whole = whole
    return found, max(end, start + 1)


def _put(frame: _Frame, value: Any) -> None:
    if isinstance(frame.container, list):
        frame.container.append(value)
    elif frame.key is not None:
        frame.container[frame.key] = value


def _candidate(found: Mapping[str, Any], shape: str, cut: str | None) -> _Candidate | None:
    """The fields of an object read (or of the object inside it that has them, as
    `{"summary": {...}}`), as text."""
    fields = _fields_of(found, cut)
    if not fields:
        for nested in found.values():
            if isinstance(nested, dict) and _fields_of(nested, None):
                # The cut, if any, is inside the object that holds the fields.
                inner_cut = next((k for k in reversed(nested) if field_name(k)), None)
                return _candidate(nested, shape, inner_cut if cut is not None else None)
        return None
    cut_field = field_name(cut) if cut is not None else None
    cut_fields = (cut_field,) if cut_field in fields else ()
    if cut_field in fields:
        fields[cut_field] = fields[cut_field].rstrip(" `\n") + CUT_NOTE
    return _Candidate(fields, shape, cut_fields)


def _fields_of(found: Mapping[str, Any], cut: str | None) -> dict[str, str]:
    fields: dict[str, str] = {}
    for key, value in found.items():
        name = field_name(key)
        if name is None or value is None:
            continue
        text = _field_text(as_text(value))
        if text is not None:
            fields[name] = text
    return fields


_MAX_INDENT = 6


def as_text(value: Any) -> str:
    """A field's value as the text a summary holds: a string as it is, a list one item a
    line, an object one `key: value` a line (an object in a list on one line when it holds no
    other), a number or `true` as written.

    Never recurses (what the C parser reads may nest up to the interpreter's recursion limit,
    and a model's list may be wide): nested items are indented under their parent.
    """
    lines: list[str] = []
    stack: list[tuple[int, str, Any]] = [(0, "", value)]
    while stack:
        depth, label, item = stack.pop()
        # Indented at most a few levels: a value hundreds deep and wide would otherwise
        # write its depth in spaces before every one of its items.
        pad = "  " * min(depth, _MAX_INDENT)
        if isinstance(item, dict):
            if label:
                lines.append(f"{pad}{label}")
            step = 1 if label else 0
            for key, child in reversed(list(item.items())):
                stack.append((depth + step, f"{key}:", child))
        elif isinstance(item, list):
            if label:
                lines.append(f"{pad}{label}")
            step = 1 if label else 0
            bullet = "- " if depth + step or label else ""
            if not any(isinstance(child, (dict, list)) for child in item):
                # A list of text or numbers, the usual one (and a hostile million): one pass.
                inner = "  " * min(depth + step, _MAX_INDENT) + bullet
                lines.extend(inner + _scalar(child) for child in item)
                continue
            for child in reversed(item):
                flat = _flat(child) if isinstance(child, dict) else None
                stack.append((depth + step, bullet.strip(), child if flat is None else flat))
        else:
            text = _scalar(item)
            lines.append(f"{pad}{label} {text}".rstrip() if label else f"{pad}{text}")
    return "\n".join(line for line in lines if line.strip())


def _scalar(item: Any) -> str:
    if item is None:
        return ""
    if type(item) is bool:
        return "true" if item else "false"
    return str(item)


def _flat(item: dict[str, Any]) -> str | None:
    """`key: value, key: value` of an object that holds no object or list; else None."""
    if any(isinstance(v, (dict, list)) for v in item.values()):
        return None
    return ", ".join(f"{key}: {_scalar(v)}" for key, v in item.items())


_QUICK_TRIES = 16
"""The objects first tried as strict JSON at C speed: a try costs up to the interpreter's
recursion limit on a reply of brackets, so a reply gets a few."""


def _whole_object(decoder: json.JSONDecoder, text: str, at: int) -> tuple[_Candidate | None, int]:
    """The fields of the valid JSON object at `at` and its end, read at C speed; `(None, -1)`
    when it is not one (lenient reading takes over)."""
    try:
        value, end = decoder.raw_decode(text, at)
    except (ValueError, RecursionError):
        return None, -1
    if not isinstance(value, dict):
        return None, -1
    return _candidate(value, "prose", None), end


def _objects(text: str, budget: _Budget) -> list[_Candidate]:
    """The fields of every object in `text` that has some: each `{` not inside an object
    read already is read from, and reading goes on where the last one stopped."""
    found: list[_Candidate] = []
    start = _OBJECT_START.search(text)
    # Numbers kept as written (`1e400` and a 5,000-digit int are text, not floats or errors).
    decoder = json.JSONDecoder(strict=False, parse_float=_Literal, parse_int=_Literal)
    quick = _QUICK_TRIES
    first, last = len(text) - len(text.lstrip()), len(text.rstrip())
    while start is not None and budget.left > 0:
        at = start.start()
        candidate, stop = _whole_object(decoder, text, at) if quick else (None, -1)
        quick = max(0, quick - 1)
        if stop < 0:
            candidate, stop = _read_object(text, at, budget)
        if candidate is not None:
            alone = at == first and stop >= last
            candidate.shape = "cut" if not candidate.whole else "json" if alone else candidate.shape
            found.append(candidate)
        start = _OBJECT_START.search(text, stop)
    return found


# -- headings and tags ---------------------------------------------------------------------------

# A line that opens a field: any markdown marks (`#`, a bullet, `**`, a number) before the
# field's name, which is followed by a colon or the end of the line, then its first text.
_MARKS = re.compile(r"\A(?:#{1,6}[ \t]*|[-*+][ \t]+|\(?\d{1,2}[.)][ \t]*|\*\*|__|[ \t]+)*")
_LABEL = re.compile(
    r"([A-Za-z][A-Za-z _-]{2,40}?)[ \t*_]{0,8}(?::|\Z)[ \t*_]{0,8}(.*)\Z", re.DOTALL
)
_MARKED_LINES = 10_000
"""The most lines (or tags) that name a field looked at as headings: a summary has a handful;
a reply of a million headings costs this many, and the rest is text."""
_HEADING = re.compile(r"([A-Za-z][A-Za-z _-]{2,40}?)[ \t*_]{0,8}(?:[/(（|–—-].*)?()\Z", re.DOTALL)
# The last line of a field that is a remark to the user rather than part of the summary, or a
# rule or a fence closing it: taken off (one line at a time from the end, never by a pattern
# run over the whole field, which could backtrack over a long run of blank lines).
_CLOSING = re.compile(
    r"(?:let me know|i hope|hope this|feel free|if you (?:need|want|have|would)|"
    r"please let me|is there anything)",
    re.IGNORECASE,
)
_RULE = re.compile(r"-{3,}|\*{3,}|`{3,}\w*")


def _trimmed(body: str, last: bool) -> str:
    """`body` without the rules and fences that end it, and (for the `last` field) the
    remark to the user after it."""
    body = body.rstrip()
    while True:
        head, _, line = body.rpartition("\n")
        line = line.strip()
        if not head or not (_RULE.fullmatch(line) or (last and _CLOSING.match(line))):
            return body
        body = head.rstrip()


def _headed(text: str) -> _Candidate | None:
    """The fields written under markdown headings or labels (`## Task overview`,
    `**Current state:** ...`, `1. Next steps:`, `TASK_OVERVIEW:`), each running to the next."""
    fields: dict[str, list[str]] = {}
    current: list[str] | None = None
    looks = _MARKED_LINES
    for line in text.split("\n"):
        if looks <= 0 or _FIELD_WORD.search(line, 0, 200) is None:
            if current is not None:
                current.append(line)
            continue
        looks -= 1
        marks = _MARKS.match(line)
        rest = line[marks.end() if marks else 0 :]
        label = _LABEL.match(rest) if len(rest) < 2_000 else None
        if label is None and marks is not None and "#" in line[: marks.end()]:
            # A markdown heading is all heading: its name may be followed by more of it
            # (`## Task Overview / 任务概述`, `## Next steps (in order)`).
            label = _HEADING.match(rest) if len(rest) < 2_000 else None
        name = field_name(label.group(1)) if label is not None else None
        if name is not None and label is not None and name not in fields:
            current = fields[name] = [label.group(2)]
        elif current is not None:
            current.append(line)
    if not fields:
        return None
    texts: dict[str, str] = {}
    last = list(fields)[-1]
    for name, lines in fields.items():
        value = _field_text(_trimmed("\n".join(lines), name == last))
        if value is not None:
            texts[name] = value
    return _Candidate(texts, "headings") if texts else None


_TAG = re.compile(r"<(/?)[ \t]{0,8}([A-Za-z][\w -]{0,40}?)[ \t]{0,8}>")


def _tagged(text: str) -> _Candidate | None:
    """The fields written as XML-ish tags (`<task_overview>...</task_overview>`), as
    Claude often answers; a tag left open runs to the next field's tag or the end."""
    fields: dict[str, str] = {}
    cut: list[str] = []
    opened: tuple[str, int] | None = None
    for looks, tag in enumerate(_TAG.finditer(text)):
        if looks >= _MARKED_LINES:
            break
        name = field_name(tag.group(2))
        if name is None:
            continue
        if opened is not None and (tag.group(1) == "" or name == opened[0]):
            value = _field_text(text[opened[1] : tag.start()])
            if value is not None and opened[0] not in fields:
                fields[opened[0]] = value
            opened = None
        if tag.group(1) == "":
            opened = (name, tag.end())
    if opened is not None and opened[0] not in fields:
        value = _field_text(text[opened[1] :])
        if value is not None:
            fields[opened[0]] = value.rstrip(" `\n") + CUT_NOTE
            cut.append(opened[0])
    return _Candidate(fields, "tags", tuple(cut)) if fields else None
