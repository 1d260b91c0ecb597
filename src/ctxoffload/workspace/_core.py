"""The workspace behaviour written once, for every store (`_store`): `StoreWorkspace`, the
base of the backends, offloads (payloads stored before the line naming them, a log checked
before content is written, a tool result's first free version name, the event that records
each offload), records events, replaces and reads state, reads logs back, lists and purges
sessions, forks. gc, for the stores it collects, is `_collected.py`'s.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._disk.commit import check_line_range, parse_lines
from .._disk.event_kinds import UNSYNCED_KINDS
from .._disk.events import ContextBatch, ToolResult
from .._disk.ids import tool_file_stem, validate_session_id
from .._disk.layout import (
    CONTEXT_FILE,
    EVENTS_FILE,
    HISTORY_FILE,
    STATE_FILE,
    is_tool_result_name,
    tool_result_name,
)
from .._disk.payloads import (
    as_message_list,
    context_rows,
    count_lines,
    offload_block,
    render_tool_output,
    tool_output_of,
)
from .._disk.read import reference_text
from .._disk.rows import dumps_line, dumps_record, lines_and_keys
from .._disk.scope import check_reference, data_files_field
from .._disk.writer import event_record
from ..exceptions import InvalidReference
from ..references import ContextRef
from ._datastore import media_type_of
from ._fence import StateFence, check_writer
from ._fork import fork_session
from ._host_store import AsksForAStore
from ._lease import SessionLease

if TYPE_CHECKING:
    from .._disk.payloads import ToolOutput
    from .._disk.records import Event
    from ._protocol import ReferenceReader
    from ._store import SessionFiles

__all__ = [
    "StoreWorkspace",
    "list_files",
    "read_bytes",
    "read_context",
    "read_events",
    "read_state",
    "tool_result_event",
    "write_state",
]


logger = logging.getLogger("ctxoffload")

_TO_THE_END = 1 << 62
"""A last line past the end of any log: `read_lines` up to it reads to the end."""


async def write_state(
    store: SessionFiles,
    session_id: str,
    state: dict[str, Any],
    fence: StateFence | None = None,
) -> str:
    """Replace the session's state.json whole: one JSON line (`StateStore.write_state`);
    with a `fence`, only while its lease is the session's (`SessionFiles.put_fenced`).

    Raises:
        InvalidSessionId: `session_id` is not a plain name (before any I/O).
        SessionBusyError: the fence's lease was taken over; nothing was written.
    """
    sid = validate_session_id(session_id)
    return await store.put_fenced(sid, STATE_FILE, dumps_line(state), fence)


async def read_state(store: SessionFiles, session_id: str) -> dict[str, Any] | None:
    """The session's state: the first value of its state.json, or None without one."""
    rows = await store.read_log(validate_session_id(session_id), STATE_FILE)
    return rows[0] if rows else None


async def read_context(store: SessionFiles, session_id: str) -> list[Any]:
    """The session's offloaded messages as stored, oldest first, whole acknowledged batches
    only (`Workspace.read_context`)."""
    return await store.read_log(validate_session_id(session_id), CONTEXT_FILE, commit=True)


async def read_events(store: SessionFiles, session_id: str) -> list[dict[str, Any]]:
    """The session's events, oldest first (`EventLog.read_events`)."""
    return await store.read_log(validate_session_id(session_id), EVENTS_FILE)


async def list_files(store: SessionFiles, session_id: str) -> list[str]:
    """The references of the session's tool_result files, sorted by name
    (`Workspace.list_files`)."""
    sid = validate_session_id(session_id)
    names = sorted(name for name in await store.list_names(sid) if is_tool_result_name(name))
    return [store.reference(sid, name) for name in names]


async def read_bytes(
    reader: ReferenceReader, reference: str | os.PathLike[str]
) -> tuple[bytes, str]:
    """A stored payload and its media type (`Workspace.read_bytes`): the type comes from the
    name's extension, which `store_bytes` chose from the type given (`media_type_of`).

    Raises:
        InvalidReference: as `reader.read_reference`.
    """
    reference = reference_text(reference)
    return await reader.read_reference(reference), media_type_of(reference)


def tool_result_event(
    reference: str, data: bytes, found: ToolOutput, urls: list[str]
) -> ToolResult:
    """The event recording a tool result stored whole at `reference`: its size in bytes and
    lines, whose result it is, and which of its lines name data/ files (`urls`, as
    `render_tool_output` gathered them)."""
    return ToolResult(
        reference=reference,
        bytes=len(data),
        lines=count_lines(data),
        tool_id=found.tool_id,
        tool_name=found.name,
        **data_files_field(urls),
    )


