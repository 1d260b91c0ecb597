"""The `ctxoffload` command.

Each command lives in `_cmd_<name>.py`, which exposes `register(commands)` (adds its parser
to the argparse subparsers and `set_defaults(run=run)`) and `run(args) -> int`. Command
modules stay light: anything heavy is imported inside `run`. `main` is in `_main.py`, the
argparse parser in `_parser.py` (imported only when a command line needs it: a plain `grep`
is read without it).
"""

from __future__ import annotations

from ._commands import COMMANDS as COMMANDS  # the names, in the order `--help` lists them
from ._main import main

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from ._parser import build_parser as build_parser

__all__ = ["main"]


def __getattr__(name: str) -> object:
    # `build_parser` brings argparse, which a plain `grep` does without (`_main.py`).
    if name == "build_parser":
        from ._parser import build_parser

        return build_parser
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
