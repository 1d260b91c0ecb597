"""Reading offloaded content back: a line range, the lines matching a pattern, or the head.

`retrieve_offloaded_content` fetches a reference's bytes from any `ReferenceReader` (every
workspace, and a custom offloader that has `read_reference`); `format_retrieval` turns the
text into numbered lines. Lines are numbered as Read numbers them (`_lines.py`), so a line
number in a summary, a preview or a retrieval always points at the same line of the file,
and a pattern matches as Grep matches (`_matches.py`): a context.jsonl line on the text the
model saw, else on its raw JSON.

Errors: an unknown reference raises `InvalidReference` (from the source); a request that
cannot be answered (an invalid regex, an impossible line range, a negative context, binary
content) raises `InvalidContent`; impossible caps raise `ConfigError`.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from .._search.engine import search_lines
from .._search.matcher import Matcher, as_searched, compile_matcher
from .._search.sniff import binary_reason
from ..exceptions import ConfigError, InvalidContent
from ..text import decode_log_line, is_jsonl
from ..workspace import ReferenceReader
from ._arguments import plural, quote
from ._lines import clip_around, cut_line, numbered, split_lines
from ._matches import JOINED, Row, as_rows, in_context

__all__ = [
    "decode_reference_text",
    "format_retrieval",
    "retrieve_offloaded_content",
]

# Room kept under max_chars for the final note.
_NOTE_ROOM = 200
_MIN_CHARS = 500


async def retrieve_offloaded_content(
    source: ReferenceReader,
    reference: str,
    pattern: str | None = None,
    line_range: tuple[int, int] | None = None,
    context_lines: int | None = None,
    *,
    char_offset: int | None = None,
    max_lines: int = 200,
    max_chars: int = 20_000,
    max_line_chars: int = 2_000,
) -> str:
    """Numbered lines of offloaded content: a range, the lines matching a pattern, or the head.

    What is shown:

    - `reference` alone: lines from the top;
    - `line_range=(a, b)`: lines a to b (`b` clamped to the last line);
    - `context_lines=N` alone: the first N lines (ignored when `line_range` is given);
    - `pattern`: the matching lines, marked `>` in a leading column, with `context_lines`
      lines of context around each, and `--` between hunks that are not adjacent; with
      `line_range` too, only lines in the range are searched;
    - `char_offset=K` with `line_range=(n, n)`: the characters of line n from K on, for
      reading a line too long to show whole.

    A JSON Lines reference (context.jsonl) is shown one message per line as the text the
    model saw, and a pattern matches that text. The regex is matched by RE2 in a worker
    thread: linear time whatever the pattern, the event loop free.

    Args:
        source: where the reference is stored: a workspace, or any `ReferenceReader`.
        reference: the reference an offload returned, such as a tool_result file's path.
        pattern: a regular expression in RE2 syntax (Python `re` without backreferences
            and lookaround); only matching lines (and context) are shown.
        line_range: `(first, last)`, 1-based and inclusive; `last` is clamped to the end.
        context_lines: with `pattern`, lines shown around each match (default 0); alone,
            the number of lines to show from the top.
        char_offset: page inside one long line: the characters of line `line_range[0]`
            from this one on (0-based).
        max_lines: most lines shown (context lines count, separators do not).
        max_chars: longest result, note included.
        max_line_chars: longest line shown; longer lines are cut with a marker.

    Returns:
        The formatted lines, with a note when the result was capped.

    Raises:
        InvalidReference: the source does not know `reference`.
        InvalidContent: the content is binary, the regex is invalid, or `line_range` or
            `context_lines` is impossible.
        ConfigError: `max_lines`, `max_chars` or `max_line_chars` is impossible.
    """
    data = await source.read_reference(reference)

    def decode_and_format() -> str:
        if pattern is None and char_offset is None:
            window = _window(
                data, reference, line_range, context_lines, max_lines, max_chars, max_line_chars
            )
            if window is not None:
                return window
        text = decode_reference_text(data, reference)
        return format_retrieval(
            text,
            reference,
            pattern,
            line_range,
            context_lines,
            max_lines,
            max_chars,
            max_line_chars=max_line_chars,
            char_offset=char_offset,
        )

    # Decoding and matching a large result is CPU work: one thread hop keeps the loop free.
    return await asyncio.to_thread(decode_and_format)


def _window(
    data: bytes,
    reference: str,
    line_range: tuple[int, int] | None,
    context_lines: int | None,
    max_lines: int,
    max_chars: int,
    max_line_chars: int,
) -> str | None:
    """`format_retrieval` of a line range (or of the first `context_lines` lines) with no
    pattern, from the bytes: only the lines the page can show are decoded, where the whole
    content was decoded and split (a page of a 40 MB log took 0.17 s). None when it is not
    such a request.

    The same answer: binary content is refused by the one rule (`binary_reason`), whatever
    the lines.
    """
    if line_range is None and context_lines is None:
        return None
    _refuse_binary(data, reference)
    _check_caps(max_lines, max_chars, max_line_chars)
    if context_lines is not None and context_lines < 0:
        raise InvalidContent(f"context_lines={context_lines} must be 0 or more")
    if line_range is not None:
        line_range = _checked_range(line_range)
    total = data.count(b"\n") + (not data.endswith(b"\n") if data else 0)
    if total == 0:
        return f"{reference} is empty (0 lines)."
    first, last = line_range if line_range is not None else (1, total)
    if line_range is None:
        if context_lines == 0:
            return f"{reference}: {plural(total, 'line')}; none shown (context_lines=0)."
        last = context_lines if context_lines is not None else last
    if first > total:
        return (
            f"{reference}: {plural(total, 'line')}; line_range=[{first}, {last}] starts past "
            f"the end: pass a range within 1–{total}."
        )
    # The page shows at most `max_lines` and looks at one more to know it was cut.
    count = min(last, total, first + max_lines) - first + 1
    lines = _Window(total, first, _lines_at(data, first, count))
    page = _Page(reference, lines, is_jsonl(reference), max_lines, max_chars, max_line_chars)
    return page.lines_in_range(first, min(last, total))


def _lines_at(data: bytes, first: int, count: int) -> list[bytes]:
    """Lines `first`.. of `data` (1-based, at most `count`, without their newlines), found by
    counting newlines a megabyte at a time up to the first."""
    pos, skip = 0, first - 1
    while skip:
        end = min(len(data), pos + (1 << 20))
        found = data.count(b"\n", pos, end)
        if found < skip:
            skip -= found
            pos = end
            continue
        for _ in range(skip):
            pos = data.index(b"\n", pos) + 1
        break
    out: list[bytes] = []
    while len(out) < count and pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        out.append(data[pos:end])
        pos = end + 1
    return out


class _Window(Sequence[str]):
    """The lines of a content as `_Page` reads them (`split_lines`), of which only those from
    `first` on are held: its length is the content's, and a line outside is an error."""

    def __init__(self, total: int, first: int, raw: list[bytes]) -> None:
        self.total, self.first = total, first
        shown = [line.decode("utf-8", "replace") for line in raw]
        self.shown = [line[:-1] if line.endswith("\r") else line for line in shown]

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, int) or not 0 <= index - self.first + 1 < len(self.shown):
            raise IndexError(index)
        return self.shown[index - self.first + 1]


