"""InMemoryWorkspace: the same protocol and read side as LocalWorkspace, held in memory."""

from __future__ import annotations

import itertools
import logging
import os
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from .._disk.batch import Span, new_rows
from .._disk.commit import check_line_range, take_lines
from .._disk.events import ContextBatch
from .._disk.ids import tool_file_stem, validate_session_id
from .._disk.layout import (
    CONTEXT_FILE,
    DATA_DIR,
    EVENTS_FILE,
    tool_result_name,
)
from .._disk.payloads import (
    as_message_list,
    context_rows,
    offload_block,
    render_tool_output,
    tool_output_of,
)
from .._disk.read import reference_text
from .._disk.rows import dumps_line, lines_and_keys
from .._disk.scope import SessionScoped, check_reference
from .._disk.writer import event_record
from ..exceptions import ConfigError, InvalidReference
from ..references import ContextRef
from ._core import (
    list_files,
    read_bytes,
    read_context,
    read_events,
    read_state,
    tool_result_event,
    write_state,
)
from ._datastore import data_name
from ._fork import fork_session
from ._lease import LEASE_FILE, SessionLease, busy_error, holder_record, orphaned_here
from ._memory_store import MemoryStore

_T = TypeVar("_T")

if TYPE_CHECKING:
    from ._protocol import ModelCallClock, Workspace

__all__ = ["InMemoryWorkspace"]

logger = logging.getLogger("ctxoffload")


