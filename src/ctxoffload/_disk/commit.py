"""Committed logs and JSON lines: what a reader of a workspace's logs trusts of their bytes.

- The commit record beside a committed log (`context.jsonl.commit`): its codec, a read that
  retries one torn by a concurrent rewrite, and `readable_end`, where every reader stops.
- Lines: chunks, pieces and complete lines of an open file, and a range of lines.
- JSONL: complete lines up to the committed length, a torn last line skipped and counted,
  a line that is not JSON (or nests deeper than any workspace writes) skipped and counted
  (`JsonLines`); the same rule for a log held in memory (`parse_log`: an object store's
  segments, an in-memory workspace's files).

Light on purpose: no pydantic and no `typing` at run time, so `ctxoffload --help` and `grep`
keep their start-up figures; `json` and `zlib` are imported by what needs them (a search of
tool results needs neither: ~1.5 ms of its start-up).
"""

from __future__ import annotations

import itertools
import os
import time

from .layout import COMMIT_SUFFIX, is_committed_log
from .paths import open_for_reading, open_for_reading_stat, open_plain

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any

__all__ = [
    "COMMIT_RECORD_SIZE",
    "COMMIT_TAIL",
    "CommitRecord",
    "JsonLines",
    "check_line_range",
    "commit_mismatch",
    "decode_commit_record",
    "encode_commit_record",
    "iter_chunks",
    "iter_lines",
    "iter_pieces",
    "parse_lines",
    "parse_log",
    "read_commit",
    "read_log",
    "readable_end",
    "tail_checksum",
    "take_lines",
]


_CHUNK = 1 << 20
COMMIT_RECORD_SIZE = 60
# A record written before it carried the checksum of the log's bytes before its end.
_OLD_COMMIT_RECORD_SIZE = 51
# How many of the log's bytes before the committed end the record's identity covers.
COMMIT_TAIL = 64
# A commit record is rewritten in place by one small pwrite; a read that lands in the middle
# of it fails its checksum and is taken again, this many times, 1 ms apart.
_COMMIT_RETRIES = 20
# A record's first field, the committed bytes, and the space after it.
_COMMITTED_FIELD = b"%020d "
# What `_read_fields` returns for a record beginning as it was told to expect.
_AS_EXPECTED = (-1, -1, None)


# -- the commit record ------------------------------------------------------------------------


class CommitRecord(tuple[int, int]):
    """(committed bytes, newlines) from a commit record, and `tail`: the CRC-32 of the last
    `COMMIT_TAIL` bytes of the log before the committed end (None in a record written before
    records carried it). The tail ties the record to its log: one copied from another
    session does not match it."""

    tail: int | None

    def __new__(cls, committed: int, newlines: int, tail: int | None = None) -> CommitRecord:
        record = tuple.__new__(cls, (committed, newlines))  # (without `super()`'s object)
        record.tail = tail
        return record


def encode_commit_record(committed: int, newlines: int, tail: bytes | None = None) -> bytes:
    """The record saying the first `committed` bytes (`newlines` lines) of a log are committed:
    one fixed-width line `BYTES LINES TAIL CRC32`, where TAIL is the CRC-32 of `tail`, the
    last `COMMIT_TAIL` bytes of the log before `committed` (all of them when fewer). Without
    `tail`, the shorter `BYTES LINES CRC32` of older versions."""
    import zlib

    body = _COMMITTED_FIELD % committed + b"%020d" % newlines
    if tail is not None:
        body += b" %08x" % zlib.crc32(tail[-COMMIT_TAIL:])
    return body + b" %08x\n" % zlib.crc32(body)


def decode_commit_record(raw: bytes) -> tuple[int, int] | None:
    """(committed bytes, newlines) from a commit record, or None if absent or damaged.

    The pair is a `CommitRecord`, whose `tail` is the checksum of the log's last bytes before
    the committed end (None in a record of an older version), which `commit_mismatch` checks.
    """
    fields = _record_fields(raw)
    return None if fields is None else CommitRecord(*fields)


def _record_fields(raw: bytes) -> tuple[int, int, int | None] | None:
    """`decode_commit_record`'s fields as a plain tuple, (committed, newlines, tail), for
    `readable_end`, which needs no `CommitRecord` made for each log it reads."""
    if len(raw) not in (COMMIT_RECORD_SIZE, _OLD_COMMIT_RECORD_SIZE) or not raw.endswith(b"\n"):
        return None
    import zlib

    body, _, crc = raw[:-1].rpartition(b" ")
    try:
        if int(crc, 16) != zlib.crc32(body):
            return None
        fields = body.split(b" ")
        committed, newlines = int(fields[0]), int(fields[1])
        tail = int(fields[2], 16) if len(fields) == 3 else None
    except (ValueError, IndexError):
        return None
    return committed, newlines, tail


