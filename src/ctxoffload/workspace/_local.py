"""LocalWorkspace: the on-disk workspace of DESIGN.md section 3."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._disk.ids import validate_session_id
from .._disk.layout import (
    CONTEXT_FILE,
    DATA_DIR,
    EVENTS_FILE,
    SESSIONS_DIR,
    STATE_FILE,
    TOP_FOLDERS,
    now_iso,
)
from .._disk.paths import (
    open_dir,
    remove_dead_temporaries,
)
from .._disk.payloads import (
    offload_block,
)
from .._disk.read import open_reference
from .._disk.scope import SessionScoped
from ..exceptions import OffloadError, SessionBusyError
from ._collected import CollectedWorkspace
from ._datastore import KnownPayloads
from ._disk_lease import LeaseCloser, write_lease_record
from ._disk_store import DiskStore, finish_killed_purges, offload_errors
from ._lease import (
    LEASE_FILE,
    SessionLease,
    orphaned_here,
)
from ._transfer import read_layout, write_layout

if TYPE_CHECKING:
    from ._protocol import GarbageCollector, Workspace
    from ._store import SessionCollector

__all__ = ["LocalWorkspace"]

logger = logging.getLogger("ctxoffload")


class LocalWorkspace(CollectedWorkspace):
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
        # Resolved once: the workdir may be a symlink, nothing below it is followed.
        self._root = os.path.realpath(self.workdir)
        self._known_payloads = KnownPayloads()
        self._disk = self._files = DiskStore(self.workdir, self._root, fsync=fsync)

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

    async def download(
        self,
        folder: str | os.PathLike[str],
        *,
        session: str | None = None,
        data: bool = True,
        check: bool = False,
    ) -> list[str]:
        """Copy the workspace, or one session, into another folder, as the other backends'
        `download` does: each log up to where a reader stops (whole acknowledged batches,
        no torn last line), every other file of the layout, and (with `data`) the data/
        files (a session's: those it names). Files are read through the workspace's reader
        (no link followed, a planted link refused) and written as new files: nothing there
        is overwritten, no link in `folder` followed.

        Args:
            folder: an empty or missing folder to fill.
            session: only this session.
            data: copy data/ too.
            check: report what was left out (a torn last line, a data/ file named but
                missing).

        Returns:
            The problems found (with `check`), one line each.

        Raises:
            InvalidSessionId: before any I/O.
            InvalidContent: a planted link, a special file, a name outside the layout, or
                a data/ file whose bytes do not match its name.
            FileExistsError: a file to write is there already.
        """
        sessions = None if session is None else [validate_session_id(session)]
        problems: list[str] = []
        root = os.path.abspath(os.fspath(folder))

        def copy() -> None:
            copies, blobs = read_layout(str(self.workdir), sessions, problems)
            write_layout(root, copies, blobs if data else {})

        await asyncio.to_thread(copy)
        return problems if check else []

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

    # -- writing (what is not here is `StoreWorkspace`'s, over the `DiskStore`) -------------

    async def offload_data_block(self, block: Any) -> Any:
        """Store a block's base64 payload as `data/{sha256}.{ext}`, once.

        A payload stored before through this object is not hashed again while its file is
        the one written (`KnownPayloads`). An existing data/ entry is used only when it is a
        regular file with one link whose bytes hash to its name; anything else at that name
        is replaced atomically.

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
            return offload_block(block, self._disk.store_payload)
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
        stored = offload_block(block, self._disk.store_payload)
        with (
            contextlib.suppress(OSError, OffloadError),
            self._disk.tree(DATA_DIR, create=False) as fd,
        ):
            self._known_payloads.remember(source.data, source.media_type, fd, stored.source.url)
        return stored

    def _collector(self) -> SessionCollector:
        return self._disk

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

        async def release() -> None:
            def give_up() -> None:
                if closer.fd is None:
                    return
                try:
                    # The run's record is durable when its lease goes (`UNSYNCED_KINDS`).
                    self._disk.sync_records(sid)
                except OffloadError as exc:
                    logger.warning("could not sync the record of session %r: %s", sid, exc)
                try:
                    write_lease_record(closer.fd, {**holder, "released": now_iso()})
                finally:
                    closer.close()

            await asyncio.to_thread(give_up)

        lease = SessionLease(sid, holder, path, release=release)
        weakref.finalize(lease, closer.close)
        return lease

    # -- reading --------------------------------------------------------------------------

    def resolve_reference(self, reference: str | os.PathLike[str]) -> Path:
        """The file a reference names, checked to lie inside the workspace.

        Accepts a reference as returned (relative to the current directory or absolute) or
        a path relative to the workdir. Every component below the workdir is opened without
        following links, and the file must be a regular file with one link.

        Raises:
            InvalidReference: it points outside the workspace, through a link, or names no
                regular file.
        """
        fd, _, parts, _ = open_reference(reference, str(self.workdir), self._root)
        os.close(fd)
        return Path(self._root, *parts)


if TYPE_CHECKING:  # mypy checks that LocalWorkspace is what it is declared to be
    _workspace: type[Workspace] = LocalWorkspace
    _scoped: type[SessionScoped] = LocalWorkspace
    _collector: type[GarbageCollector] = LocalWorkspace
