"""`ctxoffload show SESSION`: a session's timeline, or what the model was sent at one step."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .._disk.events import EventKind
from .._disk.layout import DATA_DIR, DATA_REFERENCE, EVENTS_FILE, SESSIONS_DIR
from .._disk.paths import linked_elsewhere
from .._disk.read import Folder
from .._disk.wording import plural
from ..exceptions import CliError
from ..text import message_lines
from ._access import open_workspace, session_folder
from ._arguments import EXIT_OK, EXIT_PROBLEMS, Workdir, add_workdir
from ._bucket import is_database_url, open_database
from ._commands import COMMAND_HELP
from ._describe import Timeline, by_agent, names_stored_files, session_roots
from ._output import fitted, json_text, shown, table_width
from ._session_name import SessionName
from ._view import (
    SessionLog,
    newest_session,
    step_messages,
    stored_newest_session,
)

__all__ = ["register", "run"]


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
        type=SessionName,
        help="the session: its name, or the host's own id of the conversation (a thread_id, "
        "a conversation_id...); default: the newest, as `ls` lists them first",
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
    where = Workdir.of(args)
    chosen = args.session
    if chosen is None and is_database_url(where.text):
        # The newest read from the rows: the copy holds that one session, not every one.
        store = open_database(where.text)
        try:
            chosen = _newest(store.url, stored_newest_session(store))
        finally:
            store.close()
    workdir = open_workspace(where, session=chosen)
    session = session_folder(
        workdir, _newest(workdir, newest_session(workdir)) if chosen is None else chosen
    )
    with SessionLog(workdir, session) as events:
        if args.step is not None:
            _show_step(events, session, args.step, as_json=args.json)
        else:
            _show_timeline(
                events, workdir, session, full=args.full, writers=args.writers, as_json=args.json
            )
        damaged = events.warn("show")
    return EXIT_PROBLEMS if damaged else EXIT_OK


def _newest(workdir: str, found: tuple[str | None, int]) -> str:
    """The session `show` shows when none is named: the newest of the workspace `workdir`
    (`newest_session`: the newest and how many there are; said on stderr).

    Raises:
        CliError: the workspace has no session yet.
    """
    newest, count = found
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


# -- --step N --------------------------------------------------------------------------------


def _show_step(events: SessionLog, session: str, step: int, *, as_json: bool) -> None:
    messages = step_messages(events, step)
    if as_json:
        print(json_text({"session": session, "step": step, "messages": messages}))
        return
    print(f"step {step}: the model was sent {len(messages)} messages")
    for i, msg in enumerate(messages, start=1):
        print(f"\n--- [{i}] {msg.get('role')} (id {msg.get('id')})")
        print("\n".join(message_lines(msg)[1:]))


# -- the timeline ----------------------------------------------------------------------------


def _show_timeline(
    events: SessionLog, workdir: str, session: str, *, full: bool, writers: bool, as_json: bool
) -> None:
    # A first pass finds what the second needs ahead of it: the data/ files named anywhere,
    # and whether an Agent wrote the session.
    data_names: set[str] = set()
    agent = names_files = False
    for event in events:
        data_names.update(_data_names(event))
        agent = agent or by_agent(event)
        names_files = names_files or names_stored_files(event)
    data_files = sorted(data_names)
    sizes = _data_sizes(workdir, data_files)
    if as_json:
        # Written as it is read: one event in memory at a time.
        out = sys.stdout
        out.write(f'{{"session": {json_text(session)}, "events": [')
        for index, event in enumerate(events):
            out.write((", " if index else "") + json_text(event, ensure_ascii=False))
        files = [{"path": f"{DATA_DIR}/{name}", "bytes": sizes[name]} for name in data_files]
        out.write(f'], "data_files": {json_text(files)}}}\n')
        return
    # The terminal's width (or $COLUMNS), as a table takes it; in a pipe without $COLUMNS,
    # whole lines (for grep).
    width = None if full else table_width(sys.stdout)
    folder = shown(os.path.join(workdir, SESSIONS_DIR, session))
    head = f"session {session} ({folder})"
    # The folder under the id when both do not fit: the id stays whole on its line.
    fits = width is None or len(head) <= width
    _print_lines([head] if fits else [f"session {session}", f"  in {folder}"])
    # Paths into the session's folder are written relative to it, and other paths into the
    # workspace relative to the workspace (the lines above say where both are), so a line
    # fits 80 columns however long the session's id: references hold the workdir resolved,
    # or a bucket's URI for a copy of one.
    workspaces = tuple(dict.fromkeys([os.path.realpath(workdir), workdir, shown(workdir)]))
    root = session_roots(workspaces, session)
    timeline = Timeline(
        full=full,
        writers=writers,
        by_agent=agent,
        names_files=names_files,
        root=root,
        width=width or 0,
    )

    def fit(lines: list[str]) -> list[str]:
        return lines if width is None else fitted(lines, width)

    empty = True
    for event in events:
        empty = False
        _print_lines(fit(timeline.add(event)))
    _print_lines(fit(timeline.flush()))
    if empty:
        print(f"no record: {EVENTS_FILE} is missing or empty (nothing recorded yet)")
    _print_subagents(workdir, session, events, fit)
    if data_files:
        print("data files:")
        for name in data_files:
            size = sizes[name]
            what = f"{size:,} bytes" if size is not None else "missing"
            _print_lines(fit([f"  {DATA_DIR}/{name} ({what})"]))


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


def _print_subagents(
    workdir: str,
    session: str,
    events: Iterable[dict[str, Any]],
    fit: Callable[[list[str]], list[str]],
) -> None:
    """The tree of the sub-agents a session started, read from each one's own record."""
    lines: list[str] = []
    _subagent_tree(workdir, session, events, 1, lines, {session})
    if lines:
        print("sub-agents:")
        _print_lines(fit(lines))


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
