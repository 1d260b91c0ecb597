"""A JSONL log (context.jsonl) searched by THE rule of every door: which of its lines match,
judged once here (`log_line_judge`) for the agent's Grep, the retrieval tool and `ctxoffload
grep`.

A log line matches when one of its message's decoded lines matches, else when its raw JSON
line does (`text.matching_lines`): so a string copied from what the model saw is found
although the log stores it JSON-escaped, and a key such as `"role"` is found in the JSON.
Each line is matched as every door matches text (`matcher.as_searched`): a byte that is not
UTF-8 as the U+FFFD it is read as, a lone surrogate from a JSON escape as U+FFFD too.

Most lines of a log hold nothing a search looks for, and decoding one costs far more than
looking at its bytes: `raw_line_filter` passes over a line without decoding it where that
cannot change what is found (a literal of letters that the line's bytes do not hold).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from .engine import Line
from .matcher import Matcher, as_searched, every_line

__all__ = ["log_line_judge", "log_search", "raw_line_filter", "search_log"]

# Every run of letters (and `_`) that showing a message can write without taking it from the
# line's own bytes, for a line whose bytes are printable ASCII without a backslash (so each
# string it holds is written in it as it is, and `repr` escapes none): the words of
# `text.message_lines`'s headers and marks (`-> tool call`, `<- tool result`, `(error)`,
# `(thinking)`, `(redacted)`, `(inline base64, N chars)`), of `text.data_line` (`<data url=
# name= media_type=`, with `html.escape`'s `&amp; &lt; &gt; &quot; &#x27;`), and of values
# shown as Python or JSON writes them rather than as stored (`True` for `true`, `None`,
# `1e+100` for `1E100`, `inf`, `Infinity` for `1e999`, `NaN`, `<cycle>`).
_SHOWN_WORDS = (
    "tool",
    "call",
    "result",
    "id",
    "error",
    "thinking",
    "redacted",
    "inline",
    "base",
    "chars",
    "data",
    "url",
    "name",
    "media_type",
    "amp",
    "lt",
    "gt",
    "quot",
    "x",
    "e",
    "E",
    "True",
    "False",
    "None",
    "true",
    "false",
    "null",
    "inf",
    "nan",
    "Infinity",
    "NaN",
    "cycle",
)


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
    if matcher.is_literal:  # (a literal holds no newline: in the text iff in one of its lines)
        return matcher.matches_text
    search = matcher.search

    def any_line(text: str) -> bool:
        return search(as_searched(text), 0) is not None

    return any_line


def raw_line_filter(matcher: Matcher) -> Callable[[bytes], bool] | None:
    """Whether a raw log line (bytes, without its newline) may match, judged on its bytes
    alone; None when every line must be decoded and judged (`log_line_judge`).

    A line is passed over only when the pattern's literal (bytes every match holds, none
    under -i) is made of ASCII letters and `_` and is part of no word that showing a message
    writes itself (`_SHOWN_WORDS`), and the line's bytes are printable ASCII without a
    backslash and do not hold the literal. Then each string of the line is in its bytes as
    it is (no JSON escape: `\\u0068ello` is decoded and judged), the raw line does not match,
    and a run of letters shown for it is either one of its strings' (which would hold the
    literal) or one of those words (which cannot): no line it shows can match.
    """
    literal = matcher.literal
    if (
        literal is None
        or not literal.replace(b"_", b"a").isalpha()  # (bytes.isalpha: ASCII letters only)
        or any(literal.decode("ascii") in word for word in _SHOWN_WORDS)
    ):
        return None

    def may_match(raw: bytes) -> bool:
        # (`find`, not `in`: for bytes, `in` first tries its operand as an integer, and
        # raises and clears a TypeError, which costs more than the search of a short line.)
        if raw.find(literal) >= 0:
            return True
        # A control byte or DEL is escaped by `repr` (`\x7f`, whose `f` would run into
        # the letters after it), a backslash may be a JSON escape of a letter: each of them,
        # and each byte that is not ASCII, is mapped to DEL, and a DEL left says one was
        # there (one call: a table, which `translate` does not build at each call as it
        # does bytes to delete, and `in` with an int, one memchr).
        return 0x7F in raw.translate(_NOT_PLAIN_AS_DEL)

    return may_match


_NOT_PLAIN_AS_DEL = bytes(
    0x7F if b < 0x20 or b >= 0x7F or b == ord("\\") else b for b in range(256)
)


def search_log(raw_lines: Iterable[bytes], matcher: Matcher, *, context: int = 0) -> Iterator[Line]:
    """The lines of the messages of a JSONL log that match (`log_line_judge`), each with up to
    `context` lines around it within its message; each under its JSONL line number.

    Args:
        raw_lines: the log's lines, without their newlines, from the first.
        matcher: the compiled pattern.
        context: message lines given around each match.
    """
    return log_search(matcher, context=context)(raw_lines)


def log_search(
    matcher: Matcher, *, context: int = 0
) -> Callable[[Iterable[bytes]], Iterator[Line]]:
    """`search_log` made once for a search of many logs (`ctxoffload grep` over every
    session): a function of a log's raw lines, with the judgment and the filter built once."""
    judge = log_line_judge(matcher)
    may_match = raw_line_filter(matcher)
    matches_text = matcher.matches_text

    def search(raw_lines: Iterable[bytes]) -> Iterator[Line]:
        for number, raw in enumerate(raw_lines, start=1):
            if may_match is not None and not may_match(raw):
                continue
            lines, hits = judge(raw.decode("utf-8", "replace"))
            if not context:  # (each match alone: `_utf8` written out, a call a line fewer)
                for i in hits:
                    yield number, lines[i].encode("utf-8", "surrogatepass"), True
                continue
            shown_to = -1
            for i in hits:
                first = max(i - context, shown_to + 1)
                last = min(i + context, len(lines) - 1)
                for j in range(first, last + 1):
                    # (line i was judged a match already: only the lines around it are judged)
                    yield number, _utf8(lines[j]), j == i or matches_text(lines[j])
                shown_to = last

    return search


def _utf8(text: str) -> bytes:
    """A line's text as the bytes printed: a lone surrogate a JSON escape gave as UTF-8
    would spell it."""
    return text.encode("utf-8", "surrogatepass")
