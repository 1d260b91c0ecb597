"""The one search engine: the lines of a file that a pattern matches, with context lines,
within a time bound (a JSONL log's are `log.py`'s).

The agent's Grep, the retrieval tool and `ctxoffload grep` (and through it the viewer's
search) all find their lines here; each only adapts its arguments and writes its answer. A
pattern is compiled once (`matcher.compile_matcher`: RE2, or Python's `re` under a deadline
where the door allows it) and judged on lines of bytes read as the agent's Read reads them:
split at "\\n" only, a line's trailing "\\r" not part of it (`lines_as_read`).

A line that is not UTF-8 is judged by THE rule of every door: each byte that is not UTF-8 is
to a pattern the U+FFFD the agent's Read shows for it, so `ok . end` finds `ok \\xff end`
and a U+FFFD copied from what Read showed finds its line; a pattern that holds the bytes
themselves (only a command line can give one) finds them too (`_judge_as_shown`). ripgrep,
which `ctxoffload grep` may hand a file to, reads such a byte as no character: it is given a
file that is not UTF-8 (`is_utf8_file`) only for a pattern that cannot match a U+FFFD.

A file is read in pieces of about a megabyte cut at line ends, into one reused buffer; in a
piece that is UTF-8, the pattern (or the literal every match holds) is searched across the
whole piece and only the lines it lands on are judged, so the lines between are never looked
at one by one. Memory stays bounded by the piece, or by the longest line.
"""

from __future__ import annotations

import codecs
import os
import time
from collections.abc import Callable, Generator, Iterable, Iterator

from .matcher import Matcher, every_line, literal_finder, plain_finder

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "Line",
    "SearchTimedOut",
    "is_utf8_file",
    "lines_as_read",
    "search_bytes",
    "search_lines",
]

Line = tuple[int, bytes, bool]
"""One line found: its number (from 1), its bytes without the line end, whether it matches
(a context line does not)."""

_PIECE = 1 << 20
_SAMPLE = 1 << 18  # bytes of a file's first piece that choose where a literal search starts
# Below this, a piece's literal is found with `bytes.find`: choosing the rarest byte and
# compiling an RE2 for it (`literal_finder`) cost ~60 us, more than a small file's whole search.
_SMALL_PIECE = 1 << 16
_NEWLINE = ord("\n")
_MISSES = 1024  # lines judged in vain between two looks at the clock and at the literal


class SearchTimedOut(Exception):
    """The search passed its deadline."""


def search_lines(
    file: Any,
    matcher: Matcher,
    *,
    context: int = 0,
    deadline: float | None = None,
) -> Iterator[Line]:
    """The lines of `file` that `matcher` matches, each with up to `context` lines before and
    after it (touching windows run together, as `grep -C` shows them).

    Args:
        file: an open binary file, read with `readinto` from where it stands to its end.
        matcher: the compiled pattern.
        context: lines given around each match.
        deadline: a `time.monotonic()` after which the search stops, checked between pieces
            and every `_MISSES` lines judged in vain.

    Yields:
        Each matching line and each context line, in order, once.

    Raises:
        SearchTimedOut: the deadline passed.
        OSError: the file could not be read.
    """
    pieces = _Pieces(matcher, context, deadline)
    buffer = bytearray(_buffer_size(file))
    filled = 0  # bytes of `buffer` holding file content
    at_eof = False
    while not at_eof:
        if deadline is not None and time.monotonic() > deadline:
            raise SearchTimedOut
        with memoryview(buffer) as free:
            read = file.readinto(free[filled:]) or 0
        filled += read
        at_eof = read == 0
        end = filled if at_eof else buffer.rfind(b"\n", 0, filled) + 1
        if end == 0:
            if filled == len(buffer):
                buffer.extend(bytes(len(buffer)))  # one line longer than the buffer
            continue
        yield from pieces.search(buffer, end, at_eof)
        buffer[: filled - end] = buffer[end:filled]
        filled -= end


def search_bytes(data: bytes, matcher: Matcher, *, context: int = 0) -> Iterable[Line]:
    """`search_lines` over a whole file already read (`data`, all of it): the same lines,
    without a buffer to fill. What `ctxoffload grep` uses for a small file, which it reads in
    one call."""
    literal = matcher.literal
    is_plain = data.isascii() and 0x0D not in data  # (no "\r": an int is one memchr)
    if not context and matcher.is_literal and literal is not None and is_plain:
        return _lines_holding(data, literal)
    return _Pieces(matcher, context, None).search(data, len(data), True)


