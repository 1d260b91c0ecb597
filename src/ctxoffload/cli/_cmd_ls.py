"""`ctxoffload ls`: the sessions of a workspace, newest activity first."""

from __future__ import annotations

import argparse

from .._disk.layout import CONTEXT_FILE, EVENTS_FILE, STATE_FILE
from ._access import open_workspace, say_linked_sessions
from ._arguments import EXIT_OK, EXIT_USAGE, Workdir, add_json, add_workdir
from ._bucket import is_database_url, open_database
from ._commands import COMMAND_HELP
from ._output import Column, print_json, print_table, shown
from ._view import (
    SessionRow,
    Warnings,
    indented,
    session_rows,
    shown_fields,
    stored_session_rows,
)

__all__ = ["register", "run"]


LS_COLUMNS = (
    Column("session", shorten=True),
    Column("last activity (UTC)", "last (UTC)", fold=True, keep=6),
    Column("steps", right=True, keep=5),
    Column("messages", "msgs", right=True, keep=4),
    Column("tool results", "tools", right=True, keep=3),
    Column("bytes", right=True, keep=2),
    Column("compr.", right=True, keep=1),
)
"""The columns of `ls`; on a narrow terminal they give way by `keep` (docs/cli.md)."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `ls` to the command line."""
    parser = commands.add_parser(
        "ls",
        help=COMMAND_HELP["ls"],
        description="List the sessions of a workspace, the most recently active first.",
    )
    add_workdir(parser)
    add_json(parser)
    parser.set_defaults(run=run)


# The files each column is read from ("." the folder itself, for every column).
_SOURCES = {
    "steps": (".", EVENTS_FILE, STATE_FILE),
    "messages": (".", EVENTS_FILE, CONTEXT_FILE),
    "compressions": (".", EVENTS_FILE),
}


def run(args: argparse.Namespace) -> int:
    """List the sessions."""
    where = Workdir.of(args)
    warnings = Warnings("ls")
    if is_database_url(where.text):  # its rows, not a copy in the on-disk layout
        store = open_database(where.text)
        try:
            rows = stored_session_rows(store, warnings, newest_first=True)
        finally:
            store.close()
        workdir = store.url
    else:
        workdir = open_workspace(where, data=False)
        rows = session_rows(workdir, warnings, newest_first=True)
        say_linked_sessions(workdir, warnings, "it is not listed")
    # A file that could not be read is an error (said on stderr, shown as `?`): exit 2 once
    # everything else is listed, as grep does.
    status = EXIT_USAGE if warnings.said else EXIT_OK
    if args.json:
        print_json([shown_fields(row) for row in rows])
        return status
    if not rows:
        print(f"no sessions in {shown(workdir)}")
        return status

    def cell(row: SessionRow, key: str) -> object:
        value = getattr(row, key)
        if value is not None:
            return value
        sources = _SOURCES.get(key, (".",))
        return "?" if any(name in sources for name in row.unreadable) else "-"

    print_table(
        LS_COLUMNS,
        [
            [
                indented(r.session, r.depth),
                cell(r, "last_activity"),
                cell(r, "steps"),
                cell(r, "messages"),
                cell(r, "tool_results"),
                cell(r, "bytes"),
                cell(r, "compressions"),
            ]
            for r in rows
        ],
        right=(2, 3, 4, 5, 6),
    )
    return status
