"""`ctxoffload hook EVENT`: Claude Code's hooks, as commands.

Claude Code runs a command hook with the event's JSON on stdin and reads the JSON it prints
(https://code.claude.com/docs/en/hooks). `PostToolUse` stores a big tool output and prints its
replacement, `PreCompact` appends the transcript to the session's context.jsonl before the
compaction, `SessionStart` (after a compaction) prints where the history went and the artifact
index. The work is `ctxoffload._doors.claude_hooks`, which the Claude Agent SDK's
callbacks share.

Whatever goes wrong (input that is not JSON, a missing field, a transcript path that does not
exist or is a link, a workspace that cannot be written, the project's `.ctxoffload` being a link,
an output the workspace could not store) is one line on stderr and exit status 1, which Claude
Code reads as a non-blocking error: the tool's output, the compaction and the session go on as
if the hook were not there. Exit 2 would block a compaction, so it is never used, not even for
a usage error.

`ctxoffload hook settings` names this ctxoffload by its absolute path in every command: Claude
Code started from a shell where its virtual environment is not active would find no bare
`ctxoffload` (exit 127 on every tool call).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from ._commands import COMMAND_HELP

TYPE_CHECKING = False  # `typing` costs every hook's start-up, which runs on every tool call
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, NoReturn

__all__ = ["register", "run"]

EXIT_NON_BLOCKING = 1
"""Claude Code's non-blocking error: stderr is shown, the action goes on."""

MAX_INPUT_BYTES = 512 << 20
"""The most of stdin read: a hook input carries one tool's output (Claude Code keeps a Bash
output inline up to about 30,000 characters and persists the rest itself)."""

_SETTINGS = "settings"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `hook` to the command line."""
    from .._doors.claude_hooks import HOOK_EVENTS

    parser = commands.add_parser(
        "hook",
        help=COMMAND_HELP["hook"],
        description=(
            "Run as a Claude Code hook: read the event's JSON on stdin, print the JSON Claude "
            "Code reads. PostToolUse stores a tool output over --tool-result-limit tokens in "
            "the workspace (session named after Claude Code's session_id) and replaces it by "
            "its head and a notice naming the file; PreCompact appends every message of the "
            "transcript not yet kept to the session's context.jsonl and builds the artifact "
            "index of what the compaction drops; SessionStart, after a compaction, gives "
            "Claude that index and where the history is. `ctxoffload hook settings` prints "
            "the hooks for a Claude Code settings.json, each running this ctxoffload by its "
            "absolute path (said on stderr), whatever PATH Claude Code has. The workspace: "
            "--workdir, else $CTXOFFLOAD_WORKDIR, else .ctxoffload in $CLAUDE_PROJECT_DIR "
            "(the project Claude Code runs in), which is refused when it is a symbolic link "
            "(a cloned repository may ship one) or holds one. Any error is one line on "
            "stderr and exit 1, which Claude Code reads as non-blocking: the tool call, the "
            "compaction and the session go on."
        ),
    )
    # A usage error must not exit 2: on PreCompact that would block the compaction.
    parser.error = _usage_error  # type: ignore[method-assign]
    parser.add_argument(
        "--workdir",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help=(
            "the workspace folder (default: $CTXOFFLOAD_WORKDIR, else .ctxoffload in "
            "$CLAUDE_PROJECT_DIR, else in the current directory)"
        ),
    )
    parser.add_argument("event", choices=[*HOOK_EVENTS, _SETTINGS], help="the hook event")
    parser.add_argument(
        "--tool-result-limit",
        type=int,
        default=None,
        metavar="TOKENS",
        help="PostToolUse: store outputs over this many tokens (default: 3000)",
    )
    parser.set_defaults(run=run)


def _usage_error(message: str) -> NoReturn:
    print(f"ctxoffload hook: {message}", file=sys.stderr)
    raise SystemExit(EXIT_NON_BLOCKING)


_PROJECT_WORKDIR = ".ctxoffload"
"""The default workspace's folder in the project Claude Code runs in."""


def _workdir(args: argparse.Namespace) -> str:
    """The workspace's folder: the one the user named (`--workdir`, `$CTXOFFLOAD_WORKDIR`),
    trusted as every workdir is (it may be a link); else `.ctxoffload` in the project, which
    a cloned repository may have shipped as a link (to a folder it can read, to a FIFO), so
    it is made or opened following no link (`folder_in`), and refused when it is one.

    Raises:
        Refused: the project's `.ctxoffload` is a link or not a folder.
    """
    given = getattr(args, "workdir", None)
    if given:
        return str(given)
    from_env = os.environ.get("CTXOFFLOAD_WORKDIR")
    if from_env:
        return from_env
    from .._disk.paths import folder_in

    project = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    return folder_in(
        project,
        _PROJECT_WORKDIR,
        fix=(
            "the hook keeps tool outputs, which can hold secrets, only in a real folder "
            "there, never through a link a repository could ship, and stored nothing: "
            "remove it, or name the workspace with --workdir or $CTXOFFLOAD_WORKDIR"
        ),
    )


def run(args: argparse.Namespace) -> int:
    """Run one hook; exit 0 with its JSON on stdout, or 1 with the reason on stderr."""
    event: str = args.event
    try:
        if event == _SETTINGS:
            return _print_settings(args)
        return _run_hook(event, args)
    except Exception as exc:  # a hook never fails Claude Code: every error is non-blocking
        print(f"ctxoffload hook {event}: {_reason(exc)}", file=sys.stderr)
        return EXIT_NON_BLOCKING


def _reason(exc: BaseException) -> str:
    from ..exceptions import CtxOffloadError

    if isinstance(exc, CtxOffloadError):
        return str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        where = f" {exc.filename}" if exc.filename else ""
        return f"cannot access{where}: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}"