def _lines_holding(data: bytes, literal: bytes) -> list[Line]:
    """The lines of `data` holding `literal`, each a match: what `_Pieces.search` finds in
    ASCII without a carriage return for a pattern that is `literal` alone (`is_literal`),
    without context lines, here without its generator and its buffers (most of a small
    file's search: a session's two-line tool result)."""
    found: list[Line] = []
    at = data.find(literal)
    number, counted_at = 1, 0
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        if end < 0:
            end = len(data)
        number += data.count(b"\n", counted_at, start)
        counted_at = start
        found.append((number, data[start:end], True))
        at = data.find(literal, end + 1)
    return found


def _buffer_size(file: Any) -> int:
    """A piece's size, or less for a smaller file: a folder of small files is searched
    without a megabyte to allocate and clear for each."""
    try:
        size = os.fstat(file.fileno()).st_size
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return _PIECE
    return max(1, min(_PIECE, size + 1))


class _Pieces:
    """The search of one file's pieces, and what passes from one piece to the next: the
    number of the line starting the next, context lines still owed after a match, and the
    last `context` lines, which may come before a match at the next one's start."""

    def __init__(self, matcher: Matcher, context: int, deadline: float | None) -> None:
        self.matcher = matcher
        self.deadline = deadline
        self.misses = self.matches = 0  # candidates judged not to match, and that match
        self.context = context
        self.first_line = 1
        self.after = 0  # context lines still owed after the last match
        self.shown_to = 0  # the last line number given
        self.tail: list[tuple[int, bytes]] = []  # the previous piece's last lines
        self.find: Callable[[bytes | bytearray, int, int], int | None] | None = None

    def search(self, buffer: bytes | bytearray, end: int, at_eof: bool) -> Iterator[Line]:
        """The lines of `buffer[:end]` (whole lines, but for the file's last) to give."""
        matcher = self.matcher
        if self.find is None and matcher.literal is not None:
            if at_eof and self.first_line == 1 and end < _SMALL_PIECE:  # a small file, whole
                self.find = plain_finder(matcher.literal)
            else:
                self.find = literal_finder(matcher.literal, buffer[: min(end, _SAMPLE)])
        # A piece with carriage returns is searched as the agent's tools read it.
        text: bytes | bytearray = buffer
        size = end
        if buffer.find(b"\r", 0, end) >= 0:
            text = lines_as_read(bytes(buffer[:end]), ends_file=at_eof)
            size = len(text)
        judge: Callable[[bytes], bool] = matcher.matches_line
        find = self.find
        with memoryview(text)[:size] as piece:
            search: Callable[[Any, int], int | None] = matcher.search
            # All of `text` ASCII, the piece is (a tenth of the time of decoding it).
            if not (text.isascii() or _is_utf8(piece)):
                judge, search, find = _judge_as_shown(matcher), every_line, None
            pos, counted_at, line_no = 0, 0, self.first_line
            if self.after:  # owed by a match at the previous piece's end
                pos, line_no = yield from self._after(text, piece, 0, size, line_no, judge)
                counted_at = pos
            while pos < size:
                # Candidates: lines holding the pattern's literal (judged whole below), or
                # where the pattern matches in the piece.
                start = find(text, pos, size) if find is not None else search(piece, pos)
                if start is None or (start == size and text[size - 1] == _NEWLINE):
                    break  # (an empty match after the last newline is on no line)
                line_start = text.rfind(b"\n", pos, start) + 1 or pos
                line_end = _line_end(text, start, size)
                line = bytes(piece[line_start:line_end])
                pos = line_end + 1
                if not judge(line):
                    # A match that ran across lines, or a line holding the literal only.
                    self.misses += 1
                    if not self.misses % _MISSES:
                        find = self._missed(find)
                    continue
                self.matches += 1
                line_no += text.count(b"\n", counted_at, line_start)
                counted_at = line_start
                if self.context:
                    yield from self._before(text, piece, line_start, line_no)
                yield line_no, line, True
                if self.context:
                    self.shown_to, self.after = line_no, self.context
                    pos, line_no = yield from self._after(
                        text, piece, pos, size, line_no + 1, judge
                    )
                    counted_at = pos
            self.first_line = line_no + text.count(b"\n", counted_at, size)
            if self.context and not at_eof:
                self.tail = self._last_lines(text, piece, size)

    def _missed(
        self, find: Callable[[bytes | bytearray, int, int], int | None] | None
    ) -> Callable[[bytes | bytearray, int, int], int | None] | None:
        """After each `_MISSES` lines judged in vain: stop at the deadline, which no piece
        boundary may come soon enough to check; and drop a literal that most lines hold
        without matching (RE2 then searches the whole pattern across the piece, in C)."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise SearchTimedOut
        if find is not None and self.matcher.engine == "re2" and self.misses > self.matches:
            self.find = find = None
        return find

    def _after(
        self,
        text: bytes | bytearray,
        piece: memoryview,
        pos: int,
        size: int,
        line_no: int,
        judge: Callable[[bytes], bool],
    ) -> Generator[Line, None, tuple[int, int]]:
        """The context lines owed after a match, from line `line_no` starting at `pos` on (a
        line that matches owes `context` more); returns where the next line starts, and its
        number."""
        while self.after and pos < size:
            line_end = _line_end(text, pos, size)
            line = bytes(piece[pos:line_end])
            matched = judge(line)
            yield line_no, line, matched
            self.after = self.context if matched else self.after - 1
            self.shown_to = line_no
            pos, line_no = line_end + 1, line_no + 1
        return pos, line_no

    def _before(
        self, text: bytes | bytearray, piece: memoryview, line_start: int, line_no: int
    ) -> Iterator[Line]:
        """The context lines just above line `line_no` (starting at `line_start`) that were
        not given already: from this piece, then from the previous one's tail."""
        before: list[tuple[int, bytes]] = []
        cursor, number = line_start, line_no
        while len(before) < self.context and number - 1 > self.shown_to and cursor > 0:
            prev_start = text.rfind(b"\n", 0, cursor - 1) + 1
            before.append((number - 1, bytes(piece[prev_start : cursor - 1])))
            number, cursor = number - 1, prev_start
        if cursor == 0:
            wanted = self.context - len(before)
            older = [(n, t) for n, t in self.tail if self.shown_to < n < number]
            before.extend(reversed(older[-wanted:] if wanted > 0 else []))
        for number, line in reversed(before):
            yield number, line, False

    def _last_lines(
        self, text: bytes | bytearray, piece: memoryview, size: int
    ) -> list[tuple[int, bytes]]:
        """The last `context` lines up to this piece's end (which is a line end), numbered."""
        lines: list[tuple[int, bytes]] = []
        cursor, number = size - 1, self.first_line - 1
        while len(lines) < self.context and cursor >= 0:
            start = text.rfind(b"\n", 0, cursor) + 1
            lines.append((number, bytes(piece[start:cursor])))
            number, cursor = number - 1, start - 1
        lines.reverse()
        if len(lines) < self.context:
            lines = self.tail[len(lines) - self.context :] + lines
        return lines


