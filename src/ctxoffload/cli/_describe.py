"""How an event of the session record reads: the lines `show` prints for it, and `watch`.

One home for both commands, so that watching a session prints, as it happens, what `show`
prints afterwards. Each event's line is its record's sentence (`_disk/events.py`), the one
the `ctxoffload` logger and the viewer use too; only a message's text and a summary's fields
are laid out here.
"""

from __future__ import annotations

import json
from typing import Any

from .._disk.events import EventKind, ToolCall, record_of
from .._disk.layout import SUMMARY_MARK, mark_of
from .._disk.wording import first_line
from .._disk.writer import WRITER_FIELD
from ..text import message_lines

__all__ = [
    "NOT_BY_AGENT",
    "Repeats",
    "Timeline",
    "by_agent",
    "describe",
    "names_stored_files",
    "session_roots",
    "summary_fields",
    "summary_lines",
    "writer_text",
]

NOT_BY_AGENT = "no Agent or door began this record: it holds offloads and compressions only"
"""What `show` and `watch` say of a session whose record says neither that an Agent wrote
it nor which door (a `door` event says what each door records)."""


def session_roots(workspaces: tuple[str, ...], session: str) -> tuple[str, ...]:
    """A `Timeline`'s `root` for one session: its folder in each spelling of the workspace's
    (a file of the session is named relative to it, as `tool_result-call_1.txt`, so a line
    fits 80 columns however long the id), then the workspace's own (`data/...`)."""
    own = [f"{at.rstrip('/')}/sessions/{session}" for at in workspaces]
    return (*own, f"sessions/{session}", *workspaces)


def by_agent(event: dict[str, Any]) -> bool:
    """Whether the event says who wrote the session and what its record holds: an Agent's
    start, the fork it began as, or a door's run (`door`, whose sentence says what that
    door records); a record with none of them opens with `NOT_BY_AGENT`."""
    return event["kind"] in (EventKind.SESSION_START, EventKind.FORK, EventKind.DOOR)


def names_stored_files(event: dict[str, Any]) -> bool:
    """Whether the event says that the session's writer names each file it stores in its
    own lines (a truncation's, a compression's): an Agent's start or fork, or a door that
    projects what its host's model is sent. Then the workspace's own lines for those files
    (`tool_result`, `context`) repeat them, and are not printed. A door that only stores
    what its host hands it (deepagents' backend, Strands' storage, AgentScope's offloader)
    writes no other line for a file: the workspace's are its record."""
    kind = event["kind"]
    return kind in (EventKind.SESSION_START, EventKind.FORK) or (
        kind == EventKind.DOOR and event.get("projects") is True
    )


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


