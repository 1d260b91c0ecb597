"""`ctxoffload stats`: what ctxoffload saved, per session and overall."""

from __future__ import annotations

import argparse
import os
from collections import Counter
from collections.abc import Iterable
from typing import Any

from .._disk.events import EventKind, is_event
from .._disk.layout import DATA_DIR, DATA_REFERENCE_BYTES, EVENTS_FILE, SESSIONS_DIR
from .._disk.read import Folder
from ..exceptions import CliError
from ._access import open_in, open_workspace, session_folder, session_ids
from ._arguments import EXIT_OK, EXIT_USAGE, add_json, add_workdir
from ._cmd_ls import Warnings, read_logged
from ._commands import COMMAND_HELP
from ._output import Column, human_bytes, print_json, print_table, shown

__all__ = ["register", "run"]


STATS_COLUMNS = (
    Column("session"),
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
            "each binary payload once in data/, compressions, and summaries by source."
        ),
    )
    add_workdir(parser)
    add_json(parser)
    parser.add_argument("session", nargs="?", help="only this session (default: all)")
    parser.set_defaults(run=run)


def _session_stats(
    workdir: str, session: str, warnings: Warnings
) -> tuple[dict[str, Any], Counter[str]]:
    """One session's row and the data/ references its files make.

    A file that cannot be read is said once on stderr and listed in `unreadable`; when it is
    events.jsonl, the counts it holds are None.
    """
    row: dict[str, Any] = {
        "session": session,
        "bytes_offloaded": None,
        "tokens_kept_out": None,
        "truncations": None,
        "compressions": None,
        "summaries": None,
        "artifacts": None,
        "input_tokens": None,
        "cached_input_tokens": None,
        "unreadable": [],
    }
    references: Counter[str] = Counter()
    try:
        with Folder(workdir, SESSIONS_DIR, session) as folder:
            _read_session(folder, row, references, warnings)
    except FileNotFoundError:
        pass  # removed (gc) since the sessions were listed
    except OSError as exc:  # Refused and OffloadError too: a folder that cannot be listed
        path = os.path.join(workdir, SESSIONS_DIR, session)
        warnings.folder(path, exc, f"session {session} is counted as unreadable")
        row["unreadable"].append(".")
    return row, references


def _read_session(
    folder: Folder, row: dict[str, Any], references: Counter[str], warnings: Warnings
) -> None:
    then = f"session {row['session']} is counted without it"
    counts = read_logged(folder, EVENTS_FILE, warnings, then, _event_counts)
    if counts is None:
        row["unreadable"].append(EVENTS_FILE)
    else:
        row.update(counts)
    for name in folder.names():
        try:
            opened = open_in(folder, name)
            if opened is None:
                continue  # a folder, a link, a FIFO: not a file of the session
            fd, _ = opened
            with os.fdopen(fd, "rb") as f:
                for line in f:
                    references.update(m.decode() for m in DATA_REFERENCE_BYTES.findall(line))
            continue
        except CliError as exc:
            why = str(exc)
        except OSError as exc:  # a read that failed after the open (EIO)
            why = f"cannot read {shown(folder.path(name))}: {exc.strerror or exc}"
        warnings.say(folder.path(name), why, then)
        if name not in row["unreadable"]:
            row["unreadable"].append(name)


# The events whose tokens before and after say how much left the context.
_TOKENS_KEPT_OUT = (EventKind.TRUNCATION, EventKind.OFFLOAD, EventKind.COMPRESSION)


def _event_counts(events: Iterable[Any]) -> dict[str, Any]:
    """A session's figures from its events, counted in one pass (one line in memory)."""
    offloaded = tokens_out = compressions = truncations = 0
    sources: Counter[str] = Counter()
    artifacts: Counter[str] = Counter()
    reported = cached = 0
    for event in events:
        if not is_event(event):
            continue
        kind = event.get("kind")
        if kind in (EventKind.TOOL_RESULT, EventKind.CONTEXT) and isinstance(
            event.get("bytes"), int
        ):
            offloaded += event["bytes"]
        before, after = event.get("tokens_before"), event.get("tokens_after")
        # A pipeline's ToolOutputOffload writes `offload` events, its SlidingWindow `window`
        # ones: a tool result cut, and history moved out, as the compressor's own events are.
        if kind in _TOKENS_KEPT_OUT and isinstance(before, int):
            tokens_out += max(0, before - (after if isinstance(after, int) else 0))
        if kind == EventKind.COMPRESSION:
            sources[str(event.get("summary_source") or "unknown")] += 1
            _add_fidelity(artifacts, event)
        # The cache share counts only the model calls whose provider said what it cached.
        if (
            kind == EventKind.MODEL_CALL
            and isinstance(event.get("input_tokens"), int)
            and isinstance(event.get("cached_input_tokens"), int)
        ):
            reported += event["input_tokens"]
            cached += event["cached_input_tokens"]
        compressions += kind in (EventKind.COMPRESSION, EventKind.WINDOW)
        truncations += kind in (EventKind.TRUNCATION, EventKind.OFFLOAD)
    return {
        "bytes_offloaded": offloaded,
        "tokens_kept_out": tokens_out,
        "truncations": truncations,
        "compressions": compressions,
        "summaries": dict(sources),
        "artifacts": dict(artifacts),
        "input_tokens": reported,
        "cached_input_tokens": cached,
    }


def _add_fidelity(into: Counter[str], event: dict[str, Any]) -> None:
    """Add a compression's fidelity report (its artifacts, the messages read back)."""
    counts, checked = event.get("artifacts"), event.get("recoverable")
    for key, value in (counts if isinstance(counts, dict) else {}).items():
        if isinstance(value, int):
            into[str(key)] += value
    if isinstance(checked, dict):
        for key in ("messages", "verified"):
            if isinstance(checked.get(key), int):
                into[f"messages_{key}" if key == "verified" else "messages_compressed"] += checked[
                    key
                ]


def _dedup(references: Counter[str], workdir: str) -> dict[str, int]:
    """Bytes the references would take as copies, bytes the files take, and the difference."""
    referenced = stored = 0
    try:
        with Folder(workdir, DATA_DIR) as data:
            for name, count in references.items():
                try:
                    size = data.stat(name).st_size
                except FileNotFoundError:
                    continue
                referenced += size * count
                stored += size
    except FileNotFoundError:
        pass  # no data/ folder: nothing stored
    return {
        "data_references": sum(references.values()),
        "data_files": len(references),
        "dedup_saved_bytes": referenced - stored,
    }


def run(args: argparse.Namespace) -> int:
    """Print the statistics."""
    workdir = open_workspace(args, session=args.session)
    if args.session is not None:
        sessions = [session_folder(workdir, args.session)]
    else:
        sessions = session_ids(workdir)
    rows: list[dict[str, Any]] = []
    everything: Counter[str] = Counter()
    warnings = Warnings("stats")
    for session in sessions:
        row, references = _session_stats(workdir, session, warnings)
        row.update(_dedup(references, workdir))
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
        "artifacts": dict(sum((Counter(r["artifacts"] or {}) for r in rows), Counter())),
        "input_tokens": total_of("input_tokens"),
        "cached_input_tokens": total_of("cached_input_tokens"),
        **_dedup(everything, workdir),
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
            r["session"],
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
