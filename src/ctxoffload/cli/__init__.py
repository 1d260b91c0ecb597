"""The `ctxoffload` command.

Each command lives in `_cmd_<name>.py`, which exposes `register(commands)` (adds its parser
to the argparse subparsers and `set_defaults(run=run)`) and `run(args) -> int`. Command
modules stay light: anything heavy is imported inside `run`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["main"]

# In the order `--help` lists them.
COMMANDS = ["demo", "ls", "show", "cat", "grep", "watch", "stats", "verify", "gc", "replay"]
# Commands that another branch may not have delivered yet.
_OPTIONAL = {"show"}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ctxoffload")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def _command_modules() -> list[ModuleType]:
    modules = []
    for name in COMMANDS:
        qualified = f"{__name__}._cmd_{name}"
        try:
            modules.append(importlib.import_module(qualified))
        except ModuleNotFoundError as exc:
            if name in _OPTIONAL and exc.name == qualified:
                continue
            raise
    return modules


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available command."""
    parser = argparse.ArgumentParser(
        prog="ctxoffload",
        description=(
            "Keep LLM agents inside their context window without losing anything; "
            "inspect the workspaces they leave on disk."
        ),
        epilog="Exit status: 0 success, 1 problems found (or no match), 2 usage or input error.",
    )
    parser.add_argument("--version", action="version", version=f"ctxoffload {_version()}")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        metavar="DIR",
        help="the workspace (default: $CTXOFFLOAD_WORKDIR, else the current directory)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the `ctxoffload` command line and return its exit status.

    0 on success, 1 when problems are found (or grep matches nothing), 2 on a usage or
    input error, which is reported as one line on stderr.
    """
    from ._common import EXIT_USAGE, CliError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error argparse reported
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    run = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    prefix = f"ctxoffload {args.command}"
    try:
        status: int = run(args)
        return status
    except CliError as exc:
        print(f"{prefix}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (`| head`) went away: not an error of ours. Point stdout at devnull so
        # the interpreter's final flush does not complain.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:
        from ..exceptions import CtxOffloadError

        if isinstance(exc, CtxOffloadError):
            print(f"{prefix}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(exc, OSError):
            where = f" {exc.filename}" if exc.filename else ""
            print(f"{prefix}: cannot access{where}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        raise
