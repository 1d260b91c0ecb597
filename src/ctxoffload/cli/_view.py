"""What a session looks like to a person, read once from the workspace files: its row in a
list of sessions (`ls`, the viewer's list), its events as a stream and the messages the model
was sent at one step (`show`, the viewer's timeline and step view), its figures (`stats`).

The commands and the viewer (`cli/ui/`) present these; none of them reads a session by
itself, so `ls` and the viewer cannot disagree about a session, nor `show` and the viewer
about a step. Every read goes through the disk core's reader (`Folder`, `JsonLines`); a file
that cannot be read is said once on stderr (`Warnings`) and what it would tell is None.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from .._disk.commit import JsonLines, iter_chunks
from .._disk.events import EventKind, is_event
from .._disk.layout import (
    CONTEXT_FILE,
    DATA_DIR,
    DATA_REFERENCE_BYTES,
    EVENTS_FILE,
    SESSIONS_DIR,
    STATE_FILE,
    is_tool_result_name,
)
from .._disk.paths import hard_linked
from .._disk.read import Folder, Refused
from ..exceptions import CliError
from ._access import (
    committed_end,
    hard_links_refused,
    open_in,
    read_json_lines,
    say_corrupt,
    session_ids,
)
from ._arguments import EXIT_PROBLEMS, EXIT_USAGE
from ._output import iso_time, shown

__all__ = [
    "SessionLog",
    "SessionRow",
    "SessionStats",
    "Warnings",
    "dedup_savings",
    "indented",
    "listing_order",
    "newest_session",
    "session_rows",
    "session_stats",
    "step_messages",
    "stored_newest_session",
    "stored_session_rows",
]


class Warnings:
    """The warnings of one command run: one line on stderr per file that cannot be read."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.said: set[str] = set()

    def say(self, path: str, why: str, then: str) -> None:
        """Say `why` once for `path`, and what the command does about it (`then`)."""
        if path in self.said:
            return
        self.said.add(path)
        named = (why if path in why else f"{path}: {why}").replace(path, shown(path))
        print(f"ctxoffload {self.command}: warning: {named}; {then}", file=sys.stderr)

    def folder(self, folder: str, exc: OSError, then: str) -> None:
        """Say once that the session folder `folder` cannot be listed."""
        cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
        self.say(folder, f"cannot read the folder {folder}: {cause.strerror or cause}", then)


def _read_logged(
    folder: Folder,
    name: str,
    warnings: Warnings,
    then: str,
    consume: Callable[[Iterable[Any]], Any] = list,
) -> Any | None:
    """What `consume` makes of the JSON values of a log of a session folder (read as a
    stream: `read_json_lines`), or None (said once on stderr) if it cannot be read: a
    hard-linked file, or one it has no permission to read."""
    try:
        result, _ = read_json_lines(folder, name, command=warnings.command, consume=consume)
        return result
    except CliError as exc:
        warnings.say(folder.path(name), str(exc), then)
    return None


# -- a session's row in a list of sessions ----------------------------------------------------


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

    from ..exceptions import ConfigError, OffloadError

    try:
        return cast("list[Any]", asyncio.run(store.session_facts(logs, small, reduce)))
    except (OffloadError, ConfigError) as exc:
        raise CliError(str(exc)) from None


class _Listed(Protocol):
    """What orders a session in a list of sessions: a `SessionRow` (`ls`), a `SessionStats`
    (`stats`)."""

    session: str
    last_activity: str | None
    parent: str | None
    depth: int


_Row = TypeVar("_Row", bound=_Listed)


def _ordered(rows: list[_Row], newest_first: bool) -> list[_Row]:
    if newest_first:
        rows.sort(key=lambda r: r.last_activity or "", reverse=True)
    return _grouped(rows)


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
    if not _read_folder(
        workdir,
        session,
        lambda folder: _read_row(_FolderFacts(folder, warnings), row, warnings, then),
        warnings,
        f"session {session} is shown as unreadable",
    ):
        row.unreadable.append(".")
    row.unreadable = list(dict.fromkeys(row.unreadable))  # each file once
    return row


