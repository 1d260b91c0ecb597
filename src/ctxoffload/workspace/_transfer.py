"""Sessions moved in the on-disk layout: a folder's sessions read and checked
(`read_layout`), written into a store (`upload_sessions`, what `ctxoffload import` runs: a
disk workspace moved into a database or a bucket) or into another folder (`write_layout`,
`LocalWorkspace.download`, what `ctxoffload export` runs on a folder).

Everything is read and checked before anything is written: the folder through the one
reader (`Folder`: no link followed, a planted link, FIFO or hard-linked file refused by
name), each log up to where a reader stops (a committed log's acknowledged batches; a torn
last line left out and said), each data/ file hashed against its name. Then, per session,
under its lease: the data/ files it names, then the session whole or not at all, as its
store can (`ImportTarget`: one transaction in a database; in a bucket, marked so that no
listing shows it until it is whole): its files and its logs, line for line (a line that is
not JSON, or not UTF-8, is kept as it is: its number is part of every reference after it),
with every reference into the folder rewritten to name the store (`relocate`).

A session the store holds already is never overwritten: one that holds what this import
writes (an earlier run's) is left as it is, one that holds the beginning of it (a run
killed on the way) is finished, and any other stops the import before anything is written.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._disk.ids import validate_session_id
from .._disk.layout import (
    COMMIT_SUFFIX,
    CONTEXT_FILE,
    DATA_DIR,
    EVENTS_FILE,
    LOGS,
    SESSIONS_DIR,
    is_data_name,
)
from .._disk.read import Folder, Refused, sessions_folder
from .._disk.relocate import prefixes_named, relocate, relocation_problem
from .._disk.rows import line_key
from ..exceptions import ConfigError, InvalidContent, InvalidReference, SessionBusyError
from ._bucket_keys import is_workspace_key
from ._datastore import media_type_of
from ._gc import data_names_in
from ._lease import LEASE_FILE, holder_ended
from ._store import ImportedSession
from ._store_client import gather_limited

if TYPE_CHECKING:
    from ._core import StoreWorkspace
    from ._lease import SessionLease
    from ._store import ImportTarget, SessionFiles

__all__ = [
    "IMPORT_AGENT",
    "SessionCopy",
    "Uploads",
    "imported_session",
    "read_layout",
    "remainder",
    "upload_sessions",
    "write_layout",
]

IMPORT_AGENT = "ctxoffload import"
"""The agent an import's leases name: a killed import's lease is known by it."""
# Short, so that in a bucket (where a lease lives until it lapses, whoever held it) a killed
# import's lease lapses within seconds and the next run, which waits for it, goes on; it is
# renewed every third of it while the import runs.
_IMPORT_LEASE_TTL = 5.0
# At most this long past a killed import's lease's own time to live, the next run waits.
_IMPORT_LEASE_WAIT = 30.0


@dataclass
class SessionCopy:
    """One session of a folder in the on-disk layout, read and checked: its logs (whole
    lines only), its other files, the data/ files it names, and what was left out."""

    session_id: str
    logs: dict[str, list[bytes]] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    data: set[str] = field(default_factory=set)
    prefixes: set[str] = field(default_factory=set)


def _whole_lines(raw: bytes) -> tuple[list[bytes], bool]:
    """The complete lines of a log (each with its newline), and whether a torn last line
    (no newline: a write in progress, or cut by a kill) was left out."""
    # Only a newline ends a line (`splitlines` would end one at a bare carriage return too,
    # and every line number after it would differ from the file's).
    lines = [line + b"\n" for line in raw.split(b"\n")]
    lines[-1] = lines[-1][:-1]  # what follows the last newline: b"", or a torn line
    torn = bool(lines[-1])
    return lines[:-1], torn


def _refused(path: str, why: str) -> InvalidContent:
    return InvalidContent(f"{path}: {why}; nothing was imported (remove it or fix the folder)")


def _read_session(root: str, session_id: str, problems: list[str]) -> SessionCopy:
    """Read one session folder (events.jsonl first: whatever an event names was written
    before it, so the other files read after it hold all of it)."""
    import stat

    copy = SessionCopy(session_id)
    with Folder(root, SESSIONS_DIR, session_id) as folder:
        names = folder.names()
        ordered = [EVENTS_FILE] if EVENTS_FILE in names else []
        ordered += [name for name in names if name != EVENTS_FILE]
        for name in ordered:
            path = folder.path(name)
            if name.startswith(".") or name.endswith(COMMIT_SUFFIX):
                continue  # a writer's temporary file, a lock; the commit record is read below
            st = folder.stat(name)
            if not stat.S_ISREG(st.st_mode):
                raise _refused(path, "not a regular file (a link, a folder or a special file)")
            if not is_workspace_key(f"{SESSIONS_DIR}/{session_id}/{name}"):
                raise _refused(path, "not a name of the workspace layout")
            try:
                fd, st = folder.open(name)
            except Refused as exc:  # a link swapped in, or a second hard link
                raise _refused(path, str(exc)) from None
            try:
                end = folder.readable_end(name, fd, st.st_size)
                raw = os.pread(fd, end, 0) if end else b""
                while len(raw) < end:  # pread may return less than asked, on a big file
                    more = os.pread(fd, end - len(raw), len(raw))
                    if not more:
                        break
                    raw += more
            finally:
                os.close(fd)
            if name in LOGS:
                lines, torn = _whole_lines(raw)
                if torn:
                    problems.append(f"{path}: its last line is incomplete (a torn write): left out")
                copy.logs[name] = lines
            else:
                copy.files[name] = raw
    copy.prefixes = prefixes_named(copy.logs.get(EVENTS_FILE, []), session_id)
    bodies = [b"".join(lines) for lines in copy.logs.values()] + list(copy.files.values())
    copy.data = set().union(*(data_names_in([body]) for body in bodies)) if bodies else set()
    return copy


def read_layout(
    folder: str, sessions: list[str] | None, problems: list[str]
) -> tuple[list[SessionCopy], dict[str, bytes]]:
    """Read a folder in the on-disk layout: the sessions named (default: all) and the data/
    files they name (all of data/ when no session is named), each checked against its
    hash.

    Raises:
        InvalidSessionId: a session named is not a plain name.
        InvalidReference: the folder is no workspace.
        InvalidContent: a planted link, a special file, a name outside the layout, or a
            data/ file whose bytes are not what its name says; nothing is read further.
        ConfigError: a session named is not in the folder.
    """
    root = os.path.abspath(folder)
    with sessions_folder(root) as listing:
        present = listing.sessions()
        strays = [n for n in listing.names() if not n.startswith(".") and n not in present]
    for name in strays:
        problems.append(f"{os.path.join(root, SESSIONS_DIR, name)!r}: no session folder: left out")
    if sessions is None:
        chosen = present
    else:
        chosen = list(dict.fromkeys(validate_session_id(s) for s in sessions))  # each once
        missing = [s for s in chosen if s not in present]
        if missing:
            raise ConfigError(f"no session {missing[0]!r} in {root} (it has {len(present)})")
    copies = [_read_session(root, sid, problems) for sid in chosen]
    wanted: set[str] = set().union(*(c.data for c in copies)) if copies else set()
    blobs: dict[str, bytes] = {}
    if os.path.isdir(os.path.join(root, DATA_DIR)):
        with Folder(root, DATA_DIR) as data_folder:
            names = set(data_folder.names())
            if sessions is None:
                wanted |= {n for n in names if is_data_name(n)}
            for name in sorted(wanted & names):
                try:
                    raw = data_folder.read_bytes(name)
                except Refused as exc:
                    raise _refused(data_folder.path(name), str(exc)) from None
                if hashlib.sha256(raw).hexdigest() != name.split(".", 1)[0]:
                    raise _refused(data_folder.path(name), "its bytes do not hash to its name")
                blobs[name] = raw
    for name in sorted(wanted - set(blobs)):
        problems.append(f"{os.path.join(root, DATA_DIR, name)}: named but not in the folder")
    return copies, blobs


async def upload_sessions(
    workspace: StoreWorkspace,
    files: SessionFiles,
    target: ImportTarget,
    folder: str,
    *,
    url: str,
    sessions: list[str] | None,
    acquire: Callable[[str], Awaitable[SessionLease]],
    said: Callable[[str], None] | None = None,
) -> list[str]:
    """Write the sessions of `folder` (default: all) into `workspace`, whose references
    start with `url`, each whole or not at all (`ImportTarget`); the problems met that did
    not stop it (a torn last line left out, a data/ file named but missing), one line each.

    A session the workspace holds already is left as it is when it holds what this import
    writes (an earlier run wrote it), finished when it holds the beginning of it (a killed
    run's, or one a bucket hides as unfinished), and refused otherwise, before anything is
    written. `said` is told each session's outcome, one line each, as it happens.

    Raises:
        ConfigError: a session exists in the workspace already and holds other than what
            this import writes (nothing is written), or `url` cannot stand in a reference.
        InvalidContent, InvalidReference, InvalidSessionId: as `read_layout`; nothing
            written.
        SessionBusyError: another writer holds a session's lease.
        OffloadError: the store refused a write.
    """
    import asyncio

    problem = relocation_problem(url)
    if problem is not None:
        raise ConfigError(f"cannot import into {url!r}: {problem}")
    problems: list[str] = []
    copies, blobs = await asyncio.to_thread(read_layout, folder, sessions, problems)
    old = {os.path.abspath(folder), os.path.realpath(folder)}

    def plan_of(copy: SessionCopy) -> Awaitable[ImportedSession]:
        # Made when needed, one session at a time: a copy with its references rewritten
        # costs the session's size again.
        return asyncio.to_thread(imported_session, copy, old | copy.prefixes, url)

    listed = set(await workspace.list_sessions())
    importer = _Importer(workspace, files, target, url, acquire, blobs, problems)
    importer.unfinished = await target.unfinished_imports()
    # Every session there already is checked before anything is written; one that holds
    # all this import writes (and is not marked unfinished) needs nothing more.
    whole: set[str] = set()
    for copy in copies:
        sid = copy.session_id
        if sid in listed | importer.unfinished:
            rest = await remainder(files, await plan_of(copy))
            if rest is None:
                raise _exists(sid, url)
            if rest.empty and sid not in importer.unfinished:
                whole.add(sid)
    for copy in copies:
        if copy.session_id in whole:
            outcome = _THERE_ALREADY
        else:
            outcome = await importer.session(await plan_of(copy))
        if said is not None:
            said(f"{copy.session_id}: {outcome}")
    return problems


_THERE_ALREADY = "there already, as this import writes it: left as it is"


@dataclass
class _Importer:
    """One import's target and what it has read, for writing each session."""

    workspace: StoreWorkspace
    files: SessionFiles
    target: ImportTarget
    url: str
    acquire: Callable[[str], Awaitable[SessionLease]]
    blobs: dict[str, bytes]
    problems: list[str]
    unfinished: set[str] = field(default_factory=set)

    async def session(self, plan: ImportedSession) -> str:
        """Import one session under its lease and the store's mark; what became of it.

        Raises:
            ConfigError: it holds other than what this import writes (read again under
                the lease: another writer came meanwhile).
        """
        sid = plan.session_id
        marked = sid in self.unfinished  # a killed import's mark stays until it is whole
        await self.target.begin_import(sid)
        written = False
        try:
            lease = await self._lease(sid)
            try:
                rest = await remainder(self.files, plan)
                if rest is None:
                    raise _exists(sid, self.url)
                if rest.empty:
                    outcome = _THERE_ALREADY if not rest.fresh else "nothing in it to import"
                else:
                    for name in sorted(rest.data & set(self.blobs)):
                        raw = self.blobs[name]
                        stored = await self.workspace.store_bytes(raw, media_type_of(name))
                        if not stored.endswith(f"/{DATA_DIR}/{name}"):
                            self.problems.append(f"data/{name} was stored as {stored}")
                    written = True
                    if not await self.target.write_imported(rest):
                        raise _exists(sid, self.url)
                    outcome = "imported" if rest.fresh else "finished (an import of it was cut)"
            finally:
                await lease.release()
        except BaseException:
            if not written and not marked:
                await self.target.end_import(sid)  # nothing of it written: as it was
            raise
        await self.target.end_import(sid)
        return outcome

    async def _lease(self, session_id: str) -> SessionLease:
        """The session's lease; one a killed import holds (the kernel shows its process
        ended) is waited for until it lapses: in a bucket a lease outlives its holder.

        Raises:
            SessionBusyError: another live writer holds it.
        """
        import asyncio
        import time

        deadline: float | None = None
        while True:
            try:
                return await self.acquire(session_id)
            except SessionBusyError as busy:
                holder = busy.holder
                if holder.get("agent") != IMPORT_AGENT or not holder_ended(holder):
                    raise
                if deadline is None:
                    ttl = holder.get("ttl")
                    ttl = ttl if isinstance(ttl, int | float) and 0 < ttl < 1e9 else 60.0
                    deadline = time.monotonic() + float(ttl) + _IMPORT_LEASE_WAIT
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.25)