def decode_reference_text(data: bytes, reference: str) -> str:
    """Decode stored bytes as UTF-8 text, refusing content that is binary.

    Args:
        data: the stored bytes.
        reference: named in the error message.

    Returns:
        The text; undecodable bytes become U+FFFD.

    Raises:
        InvalidContent: binary content, by the rule Read and Grep apply (`binary_reason`: a
            NUL in the first 8 KB, or a first 8 KB mostly not text).
    """
    _refuse_binary(data, reference)
    return data.decode("utf-8", errors="replace")


def format_retrieval(
    text: str,
    reference: str,
    pattern: str | None = None,
    line_range: tuple[int, int] | None = None,
    context_lines: int | None = None,
    max_lines: int = 200,
    max_chars: int = 20_000,
    *,
    max_line_chars: int = 2_000,
    char_offset: int | None = None,
) -> str:
    """Format offloaded text as numbered lines for the model.

    What is shown:

    - nothing but `text`: lines from the top;
    - `line_range=(a, b)`: lines a to b (`b` clamped to the last line);
    - `context_lines=N` alone: the first N lines (ignored when `line_range` is given);
    - `pattern`: the matching lines, marked `>` in a leading column, with `context_lines`
      lines (default 0) of context marked with a space, and (when there is context) `--`
      between hunks that are not adjacent; with `line_range` too, only lines in the range
      are searched;
    - `char_offset=K` with `line_range=(n, n)`: the characters of line n from K on, as many
      as `max_chars` allows, for reading a line too long to show whole.

    A JSON Lines reference (`….jsonl`, such as context.jsonl) is shown one message per
    line as the text the model saw (`ctxoffload.text.message_lines`, joined by ` ⏎ `), and
    a pattern matches that text, else the raw line (then shown raw): so a string copied from
    what the model saw is found although the log stores it JSON-escaped.

    Lines are numbered like the Read tool (`{number:>6}` and a tab). The first line says
    which reference and how many lines it has; when `max_lines` or `max_chars` cut the
    result short, a last line says how many lines were left out and how to get them.

    Args:
        text: the decoded content.
        reference: the reference, named in the first line of the result.
        pattern: a regular expression in RE2 syntax, matched against each line.
        line_range: `(first, last)`, 1-based and inclusive.
        context_lines: see above; at least 0.
        char_offset: see above; at least 0, and only with a one-line `line_range`.
        max_lines: most lines shown (context lines count, separators do not).
        max_chars: longest result, first and last lines included; at least 500.
        max_line_chars: longest line shown; longer lines are cut with a marker.

    Returns:
        The formatted result.

    Raises:
        InvalidContent: `text` is binary (`binary_reason`), the regex is invalid,
            `line_range` is not `(a, b)` with 1 <= a <= b, or `context_lines` is negative.
        ConfigError: `max_lines` < 1, `max_chars` < 500 or `max_line_chars` < 1.
    """
    _check_caps(max_lines, max_chars, max_line_chars)
    if context_lines is not None and context_lines < 0:
        raise InvalidContent(f"context_lines={context_lines} must be 0 or more")
    if line_range is not None:
        line_range = _checked_range(line_range)
    # RE2: linear time whatever the pattern, so `(a+)+$` cannot hang the agent.
    matcher = compile_matcher(pattern) if pattern is not None else None
    _refuse_binary(text, reference)
    lines = split_lines(text)
    total = len(lines)
    if total == 0:
        return f"{reference} is empty (0 lines)."
    jsonl = is_jsonl(reference)
    if char_offset is not None:
        return _line_slice(lines, reference, line_range, char_offset, max_chars, jsonl)
    first, last = line_range if line_range is not None else (1, total)
    if line_range is None and matcher is None and context_lines is not None:
        if context_lines == 0:
            return f"{reference}: {plural(total, 'line')}; none shown (context_lines=0)."
        last = context_lines
    if first > total:
        return (
            f"{reference}: {plural(total, 'line')}; line_range=[{first}, {last}] starts past "
            f"the end: pass a range within 1–{total}."
        )
    page = _Page(reference, lines, jsonl, max_lines, max_chars, max_line_chars)
    if matcher is None:
        return page.lines_in_range(first, min(last, total))
    return page.matching_lines(
        matcher, first, min(last, total), line_range is not None, context_lines or 0
    )


