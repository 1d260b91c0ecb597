"""`ctxoffload export`: sessions of any workspace written to a folder in the on-disk layout.

From a database (`--workdir sqlite:///...`), a bucket (`s3://...`) or another folder, each
session is copied with the workspace's `download` into a staging folder inside DIR, then
made what a `LocalWorkspace(DIR)` would hold: every reference into the source rewritten to
name DIR (`relocate`), context.jsonl given its commit record; then each data/ file the
sessions name is renamed into DIR/data/, and after them each session folder into
DIR/sessions/: a kill at any point leaves each session there whole, every file with one
link. That move runs with Ctrl-C and SIGTERM held (finished, or never begun). The staging
folder is locked while its export lives: the next export into DIR removes one whose
exporter died. A session DIR holds already is never touched: the export stops before
writing anything. Every file is written through the no-follow layer (`_disk.paths`): a link
planted in DIR is refused by name, never written through.
"""

from __future__ import annotations

import argparse
import os

from ..exceptions import CliError
from ._arguments import (
    EXIT_OK,
    EXIT_PROBLEMS,
    Workdir,
    add_json,
    add_workdir,
)
from ._commands import COMMAND_HELP
from ._session_name import SessionName, said_session

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `export` to the command line."""
    parser = commands.add_parser(
        "export",
        help=COMMAND_HELP["export"],
        description=(
            "Write sessions of the workspace (a database, a bucket or a folder) into the "
            "folder DIR in the on-disk layout, as a LocalWorkspace(DIR) would hold them: "
            "references name the copy, context.jsonl has its commit record, and the data/ "
            "files the sessions name are copied. DIR may be missing, empty, or a workspace "
            "that holds none of the sessions."
        ),
    )
    parser.add_argument(
        "sessions", nargs="*", metavar="SESSION", type=SessionName, help="the sessions to export"
    )
    parser.add_argument("folder", metavar="DIR", help="the folder to write them in")
    parser.add_argument("--all", action="store_true", help="export every session (give DIR only)")
    add_workdir(parser)
    add_json(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Export the sessions; print where each went."""
    import asyncio

    from .._disk.ids import validate_session_id
    from .._disk.relocate import relocation_problem
    from ..exceptions import InvalidSessionId
    from ._output import print_json, shown

    # A session named twice is exported once.
    sessions, target = list(dict.fromkeys(args.sessions)), args.folder
    if args.all and sessions:
        raise CliError("--all exports every session: give DIR alone")
    if not args.all and not sessions:
        raise CliError("name the sessions to export before DIR, or pass --all")
    try:
        for session in sessions:
            validate_session_id(session)
    except InvalidSessionId as exc:
        raise CliError(str(exc)) from None
    dest = os.path.abspath(target)
    problem = relocation_problem(dest)
    if problem is not None:
        raise CliError(f"cannot export to {dest}: {problem}: choose another folder")
    source, prefix = _open_source(Workdir.of(args))
    known = asyncio.run(source.list_sessions())
    if args.all:
        sessions = known
    for session in sessions:
        if session not in known:
            raise CliError(
                f"no session {said_session(session)} in {prefix}: `ctxoffload ls` lists the "
                "sessions"
            )
    _check_target(dest, sessions)
    problems = _export(source, prefix, sessions, dest)
    import sys

    for line in problems:
        print(f"ctxoffload export: warning: {line}", file=sys.stderr)
    if args.json:
        print_json({"workdir": dest, "sessions": sessions, "problems": problems})
    else:
        print(f"exported {len(sessions)} session(s) from {shown(prefix)} to {shown(dest)}")
        for session in sessions:
            print(f"  {shown(os.path.join(dest, 'sessions', session))}")
    return EXIT_PROBLEMS if problems else EXIT_OK


def _open_source(where: Workdir) -> tuple[Any, str]:
    """The workspace to export from, and the prefix its references start with."""
    if where.is_bucket:
        from ._bucket import open_store

        store = open_store(where.text)
        return store, str(store.url)
    from ..workspace import LocalWorkspace
    from ._access import open_workspace

    workdir = open_workspace(where)
    return LocalWorkspace(workdir), workdir


def _check_target(dest: str, sessions: list[str]) -> None:
    """Refuse a DIR that is a file, a non-empty folder that is no workspace, one whose
    sessions/ or data/ is a planted link, or one that holds one of the sessions (of any
    kind: a link or a file of that name too). The staging folders of exports that died are
    removed first, and those of live ones are let be."""
    from .._disk.layout import DATA_DIR, SESSIONS_DIR
    from .._disk.paths import open_path
    from ..exceptions import OffloadError

    if not os.path.lexists(dest):
        return
    if not os.path.isdir(dest):
        raise CliError(f"{dest} is not a folder: pass a missing, empty or workspace folder")
    root = os.path.realpath(dest)
    live = _remove_dead_staging(root)
    if not [name for name in os.listdir(dest) if name not in live]:
        return
    folder = os.path.join(dest, SESSIONS_DIR)
    if not os.path.lexists(folder):
        raise CliError(
            f"{dest} is not empty and is no workspace (it has no {SESSIONS_DIR}/ folder): "
            "pass a missing or empty folder, or a workspace"
        )
    for name in (SESSIONS_DIR, DATA_DIR):  # the folders written into: no link followed
        try:
            os.close(open_path(root, (name,), dest, create=False))
        except FileNotFoundError:
            continue
        except OffloadError as exc:
            raise CliError(str(exc)) from None
    there = [s for s in sessions if os.path.lexists(os.path.join(folder, s))]
    if there:
        raise CliError(_held_already(dest, sessions, there))


