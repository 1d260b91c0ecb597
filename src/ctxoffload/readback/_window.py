"""The numbered-line window Read shows of a file: lines `offset`.., or one line from a character.

Files are streamed, so a 50 MB file (or a 50 MB line) costs about one chunk of memory: lines
before the window are counted, not kept, and a long line keeps only what is shown of it. A
JSONL log (context.jsonl) is shown one message per numbered line as the text the model saw
(`ctxoffload.text.decode_log_line`), its further lines indented under the number; a line too
long to decode (over `MAX_DECODED_LINE_BYTES`) is shown as its raw head. Every window stops
within its character budget, so the caller can say where to continue.
"""

from __future__ import annotations

import codecs
from typing import IO

from ..exceptions import ToolError
from ..text import MAX_DECODED_LINE_BYTES, decode_log_line
from ._arguments import quote
from ._lines import cut_line, line_text, numbered

__all__ = ["read_jsonl_window", "read_line_slice", "read_window", "rest_hint"]

# Files are streamed in chunks of this size, so a 50 MB file costs 1 MB of memory.
_CHUNK_BYTES = 1 << 20
_CONTINUED = f"{'':>6}\t"


def rest_hint(number: int, shown: int) -> str:
    """How Read shows the rest of line `number` after its first `shown` characters."""
    return f"(Read offset={number} char_offset={shown} shows the rest)"


def read_window(
    file: IO[bytes], offset: int, limit: int, max_line_chars: int, *, budget: int
) -> tuple[list[str], int]:
    """Stream `file`: format lines offset..offset+limit-1 within `budget` chars, count all.

    Returns:
        The formatted lines shown and the file's total number of lines.
    """
    shown: list[str] = []
    used = 0
    line_number = 1  # the line the next byte belongs to
    last_wanted = offset + limit - 1
    line: _LineText | None = None
    last_byte = b""
    while chunk := file.read(_CHUNK_BYTES):
        last_byte = chunk[-1:]
        position = 0
        while position < len(chunk):
            if line_number > last_wanted:
                line_number += chunk.count(b"\n", position)
                break
            if line_number < offset:
                newlines = chunk.count(b"\n", position)
                if line_number + newlines < offset:
                    line_number += newlines
                    break
                # Line `offset` starts in this chunk: step to it newline by newline (counting
                # the rest of the chunk again for every line skipped was quadratic: 1.6 s to
                # reach line 16,800 of a 2 MB file).
                while line_number < offset:
                    position = chunk.index(b"\n", position) + 1
                    line_number += 1
                continue
            if line is None:
                line = _LineText(max_line_chars)
            end = chunk.find(b"\n", position)
            if end < 0:
                line.feed(chunk[position:])
                break
            line.feed(chunk[position:end])
            formatted = line.format(line_number)
            line = None
            if used + len(formatted) + 1 > budget:
                # Stop showing; this line's newline is counted by the branch above.
                last_wanted = line_number - 1
                continue
            shown.append(formatted)
            used += len(formatted) + 1
            line_number += 1
            position = end + 1
    if line is not None:  # a last line without a newline, inside the window
        formatted = line.format(line_number)
        if used + len(formatted) + 1 <= budget:
            shown.append(formatted)
    total = line_number if last_byte not in (b"", b"\n") else line_number - 1
    return shown, total


class _LineText:
    """One line read in pieces: keeps its first `limit` characters and counts the rest."""

    def __init__(self, limit: int) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._limit = limit
        self._head: list[str] = []
        self._head_chars = 0
        self._cut = 0
        self._ends_with_cr = False

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        if not text:
            return
        self._ends_with_cr = text.endswith("\r")
        room = max(0, self._limit - self._head_chars)
        if room:
            piece = text[:room]
            self._head.append(piece)
            self._head_chars += len(piece)
        self._cut += max(0, len(text) - room)

    def format(self, number: int) -> str:
        self.feed(b"", final=True)
        head = "".join(self._head)
        cut = self._cut
        if self._ends_with_cr:  # a CRLF line ending is not part of the line
            if cut:
                cut -= 1
            else:
                head = head[:-1]
        if not cut:
            return numbered(number, head)
        return cut_line(number, head, cut, rest_hint(number, len(head)))