def imported_session(copy: SessionCopy, old: set[str], url: str) -> ImportedSession:
    """What an import writes of a session read from a folder: every file and line with
    the references into `old` rewritten to name `url`, each context line's message key."""
    logs = {name: [relocate(line, old, url) for line in lines] for name, lines in copy.logs.items()}
    context = logs.setdefault(CONTEXT_FILE, [])
    seen: set[str] = set()
    # A folder's lease.json is its lease, not content: the target keeps leases its own way
    # (a row, or its own lease object, which a copy would overwrite).
    return ImportedSession(
        copy.session_id,
        files={
            name: relocate(body, old, url)
            for name, body in copy.files.items()
            if name != LEASE_FILE
        },
        logs=logs,
        keys=[_key(line, seen) for line in context],
        data=set(copy.data),
    )


async def remainder(files: SessionFiles, plan: ImportedSession) -> ImportedSession | None:
    """What of `plan` (a whole session) the store lacks, when what it holds of the session
    is a beginning of it: none of it, all of it (nothing left: `empty`), or some of its
    files and the first lines of its logs (an import killed on the way). None when it holds
    anything else: a file of other bytes, a file or a log the import does not write, a log
    whose lines are not the first of the import's."""
    sid = plan.session_id
    names = {*await files.list_names(sid), *plan.files, *plan.logs, CONTEXT_FILE, EVENTS_FILE}
    rest = ImportedSession(sid, keys=list(plan.keys), data=set(plan.data))

    async def read(name: str) -> bytes | None:
        try:
            return await files.read_reference(files.reference(sid, name))
        except InvalidReference:
            return None

    ordered = sorted(names - {LEASE_FILE})
    # At once: in a bucket each read is a request or two.
    bodies = await gather_limited([functools.partial(read, name) for name in ordered], 8)
    for name, body in zip(ordered, bodies, strict=True):
        if body is not None:
            rest.fresh = False
        if name in plan.files:
            if body is None:
                rest.files[name] = plan.files[name]
            elif body != plan.files[name]:
                return None
        elif name in plan.logs:
            held = _lines_held(plan.logs[name], body or b"")
            if held is None:
                return None
            rest.after[name] = held
            rest.logs[name] = plan.logs[name][held:]
            if name == CONTEXT_FILE:
                rest.keys = plan.keys[held:]
        elif body:
            return None
    return rest