def _read_folder(
    workdir: str, session: str, read: Callable[[Folder], None], warnings: Warnings, then: str
) -> bool:
    """`read` the session's folder; False (said once, with what is done about it: `then`)
    when it cannot be listed. A folder removed since the sessions were listed (gc) reads as
    empty."""
    try:
        with Folder(workdir, SESSIONS_DIR, session) as folder:
            read(folder)
    except FileNotFoundError:
        pass
    except OSError as exc:  # Refused and OffloadError too: a folder that cannot be listed
        warnings.folder(os.path.join(workdir, SESSIONS_DIR, session), exc, then)
        return False
    return True


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
        for name, st in _own_files(self.folder, lambda name, hard: refused(name, hard.links)):
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

    def refused(name: str, links: int) -> None:
        warnings.say(source.path(name), hard_links_refused(source.path(name), links), then)
        row.unreadable.append(name)

    for name, st_size, modified in source.files(refused):
        last = max(last, modified)
        size += st_size
        tool_results += is_tool_result_name(name)
    row.last_activity = iso_time(last) if last else None
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
    if row.messages is None and counted is not None:
        row.messages = row.message_lines


def _event_facts(events: Iterable[Any]) -> dict[str, Any]:
    """What a row shows of a session's events, counted in one pass (one line in memory at a
    time): compressions, model calls, the messages logged as they entered the context, the
    model calls `replay` says it replayed, and the session a sub-agent's session was started
    by (`parent`) or a fork was made from."""
    facts: dict[str, Any] = {
        "compressions": 0,
        "model_calls": 0,
        "messages": 0,
        "replayed": 0,
        "parent": None,
        "forked_from": None,
    }
    seen: set[int] = set()
    for event in events:
        if not is_event(event):
            continue
        kind = event.get("kind")
        facts["compressions"] += kind == EventKind.COMPRESSION
        facts["model_calls"] += kind == EventKind.MODEL_CALL
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
            facts["parent"] = _parent_of(event)
        origin = event.get("origin") if kind == EventKind.FORK else None
        if facts["forked_from"] is None and isinstance(origin, dict):
            facts["forked_from"] = _session_name(origin.get("session"))
    return facts


