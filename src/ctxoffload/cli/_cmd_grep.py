"""`ctxoffload grep`: search everything a workspace holds for one or all sessions.

The command reads its arguments and prints; the search is the engine every door shares
(`ctxoffload._search`, the agent's Grep's): tool-result files are searched as the agent's
Read and Grep read them (split at "\\n" only, each line without its trailing "\\r"), and
context.jsonl by the rule the agent's Grep applies (`text.matching_lines`: each message's
decoded lines, else its raw JSON line), so a string the model saw is found even when the file
stores it JSON-escaped. What it searches in a workspace is `_grep_sessions.py` (many sessions
on two cores: `_grep_parallel.py`); how a line is printed, `_grep_output.py`; the ripgrep fast
path for many matches, `_grep_ripgrep.py`.

Matching uses RE2 (linear time; google-re2 is a dependency) when it understands the pattern;
otherwise Python's `re` runs under a deadline (`--timeout`), so a pattern chosen to backtrack
forever cannot hang the command.

A file that is not read (a hard-linked file, which may be shared with a file outside the
workspace, or one this user may not read) is said on stderr, one line each, and the others
are searched; the exit status is then 2, as GNU grep's is after an error, even if lines
matched. A binary file (`_search.sniff`, the rule of the agent's Grep) is not searched either,
and said on stderr too, but it is no error: the exit status is as if it were not there.
"""

from __future__ import annotations

import contextlib

from .._search.matcher import Deadline, compile_matcher
from ..exceptions import CliError, InvalidContent
from ._access import open_workspace, session_folder, session_ids
from ._arguments import (
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_USAGE,
    Workdir,
    add_json,
    add_workdir,
)
from ._commands import COMMAND_HELP
from ._grep_arguments import DEFAULTS
from ._grep_output import GrepQuery, Printer
from ._grep_parallel import search_sessions
from ._grep_sessions import WorkspaceSearch
from ._output import print_json
from ._session_name import SessionName

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    # Not at run time: a plain `grep` is read without argparse (`_grep_arguments.py`).
    import argparse

    from ._arguments import Arguments

# Paths are str here: `pathlib` (urllib.parse, ipaddress) would cost ~4.5 ms of a search.

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `grep` to the command line."""
    parser = commands.add_parser(
        "grep",
        help=COMMAND_HELP["grep"],
        description=(
            "Search what the agents stored: the tool_result files and the decoded messages "
            "of context.jsonl of one session or of all, and, without a session, the files "
            "of memories/. The records (events.jsonl, state.json, lease.json, commit "
            "records, files being written) are left out; --events adds events.jsonl. "
            "Exit 0 when something matched, 1 when nothing did, 2 on an "
            "error: a file that could not be read (each said on stderr; the others are still "
            "searched) or a usage error. A file with more than one hard link is never read: "
            "it may be shared with a file outside the workspace. A binary file is not "
            "searched (said on stderr, not an error)."
        ),
    )
    add_workdir(parser)
    add_json(parser)
    parser.add_argument("pattern", help="a regular expression (RE2 / Python syntax)")
    parser.add_argument(
        "session", nargs="?", type=SessionName, help="only this session (default: all)"
    )
    parser.add_argument(
        "-C", "--context", type=int, default=DEFAULTS["context"], metavar="N", help="N lines around"
    )
    parser.add_argument("-i", "--ignore-case", action="store_true", help="ignore case")
    parser.add_argument("-F", "--fixed-strings", action="store_true", help="PATTERN is a string")
    parser.add_argument("--events", action="store_true", help="search events.jsonl too")
    parser.add_argument(
        "--writers",
        action="store_true",
        help="begin each line's text with the agent that wrote it (from events.jsonl)",
    )
    parser.add_argument(
        "--max-columns",
        type=int,
        default=DEFAULTS["max_columns"],
        metavar="N",
        help="cut printed lines after N bytes (0: never cut; default 2000)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULTS["timeout"],
        metavar="S",
        help=(
            "give up after S seconds when Python's re has to run the pattern (default 30; "
            "0: no deadline)"
        ),
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace | Arguments) -> int:
    """Search and print the matching lines."""
    if args.context < 0:
        raise CliError(f"-C {args.context} is negative: give a number of lines >= 0")
    if args.max_columns < 0:
        raise CliError(
            f"--max-columns {args.max_columns} is negative: give a number of bytes >= 0 "
            "(0: never cut)"
        )
    # Within what the interval timer takes (about 3 years): not infinite, and not NaN, for
    # which every comparison is false (no `math.isfinite`: `math` is ~0.4 ms of a search).
    if not 0 <= args.timeout <= _MAX_TIMEOUT:
        raise CliError(
            f"--timeout {args.timeout:g}: give a number of seconds from 0 to {_MAX_TIMEOUT:,} "
            "(0: no deadline)"
        )
    # As given (spelled as pathlib would): files are named the way the user named the folder.
    workdir = open_workspace(Workdir.of(args), session=args.session, data=False, as_given=True)
    if args.session is not None:
        sessions = [session_folder(workdir, args.session)]
    else:
        sessions = session_ids(workdir)
    try:
        matcher = compile_matcher(
            args.pattern,
            ignore_case=args.ignore_case,
            fixed=args.fixed_strings,
            backtracking=True,
            escaped_bytes=True,
        )
    except InvalidContent as exc:
        raise CliError(str(exc)) from exc
    printer = Printer(args.json, args.max_columns, args.context)
    query = GrepQuery.of(args)
    deadline = Deadline(args.timeout if matcher.engine == "re" else 0)
    skipped = 0

    def skip(message: str) -> None:
        """Say on stderr that a file was not searched, after the lines found before it."""
        nonlocal skipped
        skipped += 1
        printer.note(message)

    try:
        with deadline, WorkspaceSearch(workdir, query, matcher, printer, skip) as search:
            # Two processes for plain lines found by RE2 (`_grep_parallel` says why only then).
            plain = not args.json and not args.context and matcher.engine == "re2"
            skipped_by_child = search_sessions(search, sessions, parallel=plain)
            skipped += skipped_by_child  # (after the search: `skip` counts in `skipped` too)
            if args.session is None:
                search.memories()
    except Deadline.Expired:
        printer.out.flush()
        raise CliError(
            f"pattern {args.pattern!r} ran longer than {args.timeout:g} s in Python's re "
            f"(it backtracks): {_deadline_advice()}"
        ) from None
    except BaseException:
        _flush_found(printer)  # what was found before stays printed, before the error
        raise
    if args.json:
        print_json(printer.hits)
    else:
        printer.out.flush()
    if skipped:
        return EXIT_USAGE  # GNU grep's rule: an error gives 2 even if lines matched
    return EXIT_OK if printer.matches else EXIT_PROBLEMS


_MAX_TIMEOUT = 100_000_000


def _flush_found(printer: Printer) -> None:
    """Print the lines found before a search stopped on an error, if stdout still takes
    them (a closed pipe is said by the error that follows, not by a second one)."""
    with contextlib.suppress(OSError):
        printer.out.flush()


def _deadline_advice() -> str:
    """What to do about a pattern that Python's re ran past the deadline."""
    try:
        import re2  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return "simplify it, use -F, or install google-re2 (pip install google-re2)"
    # RE2 is there: it refused the pattern, and installing it again would change nothing.
    return (
        "RE2, which is installed, cannot run it (backreferences, lookarounds and the like "
        "need Python's re); simplify it or use -F"
    )
