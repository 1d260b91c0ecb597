"""`ctxoffload show SESSION`: a session's timeline, or what the model was sent at one step."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from ._commands import COMMAND_HELP
from ._common import add_workdir

__all__ = ["register", "run"]

_DATA_FILE = re.compile(r"data/([0-9a-f]{64}(?:\.[A-Za-z0-9]+)?)")
_SHORT = 100  # characters of a message body shown without --full


class ShowError(Exception):
    """Bad input: one line for stderr, and the exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


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
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    # Suppressed when not given, so `ctxoffload --workdir DIR show ...` keeps the global one.
    add_workdir(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run `ctxoffload show`; returns the exit status (0 ok, 1 corrupt record, 2 bad input)."""
    try:
        session_dir = _session_dir(getattr(args, "workdir", None), args.session)
        events = _read_events(session_dir / "events.jsonl")
        if args.step is not None:
            _show_step(events, args)
        else:
            _show_timeline(events, session_dir, args)
    except ShowError as exc:
        print(f"ctxoffload show: {exc}", file=sys.stderr)
        return exc.status
    return 0


# -- reading -------------------------------------------------------------------------------


def _session_dir(workdir_arg: str | None, session: str) -> Path:
    from ..exceptions import InvalidSessionId
    from ..workspace import validate_session_id
    from ._common import CliError, is_store_url, shown

    where = workdir_arg or os.environ.get("CTXOFFLOAD_WORKDIR") or os.getcwd()
    if is_store_url(where):
        from ._bucket import copy_bucket

        try:
            workdir = copy_bucket(where, session=session).folder
        except CliError as exc:
            raise ShowError(str(exc), exc.code) from None
    else:
        workdir = Path(where)
    if not (workdir / "sessions").is_dir():
        raise ShowError(
            f"{where!r} is not a ctxoffload workspace (it has no sessions/ folder): "
            "pass --workdir with the folder given to LocalWorkspace",
            2,
        )
    try:
        validate_session_id(session)
    except InvalidSessionId as exc:
        raise ShowError(str(exc), 2) from None
    session_dir = workdir / "sessions" / session
    if session_dir.is_symlink() or not session_dir.is_dir():  # a planted link is not followed
        known = sorted(p.name for p in (workdir / "sessions").iterdir() if p.is_dir())
        listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "") or "none"
        # As the other commands name it: the absolute path (a bucket's URI).
        named = shown(os.path.abspath(workdir))
        raise ShowError(f"no session {session!r} in {named!r}; sessions: {listed}", 2)
    return session_dir


def _read_events(path: Path) -> list[dict[str, Any]]:
    """Every event of the file; a torn last line (a write in progress) is skipped.

    The file is read as the workspace reads it: no link followed, and only a regular file
    with one link (another may be outside). One it cannot read is bad input (exit 2).
    """
    import errno
    import stat

    from ._common import shown

    named = shown(os.path.abspath(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return []
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ShowError(f"{named}: is a symbolic link: links are not followed", 2) from None
        raise ShowError(f"cannot read {named}: {exc.strerror or exc}", 2) from None
    try:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ShowError(f"{named}: is not a regular file", 2)
            if st.st_nlink > 1:
                raise ShowError(
                    f"{named}: has {st.st_nlink} hard links: not read (it may be shared with "
                    "a file outside)",
                    2,
                )
            raw = f.read()
    except OSError as exc:
        raise ShowError(f"cannot read {named}: {exc.strerror or exc}", 2) from None
    lines = raw.split(b"\n")
    if lines and lines[-1]:
        lines.pop()  # no newline yet: still being written, or torn by a crash
    events: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if not isinstance(event, dict) or not isinstance(event.get("kind"), str):
            raise ShowError(
                f"{path} line {number} is not valid JSON with a kind: the record is damaged "
                "there (the lines before it can be read with head -n)",
                1,
            )
        events.append(event)
    return events


# -- --step N --------------------------------------------------------------------------------


def _show_step(events: list[dict[str, Any]], args: argparse.Namespace) -> None:
    from ..exceptions import IncompleteRecord
    from ..workspace import rebuild_step

    try:
        messages = rebuild_step(events, args.step)
    except IncompleteRecord as exc:
        raise ShowError(str(exc), 1) from None
    except LookupError as exc:
        steps = sorted(
            {
                e["step"]
                for e in events
                if e["kind"] == "model_call" and isinstance(e.get("step"), int)
            }
        )
        known = f"steps {steps[0]}-{steps[-1]}" if steps else "no model calls"
        raise ShowError(f"{exc} ({known} are recorded)", 2) from None
    if args.json:
        print(json.dumps({"session": args.session, "step": args.step, "messages": messages}))
        return
    print(f"step {args.step}: the model was sent {len(messages)} messages")
    for i, msg in enumerate(messages, start=1):
        print(f"\n--- [{i}] {msg.get('role')} (id {msg.get('id')})")
        print(_body(msg))


# -- the timeline ----------------------------------------------------------------------------


def _show_timeline(
    events: list[dict[str, Any]], session_dir: Path, args: argparse.Namespace
) -> None:
    data_root = session_dir.parent.parent / "data"
    data_files = sorted(
        {m for e in events for m in _DATA_FILE.findall(json.dumps(e, ensure_ascii=False))}
    )
    if args.json:
        report = {
            "session": args.session,
            "events": events,
            "data_files": [
                {"path": f"data/{name}", "bytes": _size(data_root / name)} for name in data_files
            ],
        }
        print(json.dumps(report, ensure_ascii=False))
        return
    from ._common import shown

    print(f"session {args.session} ({shown(session_dir)})")
    if not events:
        print("no record: events.jsonl is missing or empty (nothing recorded yet)")
    # Each summary is printed once, under the line of its compression: as the summary message
    # the agent logged (its five fields; with --full the whole message the model saw), or,
    # when no message holds it (a Compressor without an Agent), from the `summary` event,
    # which the Compressor writes just before its `compression` event.
    held: list[str] = []
    for index, event in enumerate(events):
        if event["kind"] == "summary":
            if not _summary_logged_later(events, index):
                _print_lines(held)
                held = _describe_safely(event, full=args.full)
            continue
        _print_lines(_describe_safely(event, full=args.full))
        if event["kind"] == "compression":
            _print_lines(held)
            held = []
    _print_lines(held)
    if data_files:
        print("data files:")
        for name in data_files:
            size = _size(data_root / name)
            what = f"{size:,} bytes" if size is not None else "missing"
            print(f"  data/{name} ({what})")


def _print_lines(lines: list[str]) -> None:
    for line in lines:
        print(line)


def _describe_safely(event: dict[str, Any], *, full: bool) -> list[str]:
    try:
        return _describe(event, full=full)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        # A line of JSON whose fields are not what this version writes: shown raw
        # rather than hidden, so nothing in the record is skipped silently.
        return [f"{str(event.get('time', ''))[11:19]} {json.dumps(event)[:300]}"]


def _summary_fields(event: dict[str, Any]) -> dict[str, Any] | None:
    """The summary a `summary` event or a summary message's `message` event holds."""
    if event["kind"] == "summary":
        nested = event.get("summary")
        return nested if isinstance(nested, dict) else event
    message = event.get("message") if event["kind"] == "message" else None
    metadata = message.get("metadata") if isinstance(message, dict) else None
    marker = metadata.get("ctxoffload") if isinstance(metadata, dict) else None
    if isinstance(marker, dict) and marker.get("kind") == "summary":
        fields = marker.get("summary")
        return fields if isinstance(fields, dict) else {}
    return None


def _summary_logged_later(events: list[dict[str, Any]], index: int) -> bool:
    """Whether a summary message with the fields of the `summary` event at `index` is logged
    after it (before the next summary)."""
    fields = _summary_lines(_summary_fields(events[index]) or {})
    for event in events[index + 1 :]:
        if event["kind"] == "summary":
            return False
        found = _summary_fields(event)
        if found is not None and _summary_lines(found) == fields:
            return True
    return False


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _describe(event: dict[str, Any], *, full: bool) -> list[str]:
    kind = event["kind"]
    at = str(event.get("time", ""))[11:19]
    if kind == "session_start":
        tools = ", ".join(event.get("tools") or []) or "none"
        return [
            f"{at} session started: agent {event.get('agent')}, model: {event.get('model')} "
            f"(summaries: {event.get('summary_model') or 'extractive'}), window "
            f"{_n(event.get('context_window'))} tokens, tools: {tools}; ctxoffload "
            f"{event.get('version')}"
        ]
    if kind == "message":
        return _describe_message(event.get("message") or {}, at, full=full)
    if kind == "model_call":
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
    if kind == "tool_call":
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
    if kind == "truncation":
        return [
            f"{at}   truncated {event.get('tool_name')} {_n(event.get('tokens_before'))}→"
            f"{_n(event.get('tokens_after'))} tokens, {_n(event.get('lines_shown'))} of "
            f"{_n(event.get('lines_total'))} lines shown; whole output in "
            f"{event.get('reference') or 'nowhere (no offloader)'}"
        ]
    if kind == "compression":
        span = event.get("lines")
        where = str(event.get("reference") or "nowhere (no offloader)")
        if isinstance(span, list) and len(span) == 2:
            where += f" lines {span[0]}-{span[1]}"
        return [
            f"{at} compressed {event.get('messages')} messages, "
            f"{_n(event.get('tokens_before'))}→{_n(event.get('tokens_after'))} tokens, into "
            f"{where} ({event.get('summary_source')} summary, {event.get('kept')} kept)"
        ]
    if kind == "summary":
        nested = event.get("summary")
        fields = nested if isinstance(nested, dict) else event
        return [f"{at}   summary:", *_summary_lines(fields)]
    if kind in ("tool_result", "context"):
        return []  # the workspace's own line for a truncation or compression shown above
    return [f"{at} {kind}"]


def _describe_message(msg: dict[str, Any], at: str, *, full: bool) -> list[str]:
    marker = (msg.get("metadata") or {}).get("ctxoffload")
    if isinstance(marker, dict) and marker.get("kind") == "summary":
        fields = marker.get("summary")
        lines = [f"{at}   summary message {msg.get('id')}:"]
        if full:  # the message as the model saw it: the five fields are in it
            return lines + ["      " + t for t in _body(msg).splitlines()]
        return lines + _summary_lines(fields if isinstance(fields, dict) else {})
    role = msg.get("role")
    if not full and role in ("system", "tool"):
        return []
    if not full and role == "assistant" and not _text(msg):
        return []  # only tool calls: the model_call line names them
    body = _body(msg)
    if full:
        return [f"{at} {role} ({msg.get('id')}):"] + ["    " + t for t in body.splitlines()]
    short = _first_line(body)
    return [f"{at} {role}: {short}"]


def _summary_lines(fields: dict[str, Any]) -> list[str]:
    names = (
        "task_overview",
        "current_state",
        "important_discoveries",
        "next_steps",
        "context_to_preserve",
    )
    return [f"      {name}: {fields[name]}" for name in names if name in fields]


def _text(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return "\n".join(str(b.get("text", "")) for b in texts)
    return ""


def _body(msg: dict[str, Any]) -> str:
    """A message's content as readable text: text, tool calls, tool results, data."""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "thinking":
            parts.append(f"(thinking) {block.get('thinking', '')}")
        elif kind == "tool_call":
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            parts.append(f"→ call {block.get('name')} ({block.get('id')}): {arguments}")
        elif kind == "tool_result":
            error = " ERROR" if block.get("is_error") else ""
            output = block.get("output")
            if isinstance(output, list):
                output = _body({"content": output})
            parts.append(f"← result of {block.get('name')} ({block.get('id')}){error}:\n{output}")
        elif kind == "data":
            source = block.get("source") or {}
            where = source.get("url") or f"inline base64, {len(source.get('data', ''))} chars"
            parts.append(f"<data {source.get('media_type')}: {where}>")
    return "\n".join(parts)


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    more = len(line) > _SHORT or "\n" in text.strip()
    return line[:_SHORT] + (" …" if more else "")


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _ms(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "? ms"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"
