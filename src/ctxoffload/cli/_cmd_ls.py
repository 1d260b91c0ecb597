"""`ctxoffload ls`: the sessions of a workspace, newest activity first."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .._disk.events import EventKind, is_event
from .._disk.layout import CONTEXT_FILE, EVENTS_FILE, SESSIONS_DIR, STATE_FILE, is_tool_result_name
from .._disk.paths import linked_elsewhere
from .._disk.read import Folder
from ..exceptions import CliError
from ._access import (
    committed_end,
    hard_links_refused,
    open_in,
    open_workspace,
    read_json_lines,
    session_ids,
)
from ._arguments import EXIT_OK, EXIT_USAGE, add_json, add_workdir
from ._commands import COMMAND_HELP
from ._output import Column, iso_time, print_json, print_table, shown

__all__ = [
    "Warnings",
    "count_newlines",
    "grouped",
    "newest_session",
    "own_files",
    "read_logged",
    "register",
    "run",
    "session_facts",
]


LS_COLUMNS = (
    Column("session"),
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


def _event_facts(events: Iterable[Any]) -> dict[str, Any]:
    """What ls shows of a session's events, counted in one pass (one line in memory at a
    time): compressions, model calls, the model calls `replay` says it replayed, and the
    session a sub-agent's session was started by (`parent`) or a fork was made from."""
    facts: dict[str, Any] = {
        "compressions": 0,
        "model_calls": 0,
        "replayed": 0,
        "parent": None,
        "forked_from": None,
    }
    for event in events:
        if not is_event(event):
            continue
        kind = event.get("kind")
        facts["compressions"] += kind == EventKind.COMPRESSION
        facts["model_calls"] += kind == EventKind.MODEL_CALL
        if kind == EventKind.REPLAY and isinstance(event.get("model_calls"), int):
            facts["replayed"] += event["model_calls"]
        link = event.get("parent") if kind == EventKind.SESSION_START else None
        if facts["parent"] is None and isinstance(link, dict):
            facts["parent"] = _session_name(link.get("session"))
        origin = event.get("origin") if kind == EventKind.FORK else None
        if facts["forked_from"] is None and isinstance(origin, dict):
            facts["forked_from"] = _session_name(origin.get("session"))
    return facts