def _held_already(dest: str, sessions: list[str], there: list[str]) -> str:
    """Why an export into `dest`, which holds `there` of `sessions`, stops; what to do."""
    held = f"{dest} holds session {there[0]!r}"
    if len(there) > 1:
        held += f" and {len(there) - 1} more of those named"
    others = [s for s in sessions if s not in there]
    if not others:
        return (
            f"{held} already: export never overwrites a session (an interrupted export that "
            "put them there is done; else export into another folder)"
        )
    return (
        f"{held} already: export never overwrites a session: export the {len(others)} "
        f"other(s) by name ({' '.join(others)}), or into another folder"
    )


STAGING_PREFIX = "export-"
"""After `TEMPORARY_PREFIX`: an export's staging folder in DIR (`.tmp-export-XXXXXXXX`)."""


def _remove_dead_staging(root: str) -> set[str]:
    """Remove the staging folders in `root` whose export died (a kill -9, a power cut); the
    names of those a live export holds.

    An export holds a lock on its staging folder for as long as it lives (`_new_staging`):
    one this can lock is a dead export's, and one it cannot is being written.
    """
    import fcntl

    from .._disk.layout import TEMPORARY_PREFIX
    from .._disk.paths import DIR_FLAGS, remove_tree

    live: set[str] = set()
    root_fd = os.open(root, DIR_FLAGS)
    try:
        with os.scandir(root_fd) as it:
            names = [e.name for e in it if e.name.startswith(TEMPORARY_PREFIX + STAGING_PREFIX)]
        for name in names:
            try:
                fd = os.open(name, DIR_FLAGS, dir_fd=root_fd)
            except OSError:  # gone meanwhile, or not a folder (a link): not ours
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    live.add(name)
                    continue
                remove_tree(root_fd, name)
            finally:
                os.close(fd)
    finally:
        os.close(root_fd)
    return live


def _new_staging(root: str) -> tuple[str, int]:
    """A new staging folder in `root`, and the descriptor that holds its lock until closed.

    Made, then locked, then looked at again: another export that found it unlocked in
    between took it for a dead one's and removed it, and a fresh one is made.
    """
    import fcntl
    import tempfile

    from .._disk.layout import TEMPORARY_PREFIX
    from .._disk.paths import DIR_FLAGS, same_entry

    while True:
        staging = tempfile.mkdtemp(prefix=TEMPORARY_PREFIX + STAGING_PREFIX, dir=root)
        try:
            fd = os.open(staging, DIR_FLAGS)
        except FileNotFoundError:
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        root_fd = os.open(root, DIR_FLAGS)
        try:
            if same_entry(fd, root_fd, os.path.basename(staging)):
                return staging, fd
        finally:
            os.close(root_fd)
        os.close(fd)


def _export(source: Any, prefix: str, sessions: list[str], dest: str) -> list[str]:
    """Copy and relocate each session into a staging folder in `dest`, then move them all
    into place; the problems met.

    Every file is written below DIR (resolved once: DIR itself may be a link) through the
    no-follow layer (`_disk.paths`): a link planted in DIR, in its sessions/ or data/, or
    in the staging folder, is refused by name and never written through. The staging folder
    is removed however the export ends: by then every thread that wrote in it has ended
    (`asyncio.run` waits for them), and the move, run in this thread with Ctrl-C and SIGTERM
    held, is done.
    """
    import asyncio
    import shutil

    from ..exceptions import ConfigError, InvalidContent, InvalidReference, OffloadError
    from ._signals import signals_held

    os.makedirs(dest, exist_ok=True)
    root = os.path.realpath(dest)
    # Inside DIR: the renames into place stay on one file system. Hidden: no reader lists it.
    staging, lock = _new_staging(root)
    try:
        try:
            problems = asyncio.run(_stage(source, prefix, sessions, staging, dest))
            with signals_held():
                _move_into_place(staging, sessions, root, dest)
        except (OffloadError, ConfigError, InvalidContent, InvalidReference) as exc:
            raise CliError(str(exc)) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        os.close(lock)
    return problems


async def _stage(
    source: Any, prefix: str, sessions: list[str], staging: str, dest: str
) -> list[str]:
    """Copy each session and the data/ files it names into `staging`, its references
    rewritten to name `dest`; the problems met."""
    import asyncio

    problems: list[str] = []
    for session in sessions:
        problems += await source.download(staging, session=session, data=False, check=True)
        named = await asyncio.to_thread(_relocate_session, staging, session, prefix, dest)
        for name in sorted(named):
            problems += await _copy_data(source, prefix, name, staging)
    return problems


