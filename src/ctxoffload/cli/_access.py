"""How every `ctxoffload` command reaches a workspace's files, and what it says when one is
not read.

Every read goes through ctxoffload.workspace's one reader: `sessions_folder` says whether a
folder is a workspace, `Folder` reaches its folders and opens its files (no link followed
anywhere below the workdir, each file checked on its open descriptor, a second link looked
at again for a moment), `read_commit` (`Folder.committed`) reads the commit record and
`JsonLines` the JSON lines. No command opens a workspace file by itself.

What the reader refuses is said here, once, for every command (`refusal`):

- a missing entry, a symbolic link, a FIFO, socket or device is not a file of the workspace:
  it is passed over, as if absent (`ctxoffload verify` reports it);
- a file with more than one hard link (another name may be outside the workspace) is never
  read: `PATH: has N hard links: it may be shared with a file outside the workspace; not
  read`;
- a file that cannot be opened: `cannot read PATH: Permission denied`.

Kept light on purpose: `grep` starts through this module, so nothing here imports pydantic,
pathlib or `typing` at run time.
"""

from __future__ import annotations

import os
import sys

from .._disk.commit import JsonLines
from .._disk.layout import SESSIONS_DIR
from .._disk.paths import hard_links_reason
from .._disk.read import Folder, Refused, sessions_folder
from ..exceptions import CliError, InvalidReference, OffloadError
from ._arguments import DEMO_FOLDER_PREFIX, path_text
from ._output import shown
from ._session_name import said_session

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from ._arguments import Workdir

__all__ = [
    "checked_session_id",
    "committed_end",
    "expanded_session",
    "hard_links_refused",
    "no_session",
    "open_backend",
    "open_in",
    "open_workspace",
    "read_json_lines",
    "refusal",
    "say_corrupt",
    "session_entry",
    "session_folder",
    "session_ids",
    "workspace_inside",
]


# -- the workspace and its sessions ----------------------------------------------------------


def open_workspace(
    where: Workdir,
    *,
    session: str | None = None,
    data: bool = True,
    check: bool = False,
    as_given: bool = False,
) -> str:
    """The folder of the existing workspace the arguments name, checked before anything is
    read; creates nothing in it.

    A bucket (`--workdir s3://...`) is read through a temporary copy of it (see
    `_bucket.py`), kept in `where.copies`: `session`, `data` and `check` say what to copy.

    Args:
        where: the workdir the command's arguments name.
        as_given: return the folder as the user spelled it (as pathlib spells it: `grep`
            prints paths that way) instead of as an absolute path.

    Raises:
        CliError: the folder is missing, is a file, or is not a workspace (the reader's
            `sessions_folder` says which).
    """
    if where.is_bucket:
        copied = where.copies.copy(where.text, session=session, data=data, check=check)
        workdir = str(copied.folder)
    else:
        workdir = path_text(where.text)
    try:
        sessions_folder(workdir)
    except InvalidReference as exc:
        inside = workspace_inside(workdir)
        if inside is not None:
            # Where the demo just ran, its folder is beside: say which to pass.
            here = os.path.abspath(workdir) == os.getcwd()
            named = inside if here else os.path.join(workdir, inside)
            raise CliError(f"{exc}; {inside} in it is one: pass --workdir {named}") from None
        fix = "pass --workdir DIR"
        if not where.given:
            fix += " or set CTXOFFLOAD_WORKDIR"
        raise CliError(f"{exc}: {fix}") from None
    return workdir if as_given else os.path.abspath(workdir)


def workspace_inside(folder: str, *, look_at: int = 500) -> str | None:
    """The name of a workspace right inside `folder` (a folder of it holding `sessions/`,
    neither being a link): the newest `ctxoffload demo` made there (its names sort by
    time), else the first by name; None when there is none or `folder` cannot be listed.
    At most `look_at` entries are looked at: a hint must not cost a big folder's scan."""
    found: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for count, entry in enumerate(entries):
                if count >= look_at:
                    break
                sessions = os.path.join(entry.path, SESSIONS_DIR)
                if (
                    entry.is_dir(follow_symlinks=False)
                    and os.path.isdir(sessions)
                    and not os.path.islink(sessions)
                ):
                    found.append(entry.name)
    except OSError:
        return None
    demos = sorted(name for name in found if name.startswith(DEMO_FOLDER_PREFIX))
    return demos[-1] if demos else min(found, default=None)


