"""The memory tool's texts: a file's numbered lines, a folder's listing, and the two edits
(`str_replace`, `insert`), worded as Anthropic's memory tool words them so a model trained on
that tool reads ours as it reads its own.

Pure functions of text: the files are read and written by `_memory_files`. A file's bytes
are edited as text decoded with `surrogateescape`, so a byte that is not UTF-8 goes back to
disk as it was; what a model is shown has it as U+FFFD.
"""

from __future__ import annotations

import math

from ..exceptions import ToolError
from ._arguments import as_int, plural, quote
from ._lines import numbered, split_lines

__all__ = [
    "EDITED",
    "bounded",
    "encoded",
    "human_size",
    "inserted",
    "listing_header",
    "numbered_view",
    "replaced",
]

EDITED = "The memory file has been edited."
"""How `str_replace` begins its answer."""

# Lines of context shown around a replacement, before and after.
_SNIPPET_LINES = 4
# The lines where a repeated `old_str` starts, named in the error: at most this many.
_MAX_NAMED_LINES = 20
# Characters of `old_str` quoted back in an error.
_QUOTED_CHARS = 200


def listing_header(path: str) -> str:
    """The first line of a folder's listing."""
    return (
        f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden "
        "items and node_modules:"
    )


def human_size(size: int) -> str:
    """A size as `du -h` writes one, rounded up: `512B`, `5.5K`, `17K`, `2.0M`."""
    if size < 1024:
        return f"{size}B"
    value = float(size)
    for unit in "KMGT":
        value /= 1024
        if value < 1024 or unit == "T":
            break
    if value < 10:
        return f"{math.ceil(value * 10) / 10:.1f}{unit}"
    return f"{math.ceil(value)}{unit}"


def encoded(argument: str, text: object) -> bytes:
    """A text a model gave (`file_text`, `new_str`...) as the UTF-8 bytes written.

    Raises:
        ToolError: not a string, or a string holding a lone surrogate (`\\ud800`), which is
            no text and could not be written back as it was given.
    """
    if not isinstance(text, str):
        raise ToolError(f"{argument}={quote(text)} is not text: pass a string")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"{argument} holds {quote(text[exc.start : exc.end])} at character {exc.start:,}, "
            "a lone surrogate that is not text: pass the text without it"
        ) from None


def bounded(text: str, limit: int = 500) -> str:
    """The first `limit` characters of `text`, `…` when there is more: what an event keeps
    of a text removed or added (its length is kept whole beside it)."""
    return text if len(text) <= limit else text[:limit] + "…"


def numbered_view(
    path: str, data: bytes, view_range: object, *, budget: int, max_line_chars: int
) -> str:
    """`view` of a file: a header, then its lines numbered as every read-back tool numbers
    them, within `budget` characters, with a last line saying how to see the rest.

    Args:
        path: the file's `/memories/...` path.
        data: its bytes (text: the caller refused binary files).
        view_range: `[first, last]` (from 1, inclusive; `last` -1 for the end), or None.
        budget: the most characters of the answer.
        max_line_chars: the longest line shown; a longer one is cut, with a note.

    Raises:
        ToolError: a `view_range` that is not two line numbers of the file.
    """
    lines = split_lines(data.decode("utf-8", "replace"))
    first, last = _view_range(path, view_range, len(lines))
    header = f"Here's the content of {path} with line numbers:"
    if not lines:
        return f"{header}\n(the file is empty)"
    shown = [header]
    used = len(header)
    number = first
    while number <= last:
        text = lines[number - 1]
        if len(text) > max_line_chars:
            cut = len(text) - max_line_chars
            text = text[:max_line_chars] + f"… [line cut: {cut:,} more characters]"
        line = numbered(number, text)
        if used + len(line) + 1 > budget and number > first:
            break
        shown.append(line)
        used += len(line) + 1
        number += 1
    if number <= last:
        shown.append(
            f"… lines {first}–{number - 1} of {len(lines)} shown (output size cap reached); "
            f"call view with view_range=[{number}, {last}] to continue"
        )
    if not _is_utf8(data):
        shown.append(
            "(bytes of this file that are not UTF-8 are shown as \ufffd; str_replace and "
            "insert keep them as they are)"
        )
    return "\n".join(shown)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _view_range(path: str, view_range: object, total: int) -> tuple[int, int]:
    """The lines `[first, last]` a `view_range` asks for (all without one)."""
    if view_range is None:
        return 1, total
    if not isinstance(view_range, (list, tuple)) or len(view_range) != 2:
        raise ToolError(
            f"view_range={quote(view_range)} is not [first, last]: pass two line numbers, "
            "such as [1, 50] ([first, -1] reads to the end)"
        )
    first = as_int("view_range[0]", view_range[0], minimum=1)
    last = as_int("view_range[1]", view_range[1], minimum=-1)
    if first > max(total, 1):
        raise ToolError(
            f"view_range={quote(list(view_range))}: its first line {first} is past the end "
            f"of {path}, which has {plural(total, 'line')}: pass a first line from 1 to "
            f"{max(total, 1)}"
        )
    if last == -1 or last > total:
        last = total
    if last < first and total:
        raise ToolError(
            f"view_range={quote(list(view_range))}: its last line {last} is before its first "
            f"{first}: pass [first, last] with last >= first, or -1 for the end"
        )
    return first, last