def _lines_held(lines: list[bytes], body: bytes) -> int | None:
    """How many of `lines` `body` is, when it is the first of them joined; else None."""
    size = held = 0
    while size < len(body) and held < len(lines):
        size += len(lines[held])
        held += 1
    if size != len(body) or b"".join(lines[:held]) != body:
        return None
    return held


def _key(line: bytes, seen: set[str]) -> str | None:
    """A context line's message key, for the store's index of where each message is; None
    for a line without one, or whose key an earlier line has (every line is written, so
    line numbers stay as they were)."""
    key = line_key(line)
    if key is None or key in seen:
        return None
    seen.add(key)
    return key


def _exists(session_id: str, url: str) -> ConfigError:
    return ConfigError(
        f"session {session_id!r} exists in {url} already and holds other than this import "
        "writes: import never overwrites a session (import the others by name, or remove it "
        f"there first: `ctxoffload purge {session_id} --workdir {url}`)"
    )


def write_layout(root: str, copies: list[SessionCopy], blobs: dict[str, bytes]) -> None:
    """Write sessions and data/ files read by `read_layout` into the folder `root`, each as
    a new file (`write_new_file`): no link there is followed, and a file there already is
    never overwritten.

    Raises:
        FileExistsError: a file to write is there already.
        OffloadError: a folder on the way is a planted link, or cannot be made.
    """
    from .._disk.paths import write_new_file

    resolved = os.path.realpath(root)
    for copy in copies:
        folder = (SESSIONS_DIR, copy.session_id)
        for name, lines in copy.logs.items():
            write_new_file(resolved, (*folder, name), b"".join(lines), root)
        for name, body in copy.files.items():
            write_new_file(resolved, (*folder, name), body, root)
    for name, body in blobs.items():
        write_new_file(resolved, (DATA_DIR, name), body, root)