def open_backend(where: Workdir, *, session: str | None = None, fsync: bool = True) -> object:
    """The workspace the arguments name, as the backend a command that changes it acts
    through: a bucket's `ObjectStoreWorkspace` for a store URL, else a `LocalWorkspace` on
    the checked folder (see `open_workspace`).

    Args:
        where: the workdir the command's arguments name.
        session: a session the local workspace must hold (`session_folder` checks it).
        fsync: the `LocalWorkspace`'s `fsync`.

    Raises:
        CliError: as `open_workspace` and `session_folder`, or the store cannot be opened.
    """
    if where.is_bucket:
        from ._bucket import open_store

        return open_store(where.text)
    from ..workspace import LocalWorkspace

    workdir = open_workspace(where, session=session)
    if session is not None:
        session_folder(workdir, session)
    return LocalWorkspace(workdir, fsync=fsync)


def session_ids(workdir: str) -> list[str]:
    """The sessions of a workspace: the folders in sessions/ named as session ids (no link,
    no hidden name), sorted."""
    with Folder(workdir, SESSIONS_DIR) as sessions:
        return sessions.sessions()


def linked_sessions(workdir: str) -> list[str]:
    """The names in sessions/ that are symbolic links named as sessions: never followed, and
    said so (`LINKED_SESSION`) where a command would otherwise call them missing."""
    try:
        with Folder(workdir, SESSIONS_DIR) as sessions:
            return sessions.linked_sessions()
    except OSError:
        return []


LINKED_SESSION = "is a symbolic link, not a session folder: refused, never followed"
"""What a command says of a link in sessions/ named as a session."""


def say_linked_sessions(workdir: str, warnings: Any, then: str) -> None:
    """Say, through `warnings` (a `Warnings`), one line for each link in sessions/ named as
    a session, which a list of the sessions leaves out (`then`: what it does about it)."""
    for name in linked_sessions(workdir):
        warnings.say(os.path.join(workdir, SESSIONS_DIR, name), LINKED_SESSION, then)


def no_session(workdir: str, session_id: str) -> str:
    """The one line that says a workspace has no such session, naming the first ten it has
    (or that the name is a link there, refused)."""
    named = shown(os.path.abspath(workdir))
    if session_id in linked_sessions(workdir):
        link = os.path.join(os.path.abspath(workdir), SESSIONS_DIR, session_id)
        return f"session {said_session(session_id)}: {shown(link)} {LINKED_SESSION}"
    try:
        known = session_ids(workdir)
    except OSError:  # sessions/ cannot be listed: the line names none
        has = ""
    else:
        listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
        has = f" (it has {listed or 'none'})"
    return (
        f"no session {said_session(session_id)} in {named!r}{has}: `ctxoffload ls` lists the "
        "sessions"
    )


def session_folder(workdir: str, session_id: str) -> str:
    """The id of an existing session of the workspace, checked before any of its files is
    read.

    Raises:
        CliError: the id is not a plain name, or sessions/ holds no folder of that name (a
            link or a file in its place is none).
    """
    import stat

    from .._disk.ids import is_session_id

    given = getattr(session_id, "given", session_id)
    # `a...b` is a plain name too: an abbreviation only when no session has that name.
    dots = "..." in given and is_session_id(given) and session_entry(workdir, given) is None
    if "…" in given or dots:
        session_id = expanded_session(workdir, given)
    entry = session_entry(workdir, session_id)
    if entry is None or not stat.S_ISDIR(entry.st_mode):
        raise CliError(no_session(workdir, session_id))
    return session_id


def expanded_session(workdir: str, given: str) -> str:
    """The one session of the workspace that `given` shortens: `HEAD…TAIL` (or
    `HEAD...TAIL`), as `ls` and `stats` print an id too long for the terminal, stands for
    the session whose id begins with HEAD and ends with TAIL.

    Raises:
        CliError: no session, or more than one, has that beginning and end.
    """
    mark = "…" if "…" in given else "..."
    head, _, tail = given.partition(mark)
    found = [
        s
        for s in session_ids(workdir)
        if len(s) >= len(head) + len(tail) and s.startswith(head) and s.endswith(tail)
    ]
    if len(found) == 1:
        return found[0]
    if not found:
        raise CliError(no_session(workdir, given))
    named = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
    raise CliError(
        f"session {given!r} may be any of {len(found)} sessions ({named}): give more of its "
        "id (`ctxoffload ls --json` prints each whole)"
    )


def checked_session_id(session_id: str) -> str:
    """`session_id` if it is a plain name (see `validate_session_id`).

    Raises:
        CliError: it is not, saying why.
    """
    from .._disk.ids import validate_session_id
    from ..exceptions import InvalidSessionId

    try:
        validate_session_id(session_id)
    except InvalidSessionId as exc:
        raise CliError(str(exc)) from exc
    return session_id


