"""`ctxoffload stats`: what ctxoffload saved, per session and overall."""

from __future__ import annotations

import argparse
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ._cmd_ls import Warnings, read_json_lines
from ._commands import COMMAND_HELP
from ._common import (
    CliError,
    add_json,
    add_workdir,
    cannot_read,
    human_bytes,
    open_file,
    open_workspace,
    print_json,
    print_table,
    session_dir,
)

__all__ = ["DATA_REFERENCE", "register", "run"]

# A reference into the content-addressed store, in any of the forms a workspace writes.
DATA_REFERENCE = re.compile(rb"data/([0-9a-f]{64}\.[A-Za-z0-9]+)")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `stats` to the command line."""
    parser = commands.add_parser(
        "stats",
        help=COMMAND_HELP["stats"],
        description=(
            "Per session and overall: bytes offloaded to files, tokens kept out of the "
            "context (from the truncation, offload and compression events), bytes saved by storing "
            "each binary payload once in data/, compressions, and summaries by source."
        ),
    )
    add_workdir(parser)
    add_json(parser)
    parser.add_argument("session", nargs="?", help="only this session (default: all)")
    parser.set_defaults(run=run)


def _session_stats(folder: Path, warnings: Warnings) -> tuple[dict[str, Any], Counter[str]]:
    """One session's row and the data/ references its files make.

    A file that cannot be read is said once on stderr and listed in `unreadable`; when it is
    events.jsonl, the counts it holds are None.
    """
    then = f"session {folder.name} is counted without it"
    row: dict[str, Any] = {
        "session": folder.name,
        "bytes_offloaded": None,
        "tokens_kept_out": None,
        "truncations": None,
        "compressions": None,
        "summaries": None,
        "unreadable": [],
    }
    events = read_json_lines(folder / "events.jsonl", warnings, then)
    if events is None:
        row["unreadable"].append("events.jsonl")
    else:
        row.update(_event_counts(events))
    references: Counter[str] = Counter()
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        warnings.folder(folder, exc, f"session {folder.name} is counted as unreadable")
        row["unreadable"].append(".")
        return row, references
    for entry in entries:
        if not entry.is_file(follow_symlinks=False):
            continue
        path = Path(entry.path)
        try:
            opened = open_file(path)
            if opened is None:
                continue
            with os.fdopen(opened[0], "rb") as f:
                for line in f:
                    references.update(m.decode() for m in DATA_REFERENCE.findall(line))
            continue
        except CliError as exc:
            why = str(exc)
        except OSError as exc:  # a read that failed after the open (EIO)
            why = cannot_read(path, exc)
        warnings.say(path, why, then)
        if entry.name not in row["unreadable"]:
            row["unreadable"].append(entry.name)
    return row, references


def _event_counts(events: list[Any]) -> dict[str, Any]:
    offloaded = tokens_out = compressions = truncations = 0
    sources: Counter[str] = Counter()
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("kind")
        if kind in ("tool_result", "context") and isinstance(event.get("bytes"), int):
            offloaded += event["bytes"]
        before, after = event.get("tokens_before"), event.get("tokens_after")
        # A pipeline's ToolOutputOffload writes `offload` events, its SlidingWindow `window`
        # ones: a tool result cut, and history moved out, as the compressor's own events are.
        if kind in ("truncation", "offload", "compression") and isinstance(before, int):
            tokens_out += max(0, before - (after if isinstance(after, int) else 0))
        if kind == "compression":
            sources[str(event.get("summary_source") or "unknown")] += 1
        compressions += kind in ("compression", "window")
        truncations += kind in ("truncation", "offload")
    return {
        "bytes_offloaded": offloaded,
        "tokens_kept_out": tokens_out,
        "truncations": truncations,
        "compressions": compressions,
        "summaries": dict(sources),
    }


def _dedup(references: Counter[str], data_dir: Path) -> dict[str, int]:
    """Bytes the references would take as copies, bytes the files take, and the difference."""
    referenced = stored = 0
    for name, count in references.items():
        try:
            size = (data_dir / name).lstat().st_size
        except FileNotFoundError:
            continue
        referenced += size * count
        stored += size
    return {
        "data_references": sum(references.values()),
        "data_files": len(references),
        "dedup_saved_bytes": referenced - stored,
    }


def run(args: argparse.Namespace) -> int:
    """Print the statistics."""
    workspace = open_workspace(args, session=args.session)
    if args.session is not None:
        folders = [session_dir(workspace, args.session)]
    else:
        folders = sorted(
            Path(e.path)
            for e in os.scandir(workspace.sessions_dir)
            if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
        )
    rows: list[dict[str, Any]] = []
    everything: Counter[str] = Counter()
    warnings = Warnings("stats")
    for folder in folders:
        row, references = _session_stats(folder, warnings)
        row.update(_dedup(references, workspace.data_dir))
        everything.update(references)
        rows.append(row)

    def total_of(key: str) -> int:
        return sum(r[key] for r in rows if r[key] is not None)

    total: dict[str, Any] = {
        "sessions": len(rows),
        "bytes_offloaded": total_of("bytes_offloaded"),
        "tokens_kept_out": total_of("tokens_kept_out"),
        "truncations": total_of("truncations"),
        "compressions": total_of("compressions"),
        "summaries": dict(sum((Counter(r["summaries"] or {}) for r in rows), Counter())),
        **_dedup(everything, workspace.data_dir),
    }
    if args.json:
        print_json({"sessions": rows, "total": total})
        return 0

    def summaries(counts: dict[str, int] | None) -> str:
        if counts is None:
            return "?"
        return ", ".join(f"{n} {source}" for source, n in sorted(counts.items())) or "-"

    def size(n: int | None) -> str:
        return "?" if n is None else human_bytes(n)

    def count(n: int | None) -> int | str:
        return "?" if n is None else n

    table = [
        [
            r["session"],
            size(r["bytes_offloaded"]),
            count(r["tokens_kept_out"]),
            count(r["truncations"]),
            count(r["compressions"]),
            summaries(r["summaries"]),
            human_bytes(r["dedup_saved_bytes"]),
        ]
        for r in rows
    ]
    table.append(
        [
            f"all {len(rows)} sessions" if len(rows) != 1 else "1 session",
            human_bytes(total["bytes_offloaded"]),
            total["tokens_kept_out"],
            total["truncations"],
            total["compressions"],
            summaries(total["summaries"]),
            human_bytes(total["dedup_saved_bytes"]),
        ]
    )
    print_table(
        [
            "session",
            "offloaded",
            "tokens kept out",
            "truncations",
            "compressions",
            "summaries",
            "dedup saved",
        ],
        table,
        right=(1, 2, 3, 4, 6),
    )
    return 0
