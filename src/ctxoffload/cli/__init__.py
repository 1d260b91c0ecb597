"""The `ctxoffload` command."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime
from pathlib import Path

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxoffload",
        description="Keep LLM agents inside their context window without losing anything.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run an offline agent session that truncates, compresses and recovers",
        description=(
            "Run a scripted agent through realistic tools with a small context window and "
            "print what ctxoffload did. Needs no network and no API key."
        ),
    )
    demo.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="workspace folder to create (default: ./ctxoffload-demo-<time>)",
    )
    demo.add_argument("--session", default="nightly-job", help="session id (default: nightly-job)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the `ctxoffload` command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import format_report, run_demo

        workdir = args.workdir or Path(f"ctxoffload-demo-{datetime.now():%Y%m%d-%H%M%S}")
        if (workdir / "sessions" / args.session).exists():
            print(
                f"ctxoffload demo: {workdir}/sessions/{args.session} already exists; pass a new "
                "--workdir or --session",
                file=sys.stderr,
            )
            return 2
        report = asyncio.run(run_demo(workdir, session_id=args.session))
        print(format_report(report))
        return 0
    parser.print_help()
    return 2
