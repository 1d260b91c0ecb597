"""The append-only JSONL writer and its reader, with the commit rule that makes batches atomic.

Writers in many threads and many processes may append to one file at once. Each append is
one `write` of whole lines on an `O_APPEND` descriptor, made under an exclusive `flock` so
that the line numbers a writer reports are exact, and `fsync`ed before it returns.

Group commit. An `fsync` costs about as much for one line as for a thousand, so threads of one
process appending to the same log share it. Callers for one log form a queue; the first in it
(the leader) opens the file and takes the flock, then takes the batches queued behind it at
that moment (in arrival order, stopping at `_GROUP_BYTES`; it never waits for more to arrive)
and writes them all with one `write`, one `fsync` and one update of the commit record. Each
batch gets the lines and the outcome it would have had if the batches had been appended one
after another in that order: the file holds the same bytes, line numbers are the same, and a
message already in the log or in an earlier batch of the group is not written again. A caller
returns only once the `fsync` covering its batch is done. If the grouped write fails (a full
disk), the file is cut back and each batch is tried again on its own, so a small batch does
not fail because it shared a write with a huge one. Then the leader leaves the queue, its
followers wake with their results, and the next batch in the queue leads. Processes do not
group with each other; the flock orders them as before. With `fsync` off each batch is
written alone under a plain thread lock: there is no sync to share, what a group still saves
(opens, locks, the commit record) is small (bench/bench_group_commit.py: 1.1x to 1.5x for
8 threads with a no-op sync, nothing clear for 2), and a lone writer, the usual case, is
better served by the plain lock, which costs it about 2 us less per append than the queue.

A batch appended with `sync=False` (a model call's record or a compaction's decision in
events.jsonl, `UNSYNCED_KINDS`) is written the same way but not fsynced, in no group: in the
file when the call returns, for every reader and across a kill of the process, and on stable
storage once the next synced append to the same log has returned (an fsync covers all that
was written to the file before it).

A log written with `commit=True` (context.jsonl) has a commit record beside it,
`<name>.commit`: one fixed-width line `BYTES LINES CRC32` saying how many bytes (and newlines)
of the log belong to acknowledged batches. A writer updates it, under the same lock, after
its batches are written and fsynced, and only then returns. Readers stop at the committed
length, so a group being written, or one cut by a kill -9, is never seen in part; the next
writer trims such a tail before appending. Messages already in the log (same `id`, same
content, see `rows.message_key`) are not written again (the span where they are comes back), so a
caller that retries a batch after a crash does not duplicate it.

A log without the record (events.jsonl, or a context.jsonl from an older version) is read
whole: a writer killed mid-line leaves at most one torn line at the end; the next writer
starts on a fresh line, and the reader skips any line that is not complete JSON.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import OffloadError
from .batch import Span, new_rows
from .commit import (
    COMMIT_RECORD_SIZE,
    COMMIT_TAIL,
    commit_mismatch,
    decode_commit_record,
    encode_commit_record,
    iter_chunks,
    iter_lines,
)
from .layout import COMMIT_SUFFIX
from .paths import LOG_FLAGS, READ_FLAGS, open_file, same_entry, verify_file
from .rows import index_keys

__all__ = ["JsonlAppender", "count_newlines"]

logger = logging.getLogger("ctxoffload")

# How many bytes before the counted end of a file are kept to recognise it again: ext4 hands
# a purged session's inode number to the next new file, so the inode alone cannot tell that
# a file was replaced (and its line count must be redone).
_TAIL = 64
# A log replaced under an appender this many times in a row is being attacked, not purged.
_REOPEN_TRIES = 50
# A leader adds queued batches to its group while the group stays below this size, so that a
# small batch at the head is not held back writing and syncing megabytes for others (the
# bound LevelDB puts on its write groups); the leader's own batch always goes in.
_GROUP_BYTES = 1 << 20
# Where this many of the latest batches written to a log begin is remembered, so reading
# them back (`JsonlAppender.line_start`) starts at their first line, not at the log's: enough
# for the batches of a group commit, few enough to keep for every session a long-lived
# workspace object has written to.
_MARKS = 8


def count_newlines(fd: int, start: int, end: int) -> int:
    """Count b'\\n' in bytes [start, end) of an open file, reading in chunks."""
    return sum(chunk.count(b"\n") for chunk in iter_chunks(fd, start, end))


def _scan_ids(
    fd: int, start: int, end: int, first_line: int, into: dict[str, int], more: bytes = b""
) -> None:
    """Record the key (`message_key`) of every message line in bytes [start, end), then `more`."""
    index_keys(iter_lines(fd, start, end, more), first_line, into)


PATHS_KEPT = 4_096
"""The logs an appender keeps what it saw of (and its lock, queue, marks and read ends) per
table, the first seen dropped past it: a server writes a few logs for each of its sessions,
one after another, for as long as it runs (about 4 KB each, kept for good until bounded).
What is dropped is learnt again as a new process learns it (one scan of that log)."""


def _bound(table: dict[Any, Any]) -> None:
    """Drop the entries of `table` added first while it holds more than `PATHS_KEPT`. Safe
    while other threads add to it: each is a cache, or a lock or queue whose writers the
    flock still orders (a writer holding the one dropped goes on; the next makes another)."""
    while len(table) > PATHS_KEPT:
        try:
            table.pop(next(iter(table)), None)
        except (StopIteration, RuntimeError):  # (emptied, or changed by another thread)
            return


@dataclass
class _Known:
    """What an appender last saw of one log: enough to continue counting from its end."""

    dev: int
    inode: int
    size: int
    newlines: int
    tail: bytes
    ids: dict[str, int] | None = field(default=None)
    # The first line of the run of this appender's batches that ends the log at `size` (one
    # after the other, no other writer's between them); None when that is not known.
    own_from: int | None = field(default=None)


class _Batch:
    """One caller's lines on their way into a log, and what came of them."""

    # A plain class with slots: made once per append, so it is kept cheap to make.
    __slots__ = (
        "abandoned",
        "commit",
        "dir_fd",
        "ids",
        "lines",
        "name",
        "result",
        "sync",
        "taken",
        "wake",
    )

    def __init__(
        self,
        dir_fd: int,
        name: str,
        lines: Sequence[bytes],
        ids: Sequence[str | None] | None,
        commit: bool,
        sync: bool = True,
    ) -> None:
        self.dir_fd = dir_fd
        self.name = name
        self.lines = lines
        self.ids = ids
        self.commit = commit
        self.sync = sync  # fsynced before its caller returns (when the appender fsyncs)
        # Set for a caller that found others queued: it waits on it to be told it is done,
        # or that it leads now.
        self.wake: threading.Event | None = None
        # In the group of the leader writing now.
        self.taken = False
        # Its caller was interrupted while a leader had it: drop it if that leader fails.
        self.abandoned = False
        # Its span, or why it failed; None until it is done.
        self.result: Span | Exception | None = None


