"""`ctxoffload ls`: the sessions of a workspace, newest activity first."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ._commands import COMMAND_HELP
from ._common import (
    CliError,
    add_json,
    add_workdir,
    cannot_read,
    committed_bytes,
    hard_links_refused,
    iso_time,
    json_lines,
    open_file,
    open_workspace,
    print_json,
    print_table,
    settled_lstat,
    shown,
)

__all__ = ["Warnings", "count_lines", "read_json_lines", "register", "run", "session_facts"]


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

    def say(self, path: Path, why: str, then: str) -> None:
        """Say `why` once for `path`, and what the command does about it (`then`)."""
        if str(path) in self.said:
            return
        self.said.add(str(path))
        named = (why if str(path) in why else f"{path}: {why}").replace(str(path), shown(path))
        print(f"ctxoffload {self.command}: warning: {named}; {then}", file=sys.stderr)

    def folder(self, folder: Path, exc: OSError, then: str) -> None:
        """Say once that the session folder `folder` cannot be listed."""
        self.say(folder, f"cannot read the folder {folder}: {exc.strerror or exc}", then)


def read_json_lines(path: Path, warnings: Warnings, then: str) -> list[Any] | None:
    """The JSON values of a workspace log, or None (said once on stderr) if it cannot be read:
    a hard-linked file, or one it has no permission to read."""
    try:
        return [value for _, value in json_lines(path, command=f"ctxoffload {warnings.command}")]
    except CliError as exc:
        why = str(exc)
    except OSError as exc:  # a read that failed after the open (EIO)
        why = cannot_read(path, exc)
    warnings.say(path, why, then)
    return None


def count_lines(path: Path) -> int:
    """The newlines of a workspace file; 0 when it is missing, a link or a special file.

    Of a log with a commit record (`context.jsonl.commit`), only the committed part counts:
    lines past it are a batch never committed, which readers skip.

    Raises:
        CliError: it is hard-linked or cannot be read.
    """
    opened = open_file(path)
    if opened is None:
        return 0
    limit = committed_bytes(path)
    with os.fdopen(opened[0], "rb") as f:
        try:
            total, left = 0, limit
            while left is None or left > 0:
                chunk = f.read(1 << 20 if left is None else min(1 << 20, left))
                if not chunk:
                    break
                total += chunk.count(b"\n")
                if left is not None:
                    left -= len(chunk)
            return total
        except OSError as exc:
            raise CliError(cannot_read(path, exc)) from None


def session_facts(session_dir: Path, warnings: Warnings | None = None) -> dict[str, Any]:
    """What `ls` shows of one session, read from its files without following links.

    A file that cannot be read is said on stderr, listed in `unreadable`, and what it would
    tell is None.
    """
    warnings = warnings or Warnings("ls")
    then = f"session {session_dir.name} is shown without it"
    facts: dict[str, Any] = {
        "session": session_dir.name,
        "last_activity": None,
        "steps": None,
        "message_lines": None,
        "tool_results": None,
        "bytes": None,
        "compressions": None,
        "unreadable": [],
    }
    last = 0.0
    size = 0
    tool_results = 0
    try:
        with os.scandir(session_dir) as entries:
            for entry in entries:
                if not entry.is_file(follow_symlinks=False):
                    continue
                st = settled_lstat(entry.path)
                if st is None:
                    continue  # gone meanwhile (a temporary name)
                if st.st_nlink > 1:
                    # Perhaps another name of a file outside the workspace: neither its size
                    # nor its time is the session's.
                    warnings.say(
                        Path(entry.path),
                        hard_links_refused(entry.path, st.st_nlink),
                        f"session {session_dir.name} is shown without it",
                    )
                    facts["unreadable"].append(entry.name)
                    continue
                last = max(last, st.st_mtime)
                size += st.st_size
                if entry.name.startswith("tool_result-") and entry.name.endswith(".txt"):
                    tool_results += 1
    except OSError as exc:
        warnings.folder(session_dir, exc, f"session {session_dir.name} is shown as unreadable")
        facts["unreadable"].append(".")
        return facts
    facts.update(last_activity=iso_time(last) if last else None, bytes=size)
    facts["tool_results"] = tool_results
    events = read_json_lines(session_dir / "events.jsonl", warnings, then)
    if events is None:
        facts["unreadable"].append("events.jsonl")
    else:
        kinds = [e.get("kind") for e in events if isinstance(e, dict)]
        facts["compressions"] = kinds.count("compression")
        # An agent's model calls, or those `ctxoffload replay` replayed (it says how many).
        replayed = [
            e["model_calls"]
            for e in events
            if isinstance(e, dict)
            and e.get("kind") == "replay"
            and isinstance(e.get("model_calls"), int)
        ]
        facts["steps"] = kinds.count("model_call") or sum(replayed) or None
    if facts["steps"] is None:
        rows = read_json_lines(session_dir / "state.json", warnings, then)
        if rows is None:
            facts["unreadable"].append("state.json")
        state = next(iter(rows or []), None)
        if isinstance(state, dict) and isinstance(state.get("steps"), int):
            facts["steps"] = state["steps"]
    context = session_dir / "context.jsonl"
    try:
        facts["message_lines"] = count_lines(context)
    except CliError as exc:
        warnings.say(context, str(exc), then)
        facts["unreadable"].append("context.jsonl")
    facts["unreadable"] = list(dict.fromkeys(facts["unreadable"]))  # each file once
    return facts


# The files each column is read from ("." the folder itself, for every column).
_SOURCES = {
    "steps": (".", "events.jsonl", "state.json"),
    "message_lines": (".", "context.jsonl"),
    "compressions": (".", "events.jsonl"),
}


def run(args: argparse.Namespace) -> int:
    """List the sessions."""
    workspace = open_workspace(args, data=False)
    warnings = Warnings("ls")
    rows = []
    for entry in sorted(os.scandir(workspace.sessions_dir), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        rows.append(session_facts(Path(entry.path), warnings))
    rows.sort(key=lambda r: r["last_activity"] or "", reverse=True)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print(f"no sessions in {shown(workspace.workdir)}")
        return 0

    def cell(row: dict[str, Any], key: str) -> Any:
        value = row[key]
        if value is not None:
            return value
        sources = _SOURCES.get(key, (".",))
        return "?" if any(name in sources for name in row["unreadable"]) else "-"

    print_table(
        ["session", "last activity (UTC)", "steps", "messages", "tool results", "bytes", "compr."],
        [
            [
                r["session"],
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
    return 0
