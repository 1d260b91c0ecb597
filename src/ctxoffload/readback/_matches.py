"""Match with context: which lines match a pattern, and the lines shown around each match.

Grep and the retrieval tool search the same way. The lines of a text file are those the
search engine finds (`ctxoffload._search.engine`), given here as rows (`as_rows`). A line of
a JSONL log (context.jsonl) is judged by the one function every door calls,
`ctxoffload._search.log.log_line_judge` (`ctxoffload grep` too): on the lines of its message
as the model saw them, else on its raw JSON; so a string copied from what the model saw is
found although the log stores it JSON-escaped, and every door finds the same log lines.

What a matching log line shows depends on the tool: Grep shows the message line that
matched, after the message's `[role]` header (`[role] text`), or, asked for context lines,
the whole message as the lines around it are; the retrieval tool shows the whole message
with its lines joined by ` ⏎ `. A log line that matched on its raw JSON is
shown raw; a context line is its message joined by ` ⏎ `.

`in_context` judges each line of a log once, in order, and gives each match with the
lines before it and after it, as `grep -C` does (touching windows run together), holding
one window of lines, never the file.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from .._search.engine import Line
from .._search.log import log_line_judge
from .._search.matcher import Matcher
from ._lines import clip_around

__all__ = ["JOINED", "Row", "as_rows", "in_context"]

Span = tuple[int, int]

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
    matcher: Matcher,
    lines: Iterable[tuple[int, str]],
    *,
    context: int = 0,
    whole_message: bool = False,
    max_chars: int | None = None,
) -> Iterator[tuple[list[Row], Row]]:
    """The lines of a JSONL log that match (by `log_line_judge`), each with the lines
    around it, from one pass over `lines`.

    At most `context` lines are held back, so a search over a big file holds one window,
    never the file; a line that does not match costs no row unless it is shown.

    Args:
        matcher: the pattern.
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
    judge = log_line_judge(matcher)
    for number, line in lines:
        text, is_match, span = _log_line(judge(line), matcher, whole_message)
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
    matcher: Matcher,
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
        matcher: the pattern, which finds the span of a match in its line's text.
        found: the engine's lines, in order.
        context: the context lines the engine was asked for.
        text_of: a line's text as shown, from its number and bytes.
        max_chars: as `in_context`.
    """
    before: list[Row] = []
    last_match: int | None = None
    for number, raw, is_match in found:
        text = text_of(number, raw)
        span = matcher.span(text) if is_match else None
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


def _log_line(
    judged: tuple[list[str], list[int]], matcher: Matcher, whole_message: bool
) -> tuple[str, bool, Span | None]:
    """A line of a JSONL log as shown, from its judgment (`log_line_judge`): (as shown,
    matches?, match span).

    Args:
        judged: the lines to show for it, and the indexes of those that match.
        matcher: the pattern, which finds the span.
        whole_message: show a match as the whole message joined by ` ⏎ ` (the retrieval
            tool); otherwise as the message line that matched, after the `[role]` header
            (Grep).
    """
    shown, hits = judged
    if not hits or whole_message:
        text = JOINED.join(shown)  # a line shown raw is `[line]`: joined, it is the line
    else:
        text = shown[hits[0]]
        if hits[0] and shown[0].startswith("["):
            text = f"{shown[0]} {text}"  # name the role; the span is found in this text
    if not hits:
        return text, False, None
    return text, True, matcher.span(text)