def _relocate_session(staging: str, session: str, prefix: str, dest: str) -> set[str]:
    """Rewrite the references of a session copied into `staging` to name `dest`, give its
    context.jsonl a commit record; the data/ names it holds. Every file is read and
    replaced through the no-follow layer (`Folder`, `replace_file`)."""

    from .._disk.commit import COMMIT_TAIL, encode_commit_record
    from .._disk.layout import (
        COMMIT_SUFFIX,
        CONTEXT_FILE,
        DATA_REFERENCE_BYTES,
        EVENTS_FILE,
        SESSIONS_DIR,
    )
    from .._disk.paths import replace_file
    from .._disk.read import Folder
    from .._disk.relocate import prefixes_named, relocate

    old = {prefix} if "://" in prefix else {prefix, os.path.realpath(prefix)}
    data: set[str] = set()
    if not os.path.isdir(os.path.join(staging, SESSIONS_DIR, session)):
        return data  # a session with no files left (all rows hand-made)
    with Folder(staging, SESSIONS_DIR, session, root=staging) as folder:
        names = folder.files()
        if EVENTS_FILE in names:
            old |= prefixes_named(folder.read_bytes(EVENTS_FILE).splitlines(), session)
        for name in names:
            st = folder.stat(name)
            body = relocate(folder.read_bytes(name), old, dest)
            times = (st.st_atime_ns, st.st_mtime_ns)
            replace_file(folder.fd, name, body, fsync=False, modified_ns=times)
            data.update(m.decode() for m in DATA_REFERENCE_BYTES.findall(body))
            if name == CONTEXT_FILE:
                record = encode_commit_record(len(body), body.count(b"\n"), body[-COMMIT_TAIL:])
                # (Its times are the log's: the copy's last activity is the session's own, not
                # the export's, for `ls` and the `show` that opens the newest.)
                replace_file(
                    folder.fd, name + COMMIT_SUFFIX, record, fsync=False, modified_ns=times
                )
    return data


async def _copy_data(source: Any, prefix: str, name: str, staging: str) -> list[str]:
    """Copy the data/ file `name` from the source into `staging/data/`."""
    import asyncio
    import contextlib

    from .._disk.layout import DATA_DIR
    from .._disk.paths import write_new_file
    from ..exceptions import InvalidReference

    try:
        body = await source.read_reference(f"{prefix}/{DATA_DIR}/{name}")
    except InvalidReference as exc:
        # Why, when the workspace says more (a payload kept in a folder or bucket: where).
        why = f" ({exc})" if "outside the database" in str(exc) else ""
        return [f"{prefix}/{DATA_DIR}/{name} is named but not in the workspace{why}: not copied"]
    with contextlib.suppress(FileExistsError):  # named by its hash: the same bytes
        await asyncio.to_thread(write_new_file, staging, (DATA_DIR, name), body, staging)
    return []


def _move_into_place(staging: str, sessions: list[str], root: str, dest: str) -> None:
    """Rename each data/ file into `dest/data/` (one there already holds the same bytes: its
    name is their hash), then each session folder into `dest/sessions/`; every folder
    reached without following a link, all opened and every session checked before anything
    is moved. Renamed, never linked: a kill at any point leaves no file with a second link
    into the staging folder (which every reader refuses), and no session before its data.

    Args:
        staging: the staging folder (inside `root`).
        sessions: the sessions to move.
        root: `dest` resolved.
        dest: DIR as given, for messages.
    """
    import contextlib

    from .._disk.layout import DATA_DIR, SESSIONS_DIR
    from .._disk.paths import open_tree

    with contextlib.ExitStack() as folders:
        staged = folders.enter_context(open_tree(staging, (SESSIONS_DIR,), staging, create=True))
        has_data = os.path.isdir(os.path.join(staging, DATA_DIR))
        into = folders.enter_context(open_tree(root, (SESSIONS_DIR,), dest, create=True))
        for session in sessions:
            if _exists(into, session):  # made since the check: never overwritten
                target = os.path.join(dest, SESSIONS_DIR, session)
                raise CliError(f"{target} appeared while exporting: not overwritten")
        if has_data:
            staged_data = folders.enter_context(
                open_tree(staging, (DATA_DIR,), staging, create=False)
            )
            data = folders.enter_context(open_tree(root, (DATA_DIR,), dest, create=True))
            for name in sorted(os.listdir(staged_data)):
                if not _exists(data, name):  # named by its hash: the same bytes
                    os.rename(name, name, src_dir_fd=staged_data, dst_dir_fd=data)
        for session in sessions:
            try:
                os.rename(session, session, src_dir_fd=staged, dst_dir_fd=into)
            except FileNotFoundError:
                os.mkdir(session, 0o755, dir_fd=into)  # a session with no files left: empty


def _exists(dir_fd: int, name: str) -> bool:
    """Whether `dir_fd` holds an entry `name` of any kind (a link is not followed)."""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
