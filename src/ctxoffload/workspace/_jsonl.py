"""The append-only JSONL writer and its reader, with the commit rule that makes batches atomic.

Writers in many threads and many processes may append to one file at once. Each append is
one `write` of whole lines on an `O_APPEND` descriptor, made under an exclusive `flock` so
that the line numbers a writer reports are exact, and `fsync`ed before it returns.

A log written with `commit=True` (context.jsonl) has a commit record beside it,
`<name>.commit`: one fixed-width line `BYTES LINES CRC32` saying how many bytes (and newlines)
of the log belong to acknowledged batches. A writer updates it, under the same lock, after
its batch is written and fsynced, and only then returns. Readers stop at the committed length,
so a batch being written, or one cut by a kill -9, is never seen in part; the next writer
trims such a tail before appending. Messages already in the log (same `id`, same content,
see `message_key`) are not written again (the span where they are comes back), so a caller
that retries a batch after a crash does not duplicate it.

A log without the record (events.jsonl, or a context.jsonl from an older version) is read
whole: a writer killed mid-line leaves at most one torn line at the end; the next writer
starts on a fresh line, and the reader skips any line that is not complete JSON.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import OffloadError
from ._paths import LOG_FLAGS, READ_FLAGS, open_file, open_for_reading, same_entry, verify_file

__all__ = [
    "COMMIT_SUFFIX",
    "JsonlAppender",
    "count_newlines",
    "dumps_line",
    "iter_jsonl_fd",
    "read_log",
]

logger = logging.getLogger("ctxoffload")

COMMIT_SUFFIX = ".commit"
_CHUNK = 1 << 20
# How many bytes before the counted end of a file are kept to recognise it again: ext4 hands
# a purged session's inode number to the next new file, so the inode alone cannot tell that
# a file was replaced (and its line count must be redone).
_TAIL = 64
# A log replaced under an appender this many times in a row is being attacked, not purged.
_REOPEN_TRIES = 50
_RECORD_SIZE = 51


def _encode_record(committed: int, newlines: int) -> bytes:
    body = b"%020d %020d" % (committed, newlines)
    return body + b" %08x\n" % zlib.crc32(body)


def _decode_record(raw: bytes) -> tuple[int, int] | None:
    """(committed bytes, newlines) from a commit record, or None if absent or damaged."""
    if len(raw) != _RECORD_SIZE or not raw.endswith(b"\n"):
        return None
    body, _, crc = raw[:-1].rpartition(b" ")
    try:
        if int(crc, 16) != zlib.crc32(body):
            return None
        committed, newlines = (int(x) for x in body.split(b" "))
    except ValueError:
        return None
    return committed, newlines


def dumps_line(obj: Any) -> bytes:
    """Serialise one JSON value as a single line of UTF-8, ending in a newline.

    Text stays readable (not \\u-escaped) so `grep` finds it in the file; a string holding a
    lone surrogate cannot be UTF-8, and only then is the line written with ASCII escapes,
    which still round-trips exactly.
    """
    try:
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(obj, ensure_ascii=True, separators=(",", ":")) + "\n").encode()


def count_newlines(fd: int, start: int, end: int) -> int:
    """Count b'\\n' in bytes [start, end) of an open file, reading in chunks."""
    total = 0
    offset = start
    while offset < end:
        chunk = os.pread(fd, min(_CHUNK, end - offset), offset)
        if not chunk:
            break
        total += chunk.count(b"\n")
        offset += len(chunk)
    return total


def _lines_of(fd: int, start: int, end: int) -> Iterator[bytes]:
    """Yield the complete lines (without b'\\n') in bytes [start, end) of an open file."""
    # Parts of the current unfinished line, joined only once its newline arrives, so an
    # enormous single line costs O(its size), not O(size x chunks).
    parts: list[bytes] = []
    offset = start
    while offset < end:
        chunk = os.pread(fd, min(_CHUNK, end - offset), offset)
        if not chunk:
            break
        offset += len(chunk)
        if b"\n" not in chunk:
            parts.append(chunk)
            continue
        first, *lines, rest = chunk.split(b"\n")
        parts.append(first)
        yield b"".join(parts)
        yield from lines
        parts = [rest]


# Top-level fields that differ between two copies of one message (made at different times),
# left out of `message_key`.
_VOLATILE = frozenset({"timestamp", "created_at", "finished_at", "usage"})


def message_key(row: dict[str, Any]) -> str | None:
    """The key of idempotent offloading: a message's id and a hash of what it says.

    The same message offloaded again (an agent resumed after a crash, even one that rebuilt
    its messages with new timestamps) has the same key and is not written twice; a message
    whose id stays while its content grows (AgentScope keeps appending blocks to one reply
    `Msg`) has a new key, and each new version is written. None for a row without an id.
    """
    return row_line_and_key(row)[1]


def row_line_and_key(row: Any) -> tuple[bytes, str | None]:
    """A context row's line (`dumps_line`) and its `message_key`, serialising it once.

    The hash covers the row without its volatile fields (`timestamp`, `created_at`, ...);
    those are written after the rest, so the line is that text with them appended.
    """
    msg_id = row.get("id") if isinstance(row, dict) else None
    if not isinstance(msg_id, str) or not msg_id:
        return dumps_line(row), None
    volatile = {k: v for k, v in row.items() if k in _VOLATILE}
    stable = {k: v for k, v in row.items() if k not in _VOLATILE} if volatile else row
    head = dumps_line(stable)
    key = f"{msg_id}:{hashlib.sha256(head).hexdigest()[:20]}"
    if not volatile:
        return head, key
    return head[:-2] + b"," + dumps_line(volatile)[1:], key


def _scan_ids(fd: int, start: int, end: int, first_line: int, into: dict[str, int]) -> None:
    """Record the key (`message_key`) of every message line in bytes [start, end)."""
    for line_no, raw in enumerate(_lines_of(fd, start, end), first_line):
        if b'"id"' not in raw:
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        key = message_key(value) if isinstance(value, dict) else None
        if key is not None:
            into.setdefault(key, line_no)


@dataclass
class _Known:
    """What an appender last saw of one log: enough to continue counting from its end."""

    dev: int
    inode: int
    size: int
    newlines: int
    tail: bytes
    ids: dict[str, int] | None = field(default=None)


class JsonlAppender:
    """Appends whole lines to JSONL files and reports the line numbers it wrote.

    One instance is shared by a workspace. It keeps, per file, how many lines it has seen
    (and, for committed logs, the message ids and their lines), so an append costs
    O(bytes written by others since the last append), not O(file).

    Args:
        fsync: flush each append to stable storage before returning.
    """

    def __init__(self, *, fsync: bool = True) -> None:
        self.fsync = fsync
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._known: dict[str, _Known] = {}

    def _lock_for(self, path: str) -> threading.Lock:
        with self._guard:
            lock = self._locks.get(path)
            if lock is None:
                lock = self._locks[path] = threading.Lock()
            return lock

    def append(
        self,
        dir_fd: int,
        name: str,
        shown: str,
        lines: Sequence[bytes],
        ids: Sequence[str | None] | None = None,
        *,
        commit: bool = False,
    ) -> tuple[int, int]:
        """Append `lines` (each ending in b'\\n') to the log `name` in the directory `dir_fd`.

        Args:
            dir_fd: the directory, already opened without following links.
            name: the log's file name.
            shown: its path, for errors and logs.
            lines: the lines of one batch.
            ids: each line's message id (or None); with `commit`, a line whose id is already
                in the log is not written again.
            commit: keep the commit record `<name>.commit` (all-or-nothing batches).

        Returns:
            The first and last line numbers of the batch (1-based, inclusive).

        Raises:
            OffloadError: the log is a planted link or special file, or keeps being replaced.
            OSError: the write failed; the file is cut back to its size before the call.
        """
        if not lines or not all(line.endswith(b"\n") for line in lines):
            raise ValueError("lines must be a non-empty sequence of lines ending with a newline")
        # The thread lock keeps this process's writers from queueing inside flock; the flock
        # orders writers in different processes (it is held per open file description).
        with self._lock_for(shown):
            for _ in range(_REOPEN_TRIES):
                fd = open_file(dir_fd, name, shown, LOG_FLAGS, action="append to")
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    # Replaced or removed while this writer waited for the lock (a purge, a
                    # person): write to the file that is there now, never to an orphan.
                    if not same_entry(fd, dir_fd, name):
                        continue
                    verify_file(fd, shown)
                    if commit:
                        return self._append_committed(dir_fd, name, shown, fd, lines, ids)
                    return self._append_plain(shown, fd, b"".join(lines), len(lines))
                finally:
                    os.close(fd)
        raise OffloadError(
            f"{shown} was replaced {_REOPEN_TRIES} times while appending to it: "
            "something other than the workspace is rewriting it; stop it and retry",
            shown,
        )

    def _append_plain(self, key: str, fd: int, payload: bytes, n_lines: int) -> tuple[int, int]:
        st = os.fstat(fd)
        size = st.st_size
        newlines = self._newlines_before(key, fd, st, size)
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            # A writer died mid-line. Close that line so ours start clean; the reader will
            # skip the torn one.
            payload = b"\n" + payload
            newlines += 1
        self._write(key, fd, payload, size)
        end = size + len(payload)
        self._known[key] = _Known(
            st.st_dev, st.st_ino, end, newlines + n_lines, self._tail(fd, payload, end)
        )
        return newlines + 1, newlines + n_lines

    def _append_committed(
        self,
        dir_fd: int,
        name: str,
        shown: str,
        fd: int,
        lines: Sequence[bytes],
        ids: Sequence[str | None] | None,
    ) -> tuple[int, int]:
        st = os.fstat(fd)
        size = st.st_size
        commit_shown = shown + COMMIT_SUFFIX
        commit_fd = open_file(
            dir_fd, name + COMMIT_SUFFIX, commit_shown, os.O_RDWR | os.O_CREAT | READ_FLAGS
        )
        try:
            record = _decode_record(os.pread(commit_fd, _RECORD_SIZE + 1, 0))
            prefix = b""
            if record is None or record[0] > size:
                # No record (a log from before commit records, or one edited by hand): all of
                # it counts. Record that first, so readers never take the batch below for
                # old content.
                committed, newlines = size, self._newlines_before(shown, fd, st, size)
                if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                    prefix = b"\n"
                os.pwrite(commit_fd, _encode_record(committed, newlines), 0)
            else:
                committed, newlines = record
                if size > committed:
                    # A writer was killed between its write and its commit: that batch was
                    # never acknowledged (its messages are still in the caller's context).
                    logger.warning(
                        "%s: trimming %d bytes of a batch that was never committed",
                        shown,
                        size - committed,
                    )
                    os.ftruncate(fd, committed)
            index: dict[str, int] | None = None
            if ids is not None and any(i is not None for i in ids):
                index = self._index(shown, fd, st, committed, newlines, record is not None)
            else:
                # Nothing to look up: skip reading the log for ids; an index kept from
                # before still continues from where it ends.
                previous = self._known.get(shown)
                if (
                    previous is not None
                    and previous.ids is not None
                    and self._still(previous, fd, st, committed)
                ):
                    index = self._index(shown, fd, st, committed, newlines, record is not None)
            keep: list[bytes] = []
            kept_ids: list[str | None] = []
            found: list[int] = []
            for i, line in enumerate(lines):
                msg_id = ids[i] if ids is not None else None
                if msg_id is not None and index is not None and msg_id in index:
                    found.append(index[msg_id])
                else:
                    keep.append(line)
                    kept_ids.append(msg_id)
            if not keep:
                return min(found), max(found)
            payload = prefix + b"".join(keep)
            first = newlines + len(prefix) + 1
            end = committed + len(payload)
            end_newlines = newlines + payload.count(b"\n")
            self._write(shown, fd, payload, committed, commit=(commit_fd, end_newlines))
            if index is not None:
                for line_no, msg_id in enumerate(kept_ids, first):
                    if msg_id is not None:
                        index.setdefault(msg_id, line_no)
            self._known[shown] = _Known(
                st.st_dev, st.st_ino, end, end_newlines, self._tail(fd, payload, end), index
            )
            last = first + len(keep) - 1
            if found:
                return min(first, *found), max(last, *found)
            return first, last
        finally:
            os.close(commit_fd)

    def _index(
        self, key: str, fd: int, st: os.stat_result, committed: int, newlines: int, exact: bool
    ) -> dict[str, int]:
        """The ids in bytes [0, committed) of the log, continued from what was seen before."""
        known = self._known.get(key)
        if not (
            known is not None and known.ids is not None and self._still(known, fd, st, committed)
        ):
            known = _Known(st.st_dev, st.st_ino, 0, 0, b"", {})
        assert known.ids is not None
        if known.size < committed:
            _scan_ids(fd, known.size, committed, known.newlines + 1, known.ids)
        if exact:
            known.newlines = newlines
        known.size = committed
        self._known[key] = known
        return known.ids

    @staticmethod
    def _still(known: _Known, fd: int, st: os.stat_result, size: int) -> bool:
        """Whether `known` describes a prefix of the file open as `fd`."""
        return (
            (known.dev, known.inode) == (st.st_dev, st.st_ino)
            and known.size <= size
            and os.pread(fd, len(known.tail), known.size - len(known.tail)) == known.tail
        )

    @staticmethod
    def _tail(fd: int, payload: bytes, end: int) -> bytes:
        keep = min(_TAIL, end)
        return payload[-keep:] if len(payload) >= keep else os.pread(fd, keep, end - keep)

    def _write(
        self, key: str, fd: int, payload: bytes, size: int, *, commit: tuple[int, int] | None = None
    ) -> None:
        """Write and fsync `payload`; then, for a committed log, its commit record.

        `commit` is (commit record descriptor, newlines after the batch). On any failure the
        log is cut back to `size`, so a batch is never left half-written or uncommitted.
        """
        try:
            view = memoryview(payload)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if self.fsync:
                os.fsync(fd)
            if commit is not None:
                commit_fd, newlines = commit
                os.pwrite(commit_fd, _encode_record(size + len(payload), newlines), 0)
                if self.fsync:
                    os.fsync(commit_fd)
        except BaseException:
            self._cut_back(key, fd, size)
            raise

    def _cut_back(self, key: str, fd: int, size: int) -> None:
        # Leave nothing half-written: cut the file back to what it was.
        try:
            os.ftruncate(fd, size)
        except OSError:  # pragma: no cover - truncation to a smaller size should not fail
            logger.exception("could not cut %s back to %d bytes", key, size)
        self._known.pop(key, None)

    def _newlines_before(self, key: str, fd: int, st: os.stat_result, size: int) -> int:
        known = self._known.get(key)
        if known is not None and self._still(known, fd, st, size):
            return known.newlines + count_newlines(fd, known.size, size)
        return count_newlines(fd, 0, size)


def _committed_length(dir_fd: int, name: str, shown: str) -> int | None:
    """The committed length from `name`'s commit record, or None if it has none."""
    try:
        fd = open_file(dir_fd, name + COMMIT_SUFFIX, shown + COMMIT_SUFFIX, READ_FLAGS)
    except FileNotFoundError:
        return None
    try:
        # A record is rewritten in place by one small pwrite; a read that lands in the middle
        # of it fails its checksum, and is simply taken again.
        for _ in range(20):
            raw = os.pread(fd, _RECORD_SIZE + 1, 0)
            if not raw:
                return None
            record = _decode_record(raw)
            if record is not None:
                return record[0]
            time.sleep(0.001)
        return None
    finally:
        os.close(fd)


