"""`ctxoffload stats`: what ctxoffload saved, per session and overall."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from ._access import open_workspace, say_linked_sessions, session_folder, session_ids
from ._arguments import EXIT_OK, EXIT_USAGE, Workdir, add_json, add_workdir
from ._commands import COMMAND_HELP
from ._output import Column, human_bytes, print_json, print_table
from ._session_name import SessionName
from ._view import (
    Warnings,
    dedup_savings,
    indented,
    listing_order,
    session_stats,
    shown_fields,
)

__all__ = ["register", "run"]


STATS_COLUMNS = (
    Column("session", shorten=True),
    Column("offloaded", right=True, keep=8),
    Column("tokens kept out", "tokens out", right=True, keep=7),
    Column("truncations", "trunc.", right=True, keep=5),
    Column("compressions", "compr.", right=True, keep=6),
    Column("summaries", fold=True, keep=4),
    Column("artifacts named", "named", right=True, keep=3),
    Column("cached input", "cached", right=True, keep=2),
    Column("dedup saved", "dedup", right=True, keep=1),
)
"""The columns of `stats`; on a narrow terminal they give way by `keep` (docs/cli.md)."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `stats` to the command line."""
    parser = commands.add_parser(
        "stats",
        help=COMMAND_HELP["stats"],
        description=(
            "Per session and overall: bytes offloaded to files, tokens kept out of the "
            "context (from the truncation, offload and compression events), bytes saved by storing "
            "each binary payload once in data/, compressions, and summaries by source. The "
            "sessions are in the order `ls` lists them, the most recently active first."
        ),
    )
    add_workdir(parser)
    add_json(parser)
    parser.add_argument(
        "session", nargs="?", type=SessionName, help="only this session (default: all)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the statistics."""
    workdir = open_workspace(Workdir.of(args), session=args.session)
    if args.session is not None:
        sessions = [session_folder(workdir, args.session)]
    else:
        sessions = session_ids(workdir)
    everything: Counter[str] = Counter()
    warnings = Warnings("stats")
    if args.session is None:
        say_linked_sessions(workdir, warnings, "it is not counted")
    measured = []
    for session in sessions:
        stats, references = session_stats(workdir, session, warnings)
        everything.update(references)
        measured.append(stats)
    # In the order `ls` lists them: the most recently active first, each sub-agent's session
    # under its parent's.
    rows = [shown_fields(stats) for stats in listing_order(measured)]

    references_made, files_named, saved = dedup_savings(everything, workdir)

    def total_of(key: str) -> int:
        return sum(r[key] for r in rows if r[key] is not None)

    total: dict[str, Any] = {
        "sessions": len(rows),
        "bytes_offloaded": total_of("bytes_offloaded"),
        "tokens_kept_out": total_of("tokens_kept_out"),
        "truncations": total_of("truncations"),
        "compressions": total_of("compressions"),
        "summaries": dict(sum((Counter(r["summaries"] or {}) for r in rows), Counter())),
        "artifacts": dict(sum((Counter(r["artifacts"] or {}) for r in rows), Counter())),
        "input_tokens": total_of("input_tokens"),
        "cached_input_tokens": total_of("cached_input_tokens"),
        "data_references": references_made,
        "data_files": files_named,
        "dedup_saved_bytes": saved,
    }
    # A file that could not be read is an error (said on stderr, counted as `?`): exit 2 once
    # everything else is counted, as grep does.
    status = EXIT_USAGE if warnings.said else EXIT_OK
    if args.json:
        print_json({"sessions": rows, "total": total})
        return status

    def summaries(counts: dict[str, int] | None) -> str:
        if counts is None:
            return "?"
        return ", ".join(f"{n} {source}" for source, n in sorted(counts.items())) or "-"

    def named(counts: dict[str, int] | None) -> str:
        # The artifacts that left and are named in the context after (in the summary, still
        # in a kept message, or in the index), of all that left.
        if counts is None:
            return "?"
        if not counts.get("left"):
            return "-"
        kept = sum(counts.get(k, 0) for k in ("in_summary", "in_kept", "indexed"))
        return f"{kept:,}/{counts['left']:,}"

    def cache(row: dict[str, Any]) -> str:
        # The share of the input tokens the provider's prompt cache served, over the model
        # calls whose usage said it; "-" when none did.
        if row["input_tokens"] is None:
            return "?"
        if not row["input_tokens"]:
            return "-"
        return f"{row['cached_input_tokens'] / row['input_tokens']:.0%}"

    def size(n: int | None) -> str:
        return "?" if n is None else human_bytes(n)

    def count(n: int | None) -> int | str:
        return "?" if n is None else n

    table = [
        [
            indented(r["session"], r["depth"]),
            size(r["bytes_offloaded"]),
            count(r["tokens_kept_out"]),
            count(r["truncations"]),
            count(r["compressions"]),
            summaries(r["summaries"]),
            named(r["artifacts"]),
            cache(r),
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
            named(total["artifacts"]),
            cache(total),
            human_bytes(total["dedup_saved_bytes"]),
        ]
    )
    print_table(STATS_COLUMNS, table)
    return status
