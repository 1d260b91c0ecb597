"""The `ctxoffload` commands with their one-line help, in the order `--help` lists them.

Kept apart from the command modules (`_cmd_<name>.py`) so that `ctxoffload --help` lists every
command without importing any of them, and a run imports only the command it runs.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["COMMANDS", "COMMAND_HELP", "command_at", "command_module"]

COMMAND_HELP = {
    "demo": "run an offline agent session that truncates, compresses and recovers",
    "ls": "list sessions: last activity, steps, messages, tool results, bytes, compressions",
    "show": "a session's timeline, or exactly what the model was sent at one step",
    "cat": "print an offloaded file by its reference, with line numbers",
    "grep": "search offloaded content of one or all sessions, with file and line numbers",
    "watch": "follow new events and context lines as agents write them (Ctrl-C ends)",
    "stats": "bytes offloaded, tokens kept out of the context, dedup savings, compressions",
    "verify": "check JSONL lines, data hashes, references, and for links or foreign files",
    "gc": "remove sessions past an age or over a size, then unreferenced data files",
    "purge": "remove the sessions named, unless one is live (leased, or referenced)",
    "eval": "ask a model what it still knows after each compaction, with no tools and one read",
    "replay": "replay a recorded agent transcript through truncation and compression",
    "fork": "start a new session from what the model was sent at one step of another",
    "export": "write sessions of a database, bucket or folder to a folder in the on-disk layout",
    "import": "write the sessions of a workspace folder into a database or a bucket",
    "compact": "ask the agent writing a session to compact now, or compact its saved state",
    "ui": "serve a local page: each step's window, what the model was sent, files, search",
    "mcp-proxy": "serve an MCP server in front of another that stores its big tool results",
    "hook": "run as a Claude Code hook: store big tool outputs, keep what a compaction drops",
}

COMMANDS = list(COMMAND_HELP)
"""The commands, in the order `--help` lists them."""


def command_at(argv: list[str]) -> int | None:
    """Where in `argv` the command is, when it is plain to see; None means "parse with the
    whole parser".

    Only global options (`--workdir DIR`) may come before the command; `--help`, `--version`
    or anything unknown there needs every command registered (to list them, or to report the
    usage error exactly as the whole parser would).
    """
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--workdir":
            index += 2
        elif token.startswith("--workdir="):
            index += 1
        else:
            return index if token in COMMAND_HELP else None
    return None


def command_module(name: str) -> ModuleType:
    """The module of command `name` (`_cmd_<name>.py`), loaded by name: nothing imports a
    command's module but the command line, when it runs or registers that command."""
    # `mcp-proxy` lives in `_cmd_mcp_proxy.py`: a module name has no hyphen. Imported by
    # `__import__`, not `importlib.import_module`: `importlib` (with `warnings`) costs ~1 ms
    # of every command's start-up.
    module = f"{__package__}._cmd_{name.replace('-', '_')}"
    __import__(module)
    return sys.modules[module]