def read_commit(dir_fd: int, name: str, shown: str) -> tuple[int, int] | None:
    """(committed bytes, lines) from the commit record of the log `name` in `dir_fd`.

    None when the log has no record (events.jsonl, a log from before records) or its record
    stays damaged: then the whole log counts.

    Raises:
        Refused: the record is a planted link, a special file or hard-linked.
        OffloadError: it cannot be opened (EACCES...).
    """
    fields = _read_fields(dir_fd, name, shown)
    return None if fields is None else CommitRecord(*fields)


def _read_fields(
    dir_fd: int, name: str, shown: str, expected: bytes | None = None
) -> tuple[int, int, int | None] | None:
    """`read_commit`'s record as `_record_fields` gives it; `_AS_EXPECTED`, not parsed, for
    a record that begins with `expected`."""
    # The common record (a regular file with one link) at the cost of its open and fstat
    # alone (`open_plain`: one record for each session a search reads); anything else is
    # opened again, to be refused in `open_for_reading_stat`'s words, as if this were not
    # tried.
    opened = open_plain(dir_fd, name + COMMIT_SUFFIX)
    if opened is None:
        try:
            opened = open_for_reading_stat(dir_fd, name + COMMIT_SUFFIX, shown + COMMIT_SUFFIX)
        except FileNotFoundError:
            return None
    fd = opened[0]
    try:
        for _ in range(_COMMIT_RETRIES):
            raw = os.pread(fd, COMMIT_RECORD_SIZE + 1, 0)
            if not raw:
                return None
            if expected is not None and raw.startswith(expected):
                return _AS_EXPECTED
            fields = _record_fields(raw)
            if fields is not None:
                return fields
            time.sleep(0.001)
        return None
    finally:
        os.close(fd)


def commit_mismatch(
    fd: int, record: tuple[int, int], size: int, data: bytes | None = None
) -> str | None:
    """Why a commit record cannot describe the log open as `fd`, or None if it may.

    A record is trusted only where it ends: inside the log (`size` bytes, taken after the
    record was read, as writers extend a log before they commit it), on a line boundary
    (offset 0, or the byte before it a newline), and, when it carries one, with the checksum
    of the log's last bytes before its end (`CommitRecord.tail`). One that fails (copied
    from another session, edited, written by a damaged disk) is ignored: the whole log
    counts, and no writer trims into a line. Its line count is the writer's to check
    (`JsonlAppender`), as only it must count the lines.

    Args:
        fd: the log, open for reading.
        record: (committed bytes, lines) as `read_commit` found them; a `CommitRecord`'s
            `tail` is checked too.
        size: the log's size.
        data: the log's bytes, all `size` of them, where the reader holds them already: the
            record is checked against them (the bytes it shows), without reading the file
            again.
    """
    committed, lines = record
    return _mismatch(fd, committed, lines, getattr(record, "tail", None), size, data)


def _mismatch(
    fd: int, committed: int, lines: int, tail: int | None, size: int, data: bytes | None
) -> str | None:
    """`commit_mismatch` of a record's fields."""
    if committed > size:
        return f"says {committed:,} bytes are committed but the log holds only {size:,}"
    if committed > 0:
        before = (
            data[committed - 1 : committed] if data is not None else os.pread(fd, 1, committed - 1)
        )
        if before != b"\n":
            return f"says {committed:,} bytes are committed, which ends in the middle of a line"
    if lines > committed:
        return f"says {lines:,} lines are committed in {committed:,} bytes"
    if tail is not None and tail_checksum(fd, committed, data) != tail:
        return (
            "was written for other bytes than the log holds before its end (a record "
            "copied from another session?)"
        )
    return None


def tail_checksum(fd: int, end: int, data: bytes | None = None) -> int:
    """The CRC-32 of the last `COMMIT_TAIL` bytes of an open file before `end` (all of them
    when fewer): what ties a commit record to its log (`CommitRecord.tail`), and a watcher's
    place in a log to the bytes it read there. `data`: the file's bytes from its start to
    `end` at least, where they are in hand (taken from them, not read again)."""
    import zlib

    start = max(0, end - COMMIT_TAIL)
    return zlib.crc32(data[start:end] if data is not None else os.pread(fd, end - start, start))