async def first_free_version(files: SessionFiles, session_id: str, stem: str, data: bytes) -> str:
    """Store `data` as the first free version of the tool result `stem`, never overwriting:
    `tool_result-{stem}.txt`, else `.2.txt`, `.3.txt`, ...; a version holding the same bytes
    already is returned as it is (the same result offloaded again). A conditional write makes
    this hold between concurrent writers, on other machines too."""
    n = 1
    while True:
        name = tool_result_name(stem, n)
        ref = await files.put_new(session_id, name, data)
        if ref is not None:
            return ref
        if await files.read(session_id, name) == data:
            return files.reference(session_id, name)
        n += 1


class StoreWorkspace(AsksForAStore):
    """The behaviour of a workspace, written once over its store (`SessionFiles`).

    `LocalWorkspace`, `InMemoryWorkspace` and `ObjectStoreWorkspace` are this over the disk,
    memory and a bucket; each adds only what its store has of its own (paths on a disk, a
    lease, eviction, downloads) and how a reference is read back.
    """

    _files: SessionFiles
    isolate_sessions: bool

    @property
    def _fences(self) -> dict[str, StateFence]:
        """The sessions whose lease this object holds, by id: their writes are fenced
        (`_fence`). Made on first use, so that a workspace over a store needs no code of its
        own for it."""
        fences: dict[str, StateFence] = self.__dict__.setdefault("_fences_by_session", {})
        return fences

    def _fenced_lease(
        self,
        session_id: str,
        holder: dict[str, Any],
        where: str,
        *,
        release: Callable[[], Awaitable[None]],
        renew: Callable[[], Awaitable[dict[str, Any] | None]],
        ttl: float,
        since: tuple[float, float],
    ) -> SessionLease:
        """The lease just taken (as `SessionLease`'s arguments), every write of the session
        through this object fenced with it from now until it is released (`_fence`).

        A store whose leases can lapse calls this as it takes one; a lease dropped
        unreleased leaves its fence, so that a later write through this object, once
        another writer took the session, is refused rather than written over its state."""
        fence = StateFence(holder["token"], where=where)
        fences = self._fences  # (not self: a lease must not keep its workspace alive)
        fences[session_id] = fence

        async def release_fenced() -> None:
            if fences.get(session_id) is fence:
                del fences[session_id]
            await release()

        lease = SessionLease(
            session_id, holder, where, release=release_fenced, renew=renew, ttl=ttl, since=since
        )
        fence.term, fence.lease = lease.term, weakref.ref(lease)
        return lease

    def _in_doubt(self, session_id: str) -> StateFence | None:
        """The fence of this object's lease on the session when that lease may have been
        lost, to be made sure of before a write (`check_writer`); None when there is no
        lease here that can lapse, or it is surely held: the common case, a clock read and
        no request (so a write that needs no check pays no coroutine for it)."""
        fences: dict[str, StateFence] | None = self.__dict__.get("_fences_by_session")
        fence = fences.get(session_id) if fences else None
        if fence is None or fence.term is None or fence.term.surely_held():
            return None
        return fence

    def context_path(self, session_id: str) -> Any:
        """The reference of the session's context log, `sessions/<id>/context.jsonl` (a
        `Path` on a disk)."""
        return self._files.reference(validate_session_id(session_id), CONTEXT_FILE)

    def events_path(self, session_id: str) -> Any:
        """The reference of the session's events log, `sessions/<id>/events.jsonl` (a `Path`
        on a disk)."""
        return self._files.reference(validate_session_id(session_id), EVENTS_FILE)

    # -- writing ------------------------------------------------------------------------------

    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> ContextRef:
        """Append messages, oldest first, to the session's context log (`context.jsonl`).

        All messages of one call land as consecutive lines in one write, even with other
        writers (tasks, processes, machines) appending to the same session at the same time,
        and readers see all of them or none (the commit rule: see "The on-disk format" in the
        documentation). The payloads of their data blocks are stored in data/ first.

        Idempotent: a message whose top-level `id` is already in the log with the same
        content (see `message_key`) is not written again, so offloading the same messages
        after a crash (an agent resumed from an older state.json) returns the span where
        they already are; a message that grew under its id is written as a new version.
        Messages without an `id` are always written. (A bucket reads the log's ids once: a
        message another process writes at the same moment may be there twice.)

        Args:
            session_id: a plain name (see `InvalidSessionId`).
            msgs: ctxoffload `Msg` objects, OpenAI / Anthropic message dicts, or pydantic models.

        Returns:
            The reference of context.jsonl, as a `ContextRef` carrying the lines of the batch
            (when some messages were already there, the span from the first to the last line
            of the batch's messages, which may include lines of other writers).

        Raises:
            InvalidSessionId: before any I/O.
            InvalidContent: an item is not a message at all; nothing was written. (A
                message that cannot be stored as given gets a stand-in line instead; see
                "Errors" in the documentation.)
            OffloadError: the store refused the write, or a planted link was found (the
                events log too, before anything is written); the log is as it was before.
            SessionBusyError: this object's lease on the session lapsed and was taken over
                (`_fence`); nothing was written.
        """
        sid = validate_session_id(session_id)
        files = self._files
        ref = files.reference(sid, CONTEXT_FILE)
        items = as_message_list(msgs)
        if fence := self._in_doubt(sid):
            await check_writer(fence, sid, f"a batch of {len(items)} message(s) for context.jsonl")
        async with files.payloads() as payloads:
            # Serialise before touching the log: an item that is not a message leaves it as is.
            def serialise() -> list[Any]:
                rows = context_rows(items, payloads.store)
                if rows:
                    payloads.hold_session(sid, EVENTS_FILE)
                return rows

            rows = await files.run(serialise)
            if not rows:
                return ContextRef(ref, 0, -1)
            lines, keys = lines_and_keys(rows)
            await payloads.before_line()
            span = await files.append_messages(sid, lines, keys)
            await payloads.after_line()
            batch = ContextBatch(
                reference=ref,
                bytes=sum(len(line) for line in lines),
                messages=len(items),
                **span.event_fields(),
            )
            # Not synced on its own (`_append_events`): the lines are in context.jsonl,
            # synced with their commit record; this event only says where they went.
            await self._record(sid, batch, sync=False)
        return ContextRef(ref, *span, span.runs)

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        """Store the whole text of one tool result as `sessions/{id}/tool_result-{tool_id}.txt`.

        The file holds the entire output, so line numbers in it match what the agent saw.
        A file is never overwritten: the same id with the same content returns the existing
        file; the same id with other content gets `tool_result-{tool_id}.2.txt`, `.3`, ...
        (a conditional write, so this holds between concurrent writers). On a disk, an entry
        at one of those names that is not a regular file with one link (a planted link) is
        never opened: the result takes the next free name.

        Args:
            session_id: a plain name.
            tool_result: a `ToolResultBlock`, an OpenAI `tool` message, an Anthropic
                `tool_result` block, or a pydantic model with `id` and `output`.

        Returns:
            The reference of the file.

        Raises:
            InvalidSessionId: before any I/O.
            InvalidContent: not a tool result, or a payload is not valid base64.
            OffloadError: the store refused the write; no partial file is left.
            SessionBusyError: this object's lease on the session lapsed and was taken over
                (`_fence`); nothing was written.
        """
        sid = validate_session_id(session_id)
        found = tool_output_of(tool_result)
        if fence := self._in_doubt(sid):
            await check_writer(fence, sid, f"the tool result of call {found.tool_id!r}")
        files = self._files
        urls: list[str] = []
        async with files.payloads() as payloads:

            def render() -> bytes:
                data = render_tool_output(found.output, payloads.store, urls)
                payloads.hold_session(sid, EVENTS_FILE)
                return data

            data = await files.run(render)
            await payloads.before_line()
            ref = await first_free_version(files, sid, tool_file_stem(found.tool_id), data)
            await payloads.after_line()
            # Synced only where it names data/ files (gc keeps those by it): the file and
            # its folder are synced already, and the event only says what it holds.
            await self._record(sid, tool_result_event(ref, data, found, urls), sync=bool(urls))
        return ref

    async def offload_data_block(self, block: Any) -> Any:
        """Store a block's base64 payload as `data/{sha256}.{ext}`, once.

        Args:
            block: a `DataBlock`, an OpenAI / Anthropic content-part dict, or a pydantic
                block with a `source` of type base64 (AgentScope's `DataBlock`).

        Returns:
            The same kind of block with a URL source whose url is the stored file's
            reference. A block that already points elsewhere is returned unchanged.

        Raises:
            InvalidContent: malformed base64 or an unsupported block.
            OffloadError: the store refused the write.
        """
        async with self._files.payloads() as payloads:
            stored = await self._files.run(lambda: offload_block(block, payloads.store))
            await payloads.before_line()
        return stored

    async def store_bytes(self, data: bytes, media_type: str | None = None) -> str:
        """Store raw bytes in data/ under their sha256 and the media type's extension, once.

        For adapters that hand over payloads rather than messages (Strands' ContextOffloader
        storage). The same bytes stored twice are one file.

        Returns:
            The reference of `data/<sha256>.<ext>`; `read_bytes` gives back the bytes and
            the media type.

        Raises:
            OffloadError: the store refused the write.
        """
        async with self._files.payloads() as payloads:
            reference = await self._files.run(lambda: payloads.store(bytes(data), media_type))
            await payloads.before_line()
        return reference

    async def record_event(self, session_id: str, kind: str, **fields: Any) -> None:
        """Append one line to the session's events.jsonl (used by the compressor).

        An event records what happened: a store that refuses the line (a full disk, a store
        past its deadline) costs the record, logged as a warning, never the caller's work.

        Raises:
            InvalidSessionId: before any I/O.
            OffloadError: the events log is a planted link.
            SessionBusyError: this object's lease on the session lapsed and was taken over
                (`_fence`); nothing was written.
        """
        sid = validate_session_id(session_id)
        if fence := self._in_doubt(sid):
            await check_writer(fence, sid, f"a {kind} event")
        await self._record_fields(sid, kind, fields)

    async def record_events(
        self, session_id: str, events: Sequence[tuple[str, dict[str, Any]]]
    ) -> None:
        """Append `events` (each a kind and its fields), in order, to the session's
        events.jsonl in one write (`EventBatches`); as `record_event` for each, a store that
        refuses the lines costs the record, logged as a warning.

        Raises:
            InvalidSessionId: before any I/O.
            OffloadError: the events log is a planted link.
            SessionBusyError: this object's lease on the session lapsed and was taken over
                (`_fence`); nothing was written.
        """
        session_id = validate_session_id(session_id)
        lines = [dumps_record(event_record(session_id, kind, dict(f))) for kind, f in events]
        if lines:
            if fence := self._in_doubt(session_id):
                kinds = ", ".join(dict.fromkeys(kind for kind, _ in events))
                await check_writer(fence, session_id, f"{len(lines)} event(s) ({kinds})")
            await self._append_events(session_id, lines, {kind for kind, _ in events})

    async def _record(self, session_id: str, event: Event, *, sync: bool = True) -> None:
        await self._record_fields(session_id, event.kind, event.fields(), sync=sync)

    async def _record_fields(
        self, session_id: str, kind: str, fields: dict[str, Any], *, sync: bool = True
    ) -> None:
        line = dumps_record(event_record(session_id, kind, fields))
        await self._append_events(session_id, [line], {kind}, sync=sync)

    async def _append_events(
        self, session_id: str, lines: list[bytes], kinds: set[str], *, sync: bool = True
    ) -> None:
        """Append event lines, synced unless every one is of a kind that rides unsynced
        (`UNSYNCED_KINDS`: a model call's record, a compaction's or a cut's decision) or
        `sync` is False: an event about content that is synced itself (a batch of
        context.jsonl, a tool_result file naming no data/ file), which nothing rests on. Such
        a line is in events.jsonl at once for every reader and survives a killed process; it
        is made durable by the next synced append to events.jsonl (an fsync covers all that
        was written to the file before it) or when the run's lease is released."""
        try:
            sync = sync and not kinds <= UNSYNCED_KINDS
            await self._files.append(session_id, EVENTS_FILE, lines, sync=sync)
        except OSError as exc:
            if self._files.event_failure_is_fatal(exc):
                raise
            shown = self._files.reference(session_id, EVENTS_FILE)
            named = ", ".join(sorted(kinds))
            logger.warning("could not record a %s event in %s: %s", named, shown, exc)

    async def write_state(self, session_id: str, state: dict[str, Any]) -> str:
        """Replace the session's state.json (the agent's live context) in one step: a
        reader sees the old state or the new.

        While this object holds the session's lease (`acquire_lease`, until `release()`),
        the store writes only if that lease is still the session's, in the same step as the
        write: a holder whose lease lapsed (its process paused, its event loop blocked past
        the time to live) and was taken over by another writer never overwrites the new
        holder's state.json. On a disk and in memory a lease cannot lapse while its holder
        runs, and the write is as without a lease. See "One writer" in the documentation.

        Raises:
            InvalidSessionId: before any I/O.
            SessionBusyError: this object's lease on the session was taken over by another
                writer, named in the message; nothing was written, and state.json is as the
                new holder left it.
            OffloadError: the store refused the write, or state.json is not a regular file
                (a planted link); the old state.json is as it was.
        """
        sid = validate_session_id(session_id)
        if fence := self._in_doubt(sid):
            await check_writer(fence, sid, "state.json")
        return await write_state(self._files, sid, state, self._fences.get(sid))

    async def append_history(self, session_id: str, record: Any) -> int:
        """Append one record to the session's history.jsonl as one line (`HistoryLog`): whole
        or absent whatever kills the writer, as every log line is (a reader skips a torn
        one; the next writer starts on a fresh line).

        Returns:
            The record's line number.

        Raises:
            InvalidSessionId: before any I/O.
            TypeError: the record is not JSON-serialisable; nothing was written.
            OffloadError: the store refused the write, or the log is a planted link.
            SessionBusyError: this object's lease on the session lapsed and was taken over
                (`_fence`); nothing was written.
        """
        sid = validate_session_id(session_id)
        if fence := self._in_doubt(sid):
            await check_writer(fence, sid, "a history.jsonl record")
        span = await self._files.append(sid, HISTORY_FILE, [dumps_line(record)])
        return span[0]

    async def read_history(self, session_id: str, *, after: int = 0) -> list[tuple[int, Any]]:
        """The session's history records after line `after`, each with its line number
        (`HistoryLog`), read from where this workspace's latest read or append of the log
        ended at or before it where the store keeps that (every store here does): a follower
        pays for what came since, not for the log. A line being written, or torn by a killed
        writer, is not returned (a later read returns it once whole); a line that is not JSON
        is skipped with a warning.

        Raises:
            InvalidSessionId: before any I/O.
            ValueError: `after` is negative.
            OffloadError: on a disk, the log is a planted link, a special file or a file with
                another hard link.
        """
        sid = validate_session_id(session_id)
        if after < 0:
            raise ValueError(f"after must be 0 or a line number, not {after}")
        files = self._files
        reference = files.reference(sid, HISTORY_FILE)
        try:
            data = await files.read_lines(reference, after + 1, _TO_THE_END)
        except InvalidReference:
            # No log yet, or an entry that is no plain file: `read_log` finds nothing in the
            # first case and refuses the second by name; a log made meanwhile is read again.
            if not await files.read_log(sid, HISTORY_FILE):
                return []
            data = await files.read_lines(reference, after + 1, _TO_THE_END)
        return parse_lines(data, after + 1, reference, warn=logger.warning)

    async def fork_session(
        self, source: str, new: str, *, step: int | None = None
    ) -> dict[str, Any]:
        """Start session `new` from `source` at `step`: `ctxoffload.workspace.fork_session`."""
        return await fork_session(self, source, new, step=step)

    async def purge_session(self, session_id: str) -> bool:
        """Delete a session's files. data/ is shared between sessions and kept.

        On a disk it takes the session's lock exclusively, so it waits for writers in
        progress, and writers after it start a fresh session: an append acknowledged after
        purge returns is in the new log at the line it reported. In a bucket, do not purge
        a session that other processes still write to: one that cached the end of its log
        would go on numbering lines after the purged ones.

        Returns:
            Whether there was anything to delete.

        Raises:
            InvalidSessionId: before any I/O.
            OffloadError: the store refused a removal (a read-only disk, a planted link).
        """
        return await self._files.delete_session(validate_session_id(session_id))

    # -- reading ------------------------------------------------------------------------------

    async def list_sessions(self) -> list[str]:
        """The ids of the sessions in this workspace, sorted (on a disk, links and hidden
        entries skipped)."""
        return await self._files.list_sessions()

    async def read_context(self, session_id: str) -> list[Any]:
        """Every committed message offloaded for a session, oldest first, as the JSON written.

        Only whole acknowledged batches are returned: a batch being written, or one cut by a
        killed writer, is not seen. A torn line is skipped, not an error.

        Raises:
            OffloadError: on a disk, the session folder or the log is a planted link, a
                special file, or a file with another hard link.
        """
        return await read_context(self._files, session_id)

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's events.jsonl entries, oldest first.

        Raises:
            OffloadError: as for `read_context`.
        """
        return await read_events(self._files, session_id)

    async def read_state(self, session_id: str) -> dict[str, Any] | None:
        """The session's saved live context, or None if there is none.

        Raises:
            OffloadError: as for `read_context`.
        """
        return await read_state(self._files, session_id)

    async def list_files(self, session_id: str) -> list[str]:
        """The references of the session's tool_result files, sorted by name (on a disk,
        regular files only: links, FIFOs, sockets and devices are skipped)."""
        return await list_files(self._files, session_id)

    def reference_key(self, reference: str | os.PathLike[str]) -> list[str]:
        """The parts of a reference below the workspace (`["sessions", id, name]`).

        Raises:
            InvalidReference: it names nothing inside the workspace.
        """
        return self._files.reference_key(reference_text(reference))

    async def read_reference(self, reference: str | os.PathLike[str]) -> bytes:
        """The bytes behind a reference this workspace returned (a log: all of it).

        On a disk the file is opened first, without following a link below the workdir,
        and verified on the open descriptor, so what is read is the file that was checked.

        Raises:
            InvalidReference: unknown, outside the workspace, a link or not a regular file,
                evicted (`InMemoryWorkspace(evict_after_turns=...)`), or out of the working
                session's reach (`isolate_sessions`).
            OffloadError: a bucket failed past the deadline.
        """
        return await self._files.read_reference(await self._within_reach(reference))

    async def read_lines(self, reference: str | os.PathLike[str], first: int, last: int) -> bytes:
        """Lines `first` to `last` (1-based, inclusive) of the file a reference names, each
        with its newline; fewer where the file ends first (the `LineReader` protocol).

        A log is read from where the latest batch this workspace wrote there at or before
        `first` begins, so reading back what an append just wrote costs that append's size,
        however long the log (a bucket: that segment alone, one GET); otherwise from the
        start. On a disk the batch's place is taken only while the file is the one written
        (same device and inode, long enough) and the 64 bytes before it are the ones
        written; an edit in place further back is not seen, as the line numbers of appends
        do not see it (the log is append-only).

        Raises:
            InvalidReference: as `read_reference`.
            ValueError: `first` is below 1 or `last` below `first`.
        """
        check_line_range(first, last)
        reference = await self._within_reach(reference)
        return await self._files.read_lines(reference, first, last)

    def compact_appends(self, session_id: str) -> int:
        """How many of this workspace's appends to the session's events.jsonl may have held a
        compaction's request or answer; 0 where its store does not tell
        (`events_unread_are_own`)."""
        count = getattr(self._files, "compact_appends", None)
        return count(validate_session_id(session_id), EVENTS_FILE) if count is not None else 0

    async def events_unread_are_own(self, session_id: str, line: int, compact_appends: int) -> bool:
        """Whether all a follower of the session's events.jsonl (`CompactRequests`) has not
        read yet, from `line` on, is this workspace's own appends, with no compaction's
        request or answer among them since it saw `compact_appends` (`compact_appends`): it
        need not read them back. False where the store cannot tell (only a disk can: its
        appender knows where each of its batches went and that no other writer's came
        between them)."""
        own = getattr(self._files, "unread_is_own", None)
        if own is None:
            return False
        sid = validate_session_id(session_id)
        return bool(await own(sid, EVENTS_FILE, line, compact_appends))

    async def read_bytes(self, reference: str | os.PathLike[str]) -> tuple[bytes, str]:
        """The bytes behind a reference, with their media type.

        Returns:
            (bytes, media type). The media type comes from the name's extension, which
            `store_bytes` chose from the type given (`media_type_of`): `.txt` is
            `text/plain`, `.json` `application/json`, an unknown type `.bin`,
            `application/octet-stream`.

        Raises:
            InvalidReference: as `read_reference`.
        """
        return await read_bytes(self, reference)

    async def _within_reach(self, reference: str | os.PathLike[str]) -> str:
        """The reference as text, once the working session may read it (`isolate_sessions`).

        Raises:
            InvalidReference: out of the working session's reach.
        """
        reference = reference_text(reference)
        if self.isolate_sessions:
            await check_reference(self, reference, self.reference_key(reference))
        return reference