def _print_settings(args: argparse.Namespace) -> int:
    import json
    import shlex

    from .._doors.claude_hooks import hook_settings

    ctxoffload = command = _this_ctxoffload()
    given = getattr(args, "workdir", None)
    if given:
        command += f" --workdir {shlex.quote(os.path.abspath(given))}"
    # Said on stderr, before the JSON (stdout is what is pasted into settings.json).
    print(
        f"ctxoffload hook settings: the hooks run {ctxoffload}, this ctxoffload, by "
        "its full path, since Claude Code may start them where PATH lacks it: print them "
        "again if it moves",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.write(json.dumps(hook_settings(command), indent=2) + "\n")
    return 0


_NO_PROJECT_ON_PATH = (
    "import sys; sys.path[:] = filter(None, sys.path); "
    "from ctxoffload.cli import main; sys.exit(main())"
)
"""`python -c` running ctxoffload with the current directory (the `''` `-c` puts first on the
module path) taken off: a hook runs in the project, and a `ctxoffload` folder a cloned
repository put there must not be what `python -m ctxoffload` would import."""


def _this_ctxoffload() -> str:
    """The shell command that runs this ctxoffload whatever PATH is: the `ctxoffload` script
    this process was started as (or the one beside its interpreter), by its absolute path,
    else this interpreter running it (`_NO_PROJECT_ON_PATH`); quoted for a shell."""
    import shlex

    for script in (sys.argv[0], os.path.join(os.path.dirname(sys.executable), "ctxoffload")):
        is_script = os.path.basename(script) == "ctxoffload" and os.path.isfile(script)
        if is_script and os.access(script, os.X_OK):
            # Not resolved: a link (pipx's ~/.local/bin/ctxoffload) outlives upgrades.
            return shlex.quote(os.path.abspath(script))
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(_NO_PROJECT_ON_PATH)}"


def _run_hook(event: str, args: argparse.Namespace) -> int:
    from .._depth import TooDeep, load_json
    from .._doors.claude_hooks import DEFAULT_TOOL_RESULT_LIMIT, hook_session, needs_offload
    from ..exceptions import InvalidContent

    raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        raise InvalidContent(f"the hook input is over {MAX_INPUT_BYTES:,} bytes")
    if not raw.strip():
        raise InvalidContent(
            f"no hook input on stdin: Claude Code sends the {event} event as JSON there"
        )
    try:
        # Bytes that are not UTF-8 (a tool's raw output) are kept as lone surrogates, which
        # the workspace writes back as those very bytes.
        hook_input = load_json(raw.decode("utf-8", "surrogateescape"))
    except (TooDeep, ValueError) as exc:
        raise InvalidContent(f"the hook input on stdin is not JSON ({exc})") from None
    named = hook_input.get("hook_event_name") if isinstance(hook_input, dict) else None
    if isinstance(named, str) and named != event:
        raise InvalidContent(
            f"the hook input is a {named!r} event, but this is `ctxoffload hook {event}`: "
            f"register it under {named} in the hooks settings"
        )
    hook_session(hook_input, event)  # the input is checked before any file is made
    limit = args.tool_result_limit or DEFAULT_TOOL_RESULT_LIMIT
    if event == "PostToolUse" and not needs_offload(hook_input, limit):
        return 0  # most outputs: answered before asyncio and the engine are loaded
    import asyncio

    output = asyncio.run(_handle(event, hook_input, limit, args))
    if output:
        from .._doors.claude_hooks import dumps_output

        sys.stdout.write(dumps_output(output) + "\n")
    return 0


async def _handle(
    event: str, hook_input: Any, limit: int, args: argparse.Namespace
) -> dict[str, Any]:
    from .._disk.paths import workdir_problem
    from .._doors.claude_hooks import hook_config, post_tool_use, pre_compact, session_start
    from ..exceptions import CliError

    workdir = _workdir(args)
    problem = workdir_problem(workdir, create=True)
    if problem is not None:
        # Said, not only logged: the workspace would keep the output whole and warn, and a
        # hook that never stores anything would go unnoticed.
        raise CliError(f"{problem}: pass --workdir a folder (a missing one is made)")
    from ..workspace import LocalWorkspace

    workspace = LocalWorkspace(workdir)
    with _held_warnings() as held:
        if event == "PostToolUse":
            output = await post_tool_use(workspace, hook_input, config=hook_config(limit))
        elif event == "PreCompact":
            output = await pre_compact(workspace, hook_input)
        else:
            output = await session_start(workspace, hook_input)
    if held and not output:
        # Said, not only logged: the workspace keeps an output it cannot store (a link
        # planted inside it, a full disk) whole and warns, and at exit 0 Claude Code shows
        # no stderr, so a hook that stores nothing would go unnoticed.
        more = f" (and {len(held) - 1} more warnings)" if len(held) > 1 else ""
        raise CliError(held[0] + more)
    for message in held:
        print(f"ctxoffload hook {event}: {message}", file=sys.stderr)
    return output


@contextlib.contextmanager
def _held_warnings() -> Iterator[list[str]]:
    """The engine's warnings (the `ctxoffload` logger) during one hook, held to be said as
    the hook's one line instead of printed as they come; an exception drops them, its own
    line saying what went wrong."""
    import logging
    import logging.handlers

    held: list[str] = []
    handler = logging.handlers.BufferingHandler(capacity=1_000)
    handler.setLevel(logging.WARNING)
    logger = logging.getLogger("ctxoffload")
    logger.addHandler(handler)
    try:
        yield held
    finally:
        logger.removeHandler(handler)
        held.extend(record.getMessage() for record in handler.buffer)