def _check_caps(max_lines: int, max_chars: int, max_line_chars: int) -> None:
    if max_lines < 1:
        raise ConfigError(f"max_lines={max_lines} must be at least 1")
    if max_chars < _MIN_CHARS:
        raise ConfigError(f"max_chars={max_chars} must be at least {_MIN_CHARS}")
    if max_line_chars < 1:
        raise ConfigError(f"max_line_chars={max_line_chars} must be at least 1")


class _Page:
    """What a retrieval shows of `lines`: a header, numbered lines and, when cut, a note."""

    def __init__(
        self,
        reference: str,
        lines: Sequence[str],
        jsonl: bool,
        max_lines: int,
        max_chars: int,
        max_line_chars: int,
    ) -> None:
        self.reference = reference
        self.lines = lines
        self.jsonl = jsonl
        self.max_lines = max_lines
        self.max_chars = max_chars
        self.max_line_chars = max_line_chars

    def lines_in_range(self, first: int, last: int) -> str:
        """Lines `first`..`last`, as far as the caps allow."""
        lines, jsonl, max_lines = self.lines, self.jsonl, self.max_lines
        rows = (Row(n, _shown(lines[n - 1], jsonl), False) for n in range(first, last + 1))
        return self._render(
            f"{self.reference}: lines {first}–{last} of {len(lines)}",
            rows,
            marked=False,
            capped_note=lambda shown, _: (
                f"[capped: {last - first + 1 - shown:,} more lines; pass "
                f"line_range=[{first + shown}, {min(last, first + shown + max_lines - 1)}] "
                f"to continue]"
            ),
        )

    def matching_lines(
        self, matcher: Matcher, first: int, last: int, ranged: bool, context: int
    ) -> str:
        """The lines of `first`..`last` that match, with `context` lines around each."""
        total = len(self.lines)
        searched = f"lines {first}–{last} of {total}" if ranged else plural(total, "line")
        if self.jsonl:
            numbered = enumerate(self.lines[first - 1 : last], first)
            found = in_context(matcher, numbered, context=context, whole_message=True)
        else:
            found = self._found(matcher, first, last, context)
        kept: list[Row] = []  # one more than can be shown, so the page knows it was cut
        matches = 0
        for before, row in found:
            kept.extend(before[: self.max_lines + 1 - len(kept)])
            if len(kept) <= self.max_lines:
                kept.append(row)
            matches += row.is_match
        pattern = quote(matcher.pattern)
        if not matches:
            return f"{self.reference}: no lines match {pattern} ({searched} searched)."
        return self._render(
            f"{self.reference}: {plural(matches, 'matching line')} for {pattern} ({searched})",
            kept,
            marked=True,
            capped_note=lambda shown, shown_matches: (
                f"[capped: {matches - shown_matches:,} more matching lines; narrow the "
                f"pattern or pass line_range]"
                if shown_matches < matches
                else f"[capped at {shown} lines: every matching line is shown, some context is "
                f"not; lower context_lines or pass line_range]"
            ),
            # As in grep: `--` only when context is shown; without it, line numbers show gaps.
            separate_hunks=context > 0,
        )

    def _found(
        self, matcher: Matcher, first: int, last: int, context: int
    ) -> Iterator[tuple[list[Row], Row]]:
        """The lines `first`..`last` that the search engine finds, as `in_context` gives
        them, each shown as it is in `lines`."""
        lines = self.lines
        # The lines as a file would hold them: each ended by "\r\n", of which the engine
        # drops the "\r" (`lines_as_read`), so that a line keeps a "\r" of its own.
        text = "\r\n".join(lines[first - 1 : last]) + "\r\n"
        data = as_searched(text)  # a lone surrogate (a JSON escape): searched as U+FFFD
        found = (
            (number + first - 1, raw, is_match)
            for number, raw, is_match in search_lines(io.BytesIO(data), matcher, context=context)
        )
        return as_rows(matcher, found, context=context, text_of=lambda n, _: lines[n - 1])

    def _render(
        self,
        header: str,
        rows: Iterable[Row],
        *,
        marked: bool,
        capped_note: Callable[[int, int], str],
        separate_hunks: bool = False,
    ) -> str:
        """The page; `capped_note(lines_shown, matches_shown)` writes the note when cut."""
        out = [header]
        budget = self.max_chars - len(header) - 1 - _NOTE_ROOM
        # A line must fit in the budget even when max_chars is small.
        line_cap = max(1, min(self.max_line_chars, budget - 80))
        used = shown_matches = 0
        previous: int | None = None
        for shown, row in enumerate(rows):  # `shown`: the lines shown before this one
            formatted = _format_row(row, line_cap)
            if marked:
                formatted = (">" if row.is_match else " ") + formatted
            separated = separate_hunks and previous is not None and row.number != previous + 1
            cost = len(formatted) + 1 + (3 if separated else 0)
            if shown == self.max_lines or used + cost > budget:
                out.append(capped_note(shown, shown_matches))
                return "\n".join(out)
            if separated:
                out.append("--")
            out.append(formatted)
            used += cost
            shown_matches += row.is_match
            previous = row.number
        return "\n".join(out)


