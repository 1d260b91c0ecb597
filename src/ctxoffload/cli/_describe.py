"""How an event of the session record reads: the lines `show` prints for it, and `watch`.

One home for both commands, so that watching a session prints, as it happens, what `show`
prints afterwards. The sentences of the kinds every reader shares (pins, clearings, forks,
sub-agents, offloads, ...) come from the workspace (`context_event_sentence`), which the
INFO log uses too.
"""

from __future__ import annotations

import json
from typing import Any

from ..text import message_lines
from ..workspace import (
    SUMMARY_MARK,
    WRITER_FIELD,
    EventKind,
    context_event_sentence,
    fidelity_sentence,
    mark_of,
    token_change,
)

__all__ = [
    "NOT_BY_AGENT",
    "Repeats",
    "describe",
    "summary_fields",
    "summary_lines",
    "writer_text",
]

NOT_BY_AGENT = (
    "no session_start: this session was not written by ctxoffload's Agent (a workspace used "
    "on its own, or the AgentScope or Strands adapter), so the record holds the offloads, "
    "compressions and their configuration but no model calls, messages or tool calls; "
    "--step needs model calls"
)
"""What `show` and `watch` say of a session without an Agent's record."""

_SHORT = 100  # characters of a message body shown without --full
_NAMED_BY_AGENT = frozenset({EventKind.TOOL_RESULT, EventKind.CONTEXT})


class Repeats:
    """The `message` events shown already. A resumed agent (of an older version) recorded the
    messages it restored again: each is shown once, when it first entered the context, and
    again only if it changed under its id."""

    def __init__(self) -> None:
        self._shown: dict[str, int] = {}

    def again(self, event: dict[str, Any]) -> bool:
        """Whether `event` records a message as it was shown already (then skip it)."""
        message = event.get("message") if event.get("kind") == EventKind.MESSAGE else None
        if not isinstance(message, dict) or not isinstance(message.get("id"), str):
            return False
        digest = hash(json.dumps(message, sort_keys=True, default=str))
        if self._shown.get(message["id"]) == digest:
            return True
        self._shown[message["id"]] = digest
        return False


def describe(
    event: dict[str, Any], *, full: bool = False, writers: bool = False, by_agent: bool = True
) -> list[str]:
    """The lines printed for one event: the first begins with its time (`HH:MM:SS`).

    Args:
        event: the event as read from events.jsonl.
        full: message bodies whole, and a failed tool's traceback.
        writers: end the first line with who wrote the event.
        by_agent: the session was written by an `Agent`, whose truncation and compression
            lines name the files the workspace's own `tool_result` and `context` events
            describe; without one (a workspace used on its own, a framework adapter), those
            events are the record and are printed.
    """
    try:
        lines = _describe(event, full=full, by_agent=by_agent)
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


def summary_fields(event: dict[str, Any]) -> dict[str, Any] | None:
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


def _describe(event: dict[str, Any], *, full: bool, by_agent: bool) -> list[str]:
    kind = event["kind"]
    at = str(event.get("time", ""))[11:19]
    restored = event.get("restored_messages") if kind == EventKind.SESSION_START else None
    if isinstance(restored, int) and restored > 0 and not isinstance(event.get("parent"), dict):
        return [
            f"{at} resumed at step {_n(event.get('first_step'))}: {_n(restored)} messages "
            f"restored (agent {event.get('agent')}, model: {event.get('model')}, window "
            f"{_n(event.get('context_window'))} tokens)"
        ]
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
        shown_lines = event.get("lines_shown")
        of = (
            f", {_n(shown_lines)} of {_n(event.get('lines_total'))} lines shown"
            if isinstance(shown_lines, int)
            else ""
        )
        return [
            f"{at}   truncated {event.get('tool_name') or event.get('tool') or 'a tool result'} "
            f"{token_change(event)}{of}; whole output in "
            f"{event.get('reference') or 'nowhere (no offloader)'}"
        ]
    if kind == EventKind.COMPRESSION:
        span = event.get("lines")
        where = str(event.get("reference") or "nowhere (no offloader)")
        if isinstance(span, list) and len(span) == 2:
            where += f" lines {span[0]}-{span[1]}"
        fidelity = fidelity_sentence(event)
        count = event.get("messages")
        what = f"{_n(count)} messages" if isinstance(count, int) else "history"
        kept = event.get("kept")
        also = f", {_n(kept)} kept" if isinstance(kept, int) else ""
        return [
            f"{at} compressed {what}, "
            f"{token_change(event)}, into "
            f"{where} ({_summary_by(event)}{also})",
            *([f"{at}   {fidelity}"] if fidelity else []),
        ]
    if kind == EventKind.SUMMARY:
        nested = event.get("summary")
        fields = nested if isinstance(nested, dict) else event
        return [f"{at}   summary:", *summary_lines(fields)]
    if kind == EventKind.ARTIFACTS or (by_agent and kind in _NAMED_BY_AGENT):
        # The artifact list a compression's line sums up (`artifacts: ... left`), and the
        # workspace's own line for a truncation or compression: shown there.
        return []
    sentence = context_event_sentence(event)
    return [f"{at} {sentence or kind}"]


def _summary_by(event: dict[str, Any]) -> str:
    """`summary by scripted (gpt-4o-mini)`, `model summary`, `extractive summary`."""
    by = event.get("summary_model")
    if by:
        return f"summary by {by}"
    source = event.get("summary_source")
    return f"{source} summary" if source else "summary"


def _message_event(msg: dict[str, Any], at: str, *, full: bool) -> list[str]:
    """The timeline's lines for a message the agent logged: its first line (the message's
    text as `text.message_lines` shows it), or with `full` all of it."""
    mark = mark_of(msg.get("metadata"))
    if mark is not None and mark.get("kind") == SUMMARY_MARK:
        fields = mark.get("summary")
        lines = [f"{at}   summary message {msg.get('id')}:"]
        if full:  # the message as the model saw it: the five fields are in it
            return lines + ["      " + t for t in _body(msg)]
        return lines + summary_lines(fields if isinstance(fields, dict) else {})
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


def summary_lines(fields: dict[str, Any]) -> list[str]:
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
    """A figure with thousands separators; `?` for one the event does not hold."""
    if value is None:
        return "?"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _ms(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "? ms"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"
