"""Numbered lines, as every read-back tool shows them.

A line is numbered like `cat -n` (`{number:>6}` and a tab), and lines are counted the same
way everywhere: split at "\\n" only, a trailing "\\r" dropped. So a line number in a summary,
a preview, a Read, a Grep or a retrieval always points at the same line of the file. A line
too long to show is cut with a marker saying how much is left and how to read it, or, around
a match, shown as a window with the match in it.
"""

from __future__ import annotations

from .._search.engine import lines_as_read

__all__ = [
    "NOTE_ROOM",
    "clip_around",
    "cut_line",
    "line_text",
    "lines_as_read",
    "numbered",
    "split_lines",
]

NOTE_ROOM = 300
"""Room the file tools keep free under their output cap for footers and notes."""


def numbered(number: int, text: str) -> str:
    """`{number:>6}` TAB text."""
    return f"{number:>6}\t{text}"


def cut_line(number: int, head: str, cut: int, rest: str, what: str = "line") -> str:
    """A numbered line cut after `head`, with the count of characters left out.

    Args:
        number: the line's number.
        head: the part shown.
        cut: how many characters are left out.
        rest: how to read them, in parentheses (each tool says it in its own arguments).
        what: what was cut: a "line", or a JSONL "message".
    """
    return numbered(number, head) + f"… [{what} cut: {cut:,} more characters] {rest}"


def clip_around(text: str, span: tuple[int, int] | None, max_chars: int) -> str:
    """`text` cut to `max_chars`, around the match at `span` when there is one.

    A cut text says how long the line is and which characters are shown.
    """
    if len(text) <= max_chars:
        return text
    start = 0
    if span is not None:
        start = max(0, min(span[0] - max_chars // 4, len(text) - max_chars))
    end = min(start + max_chars, len(text))
    return (
        ("…" if start else "")
        + text[start:end]
        + ("…" if end < len(text) else "")
        + f" [line has {len(text):,} characters; showing {start + 1:,}–{end:,}]"
    )


def split_lines(text: str) -> list[str]:
    """The lines of `text` as they are numbered: split on "\\n" only, a trailing "\\r" dropped."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def line_text(raw: bytes) -> str:
    """One line read from a file, decoded (bad bytes as U+FFFD), without its line ending."""
    text = raw.decode("utf-8", "replace").rstrip("\n")  # a line holds one newline at most
    return text[:-1] if text.endswith("\r") else text