def session_entry(workdir: str, session_id: str) -> os.stat_result | None:
    """What sessions/ holds under that name, of any kind (a link is not followed); None when
    it holds nothing of that name.

    Raises:
        CliError: the id is not a plain name (checked before sessions/ is looked at).
    """
    checked_session_id(session_id)
    try:
        with Folder(workdir, SESSIONS_DIR) as sessions:
            return sessions.stat(session_id)
    except FileNotFoundError:
        return None


# -- what is not read, said once -------------------------------------------------------------


def hard_links_refused(path: str | os.PathLike[str], links: int) -> str:
    """The one line that says a hard-linked file was not read."""
    return f"{shown(path)}: {hard_links_reason(links)}; not read"


def refusal(exc: OSError, path: str | os.PathLike[str]) -> str | None:
    """What the CLI says of a workspace file the reader did not open or read.

    Args:
        exc: what `Folder.open` (or a read after it) raised.
        path: the file, as the command names it.

    Returns:
        None for an entry that is not a file of the workspace (missing, a symbolic link, a
        FIFO, socket or device): the command passes it over. Otherwise one line: a file
        with other hard links is refused, one that cannot be read says why.
    """
    if isinstance(exc, FileNotFoundError):
        return None
    if isinstance(exc, Refused):
        if exc.reason == "hard_links":
            return hard_links_refused(path, exc.links)
        return None
    cause = exc.__cause__ if isinstance(exc, OffloadError) else exc
    if not isinstance(cause, OSError):
        cause = exc
    return f"cannot read {shown(path)}: {cause.strerror or cause}"


def open_in(
    folder: Folder, name: str, path: str | os.PathLike[str] | None = None
) -> tuple[int, os.stat_result] | None:
    """Open a file of a session (or data/) folder for reading: `(descriptor, its fstat)`.

    Args:
        folder: the folder, entered.
        name: the file's name in it.
        path: how the command names the file (default: `folder.path(name)`).

    Returns:
        None when it is not a file of the workspace (see `refusal`).

    Raises:
        CliError: it has other hard links, or it cannot be opened (`refusal` says which).
    """
    try:
        return folder.open(name, None if path is None else os.fspath(path))
    except OSError as exc:  # Refused and OffloadError are OSErrors too
        line = refusal(exc, path if path is not None else folder.path(name))
        if line is None:
            return None
        raise CliError(line) from None


def committed_end(folder: Folder, name: str, fd: int, size: int) -> int:
    """Where the committed part of a log open as `fd` (`size` bytes) ends
    (`Folder.readable_end`): lines past it are a batch never committed, which every reader
    of the workspace skips."""
    return folder.readable_end(name, fd, size)


def read_json_lines(
    folder: Folder,
    name: str,
    *,
    command: str,
    consume: Callable[[Iterable[Any]], Any] = list,
) -> tuple[Any, list[int]]:
    """What `consume` makes of the JSON values of a log's complete lines (`JsonLines`), read
    as a stream, and the numbers of its lines that are not JSON.

    With the default `consume` (`list`) every value is held; a command that only counts
    passes a function that iterates once, and memory then holds one line at a time.
    Nothing when it is not a file of the workspace. A last line without its newline (a
    write in progress) is skipped silently; lines that are not JSON are skipped and said
    once on stderr, as `ctxoffload COMMAND: warning: ...`.

    Args:
        folder: the session's folder, entered.
        name: the log's name in it.
        command: the command, for the warning (`ls`).
        consume: called once with the values, as an iterable to go through once.

    Raises:
        CliError: it has other hard links, or it cannot be read.
    """
    named = folder.path(name)
    opened = open_in(folder, name, named)
    if opened is None:
        return consume(()), []
    fd, st = opened
    try:
        lines = JsonLines(fd, st.st_size)
        result = consume(value for _, value in lines)
    except OSError as exc:  # a read that failed after the open (EIO)
        raise CliError(f"cannot read {shown(named)}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    say_corrupt(command, named, lines.corrupt)
    return result, lines.corrupt


def say_corrupt(command: str, named: str, bad: list[int]) -> None:
    """Say once on stderr, as `ctxoffload COMMAND: warning: ...`, that the lines `bad` of
    the log `named` are not JSON and were skipped; nothing when there are none."""
    if bad:
        print(
            f"ctxoffload {command}: warning: {shown(named)} line {bad[0]} is not valid JSON"
            + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
            + ": skipped; `ctxoffload verify` checks the workspace",
            file=sys.stderr,
        )
