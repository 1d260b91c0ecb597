"""A session's row in a list of sessions (`ls`, the viewer's list): read from its folder
or from a database's rows by the same code (`_read_row`), each sub-agent's session listed
under its parent's, and the newest session (`show` without a session)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from ..._disk.commit import JsonLines, iter_chunks
from ..._disk.events import EventKind, is_event
from ..._disk.layout import CONTEXT_FILE, EVENTS_FILE, SESSIONS_DIR, STATE_FILE, is_tool_result_name
from ..._disk.read import Folder
from ...exceptions import CliError
from .._access import (
    committed_end,
    hard_links_refused,
    open_in,
    read_json_lines,
    say_corrupt,
    session_ids,
)
from .._output import iso_time, shown
from ._reading import Warnings, own_files, read_folder

__all__ = [
    "LastActive",
    "SessionRow",
    "indented",
    "listing_order",
    "newest_session",
    "parent_of",
    "session_rows",
    "shown_fields",
    "stored_newest_session",
    "stored_session_rows",
]


@dataclass
class SessionRow:
    """One session as a list of sessions shows it (`ls`, the viewer's list). A figure whose
    file cannot be read is None, and the file is named in `unreadable` ("." for the folder).
    """

    session: str
    last_activity: str | None = None
    """The newest time a file of the session's own was changed (ISO 8601, UTC)."""
    steps: int | None = None
    """An agent's model calls, else those `ctxoffload replay` replayed, else state.json's."""
    messages: int | None = None
    """The messages of the session's conversation: those its record logged as they entered
    the context (an Agent, a door that projects), else the lines of context.jsonl (a
    workspace used on its own, a door that stores only what leaves)."""
    message_lines: int | None = None
    """The committed lines of context.jsonl: the messages moved out of the context."""
    tool_results: int | None = None
    bytes: int | None = None
    compressions: int | None = None
    parent: str | None = None
    """The session whose sub-agent started this one."""
    forked_from: str | None = None
    unreadable: list[str] = field(default_factory=list)
    depth: int = 0
    """How many parents above it are listed too (its place under them)."""
    activity: float = field(default=0.0, repr=False)
    """`last_activity` to the clock's precision: what orders the list (not shown)."""


def session_rows(workdir: str, warnings: Warnings, *, newest_first: bool) -> list[SessionRow]:
    """Every session's row, each sub-agent's session right under its parent's (`depth`);
    at each level the most recently active first, or (`newest_first=False`) by id."""
    rows = [_session_row(workdir, session, warnings) for session in session_ids(workdir)]
    return _ordered(rows, newest_first)


def stored_session_rows(store: Any, warnings: Warnings, *, newest_first: bool) -> list[SessionRow]:
    """`session_rows` of a workspace in a database (a `SqlWorkspace`), read from its rows
    with a few queries (`SqlWorkspace.session_facts`) instead of a copy in the on-disk
    layout; each row as the copy's would be, made by the same code (`_read_row`).

    Raises:
        CliError: the database cannot be read.
    """

    def reduce(raw: bytes) -> tuple[dict[str, Any], list[int]]:
        lines = JsonLines.of_bytes(raw)
        return _event_facts(value for _, value in lines), lines.corrupt

    found = _stored_facts(store, (EVENTS_FILE,), reduce, (STATE_FILE,))
    rows = []
    for facts in found:
        row = SessionRow(facts.session)
        folder = f"{store.url}/{SESSIONS_DIR}/{facts.session}"
        _read_row(_StoredFacts(facts, folder), row, warnings, "")
        rows.append(row)
    return _ordered(rows, newest_first)


def _stored_facts(
    store: Any, logs: tuple[str, ...], reduce: Callable[[bytes], Any], small: tuple[str, ...] = ()
) -> list[Any]:
    """`SqlWorkspace.session_facts`, its errors as CliError."""
    import asyncio

    from ...exceptions import ConfigError, OffloadError

    try:
        return cast("list[Any]", asyncio.run(store.session_facts(logs, small, reduce)))
    except (OffloadError, ConfigError) as exc:
        raise CliError(str(exc)) from None


class _Listed(Protocol):
    """What orders a session in a list of sessions: a `SessionRow` (`ls`), a `SessionStats`
    (`stats`)."""

    session: str
    last_activity: str | None
    activity: float
    parent: str | None
    depth: int


_Row = TypeVar("_Row", bound=_Listed)


def _ordered(rows: list[_Row], newest_first: bool) -> list[_Row]:
    if newest_first:
        # The latest to the clock's precision, of two as recent the greater id: the order
        # `newest_session` picks by (what `show` opens is the first `ls` lists).
        rows.sort(key=lambda r: (r.activity, r.session), reverse=True)
    return _grouped(rows)


def shown_fields(row: Any) -> dict[str, Any]:
    """A `SessionRow`'s or `SessionStats`'s fields as `--json` and the viewer show them: all
    but `activity`, which only orders the list."""
    import dataclasses

    fields = dataclasses.asdict(row)
    del fields["activity"]
    return fields


def indented(session: str, depth: int) -> str:
    """A session's name as a list shows it: a sub-agent's indented under its parent, `└ `."""
    return "  " * depth + ("└ " if depth else "") + session


def listing_order(rows: list[_Row]) -> list[_Row]:
    """Sessions in the order `ls` lists them: the most recently active first, each
    sub-agent's session right under its parent's (`depth` set)."""
    return _ordered(list(rows), newest_first=True)


def _session_row(workdir: str, session: str, warnings: Warnings) -> SessionRow:
    """One session's row, read from its files."""
    row = SessionRow(session)
    then = f"session {session} is shown without it"
    if not read_folder(
        workdir,
        session,
        lambda folder: _read_row(_FolderFacts(folder, warnings), row, warnings, then),
        warnings,
        f"session {session} is shown as unreadable",
    ):
        row.unreadable.append(".")
    row.unreadable = list(dict.fromkeys(row.unreadable))  # each file once
    return row


class _RowFacts(Protocol):
    """Where a session's row is read from: its folder (`_FolderFacts`) or a database's rows
    (`_StoredFacts`). Each read that fails raises CliError, and `_read_row` says it."""

    def path(self, name: str) -> str:
        """The file `name` as a message names it."""

    def files(self, refused: Callable[[str, int], None]) -> Iterator[tuple[str, int, float]]:
        """The session's own files: name, size, last change; one refused (hard-linked) is
        given to `refused` with its links instead."""

    def events(self) -> dict[str, Any]:
        """`_event_facts` of events.jsonl (a line that is not JSON said on stderr)."""

    def state(self) -> list[Any]:
        """The JSON values of state.json."""

    def newlines(self, name: str) -> int:
        """The committed newlines of the log `name`; 0 when there is none."""


class _FolderFacts:
    """A session's row read from its folder."""

    def __init__(self, folder: Folder, warnings: Warnings) -> None:
        self.folder = folder
        self.command = warnings.command

    def path(self, name: str) -> str:
        return self.folder.path(name)

    def files(self, refused: Callable[[str, int], None]) -> Iterator[tuple[str, int, float]]:
        for name, st in own_files(self.folder, lambda name, hard: refused(name, hard.links)):
            yield name, st.st_size, st.st_mtime

    def events(self) -> dict[str, Any]:
        found, _ = read_json_lines(
            self.folder, EVENTS_FILE, command=self.command, consume=_event_facts
        )
        return cast("dict[str, Any]", found)

    def state(self) -> list[Any]:
        found, _ = read_json_lines(self.folder, STATE_FILE, command=self.command)
        return cast("list[Any]", found)

    def newlines(self, name: str) -> int:
        return _committed_newlines(self.folder, name)


class _StoredFacts:
    """A session's row read from a database's rows (`SqlWorkspace.session_facts`): what a
    copy in the on-disk layout would hold, every file changed at the session's last write."""

    def __init__(self, facts: Any, folder: str) -> None:
        self.facts = facts
        self.folder = folder
        self.command = "ls"

    def path(self, name: str) -> str:
        return f"{self.folder}/{name}"

    def files(self, refused: Callable[[str, int], None]) -> Iterator[tuple[str, int, float]]:
        for name, size in sorted(self.facts.sizes.items()):
            yield name, size, self.facts.updated

    def events(self) -> dict[str, Any]:
        if EVENTS_FILE not in self.facts.reduced:
            return _event_facts(())
        found, bad = self.facts.reduced[EVENTS_FILE]
        say_corrupt(self.command, self.path(EVENTS_FILE), bad)
        return cast("dict[str, Any]", found)

    def state(self) -> list[Any]:
        raw = self.facts.bodies.get(STATE_FILE, b"")
        lines = JsonLines.of_bytes(raw)
        found = [value for _, value in lines]
        say_corrupt(self.command, self.path(STATE_FILE), lines.corrupt)
        return found

    def newlines(self, name: str) -> int:
        return int(self.facts.newlines.get(name, 0))


def _read_row(source: _RowFacts, row: SessionRow, warnings: Warnings, then: str) -> None:
    """Fill `row` from `source`: the one place a row's figures are made."""
    last = 0.0
    size = 0
    tool_results = 0
    logged = False  # a context.jsonl: a store's session (Haystack's, Strands') keeps none

    def refused(name: str, links: int) -> None:
        warnings.say(source.path(name), hard_links_refused(source.path(name), links), then)
        row.unreadable.append(name)

    for name, st_size, modified in source.files(refused):
        last = max(last, modified)
        size += st_size
        tool_results += is_tool_result_name(name)
        logged = logged or name == CONTEXT_FILE
    row.last_activity = iso_time(last) if last else None
    row.activity = last
    row.bytes = size
    row.tool_results = tool_results
    try:
        counted: dict[str, Any] | None = source.events()
    except CliError as exc:
        warnings.say(source.path(EVENTS_FILE), str(exc), then)
        counted = None
    if counted is None:
        row.unreadable.append(EVENTS_FILE)
    else:
        row.compressions = counted["compressions"]
        row.parent = counted["parent"]
        row.forked_from = counted["forked_from"]
        # An agent's model calls, or those `ctxoffload replay` replayed (it says how many).
        row.steps = counted["model_calls"] or counted["replayed"] or None
        row.messages = counted["messages"] or None
        if counted["last_event"]:
            row.activity = counted["last_event"]
            row.last_activity = iso_time(row.activity)
    if row.steps is None:
        try:
            rows: list[Any] | None = source.state()
        except CliError as exc:
            warnings.say(source.path(STATE_FILE), str(exc), then)
            rows = None
        if rows is None:
            row.unreadable.append(STATE_FILE)
        state = next(iter(rows or []), None)
        if isinstance(state, dict) and isinstance(state.get("steps"), int):
            row.steps = state["steps"]
    try:
        row.message_lines = source.newlines(CONTEXT_FILE)
    except CliError as exc:
        warnings.say(source.path(CONTEXT_FILE), str(exc), then)
        row.unreadable.append(CONTEXT_FILE)
    if row.messages is None and counted is not None and logged:
        row.messages = row.message_lines


def _event_facts(events: Iterable[Any]) -> dict[str, Any]:
    """What a row shows of a session's events, counted in one pass (one line in memory at a
    time): compressions, the steps of the model calls (a retry is no step more), the
    messages logged as they entered the context, the model calls `replay` says it replayed,
    and the session a sub-agent's session was started by (`parent`) or a fork was made
    from."""
    facts: dict[str, Any] = {
        "compressions": 0,
        "model_calls": 0,
        "messages": 0,
        "replayed": 0,
        "parent": None,
        "forked_from": None,
        "last_event": 0.0,
    }
    seen: set[int] = set()
    steps: set[int] = set()
    last = LastActive()
    for event in events:
        if not is_event(event):
            continue
        kind = event.get("kind")
        last.see(event)
        facts["compressions"] += kind == EventKind.COMPRESSION
        if kind == EventKind.MODEL_CALL:
            # Steps, as `show` numbers them: a retry, or a host reading the same history
            # again (a LlamaIndex memory), is the same step, not one more.
            step = event.get("step")
            steps.add(step if isinstance(step, int) else -len(steps) - 1)
        if kind == EventKind.MESSAGE:
            # Once per message: an Agent logs a message again when it changed under its id
            # (an older one, every message it restored). The ids' hashes are kept, not the
            # ids: a number per message in memory instead of its id.
            message = event.get("message")
            named = message.get("id") if isinstance(message, dict) else None
            if not isinstance(named, str):
                facts["messages"] += 1
            elif hash(named) not in seen:
                seen.add(hash(named))
                facts["messages"] += 1
        if kind == EventKind.REPLAY and isinstance(event.get("model_calls"), int):
            facts["replayed"] += event["model_calls"]
        if facts["parent"] is None:
            facts["parent"] = parent_of(event)
        origin = event.get("origin") if kind == EventKind.FORK else None
        if facts["forked_from"] is None and isinstance(origin, dict):
            facts["forked_from"] = _session_name(origin.get("session"))
    facts["model_calls"] = len(steps)
    facts["last_event"] = last.time
    return facts


def _session_name(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def event_time(event: dict[str, Any]) -> float:
    """When `event` was recorded, in seconds since the epoch; 0.0 when its `time` is missing
    or no ISO 8601 time.

    A session's last activity is the time of its last event (the last in the file that has
    one) where it has events: the record's own clock, which a copy, an `export` and an
    `import` keep, where the files' times are those of the copy (a session imported into
    SQLite would otherwise list as written when it was imported). `ls`, `stats` and the
    session `show` opens when none is named (`newest_session`) go by it alike."""
    from datetime import datetime

    stamp = event.get("time")
    try:
        return datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) else 0.0
    except ValueError:
        return 0.0


def has_time(event: dict[str, Any]) -> bool:
    """Whether `event` says when it was recorded (the events a session's last activity is
    taken from: `LastActive`)."""
    return isinstance(event.get("time"), str)


class LastActive:
    """When a session was last active, from its events seen in order: `event_time` of the
    last that has a time (0.0 before any). One rule for `ls`, `stats` and `show` alike."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[str, Any] | None = None

    def see(self, event: dict[str, Any]) -> None:
        if has_time(event):
            self._last = event

    @property
    def time(self) -> float:
        return event_time(self._last) if self._last is not None else 0.0


def parent_of(event: dict[str, Any]) -> str | None:
    """The session that started this one as a sub-agent, if `event` is the start that says
    so (our Agent's `session_start`, a door's `door` event of a nested run)."""
    starts = (EventKind.SESSION_START, EventKind.DOOR)
    link = event.get("parent") if event.get("kind") in starts else None
    return _session_name(link.get("session")) if isinstance(link, dict) else None


def _committed_newlines(folder: Folder, name: str) -> int:
    """The newlines of a file of a session folder; 0 when it is not a file of the workspace.

    Of a log with a commit record (`context.jsonl.commit`), only the committed part counts:
    lines past it are a batch never committed, which readers skip.

    Raises:
        CliError: it is hard-linked or cannot be read.
    """
    opened = open_in(folder, name)
    if opened is None:
        return 0
    fd, st = opened
    try:
        end = committed_end(folder, name, fd, st.st_size)
        return sum(chunk.count(b"\n") for chunk in iter_chunks(fd, 0, end))
    except OSError as exc:
        raise CliError(f"cannot read {shown(folder.path(name))}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def newest_session(workdir: str) -> tuple[str | None, int]:
    """The session with the latest activity, as `ls` sorts them (its last event's time,
    `event_time`, else the newest time a file of its own was changed), and how many sessions
    there are."""
    sessions = session_ids(workdir)

    def activity() -> Iterator[tuple[float, str]]:
        for session in sessions:
            try:
                with Folder(workdir, SESSIONS_DIR, session) as folder:
                    when = _last_event_time(folder) or max(
                        (st.st_mtime for _, st in own_files(folder)), default=0.0
                    )
                    yield when, session
            except (OSError, CliError):  # gone, or cannot be read: no activity to compare
                continue

    return _newest(activity()), len(sessions)


def _last_event_time(folder: Folder) -> float:
    """`event_time` of the last event of a session's events.jsonl with a time, read from
    the file's end (a longer stretch of it each time none is found); 0.0 when none has one.

    Raises:
        CliError: the file is hard-linked or cannot be opened (as `ls` says it).
    """
    import json

    opened = open_in(folder, EVENTS_FILE)
    if opened is None:
        return 0.0
    fd, st = opened
    try:
        span = 1 << 16
        while True:
            start = max(0, st.st_size - span)
            lines = os.pread(fd, st.st_size - start, start).split(b"\n")
            for line in reversed(lines[1:] if start else lines):  # (the first may be cut)
                try:
                    event = json.loads(line)
                except ValueError:  # a torn last line, a corrupt one: skipped, as ls does
                    continue
                if is_event(event) and has_time(event):
                    return event_time(event)
            if not start:
                return 0.0
            span *= 4
    finally:
        os.close(fd)


def stored_newest_session(store: Any) -> tuple[str | None, int]:
    """`newest_session` of a workspace in a database, read from its rows (as
    `stored_session_rows`), so that `show` copies the one session it shows.

    Raises:
        CliError: the database cannot be read.
    """

    def last_event(raw: bytes) -> float:
        last = LastActive()
        for _, event in JsonLines.of_bytes(raw):
            if is_event(event):
                last.see(event)
        return last.time

    found = _stored_facts(store, (EVENTS_FILE,), last_event)

    def when(facts: Any) -> float:
        reduced = facts.reduced.get(EVENTS_FILE)
        return (reduced if isinstance(reduced, float) else 0.0) or facts.updated

    return _newest((when(f), f.session) for f in found), len(found)


def _newest(activity: Iterable[tuple[float, str]]) -> str | None:
    """The session of the latest (time, session): of two as recent, the greater id."""
    newest = max(activity, default=None)
    return newest[1] if newest is not None else None


def _grouped(rows: list[_Row]) -> list[_Row]:
    """The rows with each sub-agent's session right under its parent's (each level in the
    order given), `depth` set on each; a session whose parent is not listed stays at the
    top."""
    listed = {r.session for r in rows}
    children: dict[str, list[_Row]] = {}
    top: list[_Row] = []
    for row in rows:
        if row.parent in listed and row.parent != row.session:
            children.setdefault(row.parent, []).append(row)
        else:
            top.append(row)
    ordered: list[_Row] = []
    seen: set[str] = set()
    # Depth first with a stack, not recursion: sub-agents of sub-agents make chains of any
    # length (1,200 levels ended in RecursionError).
    for root in top + rows:  # then the rows only reachable through a loop of parents
        stack = [(root, 0)]
        while stack:
            row, depth = stack.pop()
            if row.session in seen:
                continue  # a loop of parents (hand-edited records): each row once
            seen.add(row.session)
            ordered.append(dataclasses.replace(row, depth=depth))  # type: ignore[type-var]
            stack.extend((child, depth + 1) for child in reversed(children.get(row.session, [])))
    return ordered