class Uploads:
    """`upload`, written once for the workspaces a folder is imported into (a database, a
    bucket): each has its store (`_files`), which takes imported sessions whole
    (`_imports`), its URL and its leases."""

    url: str
    _files: SessionFiles
    _imports: ImportTarget

    if TYPE_CHECKING:  # each workspace that mixes this in has its own (none here at run time)

        async def acquire_lease(
            self, session_id: str, *, agent: str | None = None, ttl: float | None = None
        ) -> SessionLease: ...

    async def upload(
        self,
        folder: str | os.PathLike[str],
        *,
        sessions: list[str] | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> list[str]:
        """Write sessions of a folder in the on-disk layout (a `LocalWorkspace`'s) into this
        workspace: the reverse of `download`, what `ctxoffload import` runs.

        Every line of each log (up to where a reader of the folder stops: whole acknowledged
        batches), every file and every data/ file the sessions name (all of data/ when no
        session is named) is written, line numbers kept, each session under its lease;
        references into the folder are rewritten to name this workspace. Everything is read
        and checked before anything is written.

        Each session arrives whole or not at all: in a database it is written in one
        transaction; in a bucket it is marked while it is written, and no listing of the
        sessions shows it until it is whole. Run again after a run was killed, it finishes
        what that run began: a session it wrote whole is left as it is (it holds what this
        import writes), one it began is finished, and the rest goes in.

        Args:
            folder: the workspace folder to read (nothing in it is changed).
            sessions: only these sessions (default: every one; one named twice is taken
                once).
            progress: called with one line for each session once it is done: `'<id>:
                imported'`, `'<id>: finished (...)'`, or `'<id>: there already, ...'`.

        Returns:
            What did not stop it, one line each: a torn last line left out, a data/ file
            named but missing in the folder.

        Raises:
            ConfigError: a session exists here already and holds other than what this
                import writes (none is overwritten; nothing is written), or one named is
                not in the folder.
            InvalidContent: the folder holds a planted link, a special file, a name outside
                the layout, or a data/ file whose bytes do not match its name; nothing is
                written.
            InvalidReference: the folder is no workspace.
            InvalidSessionId: a session named is not a plain name.
            SessionBusyError: another writer holds a session's lease.
            OffloadError: the store refused a write.
        """
        return await upload_sessions(
            self,  # type: ignore[arg-type]  # a StoreWorkspace: every class that mixes this in
            self._files,
            self._imports,
            os.fspath(folder),
            url=self.url,
            sessions=sessions,
            acquire=functools.partial(
                self.acquire_lease, agent=IMPORT_AGENT, ttl=_IMPORT_LEASE_TTL
            ),
            said=progress,
        )
