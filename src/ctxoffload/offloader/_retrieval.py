"""Reading offloaded content back: a line range, the lines matching a pattern, or the head.

`retrieve_offloaded_content` fetches a reference's bytes from any source that has
`read_reference` (LocalWorkspace, InMemoryWorkspace, ...); `format_retrieval` turns the
text into numbered lines. Lines are numbered exactly as the Read tool numbers them (split
on "\\n" only, a trailing "\\r" dropped), so a line number in a summary, a preview or a
retrieval always points at the same line of the file.

Errors: an unknown reference raises `InvalidReference` (from the source); a request that
cannot be answered (an invalid regex, an impossible line range, a negative context, binary
content) raises `InvalidContent`; impossible caps raise `ConfigError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from ..exceptions import ConfigError, InvalidContent
from ._jsonl_text import is_jsonl, message_text
from ._regex import Pattern, compile_pattern

__all__ = [
    "ReferenceSource",
    "decode_reference_text",
    "format_retrieval",
    "retrieve_offloaded_content",
]

# Content with a NUL byte in its first 8 KB is binary: the rule git, grep and Read use.
_SNIFF_CHARS = 8192
# Room kept under max_chars for the final note.
_NOTE_ROOM = 200
_MIN_CHARS = 500


class ReferenceSource(Protocol):
    """Anything that returns the stored bytes of a reference, such as a workspace."""

    async def read_reference(self, reference: str) -> bytes:
        """The bytes stored under `reference`.

        Raises:
            InvalidReference: the reference is unknown or points outside the workspace.
        """
        ...


async def retrieve_offloaded_content(
    source: ReferenceSource,
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

    See `format_retrieval` for what each combination of arguments shows. The regex is
    matched by RE2 in a worker thread: linear time whatever the pattern, the event loop free.

    Args:
        source: where the reference is stored (any object with `read_reference`).
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


def decode_reference_text(data: bytes, reference: str) -> str:
    """Decode stored bytes as UTF-8 text, refusing content that is binary.

    Args:
        data: the stored bytes.
        reference: named in the error message.

    Returns:
        The text; undecodable bytes become U+FFFD.

    Raises:
        InvalidContent: a NUL byte in the first 8 KB, or mostly undecodable bytes.
    """
    if b"\0" in data[:_SNIFF_CHARS]:
        raise InvalidContent(_binary_message(reference, "NUL bytes in its first 8 KB"))
    text = data.decode("utf-8", errors="replace")
    # U+FFFD that was in the data as valid UTF-8 is text, not a decoding failure.
    undecodable = text.count("\ufffd") - data.count("\ufffd".encode())
    if undecodable * 2 > len(text):
        raise InvalidContent(
            _binary_message(reference, f"{undecodable:,} of {len(text):,} characters not UTF-8")
        )
    return text


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
    line as its readable text (`[role]`, then its strings, newlines shown as ⏎), and a pattern
    matches that text as well as the raw line, so a string copied from what the model saw is
    found although the log stores it JSON-escaped.

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
        InvalidContent: `text` is binary (a NUL in its first 8 KB), the regex is invalid,
            `line_range` is not `(a, b)` with 1 <= a <= b, or `context_lines` is negative.
        ConfigError: `max_lines` < 1, `max_chars` < 500 or `max_line_chars` < 1.
    """
    if max_lines < 1:
        raise ConfigError(f"max_lines={max_lines} must be at least 1")
    if max_chars < _MIN_CHARS:
        raise ConfigError(f"max_chars={max_chars} must be at least {_MIN_CHARS}")
    if max_line_chars < 1:
        raise ConfigError(f"max_line_chars={max_line_chars} must be at least 1")
    if context_lines is not None and context_lines < 0:
        raise InvalidContent(f"context_lines={context_lines} must be 0 or more")
    if line_range is not None:
        line_range = _checked_range(line_range)
    regex = _compiled(pattern) if pattern is not None else None
    if "\0" in text[:_SNIFF_CHARS]:
        raise InvalidContent(_binary_message(reference, "NUL bytes in its first 8 KB"))

    lines = _split_lines(text)
    total = len(lines)
    if total == 0:
        return f"{reference} is empty (0 lines)."
    jsonl = is_jsonl(reference)
    shown_text = _jsonl_display if jsonl else _as_is
    if char_offset is not None:
        return _line_slice(lines, reference, line_range, char_offset, max_chars, shown_text)
    first, last = line_range if line_range is not None else (1, total)
    if line_range is None and regex is None and context_lines is not None:
        if context_lines == 0:
            return f"{reference}: {_plural(total, 'line')}; none shown (context_lines=0)."
        last = context_lines
    if first > total:
        return (
            f"{reference}: {_plural(total, 'line')}; line_range=[{first}, {last}] starts past "
            f"the end: pass a range within 1–{total}."
        )
    last = min(last, total)
    span = f"lines {first}–{last} of {total}"

    if regex is None:
        header = f"{reference}: {span}"
        indexes = list(range(first - 1, last))
        return _render(
            [(indexes, set())],
            lines,
            header,
            None,
            max_lines,
            max_chars,
            max_line_chars,
            text_of=shown_text,
            capped_note=lambda shown, _: (
                f"[capped: {len(indexes) - shown:,} more lines; pass "
                f"line_range=[{first + shown}, {min(last, first + shown + max_lines - 1)}] "
                f"to continue]"
            ),
        )

    matches = [
        index
        for index in range(first - 1, last)
        if regex.search(lines[index]) or (jsonl and _decoded_matches(lines[index], regex))
    ]
    searched = span if line_range is not None else _plural(total, "line")
    if not matches:
        return f"{reference}: no lines match {_quote(regex.pattern)} ({searched} searched)."
    context = context_lines or 0
    hunks: list[tuple[list[int], set[int]]] = []
    for index in matches:
        start, end = max(first - 1, index - context), min(last - 1, index + context)
        if hunks and start <= hunks[-1][0][-1] + 1:  # touching or overlapping: one hunk
            previous_end = hunks[-1][0][-1]
            hunks[-1][0].extend(range(previous_end + 1, end + 1))
            hunks[-1][1].add(index)
        else:
            hunks.append((list(range(start, end + 1)), {index}))
    header = (
        f"{reference}: {_plural(len(matches), 'matching line')} for {_quote(regex.pattern)} "
        f"({searched})"
    )
    return _render(
        hunks,
        lines,
        header,
        regex,
        max_lines,
        max_chars,
        max_line_chars,
        text_of=shown_text,
        capped_note=lambda shown, shown_matches: (
            f"[capped: {len(matches) - shown_matches:,} more matching lines; narrow the "
            f"pattern or pass line_range]"
            if shown_matches < len(matches)
            else f"[capped at {shown} lines: every matching line is shown, some context is "
            f"not; lower context_lines or pass line_range]"
        ),
        # As in grep: `--` only when context is shown; without it, line numbers show gaps.
        separate_hunks=context > 0,
    )


