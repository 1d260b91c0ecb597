"""Sessions moved in the on-disk layout: a folder's sessions read and checked
(`read_layout`), written into a store (`upload_sessions`, what `ctxoffload import` runs: a
disk workspace moved into a database or a bucket) or into another folder (`write_layout`,
`LocalWorkspace.download`, what `ctxoffload export` runs on a folder).

Everything is read and checked before anything is written: the folder through the one
reader (`Folder`: no link followed, a planted link, FIFO or hard-linked file refused by
name), each log up to where a reader stops (a committed log's acknowledged batches; a torn
last line left out and said), each data/ file hashed against its name. Then, per session,
under its lease: the data/ files it names, its files, then its logs, line for line (a line
that is not JSON, or not UTF-8, is kept as it is: its number is part of every reference
after it), with every reference into the folder rewritten to name the store (`relocate`).
A session the store holds already is never written to.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._disk.ids import validate_session_id
from .._disk.layout import (
    COMMIT_SUFFIX,
    CONTEXT_FILE,
    DATA_DIR,
    EVENTS_FILE,
    SESSIONS_DIR,
    is_data_name,
)
from .._disk.read import Folder, Refused, sessions_folder
from .._disk.relocate import prefixes_named, relocate, relocation_problem
from .._disk.rows import message_key
from ..exceptions import ConfigError, InvalidContent
from ._bucket_store import is_workspace_key
from ._datastore import media_type_of
from ._gc import data_names_in

if TYPE_CHECKING:
    from ._core import StoreWorkspace
    from ._lease import SessionLease
    from ._store import SessionFiles

__all__ = ["SessionCopy", "Uploads", "read_layout", "upload_sessions", "write_layout"]

# Lines appended per batch when a log is written: bounded batches, however long the log.
_BATCH_BYTES = 8 << 20
_BATCH_LINES = 10_000


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
    lines = raw.splitlines(keepends=True)
    torn = bool(lines) and not lines[-1].endswith(b"\n")
    return (lines[:-1] if torn else lines), torn


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
            if name in (CONTEXT_FILE, EVENTS_FILE):
                lines, torn = _whole_lines(raw)
                if torn:
                    problems.append(f"{path}: its last line is incomplete (a torn write): left out")
                copy.logs[name] = lines
            else:
                copy.files[name] = raw
    events = []
    for line in copy.logs.get(EVENTS_FILE, []):
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    copy.prefixes = prefixes_named(events, session_id)
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
    folder: str,
    *,
    url: str,
    sessions: list[str] | None,
    acquire: Callable[[str], Awaitable[SessionLease]],
) -> list[str]:
    """Write the sessions of `folder` (default: all) into `workspace`, whose references
    start with `url`; the problems met that did not stop it (a torn last line left out, a
    data/ file named but missing), one line each.

    Raises:
        ConfigError: a session exists in the workspace already (nothing of it is written),
            or `url` cannot stand in a reference.
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
    there = set(await workspace.list_sessions())
    taken = [c.session_id for c in copies if c.session_id in there]
    if taken:
        raise _exists(taken[0], url)
    old = {os.path.abspath(folder), os.path.realpath(folder)}
    for copy in copies:
        lease = await acquire(copy.session_id)
        try:
            # Checked again under the lease: another import may have written it meanwhile.
            if copy.session_id in await workspace.list_sessions():
                raise _exists(copy.session_id, url)
            for name in sorted(copy.data & set(blobs)):
                stored = await workspace.store_bytes(blobs[name], media_type_of(name))
                if not stored.endswith(f"/{DATA_DIR}/{name}"):
                    problems.append(f"data/{name} was stored as {stored}")
            await _write_session(files, copy, old | copy.prefixes, url)
        finally:
            await lease.release()
    return problems


async def _write_session(files: SessionFiles, copy: SessionCopy, old: set[str], url: str) -> None:
    sid = copy.session_id
    for name, body in sorted(copy.files.items()):
        await files.put(sid, name, relocate(body, old, url))
    context = [relocate(line, old, url) for line in copy.logs.get(CONTEXT_FILE, [])]
    seen: set[str] = set()
    for batch in _batches(context):
        keys = [_key(line, seen) for line in batch]
        await files.append_messages(sid, batch, keys)
    events = [relocate(line, old, url) for line in copy.logs.get(EVENTS_FILE, [])]
    for batch in _batches(events):
        await files.append(sid, EVENTS_FILE, batch)


def _key(line: bytes, seen: set[str]) -> str | None:
    """A context line's message key, for the store's index of where each message is; None
    for a line without one, or whose key an earlier line has (every line is written, so
    line numbers stay as they were)."""
    if b'"id"' not in line:
        return None
    try:
        value: Any = json.loads(line)
    except ValueError:
        return None
    key = message_key(value) if isinstance(value, dict) else None
    if key is None or key in seen:
        return None
    seen.add(key)
    return key


def _batches(lines: list[bytes]) -> list[list[bytes]]:
    """Consecutive runs of `lines`, each at most `_BATCH_LINES` lines or about
    `_BATCH_BYTES` bytes (a longer line is a batch of its own)."""
    out: list[list[bytes]] = []
    batch: list[bytes] = []
    size = 0
    for line in lines:
        if batch and (len(batch) >= _BATCH_LINES or size + len(line) > _BATCH_BYTES):
            out.append(batch)
            batch, size = [], 0
        batch.append(line)
        size += len(line)
    if batch:
        out.append(batch)
    return out


def _exists(session_id: str, url: str) -> ConfigError:
    return ConfigError(
        f"session {session_id!r} exists in {url} already: import never overwrites a session "
        f"(import the others by name, or remove it there first: `ctxoffload purge {session_id} "
        f"--workdir {url}`)"
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
    bucket): each has its store (`_files`), its URL and its leases."""

    url: str
    _files: SessionFiles

    if TYPE_CHECKING:  # each workspace that mixes this in has its own (none here at run time)

        async def acquire_lease(
            self, session_id: str, *, agent: str | None = None, ttl: float | None = None
        ) -> SessionLease: ...

    async def upload(
        self, folder: str | os.PathLike[str], *, sessions: list[str] | None = None
    ) -> list[str]:
        """Write sessions of a folder in the on-disk layout (a `LocalWorkspace`'s) into this
        workspace: the reverse of `download`, what `ctxoffload import` runs.

        Every line of each log (up to where a reader of the folder stops: whole acknowledged
        batches), every file and every data/ file the sessions name (all of data/ when no
        session is named) is written, line numbers kept, each session under its lease;
        references into the folder are rewritten to name this workspace. Everything is read
        and checked before anything is written.

        Args:
            folder: the workspace folder to read (nothing in it is changed).
            sessions: only these sessions (default: every one).

        Returns:
            What did not stop it, one line each: a torn last line left out, a data/ file
            named but missing in the folder.

        Raises:
            ConfigError: a session exists here already (none is overwritten), or one named
                is not in the folder.
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
            os.fspath(folder),
            url=self.url,
            sessions=sessions,
            acquire=self.acquire_lease,
        )
