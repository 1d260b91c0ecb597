"""`ctxoffload show SESSION`: a session's timeline, or what the model was sent at one step."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from .._disk.commit import JsonLines
from .._disk.events import EventKind, is_event
from .._disk.layout import DATA_DIR, DATA_REFERENCE, EVENTS_FILE, SESSIONS_DIR
from .._disk.paths import linked_elsewhere
from .._disk.read import Folder
from .._disk.wording import plural
from ..exceptions import CliError
from ..text import message_lines
from ._access import open_in, open_workspace, session_folder
from ._arguments import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, add_workdir
from ._commands import COMMAND_HELP
from ._describe import Timeline
from ._output import json_text, shown

__all__ = ["SessionLog", "register", "run", "step_messages"]


def register(commands: Any) -> None:
    """Add the `show` command to the `ctxoffload` subcommands."""
    parser = commands.add_parser(
        "show",
        help=COMMAND_HELP["show"],
        description=(
            "Print a session's timeline from the workspace files alone: model calls with "
            "tokens, tool calls with their outcome, truncations, compressions with their "
            "summaries, data files. --step N prints the messages the model was sent at step N."
        ),
    )
    parser.add_argument(
        "session",
        metavar="SESSION",
        nargs="?",
        help="the session id (default: the newest, as `ls` lists them first)",
    )
    parser.add_argument(
        "--step", type=int, metavar="N", help="print what the model was sent at step N"
    )
    parser.add_argument("--full", action="store_true", help="print message bodies whole")
    parser.add_argument(
        "--writers",
        action="store_true",
        help="end each line with the agent (and process) that wrote the event",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    # Suppressed when not given, so `ctxoffload --workdir DIR show ...` keeps the global one.
    add_workdir(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run `ctxoffload show`; returns the exit status (0 ok, 1 damaged record, 2 bad input).

    A line of events.jsonl that is not an event is said once on stderr and skipped; the rest
    is shown, and the exit status is then 1.
    """
    workdir = open_workspace(args, session=args.session)
    if args.session is None:
        args.session = _newest(workdir)
    session = session_folder(workdir, args.session)
    with SessionLog(workdir, session) as events:
        if args.step is not None:
            _show_step(events, args)
        else:
            _show_timeline(events, workdir, args)
        damaged = events.warn()
    return EXIT_PROBLEMS if damaged else EXIT_OK


def _newest(workdir: str) -> str:
    """The session `show` shows when none is named: the newest (said on stderr).

    Raises:
        CliError: the workspace has no session yet.
    """
    from ._cmd_ls import newest_session

    newest, count = newest_session(workdir)
    if newest is None:
        raise CliError(
            f"no session in {shown(workdir)!r} yet: pass a SESSION, or run an agent first"
        )
    if count > 1:
        print(
            f"ctxoffload show: the newest session of {count} is {newest} (ls lists them)",
            file=sys.stderr,
        )
    return newest


# -- reading -------------------------------------------------------------------------------