class _Queue:
    """The batches waiting for one log, oldest first; the first is its leader."""

    __slots__ = ("batches", "mutex")

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.batches: list[_Batch] = []


def _size(batch: _Batch) -> int:
    return sum(map(len, batch.lines))


@dataclass
class _Plan:
    """A group's batches as they will be written: `chunks` are their bytes, `added` the ids
    of their lines (kept apart from `index`, which must hold only what is written, until the
    write succeeds), `spans` each batch's line span, `newlines` the log's after them."""

    newlines: int
    chunks: list[bytes] = field(default_factory=list)
    added: dict[str, int] = field(default_factory=dict)
    index: dict[str, int] | None = None
    spans: list[Span] = field(default_factory=list)
    # (first line, its offset from the group's start) of each batch's written lines
    starts: list[tuple[int, int]] = field(default_factory=list)
    size: int = 0

    def add(self, batch: _Batch, prefix: bytes) -> None:
        """Plan one batch: its lines not already in the log or the group, and its span."""
        logged = () if self.index is None else (self.index, self.added)
        first = self.newlines + len(prefix) + 1
        rows = new_rows(batch.lines, batch.ids, logged, first)
        self.spans.append(rows.span)
        if not rows.lines:
            return
        payload = prefix + b"".join(rows.lines)
        self.starts.append((first, self.size + len(prefix)))
        self.size += len(payload)
        self.chunks.append(payload)
        self.newlines += payload.count(b"\n")
        if self.index is not None:
            for line_no, msg_id in enumerate(rows.ids, first):
                if msg_id is not None:
                    self.added.setdefault(msg_id, line_no)