def read_jsonl_window(
    file: IO[bytes], offset: int, limit: int, max_line_chars: int, *, budget: int
) -> tuple[list[str], int]:
    """`read_window` for a JSONL log: each line shown as its message's readable text."""
    shown: list[str] = []
    used = 0
    number = 0
    last_wanted = offset + limit - 1
    while raw := file.readline(MAX_DECODED_LINE_BYTES + 1):
        number += 1
        oversize = not raw.endswith(b"\n") and len(raw) > MAX_DECODED_LINE_BYTES
        if oversize:
            _skip_rest_of_line(file)
        if number < offset or number > last_wanted:
            continue
        if oversize:
            head = raw[: max_line_chars * 4].decode("utf-8", "replace")[:max_line_chars]
            cut = MAX_DECODED_LINE_BYTES - len(head)
            formatted = cut_line(number, head, cut, rest_hint(number, len(head)))
        else:
            formatted = _format_message(number, _readable(line_text(raw)), max_line_chars)
        if used + len(formatted) + 1 > budget:
            last_wanted = number - 1
            continue
        shown.append(formatted)
        used += len(formatted) + 1
    return shown, number


def _readable(line: str) -> str:
    """A JSONL line as Read shows it: its message's lines, or the line as it is."""
    decoded = decode_log_line(line)
    return line if decoded is None else "\n".join(decoded)


def _format_message(number: int, body: str, max_chars: int) -> str:
    """One JSONL message: numbered first line, the others indented under it, cut if long."""
    head = body[:max_chars]
    cut = len(body) - len(head)
    first, *others = head.split("\n")
    rest = "".join(f"\n{_CONTINUED}{line}" for line in others)
    if not cut:
        return numbered(number, first) + rest
    return cut_line(number, first + rest, cut, rest_hint(number, len(head)), what="message")


def _skip_rest_of_line(file: IO[bytes]) -> None:
    while chunk := file.readline(_CHUNK_BYTES):
        if chunk.endswith(b"\n"):
            return


def read_line_slice(
    file: IO[bytes], path: str, number: int, start: int, budget: int, *, jsonl: bool
) -> str:
    """Characters `start`.. of line `number` (of a JSONL log: of its message's readable text).

    Raises:
        ToolError: the file has fewer lines, or the line fewer characters.
    """
    current = 0
    while raw := file.readline(MAX_DECODED_LINE_BYTES + 1):
        current += 1
        complete = raw.endswith(b"\n") or len(raw) <= MAX_DECODED_LINE_BYTES
        if current < number:
            if not complete:
                _skip_rest_of_line(file)
            continue
        if not complete:
            # Longer than any message: page through the raw text, reading on as needed.
            text = line_text(raw)
            while len(text) < start + budget and (more := file.readline(_CHUNK_BYTES)):
                text += line_text(more)
                if more.endswith(b"\n"):
                    break
            total = f"more than {len(text):,}"
        else:
            text = _readable(line_text(raw)) if jsonl else line_text(raw)
            total = f"{len(text):,}"
        if start >= len(text):
            raise ToolError(
                f"char_offset={start} is past the end of line {number} of {quote(path)}, "
                f"which has {total} characters: pass a smaller char_offset"
            )
        piece = text[start : start + budget]
        end = start + len(piece)
        note = (
            f"\n… characters {start + 1:,}–{end:,} of {total} in line {number}; call Read "
            f"with offset={number}, char_offset={end} to continue"
            if end < len(text) or not complete
            else f"\n… characters {start + 1:,}–{end:,} of line {number}: the end of the line"
        )
        return numbered(number, piece) + note
    raise ToolError(
        f"offset={number} is past the end of {quote(path)}, which has {current} lines: "
        f"call Read with an offset from 1 to {current}"
    )