def _line_end(text: bytes | bytearray, start: int, size: int) -> int:
    end = text.find(b"\n", start, size)
    return size if end < 0 else end


def _is_utf8(piece: memoryview) -> bool:
    try:
        str(piece, "utf-8")
    except UnicodeDecodeError:
        return False
    return True


def is_utf8_file(fd: int) -> bool:
    """Whether the file open at `fd` is UTF-8 throughout, read with `preadv` (its offset
    stays where it is) a piece at a time into one buffer. A piece of ASCII is passed over
    without decoding: 100 MB of ASCII takes about 17 ms, of text that is not ASCII ~60 ms."""
    buffer = bytearray(_PIECE)
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    try:
        with memoryview(buffer) as view:
            while read := os.preadv(fd, [buffer], offset):
                offset += read
                if read == _PIECE and buffer.isascii() and not decoder.getstate()[0]:
                    continue  # (no character left open by the piece before)
                decoder.decode(view[:read])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _judge_as_shown(matcher: Matcher) -> Callable[[bytes], bool]:
    """Whether a line matches as it is, or as the tools show it (each byte that is not
    UTF-8 a U+FFFD): the rule for a line that is not UTF-8 (see the module)."""

    def judge(line: bytes) -> bool:
        if matcher.matches_line(line):
            return True
        shown = line.decode("utf-8", "replace").encode("utf-8")
        return shown != line and matcher.matches_line(shown)

    return judge


def lines_as_read(piece: bytes, *, ends_file: bool) -> bytes:
    """`piece` (whole lines of a file) as the read-back tools number and match its lines:
    each line's one trailing "\\r" before its "\\n" dropped, and the file's last "\\r" too
    when `ends_file` (its last line has no newline). Every "\\n" stays, so line numbers do
    (a last line of only "\\r" becomes an empty line ended by "\\n").

    The one rule for searching many lines at once, which the agent's Grep and
    `ctxoffload grep` share: a line is searched as `line_text` and Read show it, so
    `done$` finds `done\\r\\n` in both, and `done\\s` does not.
    """
    if b"\r" not in piece:
        return piece
    piece = piece.replace(b"\r\n", b"\n")
    if not ends_file or not piece.endswith(b"\r"):
        return piece
    if piece[-2:-1] in (b"", b"\n"):
        # A last line that held only "\r" is still a line, empty: ended by a newline so,
        # as "" after the last newline would be no line at all.
        return piece[:-1] + b"\n"
    return piece[:-1]
