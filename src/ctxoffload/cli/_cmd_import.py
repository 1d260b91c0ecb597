"""`ctxoffload import`: a disk workspace's sessions written into a database or a bucket
(`SqlWorkspace.upload`, `ObjectStoreWorkspace.upload`): the way from a folder to shared
storage, the reverse of `ctxoffload export`."""

from __future__ import annotations

import argparse

from ..exceptions import CliError
from ._arguments import EXIT_OK, EXIT_PROBLEMS, Workdir, add_json, add_workdir
from ._commands import COMMAND_HELP
from ._session_name import SessionName

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `import` to the command line."""
    parser = commands.add_parser(
        "import",
        help=COMMAND_HELP["import"],
        description=(
            "Write the sessions of the workspace folder DIR (all, or those named) into the "
            "database or bucket --workdir names: every line (line numbers kept), event, "
            "file and data/ file, each session under its lease, references rewritten to "
            "name the new workspace, and each whole or not at all. DIR is read and checked "
            "first and never changed. A session the target holds already is never "
            "overwritten: one that holds what this import writes (an earlier run wrote it) "
            "is left as it is, one a killed import began is finished, any other stops the "
            "import (exit 2, nothing written). A sqlite:/// database that does not exist "
            "yet is created."
        ),
    )
    # DIR is required and SESSION optional; argparse, given neither, would call both
    # required, so DIR's absence is said by `run`, and the usage line says which is which.
    parser.usage = "%(prog)s [-h] [--workdir DIR] [--json] DIR [SESSION ...]"
    parser.add_argument("folder", nargs="?", metavar="DIR", help="the workspace folder to read")
    parser.add_argument(
        "sessions", nargs="*", metavar="SESSION", type=SessionName, help="only these sessions"
    )
    add_workdir(parser)
    add_json(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Import the sessions; print what was written where."""
    import asyncio
    import os
    import sys

    from .. import exceptions as errors
    from ._output import print_json, shown

    if args.folder is None:
        raise CliError(
            "import needs DIR, the workspace folder to read: ctxoffload import --workdir "
            "sqlite:///FILE DIR [SESSION ...] (SESSION is optional: all sessions by default)"
        )
    where = Workdir.of(args)
    if not where.is_bucket:
        raise CliError(
            f"--workdir {where.text!r}: import writes into a database (sqlite:///FILE) or a "
            "bucket (s3://...); to copy into a folder, run `ctxoffload export --workdir DIR "
            "--all FOLDER`"
        )
    store = _open_target(where.text)
    folder = os.path.abspath(args.folder)
    sessions = list(dict.fromkeys(args.sessions)) or None  # one named twice: taken once
    refused = (
        errors.ConfigError,
        errors.InvalidContent,
        errors.InvalidReference,
        errors.InvalidSessionId,
        errors.OffloadError,
        errors.SessionBusyError,
    )
    done: list[str] = []

    def said(line: str) -> None:  # one line a session, as each is done
        done.append(line)
        if not args.json:
            print(f"  {line}", flush=True)

    try:
        problems = asyncio.run(store.upload(folder, sessions=sessions, progress=said))
    except refused as exc:
        raise CliError(str(exc)) from None
    for line in problems:
        print(f"ctxoffload import: warning: {line}", file=sys.stderr)
    if args.json:
        outcomes = dict(line.split(": ", 1) for line in done)
        print_json(
            {"workdir": store.url, "folder": folder, "sessions": outcomes, "problems": problems}
        )
    else:
        what = ", ".join(sessions) if sessions else "every session"
        print(f"imported {what} from {shown(folder)} into {store.url}")
    return EXIT_PROBLEMS if problems else EXIT_OK


def _open_target(url: str) -> Any:
    """The workspace to import into: a database (created when the file is missing; an
    existing file must be a ctxoffload workspace) or a bucket."""
    import os

    from ._bucket import is_database_url, open_database, open_store, payloads_place

    if is_database_url(url):
        from ..exceptions import ConfigError
        from ..workspace import SqlWorkspace

        try:
            workspace = SqlWorkspace(url, payloads=payloads_place())
        except ConfigError as exc:
            raise CliError(str(exc)) from None
        if workspace.path is not None and os.path.exists(workspace.path):
            return open_database(url)
        return workspace  # a new SQLite file, or a PostgreSQL database: the tables made
    return open_store(url)
