"""`ctxoffload show SESSION`: a session's timeline, or what the model was sent at one step."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from ..exceptions import CliError
from ..text import message_lines
from ..workspace import (
    DATA_DIR,
    DATA_REFERENCE,
    EVENTS_FILE,
    SESSIONS_DIR,
    SUMMARY_MARK,
    WRITER_FIELD,
    EventKind,
    Folder,
    JsonLines,
    context_event_sentence,
    fidelity_sentence,
    mark_of,
)
from ._arguments import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, add_workdir
from ._commands import COMMAND_HELP
from ._output import shown
from ._reading import open_in, open_workspace, session_folder

__all__ = ["register", "run"]

_SHORT = 100  # characters of a message body shown without --full


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
    parser.add_argument("session", metavar="SESSION", help="the session id")
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
    session = session_folder(workdir, args.session)
    with _EventLog(workdir, session) as events:
        if args.step is not None:
            _show_step(events, args)
        else:
            _show_timeline(events, workdir, args)
        damaged = events.warn()
    return EXIT_PROBLEMS if damaged else EXIT_OK


# -- reading -------------------------------------------------------------------------------


class _EventLog:
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

    def __enter__(self) -> _EventLog:
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
                if isinstance(value, dict) and isinstance(value.get("kind"), str):
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


def _show_step(events: _EventLog, args: argparse.Namespace) -> None:
    from ..exceptions import IncompleteRecord
    from ..workspace import rebuild_step

    # Two passes, so that memory holds the step's messages only, not every message logged:
    # the first finds the ids the step was sent, the second keeps only those messages.
    wanted: set[str] = set()
    steps: set[int] = set()
    for event in events:
        if event["kind"] == EventKind.MODEL_CALL and isinstance(event.get("step"), int):
            steps.add(event["step"])
            ids = event.get("messages")
            if event["step"] == args.step and isinstance(ids, list):
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
        messages = rebuild_step(needed(), args.step)
    except IncompleteRecord as exc:
        raise CliError(str(exc), EXIT_PROBLEMS) from None
    except LookupError as exc:
        known = f"steps {min(steps)}-{max(steps)}" if steps else "no model calls"
        raise CliError(f"{exc} ({known} are recorded)", EXIT_USAGE) from None
    if args.json:
        print(json.dumps({"session": args.session, "step": args.step, "messages": messages}))
        return
    print(f"step {args.step}: the model was sent {len(messages)} messages")
    for i, msg in enumerate(messages, start=1):
        print(f"\n--- [{i}] {msg.get('role')} (id {msg.get('id')})")
        print("\n".join(_body(msg)))


# -- the timeline ----------------------------------------------------------------------------


def _show_timeline(events: _EventLog, workdir: str, args: argparse.Namespace) -> None:
    # A first pass finds what the second needs ahead of it: the data/ files named anywhere,
    # and the `summary` events whose fields a summary message logs later (printed there).
    data_names: set[str] = set()
    logged_later: set[int] = set()
    pending: tuple[int, list[str]] | None = None  # the last summary event, and its lines
    for index, event in enumerate(events):
        data_names.update(_data_names(event))
        if event["kind"] == EventKind.SUMMARY:
            pending = (index, _summary_lines(_summary_fields(event) or {}))
            continue
        found = _summary_fields(event)
        if pending is not None and found is not None and _summary_lines(found) == pending[1]:
            logged_later.add(pending[0])
            pending = None
    data_files = sorted(data_names)
    sizes = _data_sizes(workdir, data_files)
    if args.json:
        # Written as it is read: one event in memory at a time.
        out = sys.stdout
        out.write(f'{{"session": {json.dumps(args.session)}, "events": [')
        for index, event in enumerate(events):
            out.write((", " if index else "") + json.dumps(event, ensure_ascii=False))
        files = [{"path": f"{DATA_DIR}/{name}", "bytes": sizes[name]} for name in data_files]
        out.write(f'], "data_files": {json.dumps(files)}}}\n')
        return
    print(f"session {args.session} ({shown(os.path.join(workdir, SESSIONS_DIR, args.session))})")
    empty = True
    # Each summary is printed once, under the line of its compression: as the summary message
    # the agent logged (its five fields; with --full the whole message the model saw), or,
    # when no message holds it (a Compressor without an Agent), from the `summary` event,
    # which the Compressor writes just before its `compression` event.
    held: list[str] = []
    for index, event in enumerate(events):
        empty = False
        if event["kind"] == EventKind.SUMMARY:
            if index not in logged_later:
                _print_lines(held)
                held = _describe_safely(event, full=args.full, writers=args.writers)
            continue
        _print_lines(_describe_safely(event, full=args.full, writers=args.writers))
        if event["kind"] == EventKind.COMPRESSION:
            _print_lines(held)
            held = []
    _print_lines(held)
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
                if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                    sizes[name] = st.st_size
    except OSError:  # no data/ folder, or one that cannot be opened
        pass
    return sizes


def _print_lines(lines: list[str]) -> None:
    for line in lines:
        print(line)


def _describe_safely(event: dict[str, Any], *, full: bool, writers: bool = False) -> list[str]:
    try:
        lines = _describe(event, full=full)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        # A line of JSON whose fields are not what this version writes: shown raw
        # rather than hidden, so nothing in the record is skipped silently.
        return [f"{str(event.get('time', ''))[11:19]} {json.dumps(event)[:300]}"]
    if writers and lines:
        lines[0] += f" · {writer_text(event.get(WRITER_FIELD))}"
    return lines


def writer_text(writer: object) -> str:
    """`by lead (session s1, pid 12)`, or `by an unnamed writer (pid 12)`, from an event's
    `writer`; `writer not recorded` for an event of an older release."""
    if not isinstance(writer, dict):
        return "writer not recorded"
    agent = writer.get("agent")
    who = f"by {agent}" if agent else "by the workspace alone"
    return f"{who} (session {writer.get('session')}, pid {writer.get('pid')})"


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
        done = f"{_n(steps)} step{'' if steps == 1 else 's'}, {status}" if steps else status
        lines.append(
            f"{'  ' * depth}step {last.get('step')} · {last.get('name')} → {child} ({done})"
        )
        if child in seen or depth >= _MAX_TREE_DEPTH:
            continue
        seen.add(child)
        try:
            with _EventLog(workdir, child) as grandchildren:
                _subagent_tree(workdir, child, grandchildren, depth + 1, lines, seen)
        except (OSError, CliError):
            lines.append(f"{'  ' * (depth + 1)}(its record cannot be read)")


_MAX_TREE_DEPTH = 16


def _summary_fields(event: dict[str, Any]) -> dict[str, Any] | None:
    """The summary a `summary` event or a summary message's `message` event holds."""
    if event["kind"] == EventKind.SUMMARY:
        nested = event.get("summary")
        return nested if isinstance(nested, dict) else event
    message = event.get("message") if event["kind"] == EventKind.MESSAGE else None
    mark = mark_of(message.get("metadata")) if isinstance(message, dict) else None
    if mark is not None and mark.get("kind") == SUMMARY_MARK:
        fields = mark.get("summary")
        return fields if isinstance(fields, dict) else {}
    return None


