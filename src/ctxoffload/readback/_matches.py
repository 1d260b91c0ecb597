"""Match with context: which lines match a pattern, and the lines shown around each match.

Grep and the retrieval tool search the same way. The lines of a text file are those the
search engine finds (`ctxoffload._search.engine`), given here as rows (`as_rows`). A line of
a JSONL log (context.jsonl) matches by THE rule of
`ctxoffload.text.matching_lines`, which `ctxoffload grep` applies too: on the lines of its
message as the model saw them, else on its raw JSON; so a string copied from what the model
saw is found although the log stores it JSON-escaped, and both find the same log lines.

What a matching log line shows depends on the tool: Grep shows the message line that
matched, after the message's `[role]` header (`[role] text`); the retrieval tool shows the
whole message with its lines joined by ` ⏎ `. A log line that matched on its raw JSON is
shown raw; a context line is its message joined by ` ⏎ `.

`in_context` judges each line of a log once, in order, and gives each match with the
lines before it and after it, as `grep -C` does (touching windows run together), holding
one window of lines, never the file.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from .._search.engine import Line
from ..text import matching_lines
from ._lines import clip_around
from ._regex import Match, Pattern, line_finder

__all__ = ["JOINED", "Row", "as_rows", "in_context"]

Span = tuple[int, int]

_SURROGATE = re.compile("[\ud800-\udfff]")

JOINED = " ⏎ "
"""What joins the lines of a message shown on one line."""


class Row(NamedTuple):
    """One line of a search, as it is shown.

    Attributes:
        number: the line's number, from 1.
        text: the line as shown.
        is_match: whether it matches.
        span: where the match is in `text`, when it is there to point at.
    """

    number: int
    text: str
    is_match: bool
    span: Span | None = None


def in_context(
    regex: Pattern,
    lines: Iterable[tuple[int, str]],
    *,
    context: int = 0,
    whole_message: bool = False,
    max_chars: int | None = None,
) -> Iterator[tuple[list[Row], Row]]:
    """The lines of a JSONL log that match (by `matching_lines`), each with the lines
    around it, from one pass over `lines`.

    At most `context` lines are held back, so a search over a big file holds one window,
    never the file; a line that does not match costs no row unless it is shown.

    Args:
        regex: the pattern.
        lines: `(number, line)` for each line, in order, without its line ending.
        context: lines shown before and after each match.
        whole_message: see `_log_line`.
        max_chars: cut each line shown to this many characters (`clip_around` its match),
            and a line waiting in the window too, so it costs no more; None: as it is.

    Yields:
        `(before, match)` for a match (`before`: up to `context` lines just above it that
        were not yielded already), and `([], line)` for each of the `context` lines after
        a match that do not match themselves.
    """
    before: collections.deque[tuple[int, str]] = collections.deque(maxlen=context)
    after = 0
    any_line = _any_line(regex)
    for number, line in lines:
        text, is_match, span = _log_line(regex, line, whole_message, any_line)
        if max_chars is not None and len(text) > max_chars:
            text = clip_around(text, span, max_chars)
        if is_match:
            yield [Row(n, t, False) for n, t in before], Row(number, text, True, span)
            before.clear()
            after = context
        elif after:
            yield [], Row(number, text, False)
            after -= 1
        elif context:
            before.append((number, text))


def as_rows(
    regex: Pattern,
    found: Iterable[Line],
    *,
    context: int,
    text_of: Callable[[int, bytes], str],
    max_chars: int | None = None,
) -> Iterator[tuple[list[Row], Row]]:
    """The lines the search engine found (`ctxoffload._search.engine.search_lines`, with
    `context`), given as `in_context` gives them: each match with the context lines above it
    that were not given already, and each context line below a match alone.

    Args:
        regex: the pattern, which finds the span of a match in its line's text.
        found: the engine's lines, in order.
        context: the context lines the engine was asked for.
        text_of: a line's text as shown, from its number and bytes.
        max_chars: as `in_context`.
    """
    before: list[Row] = []
    last_match: int | None = None
    for number, raw, is_match in found:
        text = text_of(number, raw)
        match = _search(regex, text) if is_match else None
        span = None if match is None else match.span()
        if max_chars is not None and len(text) > max_chars:
            text = clip_around(text, span, max_chars)
        row = Row(number, text, is_match, span)
        if is_match:
            yield before, row
            before, last_match = [], number
        elif last_match is not None and number <= last_match + context:
            yield [], row
        else:
            before.append(row)


def _any_line(regex: Pattern) -> Callable[[str], bool] | None:
    """Whether some line of a message's text may match (`matching_lines`' `any_line`): one
    search with `line_finder`; None for a pattern only a line-by-line search reads right."""
    finder = line_finder(regex)
    if finder is None:
        return None
    search = finder.search

    def any_line(text: str) -> bool:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate from a JSON escape, read as `_search`
            data = _SURROGATE.sub("\ufffd", text).encode("utf-8")
        return search(data) is not None

    return any_line


def _log_line(
    regex: Pattern, line: str, whole_message: bool, any_line: Callable[[str], bool] | None = None
) -> tuple[str, bool, Span | None]:
    """A line of a JSONL log, judged by `matching_lines`: (as shown, matches?, match span).

    Args:
        regex: the pattern.
        line: the raw line, without its newline.
        whole_message: show a match as the whole message joined by ` ⏎ ` (the retrieval
            tool); otherwise as the message line that matched, after the `[role]` header
            (Grep).
        any_line: `_any_line(regex)`, made once for the whole log.
    """
    shown, hits = matching_lines(
        line, lambda text: _search(regex, text) is not None, any_line=any_line
    )
    if not hits or whole_message:
        text = JOINED.join(shown)  # a line shown raw is `[line]`: joined, it is the line
    else:
        text = shown[hits[0]]
        if hits[0] and shown[0].startswith("["):
            text = f"{shown[0]} {text}"  # name the role; the span is found in this text
    if not hits:
        return text, False, None
    found = _search(regex, text)
    return text, True, None if found is None else found.span()


def _search(regex: Pattern, text: str) -> Match | None:
    """`regex.search(text)` of a message's decoded text, which may hold a lone surrogate (a
    JSON escape such as `\\ud800`): RE2 reads UTF-8, which cannot spell one, so it is matched
    as U+FFFD (one character for one: spans stay); it is shown as stored, as Read shows it."""
    try:
        return regex.search(text)
    except UnicodeEncodeError:
        return regex.search(_SURROGATE.sub("\ufffd", text))