def _render(
    hunks: list[tuple[list[int], set[int]]],
    lines: list[str],
    header: str,
    regex: Pattern | None,
    max_lines: int,
    max_chars: int,
    max_line_chars: int,
    *,
    text_of: Callable[[str], str],
    capped_note: Callable[[int, int], str],
    separate_hunks: bool = False,
) -> str:
    """Header, hunks of numbered lines (marked when `regex` is given) and, if cut, a note.

    `capped_note(lines_shown, matches_shown)` writes the note.
    """
    out = [header]
    budget = max_chars - len(header) - 1 - _NOTE_ROOM
    # A line must fit in the budget even when max_chars is small.
    line_cap = max(1, min(max_line_chars, budget - 80))
    used = shown = shown_matches = 0
    capped = False
    for hunk_number, (indexes, matching) in enumerate(hunks):
        if hunk_number and separate_hunks:
            out.append("--")
            used += 3
        for index in indexes:
            is_match = index in matching
            formatted = _format_line(
                index + 1, text_of(lines[index]), line_cap, regex if is_match else None
            )
            if regex is not None:
                formatted = (">" if is_match else " ") + formatted
            if shown == max_lines or used + len(formatted) + 1 > budget:
                capped = True
                break
            out.append(formatted)
            used += len(formatted) + 1
            shown += 1
            shown_matches += is_match
        if capped:
            break
    if capped:
        if out[-1] == "--":
            out.pop()
        out.append(capped_note(shown, shown_matches))
    return "\n".join(out)


def _format_line(number: int, line: str, line_cap: int, regex: Pattern | None) -> str:
    """`{number:>6}` TAB line; a long line is cut, around the match when there is one."""
    if len(line) <= line_cap:
        return f"{number:>6}\t{line}"
    found = regex.search(line) if regex is not None else None
    if found is None or found.start() < line_cap * 3 // 4:
        cut = len(line) - line_cap
        return (
            f"{number:>6}\t{line[:line_cap]}… [line cut: {cut:,} more characters] (pass "
            f"line_range=[{number}, {number}], char_offset={line_cap} for the rest)"
        )
    # The match lies beyond the part a plain cut would show: show a window around it.
    start = min(found.start() - line_cap // 4, len(line) - line_cap)
    end = start + line_cap
    return (
        f"{number:>6}\t…{line[start:end]}{'…' if end < len(line) else ''} "
        f"[line has {len(line):,} characters; showing {start + 1:,}–{end:,}]"
    )


def _as_is(line: str) -> str:
    return line


def _jsonl_display(line: str) -> str:
    rendered = message_text(line)
    return line if rendered is None else " ⏎ ".join(rendered)


def _decoded_matches(line: str, regex: Pattern) -> bool:
    rendered = message_text(line)
    return rendered is not None and any(regex.search(text) for text in rendered)


def _line_slice(
    lines: list[str],
    reference: str,
    line_range: tuple[int, int] | None,
    char_offset: int,
    max_chars: int,
    text_of: Callable[[str], str],
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
            f"({_plural(len(lines), 'line')})"
        )
    text = text_of(lines[number - 1])
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
    return f"{reference}: line {number}\n{number:>6}\t{piece}\n{note}"


def _split_lines(text: str) -> list[str]:
    """Lines as Read numbers them: split on "\\n" only, a trailing "\\r" dropped."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


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


def _compiled(pattern: str) -> Pattern:
    # RE2: linear time whatever the pattern, so `(a+)+$` cannot hang the agent.
    return compile_pattern(pattern)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _quote(value: str, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _binary_message(reference: str, why: str) -> str:
    return (
        f"reference {reference!r} holds binary data ({why}), not text: it is probably a data "
        f"file (image, audio, PDF); refer to it by its path instead of retrieving it as text"
    )