def readable_end(
    dir_fd: int, name: str, shown: str, fd: int, size: int, data: bytes | None = None
) -> int:
    """Where every reader of the file `name` in `dir_fd` (open as `fd`, `size` bytes) stops
    reading: the one rule for the agent's Read and Grep, the retrieval tool, the workspace's
    `read_reference` and `read_lines`, and the `ctxoffload` commands.

    A committed log (context.jsonl) ends where its commit record says its acknowledged
    batches end, when `commit_mismatch` trusts the record: lines past it are a batch being
    written, or one a kill cut before its commit, which the next `initialize` trims and no
    reader may show. Any other file, or a log whose record is missing, cannot be read or is
    not trusted, ends at `size` (`ctxoffload verify` reports a record it does not trust).

    Args:
        dir_fd: the folder the file is in, open.
        name: the file's name in it.
        shown: how the file is named to people.
        fd: the file, open for reading.
        size: its size, taken after it was opened.
        data: its bytes, all `size` of them, where the reader read the file whole already
            (`commit_mismatch` checks the record against them).
    """
    if not is_committed_log(name):
        return size
    try:
        # A record whose first field says `size` is neither parsed nor checked: trusted or
        # not, the log ends at `size` (most logs a search reads are committed whole).
        fields = _read_fields(dir_fd, name, shown, _COMMITTED_FIELD % size)
    except OSError:  # Refused and OffloadError are OSErrors too
        return size
    if fields is None or fields is _AS_EXPECTED or _mismatch(fd, *fields, size, data) is not None:
        return size
    return fields[0]


# -- lines and JSON lines ---------------------------------------------------------------------


def iter_chunks(fd: int, start: int, end: int) -> Iterator[bytes]:
    """Bytes [start, end) of an open file (less if it ends first), read a megabyte at a time."""
    offset = start
    while offset < end:
        chunk = os.pread(fd, min(_CHUNK, end - offset), offset)
        if not chunk:
            break
        offset += len(chunk)
        yield chunk


def check_line_range(first: int, last: int) -> None:
    """Refuse a line range `read_lines` cannot mean: lines are numbered from 1."""
    if first < 1 or last < first:
        raise ValueError(
            f"lines {first} to {last}: lines are numbered from 1, and the last one asked for "
            "must not come before the first"
        )


def take_lines(chunks: Iterable[bytes], skip: int, count: int) -> bytes:
    """Lines `skip + 1` to `skip + count` of bytes that begin at the start of a line, given
    in chunks: each with its newline (the data's last line may lack one), fewer when the data
    ends first. Chunks past the last line wanted are not asked for, so a reader of a file
    reads from the first line's chunk to the last's and no further."""
    if count <= 0:
        return b""
    taken: list[bytes] = []
    for chunk in chunks:
        start = 0
        if skip:
            newlines = chunk.count(b"\n")
            if newlines < skip:
                skip -= newlines
                continue
            start = _after_newlines(chunk, 0, skip)
            skip = 0
        newlines = chunk.count(b"\n", start)
        if newlines < count:
            taken.append(chunk[start:])
            count -= newlines
            continue
        taken.append(chunk[start : _after_newlines(chunk, start, count)])
        break
    return b"".join(taken)


def _after_newlines(chunk: bytes, start: int, n: int) -> int:
    """The offset just after the `n`-th newline of `chunk` from `start` (it has that many)."""
    at = start - 1
    for _ in range(n):
        at = chunk.index(b"\n", at + 1)
    return at + 1


def iter_pieces(fd: int, start: int, end: int) -> Iterator[bytes]:
    """Bytes [start, end) of an open file in pieces of about a megabyte that each end at a
    line end (the last may not): for a search over whole pieces that counts lines. A line
    longer than a megabyte comes whole, in one piece, joined once: O(its size)."""
    parts: list[bytes] = []
    for chunk in iter_chunks(fd, start, end):
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:
            parts.append(chunk)
            continue
        parts.append(chunk[:cut])
        yield b"".join(parts)
        parts = [chunk[cut:]] if cut < len(chunk) else []
    if parts:
        yield b"".join(parts)


def iter_lines(fd: int, start: int, end: int, more: bytes = b"") -> Iterator[bytes]:
    """The complete lines (without b'\\n') in bytes [start, end) of an open file.

    `more` is taken as bytes following `end` (lines about to be written after them). A last
    line without its newline is not yielded.
    """
    # Parts of the current unfinished line, joined only once its newline arrives, so an
    # enormous single line costs O(its size), not O(size x chunks).
    parts: list[bytes] = []
    for chunk in itertools.chain(iter_chunks(fd, start, end), (more,) if more else ()):
        if b"\n" not in chunk:
            parts.append(chunk)
            continue
        first, *lines, rest = chunk.split(b"\n")
        parts.append(first)
        yield b"".join(parts)
        yield from lines
        parts = [rest]


