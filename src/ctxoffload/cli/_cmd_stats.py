"""`ctxoffload stats`: what ctxoffload saved, per session and overall."""

from __future__ import annotations

import argparse
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ._commands import COMMAND_HELP
from ._common import (
    add_json,
    add_workdir,
    human_bytes,
    json_lines,
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


def _session_stats(folder: Path) -> tuple[dict[str, Any], Counter[str]]:
    offloaded = tokens_out = compressions = truncations = 0
    sources: Counter[str] = Counter()
    for _, event in json_lines(folder / "events.jsonl", command="ctxoffload stats"):
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
    references: Counter[str] = Counter()
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                with open(entry.path, "rb") as f:
                    for line in f:
                        references.update(m.decode() for m in DATA_REFERENCE.findall(line))
    return (
        {
            "session": folder.name,
            "bytes_offloaded": offloaded,
            "tokens_kept_out": tokens_out,
            "truncations": truncations,
            "compressions": compressions,
            "summaries": dict(sources),
        },
        references,
    )


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
    for folder in folders:
        row, references = _session_stats(folder)
        row.update(_dedup(references, workspace.data_dir))
        everything.update(references)
        rows.append(row)
    total: dict[str, Any] = {
        "sessions": len(rows),
        "bytes_offloaded": sum(r["bytes_offloaded"] for r in rows),
        "tokens_kept_out": sum(r["tokens_kept_out"] for r in rows),
        "truncations": sum(r["truncations"] for r in rows),
        "compressions": sum(r["compressions"] for r in rows),
        "summaries": dict(sum((Counter(r["summaries"]) for r in rows), Counter())),
        **_dedup(everything, workspace.data_dir),
    }
    if args.json:
        print_json({"sessions": rows, "total": total})
        return 0

    def summaries(counts: dict[str, int]) -> str:
        return ", ".join(f"{n} {source}" for source, n in sorted(counts.items())) or "-"

    table = [
        [
            r["session"],
            human_bytes(r["bytes_offloaded"]),
            r["tokens_kept_out"],
            r["truncations"],
            r["compressions"],
            summaries(r["summaries"]),
            human_bytes(r["dedup_saved_bytes"]),
        ]
        for r in rows
    ]
    table.append(
        [
            f"all {len(rows)} sessions",
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
