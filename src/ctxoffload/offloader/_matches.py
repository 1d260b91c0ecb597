"""Match with context: which lines match a pattern, and the lines shown around each match.

Grep and the retrieval tool search the same way. A line of a text file matches when the
regex finds something in it. A line of a JSONL log (context.jsonl) matches by THE rule of
`ctxoffload.text.matching_lines`, which `ctxoffload grep` applies too: on the lines of its
message as the model saw them, else on its raw JSON; so a string copied from what the model
saw is found although the log stores it JSON-escaped, and both find the same log lines.

What a matching log line shows depends on the tool: Grep shows the message line that
matched, after the message's `[role]` header (`[role] text`); the retrieval tool shows the
whole message with its lines joined by ` ⏎ `. A log line that matched on its raw JSON is
shown raw; a context line is its message joined by ` ⏎ `.

`judged` judges each line of a file once, in order, and `with_context` gives each match
with the lines before it and after it, as `grep -C` does (touching windows run together),
holding one window of lines, never the file.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from ..text import matching_lines
from ._lines import clip_around
from ._regex import Pattern

__all__ = ["JOINED", "Row", "judged", "with_context"]

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
    span: tuple[int, int] | None = None


def judged(
    regex: Pattern,
    lines: Iterable[tuple[int, str]],
    *,
    jsonl: bool,
    whole_message: bool = False,
    context: int = 0,
    max_chars: int | None = None,
) -> Iterator[Row]:
    """The lines of a file (numbered), judged, as `with_context` takes them.

    Args:
        regex: the pattern.
        lines: `(number, line)` for each line, without its line ending.
        jsonl: the lines are a JSONL log's (`_log_row`); otherwise text.
        whole_message: see `_log_row`.
        context: the context lines wanted; without any, only the matches are given (no
            row is made for a line that is never shown).
        max_chars: cut each line to this many characters (`clip_around` its match) as it
            is judged, so a line waiting in the context window costs no more; None: as is.
    """
    for number, line in lines:
        if jsonl:
            row = _log_row(regex, number, line, whole_message=whole_message)
            if not (row.is_match or context):
                continue
        else:
            found = regex.search(line)
            if found is not None:
                row = Row(number, line, True, found.span())
            elif context:
                row = Row(number, line, False)
            else:
                continue
        if max_chars is not None and len(row.text) > max_chars:
            row = row._replace(text=clip_around(row.text, row.span, max_chars))
        yield row


def _log_row(regex: Pattern, number: int, line: str, *, whole_message: bool) -> Row:
    """A line of a JSONL log, judged by `matching_lines` and shown as its message.

    Args:
        regex: the pattern.
        number: the line's number.
        line: the raw line, without its newline.
        whole_message: show a match as the whole message joined by ` ⏎ ` (the retrieval
            tool); otherwise as the message line that matched, after the `[role]` header
            (Grep).
    """
    shown, hits = matching_lines(line, lambda text: regex.search(text) is not None)
    if not hits or whole_message:
        text = JOINED.join(shown)  # a line shown raw is `[line]`: joined, it is the line
    else:
        text = shown[hits[0]]
        if hits[0] and shown[0].startswith("["):
            text = f"{shown[0]} {text}"  # name the role; the span is found in this text
    if not hits:
        return Row(number, text, False)
    found = regex.search(text)
    return Row(number, text, True, None if found is None else found.span())


def with_context(rows: Iterable[Row], context: int) -> Iterator[tuple[list[Row], Row]]:
    """Each match with the lines before it not given yet, and each line after a match.

    Reads `rows` once, keeping at most `context` lines back, so a search over a big file
    holds one window, never the file.

    Args:
        rows: the judged lines, in order.
        context: lines shown before and after each match.

    Yields:
        `(before, match)` for a match (`before`: up to `context` lines just above it that
        were not yielded already), and `([], line)` for each of the `context` lines after
        a match that do not match themselves.
    """
    before: collections.deque[Row] = collections.deque(maxlen=context)
    after = 0
    for row in rows:
        if row.is_match:
            yield list(before), row
            before.clear()
            after = context
        elif after:
            yield [], row
            after -= 1
        elif context:
            before.append(row)
