"""`ctxoffload ls`: the sessions of a workspace, newest activity first."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ._commands import COMMAND_HELP
from ._common import (
    add_json,
    add_workdir,
    is_plain_file,
    iso_time,
    json_lines,
    open_workspace,
    print_json,
    print_table,
    shown,
)

__all__ = ["register", "run", "session_facts"]


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


def _count_lines(path: Path) -> int:
    if not is_plain_file(path):
        return 0
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def session_facts(session_dir: Path) -> dict[str, Any]:
    """What `ls` shows of one session, read from its files without following links."""
    last = 0.0
    size = 0
    tool_results = 0
    with os.scandir(session_dir) as entries:
        for entry in entries:
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            last = max(last, st.st_mtime)
            size += st.st_size
            if entry.name.startswith("tool_result-") and entry.name.endswith(".txt"):
                tool_results += 1
    compressions = 0
    model_calls = 0
    for _, event in json_lines(session_dir / "events.jsonl", command="ctxoffload ls"):
        if not isinstance(event, dict):
            continue
        kind = event.get("kind")
        compressions += kind == "compression"
        model_calls += kind == "model_call"
    steps: int | None = model_calls or None
    if steps is None:
        rows = json_lines(session_dir / "state.json", command="ctxoffload ls")
        state = next((v for _, v in rows), None)
        if isinstance(state, dict) and isinstance(state.get("steps"), int):
            steps = state["steps"]
    return {
        "session": session_dir.name,
        "last_activity": iso_time(last) if last else None,
        "steps": steps,
        "message_lines": _count_lines(session_dir / "context.jsonl"),
        "tool_results": tool_results,
        "bytes": size,
        "compressions": compressions,
    }


def run(args: argparse.Namespace) -> int:
    """List the sessions."""
    workspace = open_workspace(args, data=False)
    rows = []
    for entry in sorted(os.scandir(workspace.sessions_dir), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        rows.append(session_facts(Path(entry.path)))
    rows.sort(key=lambda r: r["last_activity"] or "", reverse=True)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print(f"no sessions in {shown(workspace.workdir)}")
        return 0
    print_table(
        ["session", "last activity (UTC)", "steps", "messages", "tool results", "bytes", "compr."],
        [
            [
                r["session"],
                r["last_activity"] or "-",
                r["steps"] if r["steps"] is not None else "-",
                r["message_lines"],
                r["tool_results"],
                r["bytes"],
                r["compressions"],
            ]
            for r in rows
        ],
        right=(2, 3, 4, 5, 6),
    )
    return 0
