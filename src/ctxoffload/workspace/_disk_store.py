"""The disk store: a workspace's folders reached without following a link, and the steps of
gc that take the disk's own way (`SessionCollector`): flocks, renames aside, unlinks.

A writer holds its session folder shared and gc holds it exclusively, so a session is removed
only when no writer is in it, and a lease is taken only under that shared lock, so never on
a session being removed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._disk.commit import iter_chunks, take_lines
from .._disk.ids import validate_session_id
from .._disk.jsonl import JsonlAppender
from .._disk.layout import (
    CONTEXT_FILE,
    DATA_DIR,
    EVENTS_FILE,
    PURGING_PREFIX,
    SESSIONS_DIR,
    purging_name,
)
from .._disk.paths import (
    check_entry,
    file_to_link,
    open_dir,
    open_for_reading,
    open_tree,
    remove_tree,
    same_entry,
    temporary_file,
    tree_size,
    verify_file,
)
from .._disk.read import Folder, open_reference, reference_parts
from .._loop import off_loop
from ..exceptions import OffloadError
from ._datastore import store_bytes
from ._disk_lease import lease_holder, read_lease_record, why_free, write_lease_record
from ._gc import (
    DATA_GRACE_SECONDS,
    GcReport,
    SessionUsage,
    UnitOutcome,
    data_files,
    session_usage,
)
from ._lease import LEASE_FILE, busy_error, holder_record, took_over

if TYPE_CHECKING:
    from .._disk.batch import Span
    from ._fence import StateFence
    from ._store import Payloads, SessionCollector, SessionFiles

__all__ = ["SESSION_TRIES", "DiskStore", "finish_killed_purges", "offload_errors"]


@contextlib.contextmanager
def offload_errors(action: str, shown: str) -> Iterator[None]:
    """Turn an OSError into an OffloadError naming `shown`; OffloadErrors pass unchanged."""
    try:
        yield
    except OffloadError:
        raise
    except OSError as exc:
        raise OffloadError(f"cannot {action} {shown}: {exc.strerror or exc}", shown) from exc


_T = TypeVar("_T")

SESSION_TRIES = 50
"""How many times a writer retries when the session folder it opened was purged under it."""

logger = logging.getLogger("ctxoffload")
# What every line of a compaction's request or answer holds (their kinds, `compact_request`
# and `compact`): an append without it holds neither.
_COMPACT = b"compact"


class DiskStore:
    """A workspace's folders on disk, below `root` (the workdir resolved once: the workdir
    may be a symlink, nothing below it is followed); `shown` is the workdir as the user
    gave it, for messages; `fsync` flushes each write to stable storage."""

    def __init__(self, shown: Path, root: str, *, fsync: bool) -> None:
        self.shown = shown
        self.root = root
        self.fsync = fsync
        self.jsonl = JsonlAppender(fsync=fsync)
        # Per log: how many of this store's appends to it may hold a compaction's request or
        # answer (`unread_is_own`).
        self._compact_appends: dict[str, int] = {}
        # The sessions whose events.jsonl this store appended to without an fsync since its
        # last synced append (`sync_records`).
        self._unsynced: set[str] = set()
        # Each session's folder as shown (`_session_shown`): every append names its log by
        # it, and a path joined by pathlib costs 10 us (seven a model call through a door).
        self._sessions_shown: dict[str, str] = {}

    def tree(self, *parts: str, create: bool) -> contextlib.AbstractContextManager[int]:
        """A folder to write in: made if `create`, reached without following a link."""
        return open_tree(self.root, parts, str(self.shown), create=create)

    def folder(self, *parts: str) -> Folder:
        """A folder to read, through the workspace's reader (never made)."""
        return Folder(str(self.shown), *parts, root=self.root)

    @contextlib.contextmanager
    def session_for_writing(self, session_id: str) -> Iterator[int]:
        """The session directory, made if needed, held against `purge_session` while in use.

        Writers hold a shared flock on the directory; purge takes it exclusively. A writer
        that opened the directory just before a purge renamed it finds, once it has the lock,
        that the entry `sessions/{id}` is no longer that directory, and starts again on the
        new one: nothing acknowledged ever lands in a directory being deleted.
        """
        sid = validate_session_id(session_id)
        shown = self._session_shown(sid)
        with self.tree(SESSIONS_DIR, create=True) as sessions_fd:
            for _ in range(SESSION_TRIES):
                try:
                    fd = open_dir(sessions_fd, sid, shown, create=True)
                except FileNotFoundError:
                    continue  # purged between mkdir and open
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH)
                    if same_entry(fd, sessions_fd, sid):
                        break
                except BaseException:
                    os.close(fd)
                    raise
                os.close(fd)
            else:
                raise OffloadError(
                    f"{shown} was removed {SESSION_TRIES} times while writing to it: "
                    "stop whatever keeps purging it and retry",
                    shown,
                )
            try:
                yield fd
            finally:
                os.close(fd)

    async def put(self, session_id: str, name: str, data: bytes) -> str:
        """Replace the session's file `name` in one step (a temporary file renamed over it):
        a reader sees the old bytes or the new, never part of either.

        Raises:
            OffloadError: the disk refused the write, or `name` is not a regular file (a
                planted link); the old file is as it was.
        """
        return await off_loop(self._put, session_id, name, data)

    async def put_fenced(
        self, session_id: str, name: str, data: bytes, fence: StateFence | None
    ) -> str:
        """`put`: a lease on a disk is a `flock` held as long as its descriptor is open, so
        it never lapses under a holder that still runs, and there is nothing to fence
        (`SessionFiles.put_fenced`)."""
        return await self.put(session_id, name, data)

    def _put(self, session_id: str, name: str, data: bytes) -> str:
        path = self.reference(session_id, name)
        with offload_errors("write", path), self.session_for_writing(session_id) as dir_fd:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                pass
            else:
                if not stat.S_ISREG(st.st_mode):
                    raise OffloadError(
                        f"{path} is a symbolic link or not a regular file: the workspace "
                        "follows no link inside its workdir; remove that entry",
                        path,
                    )
            with temporary_file(dir_fd, name, data, fsync=self.fsync) as tmp:
                # rename() replaces the entry itself, never a file it might point to.
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return path

    async def list_names(self, session_id: str) -> list[str]:
        """The names of the session folder's regular files: links, FIFOs, sockets and
        devices are skipped."""

        def scan() -> list[str]:
            try:
                with self.folder(SESSIONS_DIR, validate_session_id(session_id)) as session:
                    return list(session.files())
            except FileNotFoundError:
                return []

        return await off_loop(scan)

    def reference(self, session_id: str, name: str) -> str:
        """The absolute path of the session's file `name`."""
        folder = self._session_shown(validate_session_id(session_id))
        if not name or "/" in name or name in (".", ".."):
            return str(Path(folder) / name)
        return f"{folder}/{name}"  # (what pathlib joins for a plain name)

    def _session_shown(self, sid: str) -> str:
        """The folder of the valid session id `sid`, as shown (`str(shown/sessions/sid)`)."""
        shown = self._sessions_shown.get(sid)
        if shown is None:
            if len(self._sessions_shown) >= 4_096:
                self._sessions_shown.clear()  # (a server's thousands of sessions: bounded)
            shown = self._sessions_shown[sid] = str(self.shown / SESSIONS_DIR / sid)
        return shown

    async def read_log(self, session_id: str, name: str, *, commit: bool = False) -> list[Any]:
        """The JSON values of the session's log `name`, by the reader's rule (`read_log`);
        with `commit`, only its committed batches.

        Raises:
            OffloadError: the folder or the log is a planted link, a special file, or a
                file with another hard link.
        """
        sid = validate_session_id(session_id)

        def read() -> list[Any]:
            try:
                with self.folder(SESSIONS_DIR, sid) as session:
                    return session.read_log(name, commit=commit, warn=logger.warning)
            except FileNotFoundError:
                return []

        return await off_loop(read)

    # -- payloads and writes ------------------------------------------------------------------

    def store_payload(self, raw: bytes, media_type: str | None) -> str:
        """Write a data/ payload under its sha256 name, once (`store_bytes`); its path.

        Raises:
            OffloadError: the disk refused the write, or data/ is a planted link.
        """
        shown = str(self.shown / DATA_DIR)
        with offload_errors("write to", shown), self.tree(DATA_DIR, create=True) as data_fd:
            # Shared with other writers, exclusive for gc() while it removes files.
            fcntl.flock(data_fd, fcntl.LOCK_SH)
            return store_bytes(data_fd, shown, raw, media_type, fsync=self.fsync)

    def hold_data(self, stack: contextlib.ExitStack) -> None:
        """Hold data/ shared in `stack` (when there is a data/): gc() takes it exclusively
        before it looks for references, so it never removes a file that an offload in
        progress has stored but not yet named in a line."""
        try:
            fd = stack.enter_context(self.tree(DATA_DIR, create=False))
        except (FileNotFoundError, OffloadError):
            # No data/ yet: the first store makes it, and a new file is kept by gc. A planted
            # data/ is refused by the store itself, if there is one to make.
            return
        fcntl.flock(fd, fcntl.LOCK_SH)

    @contextlib.asynccontextmanager
    async def payloads(self) -> AsyncIterator[Payloads]:
        """The payloads of one offload (`SessionFiles.payloads`), each written (and flushed)
        as it is met, with data/ held shared from the first one until the offload ends
        (`hold_data`); an offload that stores none never waits for gc."""
        with contextlib.ExitStack() as stack:
            yield _WrittenPayloads(self, stack)

    async def put_new(self, session_id: str, name: str, data: bytes) -> str | None:
        """Link `data` in as the session's file `name` unless an entry is there (a link never
        replaces an entry, nor follows one, so of two writers one wins); `SessionFiles.put_new`.

        Raises:
            OffloadError: the disk refused the write; no partial file is left.
        """
        path = self.reference(session_id, name)

        def create() -> bool:
            with offload_errors("write", path), self.session_for_writing(session_id) as dir_fd:
                with file_to_link(dir_fd, name, data, fsync=self.fsync) as link_as:
                    try:
                        link_as(name)
                    except FileExistsError:
                        return False
                if self.fsync:
                    os.fsync(dir_fd)
            return True

        return path if await off_loop(create) else None

    async def read(self, session_id: str, name: str) -> bytes | None:
        """The bytes of the session's file `name` when it is a regular file with one link
        (waiting out the moment a concurrent `put_new` of it has two), else None."""
        sid = validate_session_id(session_id)

        def read() -> bytes | None:
            try:
                with self.tree(SESSIONS_DIR, sid, create=False) as dir_fd:
                    fd = open_for_reading(dir_fd, name, name)
            except (OSError, OffloadError):
                return None
            try:
                return b"".join(iter_chunks(fd, 0, os.fstat(fd).st_size))
            finally:
                os.close(fd)

        return await off_loop(read)

    async def append(
        self, session_id: str, name: str, lines: Sequence[bytes], *, sync: bool = True
    ) -> Span:
        """Append `lines` to the session's log `name` in one write (`JsonlAppender.append`;
        `SessionFiles.append`), fsynced before it returns unless `sync` is False.

        Raises:
            OffloadError: the disk refused the write, or the log is a planted link; the log
                is as it was.
        """
        return await off_loop(self._append, session_id, name, lines, None, sync)

    async def append_messages(
        self, session_id: str, lines: Sequence[bytes], keys: Sequence[str | None]
    ) -> Span:
        """Append message lines to context.jsonl in one write, then its commit record
        (`SessionFiles.append_messages`).

        Raises:
            OffloadError: as `append`.
        """
        return await off_loop(self._append, session_id, CONTEXT_FILE, lines, keys)

    def _append(
        self,
        session_id: str,
        name: str,
        lines: Sequence[bytes],
        keys: Sequence[str | None] | None,
        sync: bool = True,
    ) -> Span:
        path = self.reference(session_id, name)
        commit = keys is not None  # the context log: batches acknowledged whole
        if name == EVENTS_FILE and any(_COMPACT in line for line in lines):
            # (counted before it can be read; only the events log is followed)
            self._compact_appends[path] = self._compact_appends.get(path, 0) + 1
        with offload_errors("append to", path), self.session_for_writing(session_id) as dir_fd:
            span = self.jsonl.append(dir_fd, name, path, lines, keys, commit=commit, sync=sync)
        if name == EVENTS_FILE and self.fsync:
            # (a synced append covers every line written before it)
            (self._unsynced.discard if sync else self._unsynced.add)(session_id)
        return span

    def sync_records(self, session_id: str) -> None:
        """fsync the session's events.jsonl if this store appended to it unsynced since its
        last synced append (`UNSYNCED_KINDS`): a run's record is durable when its lease goes.

        Raises:
            OffloadError: the folder or the log cannot be opened or synced.
        """
        if session_id not in self._unsynced:
            return
        self._unsynced.discard(session_id)
        try:  # (through the reader: a session removed meanwhile is never made again)
            with self.folder(SESSIONS_DIR, session_id) as folder:
                fd, _ = folder.open(EVENTS_FILE)
        except FileNotFoundError:
            return
        with offload_errors("sync", self.reference(session_id, EVENTS_FILE)):
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def compact_appends(self, session_id: str, name: str) -> int:
        """How many of this store's appends to the session's log `name` held a line that may
        be a compaction's request or answer (`unread_is_own`)."""
        return self._compact_appends.get(self.reference(session_id, name), 0)

    async def unread_is_own(
        self, session_id: str, name: str, line: int, compact_appends: int
    ) -> bool:
        """Whether a follower of the session's log `name` that has read the lines before
        `line`, when `compact_appends` was `compact_appends(session_id, name)`, has nothing
        to read but this store's own appends since, none of which may hold a compaction's
        request or answer (`JsonlAppender.unread_is_own`). The projector follows
        events.jsonl for requests at every model call: read back, the record of its own last
        call is most of what it reads. A stat of the path, no open: False whenever it cannot
        tell (no such file, a link, a file replaced or written by another)."""
        path = self.reference(session_id, name)
        if self._compact_appends.get(path, 0) != compact_appends:
            return False

        def own() -> bool:
            try:
                st = os.lstat(path)
            except OSError:
                return False
            return stat.S_ISREG(st.st_mode) and self.jsonl.unread_is_own(path, st, line)

        return await off_loop(own)

    async def run(self, work: Callable[[], _T]) -> _T:
        """Off the loop (`off_loop`): it writes files (`SessionFiles.run`)."""
        return await off_loop(work)

    def event_failure_is_fatal(self, exc: OSError) -> bool:
        """A planted entry fails the offload; the disk refusing (full, read-only) costs the
        event only (`SessionFiles.event_failure_is_fatal`)."""
        if not isinstance(exc, OffloadError):
            return False
        cause = exc.__cause__
        return not (isinstance(cause, OSError) and cause.errno not in (errno.ELOOP, errno.ENOTDIR))

    async def list_sessions(self) -> list[str]:
        """The ids of the session folders, sorted (links and hidden entries skipped)."""

        def scan() -> list[str]:
            try:
                with self.folder(SESSIONS_DIR) as sessions:
                    return sessions.sessions()
            except FileNotFoundError:
                return []

        return await off_loop(scan)

    async def delete_session(self, session_id: str) -> bool:
        """Remove the session's folder under its lock held exclusively, so writers in
        progress finish first and writers after it start a fresh folder; renamed aside first,
        so a reader sees the whole session or none of it (`SessionFiles.delete_session`).

        Raises:
            OffloadError: the folder cannot be removed (a read-only disk), or it kept
                changing while being removed.
        """
        sid = validate_session_id(session_id)
        shown = str(self.shown / SESSIONS_DIR / sid)

        def purge() -> bool:
            with offload_errors("purge", shown):
                try:
                    with self.tree(SESSIONS_DIR, create=False) as sessions_fd:
                        return _purge_locked(sessions_fd, sid, shown)
                except FileNotFoundError:
                    return False

        return await off_loop(purge)

    # -- references -----------------------------------------------------------------------

    def reference_key(self, reference: str) -> list[str]:
        """The parts of a path below the workdir (`SessionFiles.reference_key`).

        Raises:
            InvalidReference: it names nothing inside the workspace.
        """
        return reference_parts(reference, str(self.shown), self.root)

    async def read_reference(self, reference: str) -> bytes:
        """The file a reference names, opened without following a link below the workdir and
        checked on the open descriptor (`open_reference`), read to its readable end."""

        def read() -> bytes:
            fd, _, _, end = open_reference(reference, str(self.shown), self.root)
            try:
                return b"".join(iter_chunks(fd, 0, end))
            finally:
                os.close(fd)

        return await off_loop(read)

    async def read_lines(self, reference: str, first: int, last: int) -> bytes:
        """Lines `first` to `last` of the file a reference names, read from the latest batch
        this store appended there at or before `first`, or from where its latest read of the
        file ended, while the file is the one written (`JsonlAppender.line_start`), else from
        its start."""

        def read() -> bytes:
            fd, st, _, end = open_reference(reference, str(self.shown), self.root)
            try:
                line, offset = self.jsonl.line_start(fd, st, first)
                if line == first:
                    batch = self._marked_lines(fd, st, offset, end, first, last)
                    if batch is not None:
                        return batch
                chunks = iter_chunks(fd, offset, end)
                data = take_lines(chunks, first - line, last - first + 1)
                if line == first:
                    # Read from where `first` begins: where the whole lines read end is
                    # known, so a follower's next read starts there.
                    whole = data.rfind(b"\n") + 1
                    self.jsonl.note_read(fd, st, first + data.count(b"\n"), offset + whole)
                return data
            finally:
                os.close(fd)

        return await off_loop(read)

    def _marked_lines(
        self, fd: int, st: os.stat_result, offset: int, end: int, first: int, last: int
    ) -> bytes | None:
        """Lines `first` to `last` of the file open as `fd` when `first` begins at `offset`
        and this store's appender marked where line `last + 1` begins (`line_end`): the bytes
        between, read at once, without finding each line (reading back the batch an append
        just wrote). They are taken only when they hold exactly that many lines, each ending
        in its newline; None otherwise (the caller reads line by line)."""
        stop = self.jsonl.line_end(fd, st, last + 1)
        if stop is None or not offset < stop <= end:
            return None
        data = os.pread(fd, stop - offset, offset)  # (a short read falls back)
        if len(data) != stop - offset or not data.endswith(b"\n"):
            return None
        if data.count(b"\n") != last - first + 1:
            return None
        self.jsonl.note_read(fd, st, last + 1, stop)
        return data

    # -- one live writer --------------------------------------------------------------------

    def take_lease(self, sid: str, path: str, agent: str | None) -> tuple[int, dict[str, Any]]:
        """Open, lock and write the session's lease file (`LocalWorkspace.acquire_lease`):
        its descriptor, whose closing drops the lock, and the holder written.

        Raises:
            SessionBusyError: another open lease holds the session.
            OffloadError: the folder cannot be made, or `lease.json` is a planted link.
        """
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        # The lock is taken while the session folder is held shared, as every writer holds
        # it: gc and purge hold it exclusively while they look at the lease and remove the
        # folder, so a lease is never taken on a folder being removed (the taker finds the
        # new folder instead, `_session_for_writing`).
        with offload_errors("lock", path), self.session_for_writing(sid) as dir_fd:
            try:
                fd = os.open(LEASE_FILE, flags, 0o644, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise OffloadError(
                        f"{path} is a symbolic link: the workspace follows no link inside its "
                        "workdir; remove that entry",
                        path,
                    ) from None
                raise
            try:
                # A FIFO, a device, or a hard link to a file elsewhere: never written to.
                verify_file(fd, path)
                if not same_entry(fd, dir_fd, LEASE_FILE):
                    raise OffloadError(f"{path} was removed while it was opened: retry", path)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise busy_error(sid, read_lease_record(fd, settle=True), path) from None
            except BaseException:
                os.close(fd)
                raise
        try:
            previous = read_lease_record(fd, settle=False)
            if previous and not previous.get("released"):
                took_over(sid, previous, why_free(previous))
            holder = holder_record(agent)
            write_lease_record(fd, holder)
        except BaseException:
            os.close(fd)
            raise
        return fd, holder

    # -- gc (SessionCollector): each step one worker-thread hop -----------------------------

    async def recover(self, *, dry_run: bool) -> None:
        """Nothing to do first: what killed purges left is removed by `collect_data`."""

    async def measure(self) -> tuple[list[SessionUsage], dict[str, int]]:
        """Every session measured with its lease holder, and the data/ files' sizes."""

        def measure() -> tuple[list[SessionUsage], dict[str, int]]:
            with self._collecting():
                usages = self._session_usages(leases=True)
                return usages, {name: st.st_size for name, st in self._data_files().items()}

        return await off_loop(measure)

    async def remove_unit_if_idle(self, unit: list[SessionUsage]) -> UnitOutcome:
        """See `SessionCollector.remove_unit_if_idle`: under the purge lock of each."""

        def remove() -> UnitOutcome:
            with self._collecting():
                return self._remove_unit_if_idle(unit)

        return await off_loop(remove)

    async def collect_data(
        self, remaining: list[SessionUsage], now: float, report: GcReport
    ) -> None:
        """Finish the removals of killed purges and gcs (their bytes count as freed), then
        remove the data/ files no session names, under data/ locked exclusively."""

        def collect() -> None:
            with self._collecting():
                report.bytes_freed += self._finish_killed_purges(remove=not report.dry_run)
                self._collect_data(remaining, now, report)

        await off_loop(collect)

    def _collecting(self) -> contextlib.AbstractContextManager[None]:
        return offload_errors("collect garbage in", str(self.shown))

    def _finish_killed_purges(self, *, remove: bool) -> int:
        try:
            with self.tree(SESSIONS_DIR, create=False) as sessions_fd:
                return finish_killed_purges(sessions_fd, remove=remove)
        except FileNotFoundError:
            return 0

    def _session_usages(self, *, leases: bool = False) -> list[SessionUsage]:
        """Every session measured, each read through the reader; one gone meanwhile is left
        out. With `leases`, who holds each session's lease too (`lease_holder`)."""
        try:
            with self.folder(SESSIONS_DIR) as sessions:
                names = sessions.sessions()
        except FileNotFoundError:
            return []
        usages = []
        for name in names:
            try:
                with self.folder(SESSIONS_DIR, name) as session:
                    usage = session_usage(session)
                    if leases:
                        fcntl.flock(session.fd, fcntl.LOCK_EX)
                        usage.lease = lease_holder(session.fd)
                    usages.append(usage)
            except FileNotFoundError:
                continue
        return usages

    def _data_files(self) -> dict[str, os.stat_result]:
        try:
            with self.tree(DATA_DIR, create=False) as data_fd:
                return data_files(data_fd)
        except FileNotFoundError:
            return {}

    def _remove_unit_if_idle(self, unit: list[SessionUsage]) -> UnitOutcome:
        """Remove a unit of sessions (`removal_units`) under the purge lock of each, unless
        one was written since it was measured or its lease is held: then all stay, as the
        one written names the others' files."""
        outcome = UnitOutcome()
        with self.tree(SESSIONS_DIR, create=False) as sessions_fd, contextlib.ExitStack() as stack:
            # Locked in the order of their names, so two gcs never wait for each other.
            for usage in sorted(unit, key=lambda u: u.name):
                try:
                    session = stack.enter_context(self.folder(SESSIONS_DIR, usage.name))
                except FileNotFoundError:
                    outcome.gone.add(usage.name)
                    continue
                fcntl.flock(session.fd, fcntl.LOCK_EX)
                why = _why_not_idle(session, sessions_fd, usage)
                if why is not None:
                    outcome.kept[usage.name] = why
            if outcome.kept:
                return outcome
            for usage in unit:
                if usage.name not in outcome.gone:
                    doomed = purging_name(usage.name)
                    os.rename(usage.name, doomed, src_dir_fd=sessions_fd, dst_dir_fd=sessions_fd)
                    remove_tree(sessions_fd, doomed)
        return outcome

    def _collect_data(self, remaining: list[SessionUsage], now: float, report: GcReport) -> None:
        try:
            with self.tree(DATA_DIR, create=False) as data_fd:
                fcntl.flock(data_fd, fcntl.LOCK_EX)
                # Measured again under the lock: references written meanwhile count.
                referenced: set[str] = set()
                for usage in self._session_usages() if not report.dry_run else remaining:
                    referenced |= usage.references
                for name, st in sorted(data_files(data_fd).items()):
                    if name in referenced:
                        continue
                    if st.st_mtime > now - DATA_GRACE_SECONDS:
                        report.keep_recent_data([name])
                        continue
                    if not report.dry_run:
                        try:
                            os.unlink(name, dir_fd=data_fd)
                        except FileNotFoundError:
                            continue
                    report.data_removed.append(name)
                    report.bytes_freed += st.st_size
        except FileNotFoundError:
            return


def _why_not_idle(session: Folder, sessions_fd: int, usage: SessionUsage) -> str | None:
    """Why a session folder, locked exclusively, may not be removed now: it was written
    since `usage` measured it, or its lease is held; None when it may."""
    # Measured again under the lock, and only if `sessions/{name}` is still the folder
    # locked: a purge may have renamed it, and a writer made a new one. Its size counts as
    # well as its stamps: a file system stamps with a coarse clock (a tick, or a second), so
    # a file written in the tick the session was measured in looks no newer.
    if not same_entry(session.fd, sessions_fd, usage.name):
        return "it was written while gc ran"
    now = session_usage(session)
    if now.last_activity > usage.last_activity or now.size != usage.size:
        return "it was written while gc ran"
    # A taker locks the lease only while holding the folder shared, which the exclusive lock
    # excludes: free now, the lease stays free until the folder is gone.
    holder = lease_holder(session.fd)
    if holder is not None:
        return f"its lease is held by {holder}"
    return None


class _WrittenPayloads:
    """Payloads on disk: each written and flushed when met (`DiskStore.store_payload`), data/
    held shared in `stack` from the first (called from one worker thread at a time)."""

    def __init__(self, disk: DiskStore, stack: contextlib.ExitStack) -> None:
        self._disk = disk
        self._stack = stack
        self._held = False

    def store(self, raw: bytes, media_type: str | None) -> str:
        """Hold data/ shared (the first time), then write the payload; its path."""
        if not self._held:
            self._disk.hold_data(self._stack)
            self._held = True
        return self._disk.store_payload(raw, media_type)

    def hold_session(self, session_id: str, log: str) -> None:
        """Hold the session folder shared until the offload ends, as every writer does and
        purge waits for (`DiskStore.session_for_writing`), and refuse a planted `log` in it
        (`check_entry`) before the offload writes anything.

        Raises:
            OffloadError: the folder cannot be made, or it or `log` is a planted entry.
        """
        path = self._disk.reference(session_id, log)
        with offload_errors("append to", path):
            dir_fd = self._stack.enter_context(self._disk.session_for_writing(session_id))
            check_entry(dir_fd, log, path)

    async def before_line(self) -> None:
        """Nothing to wait for: each payload was written as it was met."""

    async def after_line(self) -> None:
        """Nothing to restore: data/ was held shared all along (`DiskStore.hold_data`)."""


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


def finish_killed_purges(sessions_fd: int, *, remove: bool) -> int:
    """Remove (if `remove`) the folders a purge or gc killed on the way left renamed aside
    (`.purge-*`): the bytes they hold. No reader lists them, and nobody else would remove
    them: a gc run again must free their space. One that a live purge is removing at the
    same moment is removed by both, which is harmless (`remove_tree` skips what vanished)."""
    with os.scandir(sessions_fd) as it:
        names = [
            e.name
            for e in it
            if e.name.startswith(PURGING_PREFIX) and e.is_dir(follow_symlinks=False)
        ]
    freed = 0
    for name in names:
        with contextlib.suppress(OSError):
            freed += tree_size(sessions_fd, name)
            if remove:
                remove_tree(sessions_fd, name)
    return freed


if TYPE_CHECKING:  # mypy checks that DiskStore is what it is declared to be
    _collector: type[SessionCollector] = DiskStore
    _files: type[SessionFiles] = DiskStore