class JsonlAppender:
    """Appends whole lines to JSONL files and reports the line numbers it wrote.

    One instance is shared by a workspace. It keeps, per file, how many lines it has seen
    (and, for committed logs, the message ids and their lines), so an append costs
    O(bytes written by others since the last append), not O(file). Threads appending to one
    file at once share a write and an fsync (group commit, see the module docstring).

    Args:
        fsync: flush each append to stable storage before returning.
        group: let threads appending to one file share a write and an fsync (only with
            `fsync`); without it, each batch is written and synced on its own (the baseline
            the benchmark measures).
    """

    def __init__(self, *, fsync: bool = True, group: bool = True) -> None:
        self.fsync = fsync
        self._group = group
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._queues: dict[str, _Queue] = {}
        self._known: dict[str, _Known] = {}
        # Per log (device, inode): (first line, offset, the bytes just before it) of the
        # latest batches written, to start a read of their lines where they begin.
        self._marks: dict[tuple[int, int], deque[tuple[int, int, bytes]]] = {}
        # Per file (device, inode): (line, offset, the bytes just before it) where the latest
        # read that reached its last whole line ended (`note_read`): a follower of a log
        # written by others (a session's events.jsonl) reads only what came since.
        self._read_ends: dict[tuple[int, int], tuple[int, int, bytes]] = {}
        # Per log: the same of the line after the latest group written (`line_end`); apart
        # from the marks reads start at, which would trust it far from an edit further back.
        self._group_ends: dict[tuple[int, int], tuple[int, int, bytes]] = {}

    def _lock_for(self, path: str) -> threading.Lock:
        with self._guard:
            lock = self._locks.get(path)
            if lock is None:
                lock = self._locks[path] = threading.Lock()
                _bound(self._locks)
            return lock

    def _queue_for(self, path: str) -> _Queue:
        # A dict lookup is atomic: the guard is needed only to make a queue.
        queue = self._queues.get(path)
        if queue is not None:
            return queue
        with self._guard:
            queue = self._queues.get(path)
            if queue is None:
                queue = self._queues[path] = _Queue()
                _bound(self._queues)
            return queue

    def append(
        self,
        dir_fd: int,
        name: str,
        shown: str,
        lines: Sequence[bytes],
        ids: Sequence[str | None] | None = None,
        *,
        commit: bool = False,
        sync: bool = True,
    ) -> Span:
        """Append `lines` (each ending in b'\\n') to the log `name` in the directory `dir_fd`.

        Another thread of this process may write the batch, together with its own, while
        this one waits; either way it is durable (and committed) when this returns, unless
        `sync` is False.

        Args:
            dir_fd: the directory, already opened without following links.
            name: the log's file name.
            shown: its path, for errors and logs.
            lines: the lines of one batch.
            ids: each line's message id (or None); with `commit`, a line whose id is already
                in the log is not written again.
            commit: keep the commit record `<name>.commit` (all-or-nothing batches).
            sync: False writes the batch without an fsync of its own: it is in the file
                (every reader sees it, a killed process loses none of it) but survives a
                crash of the machine only once a later synced append to the same log has
                returned (an fsync flushes all that the file was written). Not with
                `commit`, whose record must never name bytes that are not durable.

        Returns:
            The first and last line numbers of the batch (1-based, inclusive).

        Raises:
            OffloadError: the log is a planted link or special file, or keeps being replaced.
            OSError: the write failed; the file is cut back to its size before the call.
        """
        if not lines or not all(line.endswith(b"\n") for line in lines):
            raise ValueError("lines must be a non-empty sequence of lines ending with a newline")
        if commit and not sync:
            raise ValueError("a committed batch is always synced")
        batch = _Batch(dir_fd, name, lines, ids, commit, sync)
        if not (self._group and self.fsync and sync):
            # Without fsync there is nothing worth sharing (see the module docstring).
            # The thread lock keeps this process's writers from queueing inside flock; the
            # flock orders writers in different processes (it is held per open file
            # description).
            with self._lock_for(shown):
                self._lead(shown, batch, None)
        else:
            self._queue_up(shown, batch)
        result = batch.result
        if isinstance(result, Exception):
            raise result
        assert result is not None
        return result

    def _queue_up(self, shown: str, batch: _Batch) -> None:
        """Queue `batch` behind the batches for the same log; lead when it comes first.

        The queue does the thread lock's work and more: only its first batch's caller goes
        for the flock, and it writes the batches queued behind it as well.
        """
        queue = self._queue_for(shown)
        try:
            # Queued inside the `try`: an interrupt landing just after the batch joined the
            # queue still takes it out (`_leave` takes a batch never queued as well).
            with queue.mutex:
                if queue.batches:
                    batch.wake = threading.Event()
                queue.batches.append(batch)
            if batch.wake is not None:
                batch.wake.wait()
            if batch.result is None:
                self._lead(shown, batch, queue)
        finally:
            self._leave(queue, batch)

    def _lead(self, shown: str, leader: _Batch, queue: _Queue | None) -> None:
        """Write `leader`'s batch, and those of its group if `queue`, marking them done.

        Raises what made `leader`'s own batch fail when it was written alone (or the group
        could not be started: a planted link, a file that keeps being replaced).
        """
        for _ in range(_REOPEN_TRIES):
            fd = open_file(leader.dir_fd, leader.name, shown, LOG_FLAGS, action="append to")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                # Replaced or removed while this writer waited for the lock (a purge, a
                # person): write to the file that is there now, never to an orphan.
                if not same_entry(fd, leader.dir_fd, leader.name):
                    continue
                st = verify_file(fd, shown)
                # Reading a list's length is atomic; a batch queued just after this look
                # waits for the next leader, as one queued after the lock would.
                if queue is None or len(queue.batches) == 1:
                    group = [leader]
                else:
                    group = self._take(queue, leader)
                self._write_group(shown, fd, st, group)
                return
            finally:
                os.close(fd)
        raise OffloadError(
            f"{shown} was replaced {_REOPEN_TRIES} times while appending to it: "
            "something other than the workspace is rewriting it; stop it and retry",
            shown,
        )

    @staticmethod
    def _take(queue: _Queue, leader: _Batch) -> list[_Batch]:
        """The leader's group: it and the batches queued behind it now that can share its write."""
        group = [leader]
        with queue.mutex:
            room = _GROUP_BYTES - _size(leader)
            here = os.fstat(leader.dir_fd)
            for other in queue.batches[1:]:
                # Stop at the first that cannot join, so batches are still written in the
                # order they came.
                if (
                    other.name != leader.name
                    or other.commit != leader.commit
                    or other.sync != leader.sync
                ):
                    break
                room -= _size(other)
                if room < 0:
                    break
                if other.dir_fd != leader.dir_fd:
                    # Same path, but is it the same directory (not one renamed in between)?
                    try:
                        there = os.fstat(other.dir_fd)
                    except OSError:  # pragma: no cover - a waiting caller keeps it open
                        break
                    if (there.st_dev, there.st_ino) != (here.st_dev, here.st_ino):
                        break
                other.taken = True
                group.append(other)
        return group

    @staticmethod
    def _leave(queue: _Queue, batch: _Batch) -> None:
        """Take `batch` out of the queue once its caller returns or raises.

        A leader leaves with every batch its group finished and wakes their callers; the
        first batch still waiting leads next. A caller interrupted while it waits just leaves
        (or, if a leader has taken its batch, lets that leader finish it).
        """
        wake: list[_Batch] = []
        with queue.mutex:
            batches = queue.batches
            if len(batches) == 1 and batches[0] is batch:
                batches.clear()  # the usual case: a lone writer
                return
            if batches and batches[0] is batch:
                rest: list[_Batch] = []
                for other in batches[1:]:
                    if other.result is not None:
                        wake.append(other)
                    elif not other.abandoned:
                        # A leader interrupted before it finished: no one has this batch now.
                        other.taken = False
                        rest.append(other)
                queue.batches = rest
                if rest:
                    wake.append(rest[0])
            elif batch.result is None:
                if batch.taken:
                    batch.abandoned = True
                elif batch in batches:  # (an interrupt may land before it was queued)
                    batches.remove(batch)
        for other in wake:
            if other.wake is not None:
                other.wake.set()

    def _write_group(self, shown: str, fd: int, st: os.stat_result, group: list[_Batch]) -> None:
        """Append a group's batches with one write and one fsync; give each its result.

        `st` is the log's status, taken once the flock was held.
        """
        append = self._append_committed if group[0].commit else self._append_plain
        try:
            spans = append(shown, fd, st, group)
        except Exception:
            if len(group) == 1:
                raise
            # The file is cut back to where the group began. Try each batch alone, so each
            # gets its own outcome: a batch too big for the disk fails, the others need not.
            logger.debug("%s: a write of %d batches failed; writing each alone", shown, len(group))
            for batch in group:
                try:
                    # The size changed: cut back, or grown by the batches before this one.
                    st = os.fstat(fd)
                    (batch.result,) = append(shown, fd, st, [batch])
                except Exception as exc:
                    batch.result = exc
            return
        for batch, span in zip(group, spans, strict=True):
            batch.result = span

    def _append_plain(
        self, key: str, fd: int, st: os.stat_result, batches: list[_Batch]
    ) -> list[Span]:
        size = st.st_size
        newlines = self._newlines_before(key, fd, st, size)
        chunks: list[bytes] = []
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            # A writer died mid-line. Close that line so ours start clean; the reader will
            # skip the torn one.
            chunks.append(b"\n")
            newlines += 1
        own_from = self._own_from(key, st, size, newlines + 1)
        spans: list[Span] = []
        starts: list[tuple[int, int]] = []
        at = size + len(chunks[0]) if chunks else size
        for batch in batches:
            chunks.extend(batch.lines)
            spans.append(Span(newlines + 1, newlines + len(batch.lines)))
            starts.append((newlines + 1, at))
            newlines += len(batch.lines)
            at += sum(map(len, batch.lines))
        payload = b"".join(chunks)
        self._write(key, fd, payload, size, sync=any(batch.sync for batch in batches))
        end = size + len(payload)
        tail = self._tail(fd, payload, end)
        self._known[key] = _Known(st.st_dev, st.st_ino, end, newlines, tail, own_from=own_from)
        _bound(self._known)
        self._mark(fd, st, starts)
        self._mark_end(fd, st, newlines + 1, end)
        return spans

    def _append_committed(
        self, shown: str, fd: int, st: os.stat_result, batches: list[_Batch]
    ) -> list[Span]:
        dir_fd, name = batches[0].dir_fd, batches[0].name
        commit_fd = open_file(
            dir_fd,
            name + COMMIT_SUFFIX,
            shown + COMMIT_SUFFIX,
            os.O_RDWR | os.O_CREAT | READ_FLAGS,
        )
        try:
            committed, newlines, prefix, exact = self._settle_commit(shown, fd, st, commit_fd)
            plan = self._plan(shown, fd, st, batches, committed, newlines, prefix, exact)
            if not plan.chunks:
                return plan.spans
            payload = b"".join(plan.chunks)
            end = committed + len(payload)
            self._write(shown, fd, payload, committed, commit=(commit_fd, plan.newlines))
            if plan.index is not None:
                # None of `added` was in the index when planned, and nothing else has
                # touched the index since.
                plan.index.update(plan.added)
            self._known[shown] = _Known(
                st.st_dev, st.st_ino, end, plan.newlines, self._tail(fd, payload, end), plan.index
            )
            _bound(self._known)
            self._mark(fd, st, [(line, committed + at) for line, at in plan.starts])
            self._mark_end(fd, st, plan.newlines + 1, end)
            return plan.spans
        finally:
            os.close(commit_fd)

    def _settle_commit(
        self, shown: str, fd: int, st: os.stat_result, commit_fd: int
    ) -> tuple[int, int, bytes, bool]:
        """Where the committed part of the log ends, before a group is appended.

        Returns:
            (committed bytes, newlines in them, the bytes to write before the group: a newline
            when the log ends without one, whether a valid record was found).
        """
        size = st.st_size
        record = decode_commit_record(os.pread(commit_fd, COMMIT_RECORD_SIZE + 1, 0))
        if record is not None:
            wrong = commit_mismatch(fd, record, size)
            if wrong is None and self._newlines_before(shown, fd, st, record[0]) != record[1]:
                wrong = (
                    f"says {record[1]:,} lines are committed in {record[0]:,} bytes, "
                    f"which hold {self._newlines_before(shown, fd, st, record[0]):,}"
                )
            if wrong is not None:
                # Copied from another session, edited by hand, damaged: trimming to it could
                # cut into a line, and counting from it would misnumber every line after.
                logger.warning(
                    "%s: its commit record %s: ignored, the whole log counts as committed",
                    shown,
                    wrong,
                )
                record = None
        if record is None:
            # No record (a log from before commit records), or one that does not match the
            # log: all of it counts. Record that first, so readers never take the group for
            # old content.
            newlines = self._newlines_before(shown, fd, st, size)
            prefix = b"\n" if size > 0 and os.pread(fd, 1, size - 1) != b"\n" else b""
            tail = os.pread(fd, min(COMMIT_TAIL, size), size - min(COMMIT_TAIL, size))
            os.pwrite(commit_fd, encode_commit_record(size, newlines, tail), 0)
            return size, newlines, prefix, False
        committed, newlines = record
        if size > committed:
            # A writer was killed between its write and its commit: that batch was never
            # acknowledged (its messages are still in the caller's context).
            logger.warning(
                "%s: trimming %d bytes of a batch that was never committed",
                shown,
                size - committed,
            )
            os.ftruncate(fd, committed)
        return committed, newlines, b"", True

    def _plan(
        self,
        shown: str,
        fd: int,
        st: os.stat_result,
        batches: list[_Batch],
        committed: int,
        newlines: int,
        prefix: bytes,
        exact: bool,
    ) -> _Plan:
        """Each batch planned as if those before it were already on disk: the lines it adds
        and the span its messages have (a message already in the log, or in an earlier
        batch of the group, is not written again)."""
        plan = _Plan(newlines=newlines)
        for k, batch in enumerate(batches):
            has_ids = batch.ids is not None and any(i is not None for i in batch.ids)
            if k == 0:
                previous = self._known.get(shown)
                if has_ids or (
                    # Nothing to look up: the log is not read for ids, but an index kept
                    # from before still continues from where it ends.
                    previous is not None
                    and previous.ids is not None
                    and self._still(previous, fd, st, committed)
                ):
                    plan.index = self._index(shown, fd, st, committed, newlines, exact)
            elif has_ids and plan.index is None:
                # As a writer after the earlier batches would: read every id in the log,
                # those earlier batches' lines included.
                plan.index = {}
                _scan_ids(fd, 0, committed, 1, plan.index, more=b"".join(plan.chunks))
            plan.add(batch, prefix)
            prefix = b""
        return plan

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
        _bound(self._known)
        return known.ids

    def _mark(self, fd: int, st: os.stat_result, starts: list[tuple[int, int]]) -> None:
        """Remember where the batches just written begin: (first line, offset) each."""
        marks = []
        for line, offset in starts:
            keep = min(_TAIL, offset)
            marks.append((line, offset, os.pread(fd, keep, offset - keep)))
        with self._guard:
            known = self._marks.get((st.st_dev, st.st_ino))
            if known is None:
                known = self._marks[st.st_dev, st.st_ino] = deque(maxlen=_MARKS)
                _bound(self._marks)
            known.extend(marks)

    def _mark_end(self, fd: int, st: os.stat_result, line: int, offset: int) -> None:
        """Remember where the line after the group just written begins (`line_end`)."""
        keep = min(_TAIL, offset)
        before = os.pread(fd, keep, offset - keep)
        with self._guard:
            self._group_ends[st.st_dev, st.st_ino] = (line, offset, before)
            _bound(self._group_ends)

    def line_end(self, fd: int, st: os.stat_result, line: int) -> int | None:
        """Where line `line` of the file open as `fd` (status `st`) begins, when it is the
        line after the latest group this appender wrote there and the bytes before it are the
        ones written; else None. (A change further back is not seen: a reader checks that
        the bytes from a `line_start` to here hold the lines it wants.)"""
        with self._guard:
            mark = self._group_ends.get((st.st_dev, st.st_ino))
        if mark is None or mark[0] != line:
            return None
        _, offset, before = mark
        if offset <= st.st_size and os.pread(fd, len(before), offset - len(before)) == before:
            return offset
        return None

    def line_start(self, fd: int, st: os.stat_result, line: int) -> tuple[int, int]:
        """Where to start reading the file open as `fd` (its status `st`) to reach line
        `line`: `(a line number at or before it, that line's offset)`, from the batches this
        appender wrote last; `(1, 0)`, the file's start, when none is at or before it, or
        the file changed under the marks (cut back, replaced, edited).
        """
        with self._guard:
            known = self._marks.get((st.st_dev, st.st_ino))
            read_end = self._read_ends.get((st.st_dev, st.st_ino))
            candidates = [*(known or ()), *([read_end] if read_end else [])]
            marks = sorted((m for m in candidates if m[0] <= line), reverse=True)
        for first, offset, before in marks:
            if offset <= st.st_size and os.pread(fd, len(before), offset - len(before)) == before:
                return first, offset
        return 1, 0

    def note_read(self, fd: int, st: os.stat_result, line: int, offset: int) -> None:
        """Remember that line `line` of the file open as `fd` begins at `offset` (a read
        took the whole lines before it), so the next read from there (`line_start`) starts
        at it: following a log costs what was appended since, not the log."""
        keep = min(_TAIL, offset)
        before = os.pread(fd, keep, offset - keep)
        with self._guard:
            self._read_ends[st.st_dev, st.st_ino] = (line, offset, before)
            _bound(self._read_ends)

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
        self,
        key: str,
        fd: int,
        payload: bytes,
        size: int,
        *,
        commit: tuple[int, int] | None = None,
        sync: bool = True,
    ) -> None:
        """Write and fsync `payload` (no fsync without `sync`); then, for a committed log,
        its commit record.

        `commit` is (commit record descriptor, newlines after the batch). On any failure the
        log is cut back to `size`, so a batch is never left half-written or uncommitted.
        """
        try:
            view = memoryview(payload)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if self.fsync and sync:
                os.fsync(fd)
            if commit is not None:
                commit_fd, newlines = commit
                end = size + len(payload)
                tail = self._tail(fd, payload, end)
                os.pwrite(commit_fd, encode_commit_record(end, newlines, tail), 0)
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

    def _own_from(self, key: str, st: os.stat_result, size: int, first: int) -> int:
        """The first line of this appender's own run of batches once it appends line `first`
        on at `size`: where the run began, when its last batch ended at `size` in the same
        file (no one wrote after it), else `first`."""
        known = self._known.get(key)
        if (
            known is not None
            and known.own_from is not None
            and (known.dev, known.inode, known.size) == (st.st_dev, st.st_ino, size)
        ):
            return known.own_from
        return first

    def unread_is_own(self, key: str, st: os.stat_result, line: int) -> bool:
        """Whether every line of the log `key` (its status `st`, taken by the caller) from
        line `line` on was appended by this appender: its last batch ends the file, and its
        batches from before `line` on followed one another, nothing of another writer's
        between them (nor any change to the file under them: a file cut back, replaced or
        grown by another is not). A follower of the log that has read the lines before
        `line` need not read back what it appended itself."""
        known = self._known.get(key)
        return (
            known is not None
            and known.own_from is not None
            and (known.dev, known.inode, known.size) == (st.st_dev, st.st_ino, st.st_size)
            and known.own_from <= line <= known.newlines + 1
        )
