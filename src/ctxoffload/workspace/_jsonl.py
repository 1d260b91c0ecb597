"""The append-only JSONL writer and its reader.

Writers in many threads and many processes may append to one file at once. Each append is
one `write` of whole lines on an `O_APPEND` descriptor, made under an exclusive `flock` so
that the line numbers a writer reports are exact, and `fsync`ed before it returns. A writer
killed mid-write leaves at most one torn line at the end; the next writer starts its own
lines on a fresh line, and the reader skips any line that is not complete JSON.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["JsonlAppender", "count_newlines", "dumps_line", "iter_jsonl", "read_jsonl"]

logger = logging.getLogger("ctxoffload")

_CHUNK = 1 << 20
# How many bytes before the counted end of a file are kept to recognise it again: ext4 hands
# a purged session's inode number to the next new file, so the inode alone cannot tell that
# a file was replaced (and its line count must be redone).
_TAIL = 64


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


@dataclass
class _LineCount:
    inode: int
    size: int
    newlines: int
    tail: bytes


class JsonlAppender:
    """Appends whole lines to JSONL files and reports the line numbers it wrote.

    One instance is shared by a workspace. It keeps, per file, how many lines it has seen,
    so an append costs O(bytes written by others since the last append), not O(file).

    Args:
        fsync: flush each append to stable storage before returning.
    """

    def __init__(self, *, fsync: bool = True) -> None:
        self.fsync = fsync
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._counts: dict[str, _LineCount] = {}

    def _lock_for(self, path: str) -> threading.Lock:
        with self._guard:
            lock = self._locks.get(path)
            if lock is None:
                lock = self._locks[path] = threading.Lock()
            return lock

    def append(self, path: Path, payload: bytes) -> tuple[int, int]:
        """Append `payload` (one or more lines, each ending in b'\\n') to `path`.

        Returns:
            The first and last line numbers written (1-based, inclusive).

        Raises:
            OSError: the write failed; the file is cut back to its size before the call.
        """
        if not payload.endswith(b"\n"):
            raise ValueError("payload must end with a newline")
        key = str(path)
        n_lines = payload.count(b"\n")
        # The thread lock keeps this process's writers from queueing inside flock; the flock
        # orders writers in different processes (it is held per open file description).
        with self._lock_for(key):
            fd = os.open(key, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    return self._append_locked(key, fd, payload, n_lines)
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def _append_locked(self, key: str, fd: int, payload: bytes, n_lines: int) -> tuple[int, int]:
        st = os.fstat(fd)
        size = st.st_size
        newlines = self._newlines_before(key, fd, st.st_ino, size)
        torn_tail = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        if torn_tail:
            # A writer died mid-line. Close that line so ours start clean; the reader will
            # skip the torn one.
            payload = b"\n" + payload
            newlines += 1
        try:
            view = memoryview(payload)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if self.fsync:
                os.fsync(fd)
        except BaseException:
            # Leave nothing half-written: cut the file back to what it was.
            try:
                os.ftruncate(fd, size)
            except OSError:  # pragma: no cover - truncation to a smaller size should not fail
                logger.exception("could not cut %s back to %d bytes", key, size)
            self._counts.pop(key, None)
            raise
        end = size + len(payload)
        keep = min(_TAIL, end)
        tail = payload[-keep:] if len(payload) >= keep else os.pread(fd, keep, end - keep)
        self._counts[key] = _LineCount(st.st_ino, end, newlines + n_lines, tail)
        return newlines + 1, newlines + n_lines

    def _newlines_before(self, key: str, fd: int, inode: int, size: int) -> int:
        known = self._counts.get(key)
        if (
            known is not None
            and known.inode == inode
            and known.size <= size
            and os.pread(fd, len(known.tail), known.size - len(known.tail)) == known.tail
        ):
            return known.newlines + count_newlines(fd, known.size, size)
        return count_newlines(fd, 0, size)


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield `(line_number, value)` for every complete, valid JSON line of `path`.

    A last line without its newline is a write in progress or a torn write: skipped. A line
    in the middle that is not JSON (a torn write that a later writer closed) is skipped
    with a warning. A missing file yields nothing.
    """
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; a generator cannot use `with` here
    except FileNotFoundError:
        return
    with f:
        # Parts of the current unfinished line, joined only once its newline arrives, so an
        # enormous single line costs O(its size), not O(size x chunks).
        parts: list[bytes] = []
        line_no = 0
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                break
            if b"\n" not in chunk:
                parts.append(chunk)
                continue
            first, *lines, rest = chunk.split(b"\n")
            parts.append(first)
            lines.insert(0, b"".join(parts))
            parts = [rest]
            for raw in lines:
                line_no += 1
                if not raw.strip():
                    continue
                try:
                    value = json.loads(raw)
                except ValueError:
                    logger.warning(
                        "%s line %d is not valid JSON (torn write?): skipped", path, line_no
                    )
                    continue
                yield line_no, value


def read_jsonl(path: Path) -> list[Any]:
    """Every complete JSON value of `path`, in order (see `iter_jsonl`)."""
    return [value for _, value in iter_jsonl(path)]
