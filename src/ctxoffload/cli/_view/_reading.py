"""What every part of the session view shares: the warnings of one command run (a file
that cannot be read, said once on stderr), a session folder read or said unreadable, a
log read as a stream, and the session's own files."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..._disk.layout import SESSIONS_DIR
from ..._disk.paths import hard_linked
from ..._disk.read import Folder, Refused
from ...exceptions import CliError
from .._access import read_json_lines
from .._output import shown

__all__ = ["Warnings", "own_files", "read_folder", "read_logged"]


class Warnings:
    """The warnings of one command run: one line on stderr per file that cannot be read."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.said: set[str] = set()

    def say(self, path: str, why: str, then: str) -> None:
        """Say `why` once for `path`, and what the command does about it (`then`)."""
        if path in self.said:
            return
        self.said.add(path)
        named = (why if path in why else f"{path}: {why}").replace(path, shown(path))
        print(f"ctxoffload {self.command}: warning: {named}; {then}", file=sys.stderr)

    def folder(self, folder: str, exc: OSError, then: str) -> None:
        """Say once that the session folder `folder` cannot be listed."""
        cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
        self.say(folder, f"cannot read the folder {folder}: {cause.strerror or cause}", then)


def read_logged(
    folder: Folder,
    name: str,
    warnings: Warnings,
    then: str,
    consume: Callable[[Iterable[Any]], Any] = list,
) -> Any | None:
    """What `consume` makes of the JSON values of a log of a session folder (read as a
    stream: `read_json_lines`), or None (said once on stderr) if it cannot be read: a
    hard-linked file, or one it has no permission to read."""
    try:
        result, _ = read_json_lines(folder, name, command=warnings.command, consume=consume)
        return result
    except CliError as exc:
        warnings.say(folder.path(name), str(exc), then)
    return None


def own_files(
    folder: Folder, refused: Callable[[str, Refused], None] | None = None
) -> Iterator[tuple[str, os.stat_result]]:
    """The session's own files, each with its `stat`: regular files with one link. One with
    other links (perhaps another name of a file outside the workspace: neither its size nor
    its time is the session's) is given to `refused` instead, with its refusal."""
    for name in folder.names():
        try:
            st = folder.stat(name)  # a second link is looked at again for a moment
        except FileNotFoundError:
            continue  # gone meanwhile (a temporary name)
        if not stat.S_ISREG(st.st_mode):
            continue  # a folder, a link, a FIFO: not a file of the session
        hard = hard_linked(st, folder.path(name))
        if hard is not None:
            if refused is not None:
                refused(name, hard)
            continue
        yield name, st


def read_folder(
    workdir: str, session: str, read: Callable[[Folder], None], warnings: Warnings, then: str
) -> bool:
    """`read` the session's folder; False (said once, with what is done about it: `then`)
    when it cannot be listed. A folder removed since the sessions were listed (gc) reads as
    empty."""
    try:
        with Folder(workdir, SESSIONS_DIR, session) as folder:
            read(folder)
    except FileNotFoundError:
        pass
    except OSError as exc:  # Refused and OffloadError too: a folder that cannot be listed
        warnings.folder(os.path.join(workdir, SESSIONS_DIR, session), exc, then)
        return False
    return True