class InMemoryWorkspace:
    """A workspace that keeps everything in this process's memory (a `Workspace`, and a
    `ModelCallClock` for its turn-based eviction).

    For tests and for serverless functions with no writable disk. References look like
    `memory://{name}/sessions/{id}/tool_result-{tool_id}.txt` and follow the on-disk naming
    rules, so code written against `LocalWorkspace` reads the same. An agent cannot open
    these with file tools; give it `retrieve_offloaded_content` instead.

    Turn-based eviction (off by default): with `evict_after_turns=N`, a tool_result file
    or data/ payload that was neither written nor read during N model calls is dropped at
    the next one, to bound a long-lived process's memory; reading it afterwards raises
    `InvalidReference` saying when it was evicted. The `Agent` (through its pipeline)
    calls `note_model_call` before each model call. Context logs, events and state are the
    session's record and are never evicted.

    The record of evictions is bounded too: the latest `evictions_remembered` evicted
    references are remembered (and their names are not given to new content). A reference
    evicted before those reads as one never held, and a tool_result name that old may be
    used again for another result with the same tool id. `purge_session` forgets the
    session's evictions with its files: a new session of that id starts as a fresh one.

    Args:
        name: distinguishes the references of several in-memory workspaces.
        evict_after_turns: model calls an untouched file survives; None keeps everything.

    Raises:
        ConfigError: `evict_after_turns` is not a positive int.
    """

    evictions_remembered: ClassVar[int] = 10_000
    """How many of the latest evicted references are remembered (about 200 bytes each)."""

    def __init__(
        self,
        name: str = "workspace",
        *,
        evict_after_turns: int | None = None,
        isolate_sessions: bool = False,
    ) -> None:
        if evict_after_turns is not None and (
            isinstance(evict_after_turns, bool)
            or not isinstance(evict_after_turns, int)
            or evict_after_turns < 1
        ):
            raise ConfigError(
                f"evict_after_turns {evict_after_turns!r} is not a positive number of model "
                "calls: pass 1 or more, or None to keep everything"
            )
        self.name = validate_session_id(name)
        self._root = f"memory://{self.name}"
        # A log (context.jsonl, events.jsonl) is a bytearray that appends grow in place:
        # a new bytes object per append copied the whole log each time, O(its length
        # squared) over a session. Readers get bytes copied under the lock (`read`).
        self._memory = MemoryStore(self._root)
        self.evict_after_turns = evict_after_turns
        self.isolate_sessions = isolate_sessions
        self.model_calls = 0
        # Evictable references -> the model call they were last written or read at; and the
        # evicted ones -> the model call that evicted them.
        self._touched: dict[str, int] = {}
        self._evicted: dict[str, int] = {}
        # Per log: (first line, offset) of its latest batch. A log here changes only by
        # these appends and is dropped whole by a purge (which drops this too), so the
        # place stays true.
        self._marks: dict[str, tuple[int, int]] = {}
        # Per log: (its length, its newlines) after the last append, so the next one need
        # not count the whole log again (recounted when the length is not that one).
        self._newlines: dict[str, tuple[int, int]] = {}
        # Per context log: message id -> the line it was first written at.
        self._ids: dict[str, dict[str, int]] = {}
        self._leases: dict[str, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"InMemoryWorkspace(name={self.name!r})"

    def reference_key(self, reference: str | os.PathLike[str]) -> list[str]:
        """The parts of a reference below the workspace (`["sessions", id, name]`).

        Raises:
            InvalidReference: not a reference of this workspace.
        """
        reference = reference_text(reference)
        prefix = f"{self._root}/"
        if not reference.startswith(prefix):
            raise InvalidReference(
                f"reference {reference!r} is not of {self!r}: pass a reference it returned"
            )
        return reference[len(prefix) :].split("/")

    def context_path(self, session_id: str) -> str:
        """The reference of the session's context log."""
        return self._memory.ref(session_id, CONTEXT_FILE)

    async def initialize(self) -> None:
        """Nothing to prepare; present for symmetry with `LocalWorkspace`."""

    def _store(self, raw: bytes, media_type: str | None) -> str:
        ref = f"{self._root}/{DATA_DIR}/{data_name(raw, media_type)}"
        with self._memory.lock:
            self._memory.files.setdefault(ref, raw)
            self._touch(ref)
        return ref

    def _touch(self, ref: str) -> None:
        """Note a write or read of an evictable file (call with the lock held)."""
        if self.evict_after_turns is not None:
            self._touched[ref] = self.model_calls
            self._evicted.pop(ref, None)

    def note_model_call(self) -> None:
        """Count a model call, and evict the files untouched for `evict_after_turns` calls."""
        with self._memory.lock:
            self.model_calls += 1
            limit = self.evict_after_turns
            if limit is None:
                return
            stale = [ref for ref, at in self._touched.items() if self.model_calls - at > limit]
            for ref in stale:
                del self._touched[ref]
                self._memory.files.pop(ref, None)
                self._evicted[ref] = self.model_calls
            # Oldest first: a dict keeps the order the evictions were recorded in.
            excess = len(self._evicted) - self.evictions_remembered
            if excess > 0:
                for ref in list(itertools.islice(self._evicted, excess)):
                    del self._evicted[ref]

    def _append(self, ref: str, payload: bytes) -> tuple[int, int]:
        with self._memory.lock:
            log = self._log(ref)
            first = self._lines_in(ref, log) + 1
            log += payload
            last = first + payload.count(b"\n") - 1
            self._newlines[ref] = (len(log), last)
        return first, last

    def _log(self, ref: str) -> bytearray:
        """The log `ref`, to append to in place (call with the lock held)."""
        log = self._memory.files.get(ref)
        if not isinstance(log, bytearray):
            log = self._memory.files[ref] = bytearray(log or b"")
        return log

    def _lines_in(self, ref: str, data: bytes | bytearray) -> int:
        """The newlines of the log `ref`, whose bytes are `data` (call with the lock held)."""
        known = self._newlines.get(ref)
        if known is not None and known[0] == len(data):
            return known[1]
        return data.count(b"\n")

    def _append_batch(self, ref: str, lines: list[bytes], ids: list[str | None]) -> Span:
        """Append the lines whose id is not in the log yet (`new_rows`); return the span
        of the batch's messages."""
        with self._memory.lock:
            index = self._ids.setdefault(ref, {})
            log = self._log(ref)
            first = self._lines_in(ref, log) + 1
            rows = new_rows(lines, ids, (index,), first)
            if not rows.lines:
                return rows.span
            start = len(log)
            for line in rows.lines:
                log += line
            self._newlines[ref] = (len(log), first + len(rows.lines) - 1)
            self._marks[ref] = (first, start)
            for line_no, msg_id in enumerate(rows.ids, first):
                if msg_id is not None:
                    index.setdefault(msg_id, line_no)
        return rows.span

    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> ContextRef:
        """Append messages to the session's context log; see `LocalWorkspace.offload_context`."""
        ref = self.context_path(session_id)
        items = as_message_list(msgs)
        rows = context_rows(items, self._store)
        if not rows:
            return ContextRef(ref, 0, -1)
        lines, keys = lines_and_keys(rows)
        span = self._append_batch(ref, lines, keys)
        batch = ContextBatch(
            reference=ref,
            bytes=sum(len(line) for line in lines),
            messages=len(items),
            **span.event_fields(),
        )
        self._event(session_id, batch.kind, **batch.fields())
        return ContextRef(ref, *span, span.runs)

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        """Store the whole text of a tool result; see `LocalWorkspace.offload_tool_result`."""
        validate_session_id(session_id)
        found = tool_output_of(tool_result)
        urls: list[str] = []
        data = render_tool_output(found.output, self._store, urls)
        stem = tool_file_stem(found.tool_id)
        with self._memory.lock:
            n = 1
            while True:
                ref = self._memory.ref(session_id, tool_result_name(stem, n))
                existing = self._memory.files.get(ref)
                if existing is None and ref not in self._evicted:
                    self._memory.files[ref] = data
                    break
                if existing == data:
                    break
                n += 1
            self._touch(ref)
        stored = tool_result_event(ref, data, found, urls)
        self._event(session_id, stored.kind, **stored.fields())
        return ref

    async def offload_data_block(self, block: Any) -> Any:
        """Store a block's payload once, by hash; see `LocalWorkspace.offload_data_block`."""
        return offload_block(block, self._store)

    async def record_event(self, session_id: str, kind: str, **fields: Any) -> None:
        """Append one line to the session's events log."""
        self._event(session_id, kind, **fields)

    def _event(self, session_id: str, kind: str, **fields: Any) -> None:
        self._append(
            self._memory.ref(session_id, EVENTS_FILE),
            dumps_line(event_record(session_id, kind, fields)),
        )
        with self._memory.lock:
            self._memory.sessions.add(session_id)

    async def write_state(self, session_id: str, state: dict[str, Any]) -> str:
        """Replace the session's saved live context."""
        return await write_state(self._memory, session_id, state)

    async def fork_session(
        self, source: str, new: str, *, step: int | None = None
    ) -> dict[str, Any]:
        """Start session `new` from `source` at `step`: `ctxoffload.workspace.fork_session`."""
        return await fork_session(self, source, new, step=step)

    async def acquire_lease(
        self, session_id: str, *, agent: str | None = None, ttl: float | None = None
    ) -> SessionLease:
        """Take the session's lease (held in this object; `ttl` is ignored).

        Raises:
            SessionBusyError: another lease on this workspace holds the session.
        """
        sid = validate_session_id(session_id)
        where = self._memory.ref(sid, LEASE_FILE)
        holder = holder_record(agent)
        current = self._leases.get(sid)
        if current is not None and orphaned_here(current):
            self._leases.pop(sid, None)
        with self._memory.lock:
            current = self._leases.get(sid)
            if current is not None:
                raise busy_error(sid, current, where)
            self._leases[sid] = holder
        leases, lock = self._leases, self._memory.lock

        def drop() -> None:
            with lock:
                if leases.get(sid) is holder:
                    del leases[sid]

        async def release() -> None:
            drop()

        lease = SessionLease(sid, holder, where, release=release)
        weakref.finalize(lease, drop)
        return lease

    async def list_sessions(self) -> list[str]:
        """The ids of the sessions held, sorted."""
        with self._memory.lock:
            return sorted(self._memory.sessions)

    async def read_context(self, session_id: str) -> list[Any]:
        """Every message offloaded for a session, oldest first."""
        return await read_context(self._memory, session_id)

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's events, oldest first."""
        return await read_events(self._memory, session_id)

    async def read_state(self, session_id: str) -> dict[str, Any] | None:
        """The session's saved live context, or None."""
        return await read_state(self._memory, session_id)

    async def list_files(self, session_id: str) -> list[str]:
        """The references of the session's tool_result files, sorted."""
        return await list_files(self._memory, session_id)

    async def read_reference(self, reference: str | os.PathLike[str]) -> bytes:
        """The bytes behind a reference this workspace returned.

        Raises:
            InvalidReference: the reference is unknown, or out of the working session's
                reach (`isolate_sessions`).
        """
        return await self._reading(reference, self._memory.read)

    async def _reading(
        self, reference: str | os.PathLike[str], read: Callable[[str], _T | None]
    ) -> _T:
        """`read(reference)` under the lock, once the reference is checked (held, not
        evicted, within reach) and touched."""
        reference = reference_text(reference)
        if self.isolate_sessions:
            await check_reference(self, reference, self.reference_key(reference))
        with self._memory.lock:
            data = read(reference)
            if data is not None and reference in self._touched:
                self._touch(reference)
            evicted_at = self._evicted.get(reference)
        if evicted_at is not None:
            raise InvalidReference(
                f"reference {reference!r} was evicted at model call {evicted_at}: it was "
                f"neither written nor read for {self.evict_after_turns} model calls "
                f"(InMemoryWorkspace(evict_after_turns={self.evict_after_turns})); raise "
                "evict_after_turns, or use a LocalWorkspace to keep everything"
            )
        if data is None:
            forgotten = (
                ""
                if self.evict_after_turns is None
                else f" (or it was evicted before the latest {self.evictions_remembered} "
                "evictions, which are all that is remembered)"
            )
            raise InvalidReference(
                f"reference {reference!r} is not held by {self!r}{forgotten}: pass a "
                "reference it returned, of a session not purged since"
            )
        return data

    async def read_lines(self, reference: str | os.PathLike[str], first: int, last: int) -> bytes:
        """Lines `first` to `last` (1-based, inclusive) of what a reference names; see
        `LocalWorkspace.read_lines`.

        Raises:
            InvalidReference: as `read_reference`.
            ValueError: `first` is below 1 or `last` below `first`.
        """
        check_line_range(first, last)

        def tail(ref: str) -> tuple[int, bytes] | None:
            # Only from the latest batch's mark on, when it is at or before `first`: a
            # compaction's read-back costs what it wrote, not the whole log.
            data = self._memory.files.get(ref)
            if data is None:
                return None
            line, offset = self._marks.get(ref, (1, 0))
            if line > first or offset > len(data):
                line, offset = 1, 0
            return line, bytes(data[offset:])

        line, data = await self._reading(reference, tail)
        return take_lines((data,), first - line, last - first + 1)

    async def store_bytes(self, data: bytes, media_type: str | None = None) -> str:
        """Store raw bytes in memory under their sha256, once; see
        `LocalWorkspace.store_bytes`."""
        return self._store(bytes(data), media_type)

    async def read_bytes(self, reference: str | os.PathLike[str]) -> tuple[bytes, str]:
        """The bytes behind a reference, with their media type; see
        `LocalWorkspace.read_bytes`."""
        return await read_bytes(self, reference)

    async def purge_session(self, session_id: str) -> bool:
        """Forget a session, its evicted files included (a new session of that id starts
        fresh: its first result is `tool_result-<id>.txt`, an old reference is unknown);
        stored data payloads are shared and kept."""
        prefix = self._memory.ref(session_id, "")
        with self._memory.lock:
            doomed = [ref for ref in self._memory.files if ref.startswith(prefix)]
            for ref in doomed:
                del self._memory.files[ref]
                self._ids.pop(ref, None)
                self._marks.pop(ref, None)
                self._newlines.pop(ref, None)
            for records in (self._touched, self._evicted):
                for ref in [ref for ref in records if ref.startswith(prefix)]:
                    del records[ref]
            known = session_id in self._memory.sessions
            self._memory.sessions.discard(session_id)
        return bool(doomed) or known


if TYPE_CHECKING:  # mypy checks that InMemoryWorkspace is what it is declared to be
    _workspace: type[Workspace] = InMemoryWorkspace
    _scoped: type[SessionScoped] = InMemoryWorkspace
    _clock: type[ModelCallClock] = InMemoryWorkspace
