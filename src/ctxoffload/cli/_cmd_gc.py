"""`ctxoffload gc`: remove old sessions and data files no session references."""

from __future__ import annotations

import argparse
import re

from ..exceptions import CliError
from ._access import open_backend
from ._arguments import Workdir, add_json, add_workdir
from ._commands import COMMAND_HELP
from ._output import Progress, human_bytes, inert, print_json

__all__ = ["parse_duration", "parse_size", "register", "run"]

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_MAX_SIZE = float(1024**6)  # more bytes than any disk holds
_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_duration(text: str) -> float:
    """`'7d'` -> 604800.0 seconds. Units: s, m, h, d, w; a bare number is seconds.

    Raises:
        CliError: not a duration.
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not found:
        raise CliError(
            f"--older-than {text!r} is not a duration: use a number and a unit, e.g. 7d, 12h, 30m"
        )
    return float(found.group(1)) * _DURATION_UNITS[found.group(2) or "s"]


def parse_size(text: str) -> int:
    """`'500M'` -> 524288000 bytes. Units: K, M, G, T (powers of 1024), optional B or iB.

    Raises:
        CliError: not a size.
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, flags=re.IGNORECASE)
    if not found:
        raise CliError(f"--max-bytes {text!r} is not a size: use e.g. 500M, 2G, 1048576")
    size = float(found.group(1)) * _SIZE_UNITS[found.group(2).upper()]
    if not size < _MAX_SIZE:  # 5,000 digits read as a float are infinite
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise CliError(f"--max-bytes {shown!r} is too large: give a size up to 1048576T")
    return int(size)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `gc` to the command line."""
    parser = commands.add_parser(
        "gc",
        help=COMMAND_HELP["gc"],
        description=(
            "Remove sessions older than --older-than (and, with --max-bytes, the oldest "
            "sessions until the workspace fits), then the data/ files no remaining session "
            "references. Never removes a referenced file, nor a live session: one whose "
            "lease a writer holds, or whose files a remaining session references (a fork's "
            "origin, a sub-agent's parent or child); it says which it keeps and why. Safe "
            "while agents write."
        ),
    )
    add_workdir(parser)
    add_json(parser)
    parser.add_argument("--older-than", metavar="AGE", help="e.g. 7d, 12h, 30m, 3600")
    parser.add_argument("--max-bytes", metavar="SIZE", help="e.g. 500M, 2G")
    parser.add_argument("--dry-run", action="store_true", help="report, remove nothing")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Collect garbage and print what was (or would be) removed."""
    import asyncio

    older_than = parse_duration(args.older_than) if args.older_than is not None else None
    max_bytes = parse_size(args.max_bytes) if args.max_bytes is not None else None
    if older_than is None and max_bytes is None:
        raise CliError("say what to remove: --older-than AGE and/or --max-bytes SIZE")
    from ..workspace import GarbageCollector

    workspace = open_backend(Workdir.of(args), fsync=False)
    if not isinstance(workspace, GarbageCollector):
        raise CliError(
            f"this version of ctxoffload has no {type(workspace).__name__}.gc: upgrade ctxoffload"
        )
    with Progress("gc: measuring sessions and data/ references...") as progress:
        progress.advance(0)
        report = asyncio.run(
            workspace.gc(older_than=older_than, max_bytes=max_bytes, dry_run=args.dry_run)
        )
    if args.json:
        print_json(
            {
                "dry_run": report.dry_run,
                "sessions_removed": list(report.sessions_removed),
                "data_removed": list(report.data_removed),
                "bytes_freed": report.bytes_freed,
                "sessions_kept": dict(report.sessions_kept),
                "data_kept": dict(report.data_kept),
            }
        )
        return 0
    verb = "would remove" if report.dry_run else "removed"
    for session in report.sessions_removed:
        print(f"{verb} session {inert(session)}")
    for session, why in report.sessions_kept.items():
        # `why` quotes a lease's record (an agent's name): text the workspace holds.
        print(
            f"{'would keep' if report.dry_run else 'kept'} session {inert(session)}: {inert(why)}"
        )
    for name in report.data_removed:
        print(f"{verb} data file {name}")
    for name, why in report.data_kept.items():
        print(f"{'would keep' if report.dry_run else 'kept'} data file {name}: {why}")
    print(
        f"{verb} {_many(len(report.sessions_removed), 'session')} and "
        f"{_many(len(report.data_removed), 'data file')}: {human_bytes(report.bytes_freed)}"
        + (" would be freed" if report.dry_run else " freed")
    )
    return 0


def _many(n: int, what: str) -> str:
    """`1 session`, `2 sessions`."""
    return f"{n:,} {what}{'' if n == 1 else 's'}"