def replaced(path: str, data: bytes, old_str: str, new_str: str) -> tuple[bytes, int, str]:
    """`data` with `old_str`, which must appear in it exactly once, replaced by `new_str`.

    Returns:
        The new bytes, the line where the replacement starts, and the answer: the edit's
        lines numbered with a few lines around them.

    Raises:
        ToolError: `old_str` is empty, missing, or appears more than once (the lines where
            it does are named).
    """
    if not old_str:
        raise ToolError(
            "old_str is empty: pass the exact text to replace, as view shows it (without the "
            "line numbers)"
        )
    text = data.decode("utf-8", "surrogateescape")
    start = text.find(old_str)
    shown = bounded(old_str, _QUOTED_CHARS)
    if start < 0:
        raise ToolError(
            f"No replacement was performed, old_str `{shown}` did not appear verbatim in {path}."
        )
    again = text.find(old_str, start + len(old_str))
    if again >= 0:
        raise ToolError(
            f"No replacement was performed. Multiple occurrences of old_str `{shown}` in "
            f"lines: {_lines_of(text, old_str, start)}. Please ensure it is unique"
        )
    changed = text[:start] + new_str + text[start + len(old_str) :]
    line = text.count("\n", 0, start) + 1
    last = line + new_str.count("\n")
    lines = split_lines(changed.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
    low = max(1, line - _SNIPPET_LINES)
    high = min(len(lines), last + _SNIPPET_LINES)
    snippet = "\n".join(numbered(n, lines[n - 1]) for n in range(low, high + 1))
    answer = f"{EDITED} Here is the snippet showing the change (with line numbers):\n{snippet}"
    return changed.encode("utf-8", "surrogateescape"), line, answer


def _lines_of(text: str, old_str: str, start: int) -> str:
    """`1, 3, 7`: the lines where `old_str` starts, from `start` on (at most 20 named)."""
    found: list[int] = []
    position = start
    while position >= 0:
        if len(found) == _MAX_NAMED_LINES:
            return ", ".join(map(str, found)) + ", …"
        found.append(text.count("\n", 0, position) + 1)
        position = text.find(old_str, position + len(old_str))
    return ", ".join(map(str, found))


def inserted(data: bytes, insert_line: object, insert_text: str) -> bytes:
    """`data` with `insert_text` as lines of their own after line `insert_line` (0: before
    the first line).

    Raises:
        ToolError: `insert_line` is not a whole number from 0 to the file's count of lines.
    """
    text = data.decode("utf-8", "surrogateescape")
    total = len(split_lines(text))
    try:
        after = int(insert_line)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        after = -1
    if isinstance(insert_line, bool) or after < 0 or after > total:
        raise ToolError(
            f"Invalid `insert_line` parameter: {quote(insert_line)}. It should be within the "
            f"range of lines of the file: [0, {total}]"
        )
    if after == total and text and not text.endswith("\n"):
        return (text + "\n" + insert_text).encode("utf-8", "surrogateescape")
    offset = 0
    for _ in range(after):
        offset = text.index("\n", offset) + 1
    piece = insert_text if insert_text.endswith("\n") else insert_text + "\n"
    return (text[:offset] + piece + text[offset:]).encode("utf-8", "surrogateescape")