def iter_jsonl_fd(fd: int, end: int, shown: str) -> Iterator[tuple[int, Any]]:
    """Yield `(line_number, value)` for every complete, valid JSON line of bytes [0, end).

    A last line without its newline is a write in progress or a torn write: skipped. A line
    in the middle that is not JSON (a torn write that a later writer closed) is skipped
    with a warning.
    """
    for line_no, raw in enumerate(_lines_of(fd, 0, end), 1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            logger.warning("%s line %d is not valid JSON (torn write?): skipped", shown, line_no)
            continue
        yield line_no, value


def read_log(dir_fd: int, name: str, shown: str, *, commit: bool = False) -> list[Any]:
    """Every complete JSON value of the log `name` in `dir_fd`, in order.

    With `commit`, only the committed batches (see the module docstring). A missing log is
    empty; a planted link, a special file or a file with other hard links is refused.

    Raises:
        OffloadError: the entry is not a regular file with one link.
    """
    try:
        fd = open_for_reading(dir_fd, name, shown)
    except FileNotFoundError:
        return []
    try:
        end = os.fstat(fd).st_size
        if commit:
            committed = _committed_length(dir_fd, name, shown)
            if committed is not None:
                end = min(end, committed)
        return [value for _, value in iter_jsonl_fd(fd, end, shown)]
    finally:
        os.close(fd)