def _format_row(row: Row, line_cap: int) -> str:
    """A numbered line; a long one is cut, around the match when there is one."""
    number, text = row.number, row.text
    if len(text) <= line_cap:
        return numbered(number, text)
    if row.span is None or row.span[0] < line_cap * 3 // 4:
        rest = f"(pass line_range=[{number}, {number}], char_offset={line_cap} for the rest)"
        return cut_line(number, text[:line_cap], len(text) - line_cap, rest)
    # The match lies beyond the part a plain cut would show: show a window around it.
    return numbered(number, clip_around(text, row.span, line_cap))


def _shown(line: str, jsonl: bool) -> str:
    """A line as shown: a JSONL message as its lines joined by ` ⏎ `, else as it is."""
    decoded = decode_log_line(line) if jsonl else None
    return line if decoded is None else JOINED.join(decoded)


def _line_slice(
    lines: list[str],
    reference: str,
    line_range: tuple[int, int] | None,
    char_offset: int,
    max_chars: int,
    jsonl: bool,
) -> str:
    """Characters `char_offset`.. of one line, as many as `max_chars` leaves room for."""
    if char_offset < 0:
        raise InvalidContent(f"char_offset={char_offset} must be 0 or more")
    if line_range is None or line_range[0] != line_range[1]:
        raise InvalidContent(
            f"char_offset={char_offset} needs one line: pass line_range=[n, n] naming it"
        )
    number = line_range[0]
    if number > len(lines):
        raise InvalidContent(
            f"line_range=[{number}, {number}] is past the end of {reference} "
            f"({plural(len(lines), 'line')})"
        )
    text = _shown(lines[number - 1], jsonl)
    if char_offset >= len(text) and text:
        raise InvalidContent(
            f"char_offset={char_offset} is past the end of line {number}, which has "
            f"{len(text):,} characters: pass a smaller char_offset"
        )
    piece = text[char_offset : char_offset + max_chars - _NOTE_ROOM - 20]
    end = char_offset + len(piece)
    note = (
        f"[characters {char_offset + 1:,}–{end:,} of {len(text):,}; pass "
        f"line_range=[{number}, {number}], char_offset={end} to continue]"
        if end < len(text)
        else f"[characters {char_offset + 1:,}–{end:,} of {len(text):,}: the end of the line]"
    )
    return f"{reference}: line {number}\n{numbered(number, piece)}\n{note}"


def _checked_range(line_range: tuple[int, int]) -> tuple[int, int]:
    try:
        first, last = (int(bound) for bound in line_range)
    except (TypeError, ValueError):
        raise InvalidContent(
            f"line_range={line_range!r} is not a pair of line numbers: pass [first, last]"
        ) from None
    if first < 1 or first > last:
        raise InvalidContent(
            f"line_range=[{first}, {last}] is impossible: pass [first, last] with "
            f"1 <= first <= last, counting lines from 1"
        )
    return first, last


def _refuse_binary(head: bytes | str, reference: str) -> None:
    why = binary_reason(head)
    if why is not None:
        raise InvalidContent(_binary_message(reference, why))


def _binary_message(reference: str, why: str) -> str:
    return (
        f"reference {reference!r} holds binary data ({why}), not text: it is probably a data "
        f"file (image, audio, PDF); refer to it by its path instead of retrieving it as text"
    )