def _describe(event: dict[str, Any], *, full: bool) -> list[str]:
    kind = event["kind"]
    at = str(event.get("time", ""))[11:19]
    if kind == EventKind.SESSION_START:
        tools = ", ".join(event.get("tools") or []) or "none"
        parent = event.get("parent")
        child = (
            f"; sub-agent of session {parent.get('session')} (agent {parent.get('agent')}, "
            f"step {parent.get('step')}, call {parent.get('tool_id')})"
            if isinstance(parent, dict)
            else ""
        )
        return [
            f"{at} session started: agent {event.get('agent')}, model: {event.get('model')} "
            f"(summaries: {event.get('summary_model') or 'extractive'}), window "
            f"{_n(event.get('context_window'))} tokens, tools: {tools}; ctxoffload "
            f"{event.get('version')}{child}"
        ]
    if kind == EventKind.MESSAGE:
        return _message_event(event.get("message") or {}, at, full=full)
    if kind == EventKind.MODEL_CALL:
        reported = event.get("input_tokens")
        tokens = f"{_n(event.get('tokens_counted'))} tokens counted" + (
            f" ({_n(reported)} reported)" if reported is not None else ""
        )
        attempt_no = event.get("attempt")
        attempt = (
            f" (attempt {attempt_no})" if isinstance(attempt_no, int) and attempt_no > 1 else ""
        )
        outcome = str(event.get("outcome"))
        error = event.get("error")
        if isinstance(error, dict):
            outcome += f": {error.get('type')}: {error.get('message')}"
        calls = event.get("tool_calls") or []
        then = f" → {', '.join(c.get('name', '?') for c in calls)}" if calls else ""
        summary = " (one a summary)" if event.get("summary") else ""
        return [
            f"{at} step {event.get('step')} · model call{attempt} · "
            f"{len(event.get('messages') or [])} messages{summary} · {tokens} · "
            f"{_ms(event.get('duration_ms'))} · {outcome}{then}"
        ]
    if kind == EventKind.TOOL_CALL:
        outcome = str(event.get("outcome"))
        error = event.get("error")
        if isinstance(error, dict):
            what = f"{error.get('type')}: " if error.get("type") else ""
            outcome += f": {what}{_first_line(str(error.get('message')))}"
        lines = [
            f"{at}   tool {event.get('name')} ({event.get('tool_id')}) {outcome} · "
            f"{_ms(event.get('duration_ms'))}"
        ]
        if full and isinstance(error, dict) and error.get("traceback"):
            lines += ["      " + t for t in str(error["traceback"]).rstrip().splitlines()]
        return lines
    if kind == EventKind.TRUNCATION:
        return [
            f"{at}   truncated {event.get('tool_name')} {_n(event.get('tokens_before'))}→"
            f"{_n(event.get('tokens_after'))} tokens, {_n(event.get('lines_shown'))} of "
            f"{_n(event.get('lines_total'))} lines shown; whole output in "
            f"{event.get('reference') or 'nowhere (no offloader)'}"
        ]
    if kind == EventKind.COMPRESSION:
        span = event.get("lines")
        where = str(event.get("reference") or "nowhere (no offloader)")
        if isinstance(span, list) and len(span) == 2:
            where += f" lines {span[0]}-{span[1]}"
        fidelity = fidelity_sentence(event)
        return [
            f"{at} compressed {event.get('messages')} messages, "
            f"{_n(event.get('tokens_before'))}→{_n(event.get('tokens_after'))} tokens, into "
            f"{where} ({event.get('summary_source')} summary, {event.get('kept')} kept)",
            *([f"{at}   {fidelity}"] if fidelity else []),
        ]
    if kind == EventKind.SUMMARY:
        nested = event.get("summary")
        fields = nested if isinstance(nested, dict) else event
        return [f"{at}   summary:", *_summary_lines(fields)]
    if kind in (EventKind.TOOL_RESULT, EventKind.CONTEXT, EventKind.ARTIFACTS):
        # The workspace's own line for a truncation or compression, and the artifact list a
        # compression's line sums up (`artifacts: ... left`): shown above.
        return []
    sentence = context_event_sentence(event)
    return [f"{at} {sentence or kind}"]


