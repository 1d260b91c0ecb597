"""`ctxoffload demo`: an offline agent session that truncates, compresses and recovers."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from .._disk.layout import SESSIONS_DIR
from .._disk.paths import workdir_problem
from ..exceptions import CliError
from ._access import checked_session_id
from ._arguments import DEMO_FOLDER_PREFIX, Workdir
from ._commands import COMMAND_HELP
from ._output import Progress

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `demo` to the command line."""
    parser = commands.add_parser(
        "demo",
        help=COMMAND_HELP["demo"],
        description=(
            "Run a scripted agent through realistic tools with a small context window and "
            "print what ctxoffload did. Needs no network and no API key."
        ),
    )
    # Not `add_workdir`: the demo writes a new local workspace, and $CTXOFFLOAD_WORKDIR,
    # which names the workspace the other commands read, is not where it goes.
    parser.add_argument(
        "--workdir",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help=(
            "the folder to write the demo's workspace in, created if missing (default: a new "
            "ctxoffload-demo-<time> folder in the current directory; $CTXOFFLOAD_WORKDIR is "
            "not used); a bucket URL is refused"
        ),
    )
    parser.add_argument(
        "--session", default="nightly-job", help="session id (default: nightly-job)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo and print its report."""
    import asyncio

    # Everything is checked before the first folder is created.
    checked_session_id(args.session)
    given = getattr(args, "workdir", None)
    if given is not None:
        Workdir.of(args).local()  # a bucket URL: one clear line, and no folder named after it
    workdir = (
        Path(given)
        if given is not None
        else Path(f"{DEMO_FOLDER_PREFIX}{datetime.now():%Y%m%d-%H%M%S}")
    )
    problem = workdir_problem(str(workdir), create=True)
    if problem is not None:
        raise CliError(f"{problem}: pass a new --workdir")
    if (workdir / SESSIONS_DIR / args.session).exists():
        raise CliError(
            f"{workdir / SESSIONS_DIR / args.session} already exists; pass a new --workdir or "
            "--session"
        )

    from ._demo import DEMO_CONFIG, describe_config, format_report, run_demo

    with Progress("demo: model call") as progress:
        if progress.enabled:
            # Said at once on a terminal, as the run takes a few seconds; the report says it too.
            print(f"ctxoffload demo: {describe_config(DEMO_CONFIG)}", file=progress.stream)

        def on_step(done: int, total: int) -> None:
            progress.total = total
            progress.advance(done - progress.done)

        report = asyncio.run(run_demo(workdir, session_id=args.session, on_step=on_step))
    print(format_report(report))
    return 0
