"""A JSONL log (context.jsonl) searched by THE rule of every door: which of its lines match,
judged once here (`log_line_judge`) for the agent's Grep, the retrieval tool and `ctxoffload
grep`.

A log line matches when one of its message's decoded lines matches, else when its raw JSON
line does (`text.matching_lines`): so a string copied from what the model saw is found
although the log stores it JSON-escaped, and a key such as `"role"` is found in the JSON.
Each line is matched as every door matches text (`matcher.as_searched`): a byte that is not
UTF-8 as the U+FFFD it is read as, a lone surrogate from a JSON escape as U+FFFD too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from .engine import Line
from .matcher import Matcher, as_searched, every_line

__all__ = ["log_line_judge", "search_log"]


def log_line_judge(matcher: Matcher) -> Callable[[str], tuple[list[str], list[int]]]:
    """The one judgment of a JSONL log's line, for every door, made once for a search: a
    function of the raw line (decoded, a byte that is not UTF-8 as U+FFFD, without its
    newline) that returns the lines to show for it (its message's, or `[line]` when it
    matched only as raw JSON) and the indexes of those that match; no indexes when it does
    not match."""
    # Only now: a search of tool results alone never loads it.
    from ..text import matching_lines

    matches, any_line = matcher.matches_text, _any_line(matcher)

    def judge(line: str) -> tuple[list[str], list[int]]:
        return matching_lines(line, matches, any_line=any_line)

    return judge


def _any_line(matcher: Matcher) -> Callable[[str], bool] | None:
    """Whether some line of a message's text may match: one search of the whole text (the
    pattern has `^` and `$` at every line end, so it finds at least what each line's search
    would), which costs less than judging a message's hundreds of lines one by one. None for
    a pattern only a line-by-line search reads right (`reads_whole_text`)."""
    if matcher.search is every_line:
        return None
    search = matcher.search

    def any_line(text: str) -> bool:
        return search(as_searched(text), 0) is not None

    return any_line


def search_log(raw_lines: Iterable[bytes], matcher: Matcher, *, context: int = 0) -> Iterator[Line]:
    """The lines of the messages of a JSONL log that match (`log_line_judge`), each with up to
    `context` lines around it within its message; each under its JSONL line number.

    Args:
        raw_lines: the log's lines, without their newlines, from the first.
        matcher: the compiled pattern.
        context: message lines given around each match.
    """
    judge = log_line_judge(matcher)
    for number, raw in enumerate(raw_lines, start=1):
        lines, hits = judge(raw.decode("utf-8", "replace"))
        shown_to = -1
        for i in hits:
            first = max(i - context, shown_to + 1)
            last = min(i + context, len(lines) - 1)
            for j in range(first, last + 1):
                line = _utf8(lines[j])
                yield number, line, matcher.matches_text(lines[j])
            shown_to = last


def _utf8(text: str) -> bytes:
    """A line's text as the bytes printed: a lone surrogate a JSON escape gave as UTF-8
    would spell it."""
    return text.encode("utf-8", "surrogatepass")