def _message_event(msg: dict[str, Any], at: str, *, full: bool) -> list[str]:
    """The timeline's lines for a message the agent logged: its first line (the message's
    text as `text.message_lines` shows it), or with `full` all of it."""
    mark = mark_of(msg.get("metadata"))
    if mark is not None and mark.get("kind") == SUMMARY_MARK:
        fields = mark.get("summary")
        lines = [f"{at}   summary message {msg.get('id')}:"]
        if full:  # the message as the model saw it: the five fields are in it
            return lines + ["      " + t for t in _body(msg)]
        return lines + _summary_lines(fields if isinstance(fields, dict) else {})
    role = msg.get("role")
    if not full and role in ("system", "tool"):
        return []
    body = _body(msg)
    if not full and role == "assistant" and (not body or body[0].startswith(_CALL)):
        return []  # only tool calls: the model_call line names them
    if full:
        return [f"{at} {role} ({msg.get('id')}):"] + ["    " + t for t in body]
    short = _first_line("\n".join(body))
    return [f"{at} {role}: {short}"]


# How `text.message_lines` begins the lines of a tool call.
_CALL = "-> tool call "


def _body(msg: dict[str, Any]) -> list[str]:
    """A message's lines as people and agents read them, without the `[role]` header."""
    return message_lines(msg)[1:]


def _summary_lines(fields: dict[str, Any]) -> list[str]:
    names = (
        "task_overview",
        "current_state",
        "important_discoveries",
        "next_steps",
        "context_to_preserve",
    )
    return [f"      {name}: {fields[name]}" for name in names if name in fields]


def _first_line(text: str) -> str:
    """The first line of `text`, cut to `_SHORT` characters, ` …` when there is more."""
    text = text.strip()
    line = text.split("\n", 1)[0]
    more = len(line) > _SHORT or "\n" in text
    return line[:_SHORT] + (" …" if more else "")


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _ms(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "? ms"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"