def _session_name(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def count_newlines(folder: Folder, name: str) -> int:
    """The newlines of a file of a session folder; 0 when it is not a file of the workspace.

    Of a log with a commit record (`context.jsonl.commit`), only the committed part counts:
    lines past it are a batch never committed, which readers skip.

    Raises:
        CliError: it is hard-linked or cannot be read.
    """
    opened = open_in(folder, name)
    if opened is None:
        return 0
    fd, st = opened
    try:
        end = committed_end(folder, name, fd, st.st_size)
        total = offset = 0
        while offset < end:
            chunk = os.pread(fd, min(1 << 20, end - offset), offset)
            if not chunk:
                break
            total += chunk.count(b"\n")
            offset += len(chunk)
        return total
    except OSError as exc:
        raise CliError(f"cannot read {shown(folder.path(name))}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def session_facts(workdir: str, session: str, warnings: Warnings | None = None) -> dict[str, Any]:
    """What `ls` shows of one session, read from its files through the workspace's reader.

    A file that cannot be read is said on stderr, listed in `unreadable`, and what it would
    tell is None.
    """
    warnings = warnings or Warnings("ls")
    then = f"session {session} is shown without it"
    facts: dict[str, Any] = {
        "session": session,
        "last_activity": None,
        "steps": None,
        "message_lines": None,
        "tool_results": None,
        "bytes": None,
        "compressions": None,
        "parent": None,
        "forked_from": None,
        "unreadable": [],
    }
    shown_folder = os.path.join(workdir, SESSIONS_DIR, session)
    try:
        with Folder(workdir, SESSIONS_DIR, session) as folder:
            _read_facts(folder, facts, warnings, then)
    except FileNotFoundError:
        pass  # removed (gc) since the sessions were listed
    except OSError as exc:  # Refused and OffloadError too: a folder that cannot be listed
        warnings.folder(shown_folder, exc, f"session {session} is shown as unreadable")
        facts["unreadable"].append(".")
    facts["unreadable"] = list(dict.fromkeys(facts["unreadable"]))  # each file once
    return facts


def own_files(
    folder: Folder, refused: Callable[[str, os.stat_result], None] | None = None
) -> Iterator[tuple[str, os.stat_result]]:
    """The session's own files, each with its `stat`: regular files with one link. One with
    other links (perhaps another name of a file outside the workspace: neither its size nor
    its time is the session's) is given to `refused` instead."""
    for name in folder.names():
        try:
            st = folder.stat(name)  # a second link is looked at again for a moment
        except FileNotFoundError:
            continue  # gone meanwhile (a temporary name)
        if not stat.S_ISREG(st.st_mode):
            continue  # a folder, a link, a FIFO: not a file of the session
        if linked_elsewhere(st):
            if refused is not None:
                refused(name, st)
            continue
        yield name, st


def newest_session(workdir: str) -> tuple[str | None, int]:
    """The session with the latest activity (as `ls` sorts them: the newest time a file of
    its own was changed), and how many sessions there are."""
    newest: tuple[float, str] | None = None
    sessions = session_ids(workdir)
    for session in sessions:
        try:
            with Folder(workdir, SESSIONS_DIR, session) as folder:
                last = max((st.st_mtime for _, st in own_files(folder)), default=0.0)
        except OSError:  # gone, or cannot be listed: no activity to compare
            continue
        if newest is None or (last, session) > newest:
            newest = (last, session)
    return (newest[1] if newest else None), len(sessions)


def _read_facts(folder: Folder, facts: dict[str, Any], warnings: Warnings, then: str) -> None:
    last = 0.0
    size = 0
    tool_results = 0

    def refused(name: str, st: os.stat_result) -> None:
        warnings.say(folder.path(name), hard_links_refused(folder.path(name), st.st_nlink), then)
        facts["unreadable"].append(name)

    for name, st in own_files(folder, refused):
        last = max(last, st.st_mtime)
        size += st.st_size
        tool_results += is_tool_result_name(name)
    facts.update(last_activity=iso_time(last) if last else None, bytes=size)
    facts["tool_results"] = tool_results
    counted = read_logged(folder, EVENTS_FILE, warnings, then, _event_facts)
    if counted is None:
        facts["unreadable"].append(EVENTS_FILE)
    else:
        facts["compressions"] = counted["compressions"]
        facts["parent"] = counted["parent"]
        facts["forked_from"] = counted["forked_from"]
        # An agent's model calls, or those `ctxoffload replay` replayed (it says how many).
        facts["steps"] = counted["model_calls"] or counted["replayed"] or None
    if facts["steps"] is None:
        rows = read_logged(folder, STATE_FILE, warnings, then)
        if rows is None:
            facts["unreadable"].append(STATE_FILE)
        state = next(iter(rows or []), None)
        if isinstance(state, dict) and isinstance(state.get("steps"), int):
            facts["steps"] = state["steps"]
    try:
        facts["message_lines"] = count_newlines(folder, CONTEXT_FILE)
    except CliError as exc:
        warnings.say(folder.path(CONTEXT_FILE), str(exc), then)
        facts["unreadable"].append(CONTEXT_FILE)


def grouped(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with each sub-agent's session right under its parent's (each level in the
    order given), a `depth` added to each; a session whose parent is not listed stays at
    the top."""
    listed = {r["session"] for r in rows}
    children: dict[str, list[dict[str, Any]]] = {}
    top: list[dict[str, Any]] = []
    for row in rows:
        parent = row.get("parent")
        if isinstance(parent, str) and parent in listed and parent != row["session"]:
            children.setdefault(parent, []).append(row)
        else:
            top.append(row)
    ordered: list[dict[str, Any]] = []
    seen: set[str] = set()
    # Depth first with a stack, not recursion: sub-agents of sub-agents make chains of any
    # length (1,200 levels ended in RecursionError).
    for root in top + rows:  # then the rows only reachable through a loop of parents
        stack = [(root, 0)]
        while stack:
            row, depth = stack.pop()
            if row["session"] in seen:
                continue  # a loop of parents (hand-edited records): each row once
            seen.add(row["session"])
            ordered.append({**row, "depth": depth})
            stack.extend((child, depth + 1) for child in reversed(children.get(row["session"], [])))
    return ordered


# The files each column is read from ("." the folder itself, for every column).
_SOURCES = {
    "steps": (".", EVENTS_FILE, STATE_FILE),
    "message_lines": (".", CONTEXT_FILE),
    "compressions": (".", EVENTS_FILE),
}


def run(args: argparse.Namespace) -> int:
    """List the sessions."""
    workdir = open_workspace(args, data=False)
    warnings = Warnings("ls")
    rows = [session_facts(workdir, session, warnings) for session in session_ids(workdir)]
    rows.sort(key=lambda r: r["last_activity"] or "", reverse=True)
    rows = grouped(rows)
    # A file that could not be read is an error (said on stderr, shown as `?`): exit 2 once
    # everything else is listed, as grep does.
    status = EXIT_USAGE if warnings.said else EXIT_OK
    if args.json:
        print_json(rows)
        return status
    if not rows:
        print(f"no sessions in {shown(workdir)}")
        return status

    def cell(row: dict[str, Any], key: str) -> Any:
        value = row[key]
        if value is not None:
            return value
        sources = _SOURCES.get(key, (".",))
        return "?" if any(name in sources for name in row["unreadable"]) else "-"

    print_table(
        LS_COLUMNS,
        [
            [
                "  " * r["depth"] + ("└ " if r["depth"] else "") + r["session"],
                cell(r, "last_activity"),
                cell(r, "steps"),
                cell(r, "message_lines"),
                cell(r, "tool_results"),
                cell(r, "bytes"),
                cell(r, "compressions"),
            ]
            for r in rows
        ],
        right=(2, 3, 4, 5, 6),
    )
    return status