class JsonLines:
    """The JSON values of a log's complete lines in bytes [0, end), counting what is skipped.

    Iterate for `(line_number, value)`. After iterating: `torn` says a last line without its
    newline was skipped (a write in progress, or one a kill cut); `corrupt` holds the numbers
    of complete lines that are not JSON (a torn write a later writer closed, a hand edit) or
    nest deeper than any workspace writes (`_depth.READ_DEPTH`: whatever reads the values
    never walks a value deep enough to exhaust the stack); blank lines are skipped silently.

    Args:
        fd: the log, open for reading.
        end: where to stop: the file's size, or the committed length of a committed log.
    """

    def __init__(self, fd: int, end: int) -> None:
        self.fd = fd
        self.end = end
        self.torn = False
        self.corrupt: list[int] = []
        self._held: bytes | None = None

    @classmethod
    def of_bytes(cls, raw: bytes) -> JsonLines:
        """The JSON lines of a log held in memory (read from a bucket, kept by a process)."""
        lines = cls(-1, len(raw))
        lines._held = raw
        return lines

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        # Here, not at the top: a search of tool results reads no JSON (~1.5 ms of start-up).
        from .._depth import load_json

        self.torn = False
        self.corrupt = []
        read = 0
        if self._held is None:
            complete = iter_lines(self.fd, 0, self.end)
        else:
            complete = iter(self._held.split(b"\n")[:-1])
        for number, raw in enumerate(complete, 1):
            read += len(raw) + 1
            if not raw.strip():
                continue
            try:
                value = load_json(raw)
            except ValueError:  # not JSON, or nested deeper than any workspace writes
                self.corrupt.append(number)
                continue
            yield number, value
        self.torn = read < self.end


def read_log(
    dir_fd: int,
    name: str,
    shown: str,
    *,
    commit: bool = False,
    warn: Callable[[str], None] | None = None,
) -> list[Any]:
    """Every complete JSON value of the log `name` in `dir_fd`, in order.

    With `commit`, only the committed batches: a batch being written, or one a kill cut, is
    never seen in part. A missing log is empty. Each line that is not JSON is skipped and
    said through `warn`.

    Raises:
        Refused: the log (or its commit record) is a planted link, a special file or
            hard-linked.
        OffloadError: it cannot be opened.
    """
    try:
        fd = open_for_reading(dir_fd, name, shown)
    except FileNotFoundError:
        return []
    try:
        # The record before the size: a writer extends the log before it commits, so a
        # record read first never lies past the end because of a concurrent append.
        record = read_commit(dir_fd, name, shown) if commit else None
        end = os.fstat(fd).st_size
        if record is not None:
            wrong = commit_mismatch(fd, record, end)
            if wrong is None:
                end = record[0]
            elif warn is not None:
                warn(f"{shown}: its commit record {wrong}: ignored, the whole log is read")
        return _values(JsonLines(fd, end), shown, warn)
    finally:
        os.close(fd)


def parse_log(raw: bytes, shown: str, *, warn: Callable[[str], None] | None = None) -> list[Any]:
    """Every complete JSON value of a log held in memory, by `read_log`'s rule: a torn last
    line is skipped, and so is each line that is not JSON, said through `warn`.

    Args:
        raw: the log's bytes (an object store's segments joined, an in-memory file).
        shown: how the log is named to people.
        warn: told about each line skipped as not JSON.
    """
    return [value for _, value in parse_lines(raw, 1, shown, warn=warn)]


def parse_lines(
    raw: bytes, first: int, shown: str, *, warn: Callable[[str], None] | None = None
) -> list[tuple[int, Any]]:
    """`parse_log` for lines read from line `first` of a log on (`read_lines`): each
    complete JSON value with its line number.

    Args:
        raw: the lines' bytes, the first of them line `first` of the log.
        first: the line number of the first line in `raw`.
        shown: how the log is named to people.
        warn: told about each line skipped as not JSON.
    """
    return _numbered(JsonLines.of_bytes(raw), first - 1, shown, warn)


def _values(lines: JsonLines, shown: str, warn: Callable[[str], None] | None) -> list[Any]:
    return [value for _, value in _numbered(lines, 0, shown, warn)]


def _numbered(
    lines: JsonLines, before: int, shown: str, warn: Callable[[str], None] | None
) -> list[tuple[int, Any]]:
    values = [(before + number, value) for number, value in lines]
    if warn is not None:
        for number in lines.corrupt:
            warn(f"{shown} line {before + number} is not valid JSON (torn write?): skipped")
    return values
