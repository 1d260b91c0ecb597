"""The memory store: a workspace's files held in this process, each under its reference
(`memory://{name}/sessions/{id}/{file}`), behind one lock; and the turn-based eviction of
`InMemoryWorkspace(evict_after_turns=N)`."""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._disk.batch import Span, new_rows
from .._disk.commit import parse_log, take_lines
from .._disk.ids import validate_session_id
from .._disk.layout import CONTEXT_FILE, DATA_DIR, SESSIONS_DIR
from ..exceptions import InvalidReference
from ._datastore import data_name

if TYPE_CHECKING:
    from ._fence import StateFence
    from ._store import Payloads, SessionFiles

__all__ = ["MemoryStore"]

_T = TypeVar("_T")

logger = logging.getLogger("ctxoffload")


class _HeldPayloads:
    """Payloads in memory: stored at once, never collected while a line names them."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store.store_payload

    async def before_line(self) -> None:
        """Nothing to wait for: a payload is held once stored."""

    async def after_line(self) -> None:
        """Nothing to restore: memory has no gc."""

    def hold_session(self, session_id: str, log: str) -> None:
        """Nothing to check or hold: no entry here can be planted, and a write here is one
        step under the store's lock."""


class MemoryStore:
    """Files by reference below `root` (`memory://{name}`), and the sessions that have any.

    A log (context.jsonl, events.jsonl) is a bytearray that appends grow in place: a new
    bytes object per append copied the whole log each time, O(its length squared) over a
    session. Readers get bytes copied under the lock (`read_ref`).

    Attributes:
        files: reference -> bytes; a log is a bytearray.
        sessions: the ids of the sessions that have files.
        lock: held for every look at or change of the store.
        evict_after_turns: model calls an untouched tool_result or data/ file survives;
            None keeps everything.
        evictions_remembered: how many of the latest evicted references are remembered.
        model_calls: the model calls counted (`note_model_call`).
        touched: evictable reference -> the model call it was last written or read at.
        evicted: evicted reference -> the model call that evicted it, oldest first.
        marks: per log, (first line, offset) of its latest batch: a log here changes only by
            appends and is dropped whole by a purge (which drops this too), so it stays true.
        read_ends: per log, (line, offset) where the latest read of its lines from a line's
            start ended, so a follower of the log reads only what came since (dropped with
            the log too).
    """

    def __init__(
        self, root: str, *, shown: str, evict_after_turns: int | None, evictions_remembered: int
    ) -> None:
        self.root = root
        self.shown = shown
        self.files: dict[str, bytes | bytearray] = {}
        self.sessions: set[str] = set()
        self.lock = threading.Lock()
        self.evict_after_turns = evict_after_turns
        self.evictions_remembered = evictions_remembered
        self.model_calls = 0
        self.touched: dict[str, int] = {}
        self.evicted: dict[str, int] = {}
        self.marks: dict[str, tuple[int, int]] = {}
        self.read_ends: dict[str, tuple[int, int]] = {}
        # Per log: (its length, its newlines) after the last append, so the next one need
        # not count the whole log again (recounted when the length is not that one).
        self._newlines: dict[str, tuple[int, int]] = {}
        # Per context log: message key -> the line it was first written at.
        self._keys: dict[str, dict[str, int]] = {}

    def ref(self, session_id: str, name: str) -> str:
        """The reference of the session's file `name` (the id checked first)."""
        return f"{self.root}/{SESSIONS_DIR}/{validate_session_id(session_id)}/{name}"

    def read_ref(self, ref: str) -> bytes | None:
        """The bytes of `ref` as they are now, or None (call with the lock held): a log is
        copied, so later appends never change what a reader holds."""
        data = self.files.get(ref)
        return bytes(data) if isinstance(data, bytearray) else data

    # -- eviction ---------------------------------------------------------------------------

    def touch(self, ref: str) -> None:
        """Note a write or read of an evictable file (call with the lock held)."""
        if self.evict_after_turns is not None:
            self.touched[ref] = self.model_calls
            self.evicted.pop(ref, None)

    def note_model_call(self) -> None:
        """Count a model call, and evict the files untouched for `evict_after_turns` calls."""
        with self.lock:
            self.model_calls += 1
            limit = self.evict_after_turns
            if limit is None:
                return
            stale = [ref for ref, at in self.touched.items() if self.model_calls - at > limit]
            for ref in stale:
                del self.touched[ref]
                self.files.pop(ref, None)
                self.evicted[ref] = self.model_calls
            # Oldest first: a dict keeps the order the evictions were recorded in.
            excess = len(self.evicted) - self.evictions_remembered
            if excess > 0:
                for ref in list(itertools.islice(self.evicted, excess)):
                    del self.evicted[ref]

    # -- SessionFiles -------------------------------------------------------------------------

    def store_payload(self, raw: bytes, media_type: str | None) -> str:
        """Hold a data/ payload under its sha256 name, once; its reference."""
        ref = f"{self.root}/{DATA_DIR}/{data_name(raw, media_type)}"
        with self.lock:
            self.files.setdefault(ref, raw)
            self.touch(ref)
        return ref

    @contextlib.asynccontextmanager
    async def payloads(self) -> AsyncIterator[Payloads]:
        """The payloads of one offload (`SessionFiles.payloads`): held as stored."""
        yield _HeldPayloads(self)

    async def put(self, session_id: str, name: str, data: bytes) -> str:
        """Replace the session's file `name` (`SessionFiles.put`); never fails."""
        ref = self.ref(session_id, name)
        with self.lock:
            self.files[ref] = data
            self.sessions.add(session_id)
        return ref

    async def put_fenced(
        self, session_id: str, name: str, data: bytes, fence: StateFence | None
    ) -> str:
        """`put`: a lease in memory lasts as long as its object, so it never lapses under a
        holder that still runs, and there is nothing to fence (`SessionFiles.put_fenced`)."""
        return await self.put(session_id, name, data)

    async def put_new(self, session_id: str, name: str, data: bytes) -> str | None:
        """Hold `data` as the session's file `name` unless that name is held or was evicted
        (a name evicted is not given to new content: its old reference must not read other
        bytes); `SessionFiles.put_new`."""
        ref = self.ref(session_id, name)
        with self.lock:
            if ref in self.files or ref in self.evicted:
                return None
            self.files[ref] = data
            self.sessions.add(session_id)
            self.touch(ref)
        return ref

    async def read(self, session_id: str, name: str) -> bytes | None:
        """The bytes of the session's file `name` (a read touches an evictable one)."""
        ref = self.ref(session_id, name)
        with self.lock:
            data = self.read_ref(ref)
            if data is not None and ref in self.touched:
                self.touch(ref)
        return data

    async def append(
        self, session_id: str, name: str, lines: Sequence[bytes], *, sync: bool = True
    ) -> Span:
        """Append the lines in place, under the lock (`SessionFiles.append`)."""
        return self._append(session_id, name, lines, None)

    async def append_messages(
        self, session_id: str, lines: Sequence[bytes], keys: Sequence[str | None]
    ) -> Span:
        """Append the lines whose key the log lacks (`new_rows`), under the lock: whole or not
        at all, which is all the commit rule asks (`SessionFiles.append_messages`)."""
        return self._append(session_id, CONTEXT_FILE, lines, keys)

    def _append(
        self, session_id: str, name: str, lines: Sequence[bytes], keys: Sequence[str | None] | None
    ) -> Span:
        ref = self.ref(session_id, name)
        with self.lock:
            index = self._keys.setdefault(ref, {})
            log = self.files.get(ref)
            if not isinstance(log, bytearray):
                log = self.files[ref] = bytearray(log or b"")
            known = self._newlines.get(ref)
            lines_before = known[1] if known is not None and known[0] == len(log) else None
            if lines_before is None:
                lines_before = log.count(b"\n")
            first = lines_before + 1
            rows = new_rows(lines, keys, (index,), first)
            self.sessions.add(session_id)
            if not rows.lines:
                return rows.span
            start = len(log)
            for line in rows.lines:
                log += line
            added = sum(line.count(b"\n") for line in rows.lines)
            self._newlines[ref] = (len(log), lines_before + added)
            self.marks[ref] = (first, start)
            for line_no, key in enumerate(rows.ids, first):
                if key is not None:
                    index.setdefault(key, line_no)
        return rows.span

    async def run(self, work: Callable[[], _T]) -> _T:
        """At once: nothing here blocks (`SessionFiles.run`)."""
        return work()

    def event_failure_is_fatal(self, exc: OSError) -> bool:
        """An append here never fails (`SessionFiles.event_failure_is_fatal`)."""
        return False

    async def list_names(self, session_id: str) -> list[str]:
        """The names of the session's files (`SessionFiles.list_names`)."""
        prefix = self.ref(session_id, "")
        with self.lock:
            return [ref[len(prefix) :] for ref in self.files if ref.startswith(prefix)]

    def reference(self, session_id: str, name: str) -> str:
        """The reference of the session's file `name` (`ref`)."""
        return self.ref(session_id, name)

    async def read_log(self, session_id: str, name: str, *, commit: bool = False) -> list[Any]:
        """The JSON values of the session's file `name` (`SessionFiles.read_log`; an append
        here is whole or absent, so `commit` changes nothing)."""
        ref = self.ref(session_id, name)
        with self.lock:
            raw = self.read_ref(ref) or b""
        return parse_log(raw, ref, warn=logger.warning)

    async def list_sessions(self) -> list[str]:
        """The ids of the sessions held, sorted."""
        with self.lock:
            return sorted(self.sessions)

    def reference_key(self, reference: str) -> list[str]:
        """The parts of a reference below `root` (`SessionFiles.reference_key`).

        Raises:
            InvalidReference: not a reference of this store.
        """
        prefix = f"{self.root}/"
        if not reference.startswith(prefix):
            raise InvalidReference(
                f"reference {reference!r} is not of {self.shown}: pass a reference it returned"
            )
        return reference[len(prefix) :].split("/")

    async def read_reference(self, reference: str) -> bytes:
        """The bytes behind a reference (`SessionFiles.read_reference`)."""
        return self._reading(reference, self.read_ref)

    async def read_lines(self, reference: str, first: int, last: int) -> bytes:
        """Lines `first` to `last` of what a reference names, from the latest batch's mark or
        the end of the latest read when one is at or before `first`: a compaction's
        read-back costs what it wrote, a follower's read what came since, not the whole log
        (`SessionFiles.read_lines`)."""

        def tail(ref: str) -> tuple[int, int, bytes] | None:
            data = self.files.get(ref)
            if data is None:
                return None
            starts = [self.marks.get(ref, (1, 0)), self.read_ends.get(ref, (1, 0)), (1, 0)]
            line, offset = max(s for s in starts if s[0] <= first and s[1] <= len(data))
            return line, offset, bytes(data[offset:])

        line, offset, data = self._reading(reference, tail)
        taken = take_lines((data,), first - line, last - first + 1)
        if line == first:
            with self.lock:
                if reference in self.files:
                    end = (first + taken.count(b"\n"), offset + taken.rfind(b"\n") + 1)
                    self.read_ends[reference] = end
        return taken

    def _reading(self, reference: str, read: Callable[[str], _T | None]) -> _T:
        """`read(reference)` under the lock, touched, or why nothing is held there.

        Raises:
            InvalidReference: evicted, or never held (or purged since).
        """
        with self.lock:
            data = read(reference)
            if data is not None and reference in self.touched:
                self.touch(reference)
            evicted_at = self.evicted.get(reference)
        limit = self.evict_after_turns
        if evicted_at is not None:
            raise InvalidReference(
                f"reference {reference!r} was evicted at model call {evicted_at}: it was "
                f"neither written nor read for {limit} model calls "
                f"(InMemoryWorkspace(evict_after_turns={limit})); raise "
                "evict_after_turns, or use a LocalWorkspace to keep everything"
            )
        if data is None:
            forgotten = (
                ""
                if limit is None
                else f" (or it was evicted before the latest {self.evictions_remembered} "
                "evictions, which are all that is remembered)"
            )
            raise InvalidReference(
                f"reference {reference!r} is not held by {self.shown}{forgotten}: pass a "
                "reference it returned, of a session not purged since"
            )
        return data

    async def delete_session(self, session_id: str) -> bool:
        """Forget a session, its evicted files included (a new session of that id starts
        fresh: its first result is `tool_result-<id>.txt`, an old reference is unknown)."""
        prefix = self.ref(session_id, "")
        with self.lock:
            doomed = [ref for ref in self.files if ref.startswith(prefix)]
            for ref in doomed:
                del self.files[ref]
                self._keys.pop(ref, None)
                self.marks.pop(ref, None)
                self.read_ends.pop(ref, None)
                self._newlines.pop(ref, None)
            for records in (self.touched, self.evicted):
                for ref in [ref for ref in records if ref.startswith(prefix)]:
                    del records[ref]
            known = session_id in self.sessions
            self.sessions.discard(session_id)
        return bool(doomed) or known


if TYPE_CHECKING:  # mypy checks that MemoryStore is what it is declared to be
    _files: type[SessionFiles] = MemoryStore
