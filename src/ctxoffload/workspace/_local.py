"""LocalWorkspace: the on-disk workspace of DESIGN.md section 3."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import stat
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._disk.commit import check_line_range, iter_chunks, take_lines
from .._disk.events import ContextBatch
from .._disk.ids import tool_file_stem, validate_session_id
from .._disk.jsonl import JsonlAppender
from .._disk.layout import (
    CONTEXT_FILE,
    DATA_DIR,
    EVENTS_FILE,
    SESSIONS_DIR,
    STATE_FILE,
    TOP_FOLDERS,
    now_iso,
    purging_name,
    tool_result_name,
)
from .._disk.paths import (
    check_entry,
    file_to_link,
    open_dir,
    open_for_reading,
    remove_dead_temporaries,
    remove_tree,
    same_entry,
)
from .._disk.payloads import (
    as_message_list,
    context_rows,
    offload_block,
    render_tool_output,
    tool_output_of,
)
from .._disk.read import open_reference, reference_parts, reference_text
from .._disk.rows import dumps_line, lines_and_keys
from .._disk.scope import SessionScoped, check_reference
from .._disk.writer import event_record
from ..exceptions import OffloadError, SessionBusyError
from ..references import ContextRef
from ._core import (
    collect_garbage,
    list_files,
    read_bytes,
    read_context,
    read_events,
    read_state,
    tool_result_event,
    write_state,
)
from ._datastore import KnownPayloads, store_bytes
from ._disk_store import (
    SESSION_TRIES,
    DiskStore,
    LeaseCloser,
    finish_killed_purges,
    offload_errors,
    write_lease_record,
)
from ._fork import fork_session
from ._gc import (
    GcReport,
)
from ._lease import (
    LEASE_FILE,
    SessionLease,
    orphaned_here,
)

if TYPE_CHECKING:
    from ._protocol import GarbageCollector, Workspace

__all__ = ["LocalWorkspace"]

logger = logging.getLogger("ctxoffload")


class LocalWorkspace:
    """A workspace directory that holds everything offloaded from an agent's context.

    A `Workspace` and a `GarbageCollector`. Every public method is async and does its file
    work in one worker-thread hop. References are absolute paths, whatever form `workdir`
    was given in (made absolute against the current directory at construction, links not
    resolved), because other frameworks' file tools refuse relative paths (AgentScope's
    Read does) and an agent's working directory may change.

    Args:
        workdir: the workspace root; created on first use.
        fsync: flush every write to stable storage before returning (the default). Turn
            off only where losing the last writes on a power cut is acceptable.
        isolate_sessions: keep sessions apart, for a workspace that serves many users:
            while an agent works in a session, what it reads back (the retrieval tool, the
            workspace file tools, the adapters) is confined to that session's folder, its
            sub-agents' and fork origin's, and the data/ files their messages name; another
            session's reference is an `InvalidReference` saying so. Off by default: one
            agent and its sub-agents share the workspace.

    Example::

        ws = LocalWorkspace(workdir="./agent_workspace")
        await ws.initialize()
        path = await ws.offload_tool_result("run-42", result_block)
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str] = "./agent_workspace",
        *,
        fsync: bool = True,
        isolate_sessions: bool = False,
    ):
        self.workdir = Path(os.path.abspath(workdir))
        self.fsync = fsync
        self.isolate_sessions = isolate_sessions
        self._jsonl = JsonlAppender(fsync=fsync)
        # Resolved once: the workdir may be a symlink, nothing below it is followed.
        self._root = os.path.realpath(self.workdir)
        self._known_payloads = KnownPayloads()
        self._disk = DiskStore(self.workdir, self._root, fsync=fsync)

    def __repr__(self) -> str:
        return f"LocalWorkspace(workdir={str(self.workdir)!r})"

    # -- layout ---------------------------------------------------------------------------

    @property
    def sessions_dir(self) -> Path:
        """`{workdir}/sessions`."""
        return self.workdir / SESSIONS_DIR

    @property
    def data_dir(self) -> Path:
        """`{workdir}/data`, the content-addressed store."""
        return self.workdir / DATA_DIR

    def session_dir(self, session_id: str) -> Path:
        """`{workdir}/sessions/{session_id}` (validated; not created)."""
        return self.sessions_dir / validate_session_id(session_id)

    def context_path(self, session_id: str) -> Path:
        """The session's context.jsonl."""
        return self.session_dir(session_id) / CONTEXT_FILE

    def events_path(self, session_id: str) -> Path:
        """The session's events.jsonl."""
        return self.session_dir(session_id) / EVENTS_FILE

    def state_path(self, session_id: str) -> Path:
        """The session's state.json (the agent's live context, written by `Agent`)."""
        return self.session_dir(session_id) / STATE_FILE

    async def initialize(self) -> None:
        """Create `sessions/`, `data/` and `skills/`, and clear what crashed writers left.

        Idempotent; offloading works without it. Removes the `.tmp-*` files of writers that
        died (killed mid-write) in `sessions/*/` and `data/`, at once, and never one a live
        writer holds (`temporary_file`: a writer locks its temporary file while it exists),
        and the `.purge-*` directories of purges that were killed.

        Raises:
            OffloadError: a directory cannot be created, or is a planted link.
        """
        await asyncio.to_thread(self._initialize)

    def _initialize(self) -> None:
        with offload_errors("initialize", str(self.workdir)):
            self._initialize_unwrapped()

    def _initialize_unwrapped(self) -> None:
        for sub in TOP_FOLDERS:
            with self._disk.tree(sub, create=True):
                pass
        with self._disk.tree(DATA_DIR, create=False) as data_fd:
            remove_dead_temporaries(data_fd)
        with (
            self._disk.tree(SESSIONS_DIR, create=False) as sessions_fd,
            os.scandir(sessions_fd) as it,
        ):
            entries = [e for e in it if e.is_dir(follow_symlinks=False)]
        with self._disk.tree(SESSIONS_DIR, create=False) as sessions_fd:
            finish_killed_purges(sessions_fd, remove=True)
            for entry in entries:
                if not entry.name.startswith("."):
                    try:
                        session_fd = open_dir(sessions_fd, entry.name, entry.name, create=False)
                    except (OSError, OffloadError):
                        continue
                    try:
                        remove_dead_temporaries(session_fd)
                    finally:
                        os.close(session_fd)

    @contextlib.contextmanager
    def _data_in_use(self) -> Iterator[None]:
        """Hold data/ shared from storing payloads until the log line naming them is written.

        gc() takes data/ exclusively before it looks for references, so it never removes a
        file that an offload in progress has stored but not yet logged.
        """
        with contextlib.ExitStack() as stack:
            try:
                fd = stack.enter_context(self._disk.tree(DATA_DIR, create=False))
            except (FileNotFoundError, OffloadError):
                # No data/ yet: the first store makes it, and a new file is kept by gc. A
                # planted data/ is refused by the store itself, if there is one to make.
                pass
            else:
                fcntl.flock(fd, fcntl.LOCK_SH)
            yield

    # -- writing --------------------------------------------------------------------------

    def _store(self, raw: bytes, media_type: str | None) -> str:
        shown = str(self.data_dir)
        with offload_errors("write to", shown), self._disk.tree(DATA_DIR, create=True) as data_fd:
            # Shared with other writers, exclusive for gc() while it removes files.
            fcntl.flock(data_fd, fcntl.LOCK_SH)
            return store_bytes(data_fd, shown, raw, media_type, fsync=self.fsync)

    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> ContextRef:
        """Append messages, oldest first, to `sessions/{session_id}/context.jsonl`.

        All messages of one call land as consecutive lines in one write, even with other
        writers (tasks or processes) appending to the same session at the same time, and
        readers see all of them or none (the commit rule: see "The on-disk format" in the
        documentation).

        Idempotent: a message whose top-level `id` is already in the log with the same
        content (see `message_key`) is not written again, so offloading the same messages
        after a crash (an agent resumed from an older state.json) returns the span where
        they already are; a message that grew under its id is written as a new version.
        Messages without an `id` are always written.

        Args:
            session_id: a plain name (see `InvalidSessionId`).
            msgs: ctxoffload `Msg` objects, OpenAI / Anthropic message dicts, or pydantic models.

        Returns:
            The path of context.jsonl, as a `ContextRef` carrying the lines of the batch (when
            some messages were already there, the span from the first to the last line of
            the batch's messages, which may include lines of other writers).

        Raises:
            InvalidSessionId: before any I/O.
            InvalidContent: an item is not a message at all; nothing was written. (A
                message that cannot be stored as given gets a stand-in line instead; see
                "Errors" in the documentation.)
            OffloadError: the disk refused the write, or a planted link was found; the log
                is as it was before.
        """
        validate_session_id(session_id)
        return await asyncio.to_thread(self._offload_context, session_id, as_message_list(msgs))

    def _offload_context(self, session_id: str, msgs: list[Any]) -> ContextRef:
        with self._data_in_use():
            return self._offload_context_using_data(session_id, msgs)

    def _offload_context_using_data(self, session_id: str, msgs: list[Any]) -> ContextRef:
        path = self.context_path(session_id)
        # Serialise (and store payloads) before touching the log, so an item that is not a
        # message leaves the log untouched.
        rows = context_rows(msgs, self._store)
        if not rows:
            return ContextRef(str(path), 0, -1)
        lines, ids = lines_and_keys(rows)
        shown = str(path)
        with (
            offload_errors("append to", shown),
            self._disk.session_for_writing(session_id) as dir_fd,
        ):
            check_entry(dir_fd, EVENTS_FILE, str(self.events_path(session_id)))
            span = self._jsonl.append(dir_fd, CONTEXT_FILE, str(path), lines, ids, commit=True)
            batch = ContextBatch(
                reference=str(path),
                bytes=sum(len(line) for line in lines),
                messages=len(msgs),
                **span.event_fields(),
            )
            self._event(dir_fd, session_id, kind=batch.kind, **batch.fields())
        return ContextRef(str(path), *span, span.runs)

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        """Write the whole text of one tool result to `sessions/{id}/tool_result-{tool_id}.txt`.

        The file holds the entire output, so line numbers in it match what the agent saw.
        A file is never overwritten: the same id with the same content returns the existing
        file; the same id with other content gets `tool_result-{tool_id}.2.txt`, `.3`, ...
        An entry at one of those names that is not a regular file with one link (a planted
        link) is never opened: the result takes the next free name.

        Args:
            session_id: a plain name.
            tool_result: a `ToolResultBlock`, an OpenAI `tool` message, an Anthropic
                `tool_result` block, or a pydantic model with `id` and `output`.

        Returns:
            The path of the file.

        Raises:
            InvalidSessionId: before any I/O.
            InvalidContent: not a tool result, or a payload is not valid base64.
            OffloadError: the disk refused the write; no partial file is left.
        """
        validate_session_id(session_id)
        return await asyncio.to_thread(self._offload_tool_result, session_id, tool_result)

    def _offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        with self._data_in_use():
            return self._offload_tool_result_using_data(session_id, tool_result)

    def _offload_tool_result_using_data(self, session_id: str, tool_result: Any) -> str:
        found = tool_output_of(tool_result)
        urls: list[str] = []
        data = render_tool_output(found.output, self._store, urls)
        session_dir = self.session_dir(session_id)
        stem = tool_file_stem(found.tool_id)
        first = str(session_dir / tool_result_name(stem))
        with offload_errors("write", first), self._disk.session_for_writing(session_id) as dir_fd:
            check_entry(dir_fd, EVENTS_FILE, str(self.events_path(session_id)))
            name = self._write_unique(dir_fd, stem, data)
            path = str(session_dir / name)
            stored = tool_result_event(path, data, found, urls)
            self._event(dir_fd, session_id, kind=stored.kind, **stored.fields())
        return path

    def _write_unique(self, dir_fd: int, stem: str, data: bytes) -> str:
        """Link `data` in as the first free version of the tool result `stem`; its name."""
        with file_to_link(dir_fd, tool_result_name(stem), data, fsync=self.fsync) as link_as:
            n = 1
            while True:
                name = tool_result_name(stem, n)
                try:
                    # A link never replaces an existing entry (nor follows one), which makes
                    # "never overwritten" hold against concurrent writers too.
                    link_as(name)
                    break
                except FileExistsError:
                    if _same_content(dir_fd, name, data):
                        break
                    n += 1
        if self.fsync:
            os.fsync(dir_fd)
        return name

    async def offload_data_block(self, block: Any) -> Any:
        """Store a block's base64 payload as `data/{sha256}.{ext}`, once.

        An existing data/ entry is used only when it is a regular file with one link whose
        bytes hash to its name; anything else at that name is replaced atomically.

        Args:
            block: a `DataBlock`, an OpenAI / Anthropic content-part dict, or a pydantic
                block with a `source` of type base64 (AgentScope's `DataBlock`).

        Returns:
            The same kind of block with a URL source whose url is the stored file's path.
            A block that already points elsewhere is returned unchanged.

        Raises:
            InvalidContent: malformed base64 or an unsupported block.
            OffloadError: the disk refused the write, or data/ is a planted link.
        """
        return await asyncio.to_thread(self._offload_data_block, block)

    def _offload_data_block(self, block: Any) -> Any:
        from ..messages import Base64Source, DataBlock, URLSource

        if not (isinstance(block, DataBlock) and isinstance(block.source, Base64Source)):
            return offload_block(block, self._store)
        source = block.source
        known = None
        # Any failure here (no data/ yet, a planted link) is a miss: the full path below
        # then validates the payload first and reports a real problem as it always does.
        with (
            contextlib.suppress(OSError, OffloadError),
            self._disk.tree(DATA_DIR, create=False) as fd,
        ):
            fcntl.flock(fd, fcntl.LOCK_SH)  # gc() takes it exclusively to remove files
            known = self._known_payloads.lookup(source.data, source.media_type, fd)
        if known is not None:
            url = URLSource(url=known, media_type=source.media_type)
            return block.model_copy(update={"source": url})
        stored = offload_block(block, self._store)
        with (
            contextlib.suppress(OSError, OffloadError),
            self._disk.tree(DATA_DIR, create=False) as fd,
        ):
            self._known_payloads.remember(source.data, source.media_type, fd, stored.source.url)
        return stored

    async def record_event(self, session_id: str, kind: str, **fields: Any) -> None:
        """Append one line to the session's events.jsonl (used by the compressor).

        Raises:
            OffloadError: the session directory cannot be made, or is a planted link.
        """
        validate_session_id(session_id)

        def record() -> None:
            # The session may have no directory yet (nothing offloaded so far).
            with self._disk.session_for_writing(session_id) as dir_fd:
                self._event(dir_fd, session_id, kind=kind, **fields)

        await asyncio.to_thread(record)

    def _event(self, dir_fd: int, session_id: str, *, kind: str, **fields: Any) -> None:
        # An event is a record of what happened, not content: failing to write one must not
        # undo the offload it describes. A planted link is not a failure to shrug off.
        line = dumps_line(event_record(session_id, kind, fields))
        path = str(self.events_path(session_id))
        try:
            self._jsonl.append(dir_fd, EVENTS_FILE, path, [line])
        except OSError as exc:
            if isinstance(exc, OffloadError) and not _is_disk_error(exc):
                raise
            logger.warning("could not record a %s event in %s: %s", kind, path, exc)

    async def write_state(self, session_id: str, state: dict[str, Any]) -> str:
        """Atomically replace the session's state.json (the agent's live context).

        Raises:
            OffloadError: the disk refused the write, or state.json is not a regular file
                (a planted link); the old state.json is as it was.
        """
        return await write_state(self._disk, session_id, state)

    async def fork_session(
        self, source: str, new: str, *, step: int | None = None
    ) -> dict[str, Any]:
        """Start session `new` from `source` at `step`: `ctxoffload.workspace.fork_session`."""
        return await fork_session(self, source, new, step=step)

    # -- one live writer --------------------------------------------------------------------

    async def acquire_lease(
        self, session_id: str, *, agent: str | None = None, ttl: float | None = None
    ) -> SessionLease:
        """Take the session's lease: `sessions/{id}/lease.json`, locked while held.

        The lock is an exclusive `flock` on the open file, so it ends with the holder's
        process however that ends (`ttl` is not needed on one machine and is ignored). The
        file records the holder (pid, host, agent, start) for the error a second writer
        gets and for people looking at the folder. Readers never take it.

        Raises:
            SessionBusyError: another open lease holds the session (in this process or
                another), named in the message.
            OffloadError: the folder cannot be made, or `lease.json` is a planted link.
        """
        sid = validate_session_id(session_id)
        path = str(self.session_dir(sid) / LEASE_FILE)
        try:
            fd, holder = await asyncio.to_thread(self._disk.take_lease, sid, path, agent)
        except SessionBusyError as busy:
            if not orphaned_here(busy.holder):
                raise
            # Collected just now, its descriptor closed: the lock is free.
            fd, holder = await asyncio.to_thread(self._disk.take_lease, sid, path, agent)
        # Closing the descriptor drops the lock: when the lease is released, or when the
        # lease object is garbage-collected unreleased.
        closer = LeaseCloser(fd)
        fsync = self.fsync

        async def release() -> None:
            def give_up() -> None:
                if closer.fd is None:
                    return
                try:
                    write_lease_record(closer.fd, {**holder, "released": now_iso()}, fsync=fsync)
                finally:
                    closer.close()

            await asyncio.to_thread(give_up)

        lease = SessionLease(sid, holder, path, release=release)
        weakref.finalize(lease, closer.close)
        return lease

    # -- reading --------------------------------------------------------------------------

    async def list_sessions(self) -> list[str]:
        """The ids of the sessions in this workspace, sorted (links and hidden entries skipped)."""
        return await asyncio.to_thread(self._list_sessions)

    def _list_sessions(self) -> list[str]:
        try:
            with self._disk.folder(SESSIONS_DIR) as sessions:
                return sessions.sessions()
        except FileNotFoundError:
            return []

    async def read_context(self, session_id: str) -> list[Any]:
        """Every committed message offloaded for a session, oldest first, as the JSON written.

        Only whole acknowledged batches are returned: a batch being written, or one cut by a
        killed writer, is not seen. A torn line is skipped, not an error.

        Raises:
            OffloadError: the session directory or the log is a planted link, a special
                file, or a file with another hard link.
        """
        return await read_context(self._disk, session_id)

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's events.jsonl entries, oldest first.

        Raises:
            OffloadError: as for `read_context`.
        """
        return await read_events(self._disk, session_id)

    async def read_state(self, session_id: str) -> dict[str, Any] | None:
        """The session's saved live context, or None if there is none.

        Raises:
            OffloadError: as for `read_context`.
        """
        return await read_state(self._disk, session_id)

    async def list_files(self, session_id: str) -> list[str]:
        """The paths of the session's tool_result files, sorted by name.

        Only regular files are listed: links, FIFOs, sockets and devices are skipped.
        """
        return await list_files(self._disk, session_id)

    def _open_reference(
        self, reference: str | os.PathLike[str]
    ) -> tuple[int, os.stat_result, list[str], int]:
        """Open the file a reference names through the reader: `(fd, its fstat, its parts,
        where reading it stops)` (`open_reference`)."""
        return open_reference(reference, str(self.workdir), self._root)

    def reference_key(self, reference: str | os.PathLike[str]) -> list[str]:
        """The parts of a reference below the workdir (`["sessions", id, name]`).

        Raises:
            InvalidReference: it names nothing inside the workspace.
        """
        return reference_parts(reference, str(self.workdir), self._root)

    def resolve_reference(self, reference: str | os.PathLike[str]) -> Path:
        """The file a reference names, checked to lie inside the workspace.

        Accepts a reference as returned (relative to the current directory or absolute) or
        a path relative to the workdir. Every component below the workdir is opened without
        following links, and the file must be a regular file with one link.

        Raises:
            InvalidReference: it points outside the workspace, through a link, or names no
                regular file.
        """
        fd, _, parts, _ = self._open_reference(reference)
        os.close(fd)
        return Path(self._root, *parts)

    async def read_reference(self, reference: str | os.PathLike[str]) -> bytes:
        """The bytes behind a reference this workspace returned.

        The file is opened first and verified on the open descriptor, so what is read is
        the file that was checked.

        Raises:
            InvalidReference: unknown, outside the workspace, a link or not a regular file.
        """
        reference = reference_text(reference)
        if self.isolate_sessions:
            await check_reference(self, reference, self.reference_key(reference))

        def read() -> bytes:
            fd, _, _, end = self._open_reference(reference)
            try:
                return b"".join(iter_chunks(fd, 0, end))
            finally:
                os.close(fd)

        return await asyncio.to_thread(read)

    async def read_lines(self, reference: str | os.PathLike[str], first: int, last: int) -> bytes:
        """Lines `first` to `last` (1-based, inclusive) of the file a reference names, each
        with its newline; fewer where the file ends first (the `LineReader` protocol).

        A log is read from where the latest batch this workspace wrote there at or before
        `first` begins, so reading back what an append just wrote costs that append's size,
        however long the log; otherwise from the start. The batch's place is taken only
        while the file is the one written (same device and inode, long enough) and the 64
        bytes before it are the ones written; an edit in place further back is not seen,
        as the line numbers of appends do not see it (the log is append-only).

        Raises:
            InvalidReference: as `read_reference`.
            ValueError: `first` is below 1 or `last` below `first`.
        """
        check_line_range(first, last)
        reference = reference_text(reference)
        if self.isolate_sessions:
            await check_reference(self, reference, self.reference_key(reference))

        def read() -> bytes:
            fd, st, _, end = self._open_reference(reference)
            try:
                line, offset = self._jsonl.line_start(fd, st, first)
                chunks = iter_chunks(fd, offset, end)
                return take_lines(chunks, first - line, last - first + 1)
            finally:
                os.close(fd)

        return await asyncio.to_thread(read)

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
        return await asyncio.to_thread(self._store, bytes(data), media_type)

    async def read_bytes(self, reference: str | os.PathLike[str]) -> tuple[bytes, str]:
        """The bytes behind a reference, with their media type.

        Returns:
            (bytes, media type). The media type comes from the name's extension, which
            `store_bytes` chose from the type given (`media_type_of`): `.txt` is
            `text/plain`, `.json` `application/json`, an unknown type `.bin`,
            `application/octet-stream`.

        Raises:
            InvalidReference: unknown, or outside the workspace.
        """
        return await read_bytes(self, reference)

    async def purge_session(self, session_id: str) -> bool:
        """Delete a session's directory. data/ is shared between sessions and kept.

        Takes the session's lock exclusively, so it waits for writers in progress and
        writers after it start a fresh session directory: an append acknowledged after purge
        returns is in the new log at the line it reported. Nothing is left behind.

        Returns:
            Whether there was anything to delete.

        Raises:
            OffloadError: the directory cannot be removed (read-only disk, a planted link).
        """
        sid = validate_session_id(session_id)
        shown = str(self.session_dir(sid))

        def purge() -> bool:
            with offload_errors("purge", shown):
                try:
                    with self._disk.tree(SESSIONS_DIR, create=False) as sessions_fd:
                        return _purge_locked(sessions_fd, sid, shown)
                except FileNotFoundError:
                    return False

        return await asyncio.to_thread(purge)

    async def gc(
        self,
        *,
        older_than: float | None = None,
        max_bytes: int | None = None,
        dry_run: bool = False,
    ) -> GcReport:
        """Remove old sessions, then the oldest until the workspace fits, then unused data.

        1. Sessions whose last activity (the newest mtime of their files) is more than
           `older_than` seconds ago are removed.
        2. If `max_bytes` is given, the remaining sessions are removed oldest first until the
           sessions plus the data/ files they reference take at most `max_bytes`.
        3. data/ files that no remaining session references (in context.jsonl, tool_result
           files, events.jsonl or state.json) are removed, except those used within the last
           `DATA_GRACE_SECONDS` (a writer may have stored one and not yet logged it).

        It also finishes the removals of a purge or gc killed on the way (their folders,
        renamed aside, count in `bytes_freed`).

        Never removes a live session (`GcReport.sessions_kept` says why each stays): one
        whose lease is held, or whose files a session that stays references (a fork's
        origin, a sub-agent's parent or child); a session referenced by a newer one goes only
        after it.

        Safe while agents write: a session is removed under the same exclusive lock as
        `purge_session`, only if nothing was written to it since it was measured and its
        lease is free; a lease is taken only under that lock held shared, so never on a
        session being removed. Sessions that name each other (a sub-agent and its parent)
        are locked together and go together or not at all. data/ files are removed under
        an exclusive lock on data/ that every store shares. A referenced file is never
        removed.

        Args:
            older_than: age in seconds; None skips step 1.
            max_bytes: size budget for the whole workspace; None skips step 2.
            dry_run: remove nothing; report what would be removed.

        Returns:
            A `GcReport`.

        Raises:
            ConfigError: a negative `older_than` or `max_bytes`.
            OffloadError: a planted link, or the disk refused a removal.
        """
        return await collect_garbage(
            self._disk, older_than=older_than, max_bytes=max_bytes, dry_run=dry_run
        )


def _purge_locked(sessions_fd: int, sid: str, shown: str) -> bool:
    for _ in range(SESSION_TRIES):
        try:
            fd = open_dir(sessions_fd, sid, shown, create=False)
        except FileNotFoundError:
            return False
        except OffloadError:
            st = os.stat(sid, dir_fd=sessions_fd, follow_symlinks=False)
            if not stat.S_ISLNK(st.st_mode):
                raise
            # A planted link: remove the link itself, never what it points to.
            os.unlink(sid, dir_fd=sessions_fd)
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not same_entry(fd, sessions_fd, sid):
                continue  # another purge got there first; look at what is there now
            # Rename first so a reader sees the whole session or none of it, and so writers
            # waiting for the lock find that their directory is gone.
            doomed = purging_name(sid)
            os.rename(sid, doomed, src_dir_fd=sessions_fd, dst_dir_fd=sessions_fd)
            remove_tree(sessions_fd, doomed)
            return True
        finally:
            os.close(fd)
    raise OffloadError(f"{shown} kept changing while being purged: retry", shown)


def _is_disk_error(exc: OffloadError) -> bool:
    """Whether an OffloadError comes from the disk refusing (not from a planted entry)."""
    cause = exc.__cause__
    return isinstance(cause, OSError) and cause.errno not in (errno.ELOOP, errno.ENOTDIR)


def _same_content(dir_fd: int, name: str, data: bytes) -> bool:
    """Whether `name` is a regular file with one link holding exactly `data`."""
    try:
        # Waits out the moment a concurrent writer of the same result has two links.
        fd = open_for_reading(dir_fd, name, name)
    except (OSError, OffloadError):
        return False
    try:
        size = os.fstat(fd).st_size
        return size == len(data) and b"".join(iter_chunks(fd, 0, size)) == data
    finally:
        os.close(fd)


if TYPE_CHECKING:  # mypy checks that LocalWorkspace is what it is declared to be
    _workspace: type[Workspace] = LocalWorkspace
    _scoped: type[SessionScoped] = LocalWorkspace
    _collector: type[GarbageCollector] = LocalWorkspace