class SessionLog:
    """The session's events.jsonl, read as a stream through the workspace's reader, as many
    times as the command needs: memory holds one line at a time (the longest line bounds
    it), never the whole log. Each pass stops where the log ended when it was opened, so an
    agent still writing does not make two passes disagree.

    A torn last line (a write in progress) is skipped silently. A line that is not JSON, or
    JSON that is not an event (an object with a kind), is skipped and said once on stderr
    (`warn`).

    Raises (on entering):
        CliError: the file has other hard links or cannot be read (exit 2).
    """

    def __init__(self, workdir: str, session: str) -> None:
        self.workdir = workdir
        self.session = session
        self.corrupt: list[int] = []
        self.odd = 0
        self._stack = contextlib.ExitStack()
        self._fd = -1
        self._end = 0
        self.path = ""

    def __enter__(self) -> SessionLog:
        folder = self._stack.enter_context(Folder(self.workdir, SESSIONS_DIR, self.session))
        self.path = folder.path(EVENTS_FILE)
        opened = open_in(folder, EVENTS_FILE, self.path)
        if opened is not None:
            self._fd, st = opened
            self._stack.callback(os.close, self._fd)
            self._end = st.st_size
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every event, oldest first; counts what is skipped."""
        if self._fd < 0:
            return
        lines = JsonLines(self._fd, self._end)
        odd = 0
        try:
            for _, value in lines:
                if is_event(value):
                    yield value
                else:
                    odd += 1
        except OSError as exc:  # a read that failed after the open (EIO)
            raise CliError(f"cannot read {shown(self.path)}: {exc.strerror or exc}") from None
        self.corrupt, self.odd = lines.corrupt, odd

    def warn(self) -> bool:
        """Say what the last whole pass skipped, once; whether anything was."""
        bad, odd = self.corrupt, self.odd
        if bad:
            print(
                f"ctxoffload show: warning: {shown(self.path)} line {bad[0]} is not valid JSON"
                + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
                + ": skipped; `ctxoffload verify` checks the workspace",
                file=sys.stderr,
            )
        if odd:
            print(
                f"ctxoffload show: warning: {shown(self.path)}: {odd:,} JSON "
                f"line{' is' if odd == 1 else 's are'} not an event (an object with a kind): "
                "skipped; `ctxoffload verify` checks the workspace",
                file=sys.stderr,
            )
        return bool(bad or odd)


# -- --step N --------------------------------------------------------------------------------


def step_messages(events: SessionLog, step: int) -> list[dict[str, Any]]:
    """The messages the model was sent at `step`, rebuilt from the record.

    Two passes, so that memory holds the step's messages only, not every message logged:
    the first finds the ids the step was sent, the second keeps only those messages.

    Raises:
        CliError: the record cannot rebuild the step (exit 1), or no model call has that
            step (exit 2; the message names the steps recorded).
    """
    from .._disk.read import rebuild_step
    from ..exceptions import IncompleteRecord

    wanted: set[str] = set()
    steps: set[int] = set()
    for event in events:
        if event["kind"] == EventKind.MODEL_CALL and isinstance(event.get("step"), int):
            steps.add(event["step"])
            ids = event.get("messages")
            if event["step"] == step and isinstance(ids, list):
                wanted.update(i for i in ids if isinstance(i, str))

    def needed() -> Iterator[dict[str, Any]]:
        for event in events:
            if event["kind"] == EventKind.MESSAGE:
                message = event.get("message")
                if not isinstance(message, dict) or str(message.get("id")) not in wanted:
                    continue
            elif event["kind"] != EventKind.MODEL_CALL:
                continue
            yield event

    try:
        return rebuild_step(needed(), step)
    except IncompleteRecord as exc:
        raise CliError(str(exc), EXIT_PROBLEMS) from None
    except LookupError as exc:
        known = f"steps {min(steps)}-{max(steps)}" if steps else "no model calls"
        raise CliError(f"{exc} ({known} are recorded)", EXIT_USAGE) from None


def _show_step(events: SessionLog, args: argparse.Namespace) -> None:
    messages = step_messages(events, args.step)
    if args.json:
        print(json_text({"session": args.session, "step": args.step, "messages": messages}))
        return
    print(f"step {args.step}: the model was sent {len(messages)} messages")
    for i, msg in enumerate(messages, start=1):
        print(f"\n--- [{i}] {msg.get('role')} (id {msg.get('id')})")
        print("\n".join(message_lines(msg)[1:]))


# -- the timeline ----------------------------------------------------------------------------


def _show_timeline(events: SessionLog, workdir: str, args: argparse.Namespace) -> None:
    # A first pass finds what the second needs ahead of it: the data/ files named anywhere,
    # and whether an Agent wrote the session.
    data_names: set[str] = set()
    by_agent = False
    for event in events:
        data_names.update(_data_names(event))
        by_agent = by_agent or event["kind"] in (EventKind.SESSION_START, EventKind.FORK)
    data_files = sorted(data_names)
    sizes = _data_sizes(workdir, data_files)
    if args.json:
        # Written as it is read: one event in memory at a time.
        out = sys.stdout
        out.write(f'{{"session": {json_text(args.session)}, "events": [')
        for index, event in enumerate(events):
            out.write((", " if index else "") + json_text(event, ensure_ascii=False))
        files = [{"path": f"{DATA_DIR}/{name}", "bytes": sizes[name]} for name in data_files]
        out.write(f'], "data_files": {json_text(files)}}}\n')
        return
    print(f"session {args.session} ({shown(os.path.join(workdir, SESSIONS_DIR, args.session))})")
    timeline = Timeline(full=args.full, writers=args.writers, by_agent=by_agent)
    empty = True
    for event in events:
        empty = False
        _print_lines(timeline.add(event))
    _print_lines(timeline.flush())
    if empty:
        print(f"no record: {EVENTS_FILE} is missing or empty (nothing recorded yet)")
    _print_subagents(workdir, args.session, events)
    if data_files:
        print("data files:")
        for name in data_files:
            size = sizes[name]
            what = f"{size:,} bytes" if size is not None else "missing"
            print(f"  {DATA_DIR}/{name} ({what})")


def _data_names(event: dict[str, Any]) -> Iterator[str]:
    """The data/ files an event names, in any of its strings (keys too), found in place: no
    copy of a long line is made to search it."""
    stack: list[Any] = [event]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "data/" in item:
                yield from DATA_REFERENCE.findall(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _data_sizes(workdir: str, names: list[str]) -> dict[str, int | None]:
    """The size of each data/ file, None for one that is missing or not a file of the
    workspace (a link, a special or hard-linked file: `ctxoffload verify` reports it)."""
    import stat

    sizes: dict[str, int | None] = dict.fromkeys(names)
    if not names:
        return sizes
    try:
        with Folder(workdir, DATA_DIR) as data:
            for name in names:
                try:
                    st = data.stat(name)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and not linked_elsewhere(st):
                    sizes[name] = st.st_size
    except OSError:  # no data/ folder, or one that cannot be opened
        pass
    return sizes


def _print_lines(lines: list[str]) -> None:
    for line in lines:
        print(line)


def _print_subagents(workdir: str, session: str, events: Iterable[dict[str, Any]]) -> None:
    """The tree of the sub-agents a session started, read from each one's own record."""
    lines: list[str] = []
    _subagent_tree(workdir, session, events, 1, lines, {session})
    if lines:
        print("sub-agents:")
        _print_lines(lines)


def _subagent_tree(
    workdir: str,
    session: str,
    events: Iterable[dict[str, Any]],
    depth: int,
    lines: list[str],
    seen: set[str],
) -> None:
    children: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["kind"] == EventKind.SUBAGENT and isinstance(event.get("session"), str):
            children.setdefault(event["session"], {}).update(event)
    for child, last in children.items():
        status = last.get("status")
        steps = last.get("steps")
        done = f"{plural(steps, 'step')}, {status}" if steps else status
        lines.append(
            f"{'  ' * depth}step {last.get('step')} · {last.get('name')} → {child} ({done})"
        )
        if child in seen or depth >= _MAX_TREE_DEPTH:
            continue
        seen.add(child)
        try:
            with SessionLog(workdir, child) as grandchildren:
                _subagent_tree(workdir, child, grandchildren, depth + 1, lines, seen)
        except (OSError, CliError):
            lines.append(f"{'  ' * (depth + 1)}(its record cannot be read)")


_MAX_TREE_DEPTH = 16