class Timeline:
    """The lines of a session's timeline, fed one event at a time, oldest first: what `show`
    prints, and what `watch` prints as the events are written.

    A Compressor logs each summary as a `summary` event just before its `compression`
    event, and an Agent then logs the summary message too. Each summary is printed once,
    under the line of its compression: as the message when one holds the same fields (with
    `full`, the whole message the model saw), otherwise from the event. So the event's lines
    are held (`holding`) until the event after the compression says which: `flush` prints
    what is held when no more events are coming, or none soon.

    Args:
        full: message bodies whole, and a failed tool's traceback.
        writers: end the first line of each event with who wrote it.
        by_agent: whether the record says who wrote the session (an Agent, a door: see
            `by_agent`); without it the timeline opens with `NOT_BY_AGENT`. May be set later.
        session: written after each time (see `describe`).
        names_files: whether the writer names the files it stores in its own lines
            (`names_stored_files`); default: `by_agent`. Set by the first event that says
            so.
        root: the workspace's folder (each spelling of it): a line naming a file in it
            names it relative to it (`sessions/run-42/tool_result-call_1.txt`).
        width: the columns a message's one line is cut to (0: its first 100 characters).
    """

    def __init__(
        self,
        *,
        full: bool = False,
        writers: bool = False,
        by_agent: bool = True,
        session: str | None = None,
        names_files: bool | None = None,
        root: tuple[str, ...] = (),
        width: int = 0,
    ) -> None:
        self.by_agent = by_agent
        self._width = width
        self.names_files = by_agent if names_files is None else names_files
        self._root = root
        self._full, self._writers, self._session = full, writers, session
        self._repeats = Repeats()
        self._started = False
        self._held: list[str] = []  # the lines of a summary event not printed yet
        self._held_event: dict[str, Any] | None = None
        self._held_fields: list[str] = []  # its fields, to know the message that logs it
        self._compressed = False  # the compression of the held summary is printed

    @property
    def holding(self) -> bool:
        """Whether the lines of a summary event wait for what comes next."""
        return bool(self._held)

    @property
    def compressed(self) -> bool:
        """Whether the compression of the summary held is printed: only a summary message
        that holds it can come next."""
        return bool(self._held) and self._compressed

    def add(self, event: dict[str, Any]) -> list[str]:
        """The lines to print for `event` (and for a summary held until now)."""
        return [line for _, lines in self.entries(event) for line in lines]

    def entries(self, event: dict[str, Any]) -> list[tuple[dict[str, Any] | None, list[str]]]:
        """What `add` prints, each part with the event it is the lines of (None: the
        sentence `NOT_BY_AGENT`, before the first event), for a reader that keeps them
        apart (the viewer)."""
        out: list[tuple[dict[str, Any] | None, list[str]]] = []
        if not self._started:
            self._started = True
            if not self.by_agent:
                out.append((None, [NOT_BY_AGENT]))
        kind = event["kind"]
        self.names_files = self.names_files or names_stored_files(event)
        if kind == EventKind.SUMMARY:
            out += self.flush_entries()  # an earlier summary no message held
            fields = summary_fields(event) or {}
            self._held = self._describe(event)
            self._held_event = event
            self._held_fields = summary_lines(fields)
            self._compressed = False
            return out
        if self._held:
            found = summary_fields(event)
            if found is not None and summary_lines(found) == self._held_fields:
                self._held = []  # the summary message logs it: printed there
        if self._repeats.again(event):
            return out
        lines = self._describe(event)
        if lines and self._held and self._compressed:
            out += self.flush_entries()
        if lines:
            out.append((event, lines))
        if kind == EventKind.COMPRESSION and self._held:
            self._compressed = True
        return out

    def flush(self) -> list[str]:
        """The lines held, to print now: no more events are coming (or none soon)."""
        return [line for _, lines in self.flush_entries() for line in lines]

    def flush_entries(self) -> list[tuple[dict[str, Any] | None, list[str]]]:
        """`flush`, with the event the lines are of (see `entries`)."""
        held, self._held = self._held, []
        return [(self._held_event, held)] if held else []

    def _describe(self, event: dict[str, Any]) -> list[str]:
        return describe(
            event,
            full=self._full,
            writers=self._writers,
            by_agent=self.names_files,
            session=self._session,
            root=self._root,
            width=self._width,
        )