def _session_name(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _parent_of(event: dict[str, Any]) -> str | None:
    """The session that started this one as a sub-agent, if `event` is the start that says
    so."""
    link = event.get("parent") if event.get("kind") == EventKind.SESSION_START else None
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


def _own_files(
    folder: Folder, refused: Callable[[str, Refused], None] | None = None
) -> Iterator[tuple[str, os.stat_result]]:
    """The session's own files, each with its `stat`: regular files with one link. One with
    other links (perhaps another name of a file outside the workspace: neither its size nor
    its time is the session's) is given to `refused` instead, with its refusal."""
    for name in folder.names():
        try:
            st = folder.stat(name)  # a second link is looked at again for a moment
        except FileNotFoundError:
            continue  # gone meanwhile (a temporary name)
        if not stat.S_ISREG(st.st_mode):
            continue  # a folder, a link, a FIFO: not a file of the session
        hard = hard_linked(st, folder.path(name))
        if hard is not None:
            if refused is not None:
                refused(name, hard)
            continue
        yield name, st


def newest_session(workdir: str) -> tuple[str | None, int]:
    """The session with the latest activity (as `ls` sorts them: the newest time a file of
    its own was changed), and how many sessions there are."""
    sessions = session_ids(workdir)

    def activity() -> Iterator[tuple[float, str]]:
        for session in sessions:
            try:
                with Folder(workdir, SESSIONS_DIR, session) as folder:
                    yield max((st.st_mtime for _, st in _own_files(folder)), default=0.0), session
            except OSError:  # gone, or cannot be listed: no activity to compare
                continue

    return _newest(activity()), len(sessions)


def stored_newest_session(store: Any) -> tuple[str | None, int]:
    """`newest_session` of a workspace in a database, read from its rows (as
    `stored_session_rows`), so that `show` copies the one session it shows.

    Raises:
        CliError: the database cannot be read.
    """
    found = _stored_facts(store, (), bytes)
    return _newest((f.updated, f.session) for f in found), len(found)


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


# -- a session's events and its steps ----------------------------------------------------------


class SessionLog:
    """The session's events.jsonl, read as a stream through the workspace's reader, as many
    times as the reader needs: memory holds one line at a time (the longest line bounds
    it), never the whole log. Each pass stops where the log ended when it was opened, so an
    agent still writing does not make two passes disagree.

    A torn last line (a write in progress) is skipped silently. A line that is not JSON, or
    JSON that is not an event (an object with a kind), is skipped and counted (`corrupt`,
    `odd`), and `warn` says so once on stderr.

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

    def warn(self, command: str) -> bool:
        """Say what the last whole pass skipped, once, as `command`; whether anything was."""
        bad, odd = self.corrupt, self.odd
        if bad:
            print(
                f"ctxoffload {command}: warning: {shown(self.path)} line {bad[0]} is not "
                "valid JSON"
                + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
                + ": skipped; `ctxoffload verify` checks the workspace",
                file=sys.stderr,
            )
        if odd:
            print(
                f"ctxoffload {command}: warning: {shown(self.path)}: {odd:,} JSON "
                f"line{' is' if odd == 1 else 's are'} not an event (an object with a kind): "
                "skipped; `ctxoffload verify` checks the workspace",
                file=sys.stderr,
            )
        return bool(bad or odd)


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


# -- a session's figures -------------------------------------------------------------------


@dataclass
class SessionStats:
    """What ctxoffload saved in one session (`stats`). A figure read from events.jsonl is
    None when that file cannot be read; each file not read is named in `unreadable`."""

    session: str
    last_activity: str | None = None
    """The newest time a file of the session's own was changed (ISO 8601, UTC), as `ls`."""
    parent: str | None = None
    """The session whose sub-agent started this one."""
    depth: int = 0
    """Its place under the parents listed too (`listing_order`)."""
    bytes_offloaded: int | None = None
    tokens_kept_out: int | None = None
    truncations: int | None = None
    compressions: int | None = None
    summaries: dict[str, int] | None = None
    """Compressions by the source of their summary (a model, extractive, ...)."""
    artifacts: dict[str, int] | None = None
    """The compressions' fidelity reports, added up."""
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    unreadable: list[str] = field(default_factory=list)
    data_references: int = 0
    data_files: int = 0
    dedup_saved_bytes: int = 0


def session_stats(
    workdir: str, session: str, warnings: Warnings
) -> tuple[SessionStats, Counter[str]]:
    """One session's figures, and the data/ references its files make (to add up the
    bytes the workspace saves by storing each payload once)."""
    stats = SessionStats(session)
    references: Counter[str] = Counter()
    if not _read_folder(
        workdir,
        session,
        lambda folder: _read_stats(folder, stats, references, warnings),
        warnings,
        f"session {session} is counted as unreadable",
    ):
        stats.unreadable.append(".")
    saved = dedup_savings(references, workdir)
    stats.data_references, stats.data_files, stats.dedup_saved_bytes = saved
    return stats, references


def _read_stats(
    folder: Folder, stats: SessionStats, references: Counter[str], warnings: Warnings
) -> None:
    then = f"session {stats.session} is counted without it"
    last = max((st.st_mtime for _, st in _own_files(folder)), default=0.0)
    stats.last_activity = iso_time(last) if last else None
    counts = _read_logged(folder, EVENTS_FILE, warnings, then, _event_counts)
    if counts is None:
        stats.unreadable.append(EVENTS_FILE)
    else:
        for name, value in counts.items():
            setattr(stats, name, value)
    for name in folder.names():
        try:
            opened = open_in(folder, name)
            if opened is None:
                continue  # a folder, a link, a FIFO: not a file of the session
            fd, _ = opened
            with os.fdopen(fd, "rb") as f:
                for line in f:
                    references.update(m.decode() for m in DATA_REFERENCE_BYTES.findall(line))
            continue
        except CliError as exc:
            why = str(exc)
        except OSError as exc:  # a read that failed after the open (EIO)
            why = f"cannot read {shown(folder.path(name))}: {exc.strerror or exc}"
        warnings.say(folder.path(name), why, then)
        if name not in stats.unreadable:
            stats.unreadable.append(name)


# The events whose tokens before and after say how much left the context.
_TOKENS_KEPT_OUT = (EventKind.TRUNCATION, EventKind.OFFLOAD, EventKind.COMPRESSION)


def _event_counts(events: Iterable[Any]) -> dict[str, Any]:
    """A session's figures from its events, counted in one pass (one line in memory)."""
    offloaded = tokens_out = compressions = truncations = 0
    sources: Counter[str] = Counter()
    artifacts: Counter[str] = Counter()
    reported = cached = 0
    parent: str | None = None
    for event in events:
        if not is_event(event):
            continue
        kind = event.get("kind")
        parent = parent or _parent_of(event)
        if kind in (EventKind.TOOL_RESULT, EventKind.CONTEXT) and isinstance(
            event.get("bytes"), int
        ):
            offloaded += event["bytes"]
        before, after = event.get("tokens_before"), event.get("tokens_after")
        # A pipeline's ToolOutputOffload writes `offload` events, its SlidingWindow `window`
        # ones: a tool result cut, and history moved out, as the compressor's own events are.
        if kind in _TOKENS_KEPT_OUT and isinstance(before, int):
            tokens_out += max(0, before - (after if isinstance(after, int) else 0))
        if kind == EventKind.COMPRESSION:
            sources[str(event.get("summary_source") or "unknown")] += 1
            _add_fidelity(artifacts, event)
        # The cache share counts only the model calls whose provider said what it cached.
        if (
            kind == EventKind.MODEL_CALL
            and isinstance(event.get("input_tokens"), int)
            and isinstance(event.get("cached_input_tokens"), int)
        ):
            reported += event["input_tokens"]
            cached += event["cached_input_tokens"]
        compressions += kind in (EventKind.COMPRESSION, EventKind.WINDOW)
        truncations += kind in (EventKind.TRUNCATION, EventKind.OFFLOAD)
    return {
        "bytes_offloaded": offloaded,
        "tokens_kept_out": tokens_out,
        "truncations": truncations,
        "compressions": compressions,
        "summaries": dict(sources),
        "artifacts": dict(artifacts),
        "input_tokens": reported,
        "cached_input_tokens": cached,
        "parent": parent,
    }


def _add_fidelity(into: Counter[str], event: dict[str, Any]) -> None:
    """Add a compression's fidelity report (its artifacts, the messages read back)."""
    counts, checked = event.get("artifacts"), event.get("recoverable")
    for key, value in (counts if isinstance(counts, dict) else {}).items():
        if isinstance(value, int):
            into[str(key)] += value
    if isinstance(checked, dict):
        for key in ("messages", "verified"):
            if isinstance(checked.get(key), int):
                into[f"messages_{key}" if key == "verified" else "messages_compressed"] += checked[
                    key
                ]


def dedup_savings(references: Counter[str], workdir: str) -> tuple[int, int, int]:
    """The data/ references, the files they name, and the bytes saved by storing each file
    once: what the references would take as copies less what the files take."""
    referenced = stored = 0
    try:
        with Folder(workdir, DATA_DIR) as data:
            for name, count in references.items():
                try:
                    size = data.stat(name).st_size
                except FileNotFoundError:
                    continue
                referenced += size * count
                stored += size
    except FileNotFoundError:
        pass  # no data/ folder: nothing stored
    return sum(references.values()), len(references), referenced - stored