def describe(
    event: dict[str, Any],
    *,
    full: bool = False,
    writers: bool = False,
    by_agent: bool = True,
    session: str | None = None,
    root: tuple[str, ...] = (),
    width: int = 0,
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
        session: written after the time of each line that has one (what `watch` prints,
            following several sessions); the lines that continue one (a summary's fields,
            a traceback) are the same as without it.
        root: the workspace's folder, in each spelling a reference may hold it (resolved,
            as given, a bucket's URI): in an event's own lines (not a message's text nor a
            summary's), a path into it is written relative to it, as
            `sessions/run-42/tool_result-call_1.txt`.
        width: the columns a message's one line is cut to (0: its first 100 characters).
    """
    at = _time_of(event) + (f" {session}" if session is not None else "")
    try:
        lines = _describe(event, at, full=full, by_agent=by_agent, root=root, width=width)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        # A line of JSON whose fields are not what this version writes: shown raw
        # rather than hidden, so nothing in the record is skipped silently.
        return [f"{at} {json.dumps(event)[:300]}"]
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


def _time_of(event: dict[str, Any]) -> str:
    """`HH:MM:SS` of the event's time (empty when it has none)."""
    return str(event.get("time", ""))[11:19]


def _relative(line: str, root: tuple[str, ...]) -> str:
    """`line` with each path into the workspace `root` written relative to it."""
    for folder in root:
        line = line.replace(folder.rstrip("/") + "/", "")
    return line


def _describe(
    event: dict[str, Any],
    at: str,
    *,
    full: bool,
    by_agent: bool,
    root: tuple[str, ...] = (),
    width: int = 0,
) -> list[str]:
    kind = event["kind"]
    if kind == EventKind.MESSAGE:
        message = event.get("message") or {}
        return _message_event(message, at, full=full, root=root, width=width)
    if kind == EventKind.SUMMARY:
        nested = event.get("summary")
        fields = nested if isinstance(nested, dict) else event
        return [f"{at}   summary:", *(_relative(t, root) for t in summary_lines(fields))]
    if kind == EventKind.ARTIFACTS or (by_agent and kind in _NAMED_BY_AGENT):
        # The artifact list a compression's line sums up (`artifacts: ... left`), and the
        # workspace's own line for a truncation or compression: shown there.
        return []
    record = record_of(event)
    indent = "   " if record.nested else " "
    # A note continues its event's line: indented under it.
    lines = [f"{at}{indent}{_relative(record.sentence(), root)}"]
    lines += [f"{at}{indent}  {_relative(note, root)}" for note in record.notes()]
    if full and isinstance(record, ToolCall):
        lines += ["      " + t for t in record.traceback()]
    return lines


def _message_event(
    msg: dict[str, Any], at: str, *, full: bool, root: tuple[str, ...] = (), width: int = 0
) -> list[str]:
    """The timeline's lines for a message the agent logged: its first line (the message's
    text as `text.message_lines` shows it), or with `full` all of it. A summary's fields
    name the workspace's files relative to it (`root`); with `full`, as the model saw
    them."""
    mark = mark_of(msg.get("metadata"))
    if mark is not None and mark.get("kind") == SUMMARY_MARK:
        fields = mark.get("summary")
        lines = [f"{at}   summary message {msg.get('id')}:"]
        if full:  # the message as the model saw it: the five fields are in it
            return lines + ["      " + t for t in _body(msg)]
        said = summary_lines(fields if isinstance(fields, dict) else {})
        return lines + [_relative(t, root) for t in said]
    role = msg.get("role")
    if not full and role in ("system", "tool"):
        return []
    body = _body(msg)
    if not full and role == "assistant" and (not body or body[0].startswith(_CALL)):
        return []  # only tool calls: the model_call line names them
    if full:
        return [f"{at} {role} ({msg.get('id')}):"] + ["    " + t for t in body]
    lead = f"{at} {role}: "
    if not width:
        return [lead + first_line(_opening(body))]
    # On one line within `width` (a preview; `--full` has it whole), cut after a word.
    limit = max(20, width - len(lead) - 2)
    text = _opening(body)
    short = first_line(text, limit)
    if len(text.split("\n", 1)[0]) > limit and " " in short[limit // 2 : -2]:
        short = short[:-2].rsplit(" ", 1)[0].rstrip(" ,;:") + " …"
    return [lead + short]


def _opening(body: list[str]) -> str:
    """A message's text with a first line that only heads the rest (`New task:`, which a
    smolagents agent puts above the task) joined to the line after it: the one line shown
    is then what the message says, not its heading and `…`."""
    text = "\n".join(body).strip()
    head, _, rest = text.partition("\n")
    if head.endswith(":") and len(head) <= 40 and rest.strip():
        return f"{head} {rest.lstrip()}"
    return text


# How `text.message_lines` begins the lines of a tool call.
_CALL = "-> tool call "


def _body(msg: dict[str, Any]) -> list[str]:
    """A message's lines as people and agents read them, without the `[role]` header."""
    return message_lines(msg)[1:]


def summary_lines(fields: dict[str, Any]) -> list[str]:
    """A summary's five fields, one under the other; a field of several lines goes on
    indented under its name (an extractive summary's lists), not back at the margin."""
    names = (
        "task_overview",
        "current_state",
        "important_discoveries",
        "next_steps",
        "context_to_preserve",
    )
    lines: list[str] = []
    for name in names:
        if name in fields:
            first, *rest = str(fields[name]).split("\n")
            lines.append(f"      {name}: {first}")
            lines += [f"        {line}" for line in rest]
    return lines
