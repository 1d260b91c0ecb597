"""`ctxoffload watch`: follow a workspace live, like `tail -f` for events and messages."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import stat
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from .._depth import load_json
from .._disk.commit import iter_chunks, iter_lines, tail_checksum
from .._disk.events import EventKind, is_event
from .._disk.layout import CONTEXT_FILE, EVENTS_FILE, SESSIONS_DIR, is_tool_result_name
from .._disk.paths import hard_linked
from .._disk.read import Folder, Refused
from ..exceptions import CliError
from ..text import message_lines
from ._access import (
    checked_session_id,
    committed_end,
    hard_links_refused,
    no_session,
    open_in,
    open_workspace,
    refusal,
    session_entry,
    session_folder,
)
from ._arguments import Workdir, add_json, add_workdir
from ._commands import COMMAND_HELP
from ._describe import NOT_BY_AGENT, Timeline, by_agent, session_roots
from ._output import json_text, shown
from ._session_name import SessionName, said_session
from ._watching import watch_sessions

__all__ = ["Follower", "register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `watch` to the command line."""
    parser = commands.add_parser(
        "watch",
        help=COMMAND_HELP["watch"],
        description=(
            "Print new events.jsonl entries, new context.jsonl messages and new files of one "
            "session or all, as they are written. A line still being written is printed once "
            "it is complete; a batch of context.jsonl never committed (its commit record "
            "ends before it), never. A file that cannot be read, or has more than one hard "
            "link (one may be outside the workspace: it is never read), is said once on "
            "stderr and the rest is still followed. With --wait, a SESSION that does not "
            "exist yet is waited for (to start watching before the agent starts). On a "
            "database URL each look "
            "reads from where the last one ended: SQLite is looked at every "
            f"{STORE_POLL_SECONDS:g} s; PostgreSQL as soon as a write's NOTIFY arrives (watch "
            f"LISTENs), and every {NOTIFIED_LOOK:g} s whatever it hears. Ctrl-C ends it "
            "(exit 0)."
        ),
    )
    add_workdir(parser, bucket=False, database=True)  # a bucket's logs would be read whole
    add_json(parser)
    parser.add_argument(
        "session", nargs="?", type=SessionName, help="only this session (default: all)"
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="if SESSION does not exist yet, wait for it to appear instead of exit 2",
    )
    parser.add_argument(
        "--from-start", action="store_true", help="print what is already there first"
    )
    parser.set_defaults(run=run)


# How long the lines of a summary event wait for the summary message that may hold them (an
# Agent logs it just after the compression), before they are printed from the event.
HOLD_SECONDS = 5.0


# How many of the places where earlier looks at a log began are kept to go back to.
_PLACES_KEPT = 8


@dataclass
class _Place:
    """A place in a log: the offset where a line starts, the complete lines before it (None:
    not counted yet), and `tail_checksum` of the bytes before it as they were read (None: not
    taken)."""

    offset: int = 0
    lines: int | None = 0
    checksum: int | None = None

    def holds(self, fd: int, end: int) -> bool:
        """Whether the log open as `fd`, read up to `end`, still holds the bytes read before
        this place."""
        if self.offset > end:
            return False
        return (
            self.checksum is None
            or self.offset == 0
            or tail_checksum(fd, self.offset) == self.checksum
        )


@dataclass
class _Tail:
    """Where watch is in one log, and where its earlier looks began."""

    place: _Place = field(default_factory=_Place)  # where the next line of the log starts
    inode: int = 0
    earlier: list[_Place] = field(default_factory=list)  # oldest first

    def resync(self, fd: int, inode: int, end: int) -> None:
        """Go back to the newest place whose bytes before it the log still holds: the bytes
        read may have been rewritten since (a batch read while its commit record could not
        be trusted, then trimmed by the next writer as never committed, and new lines written
        over it; a log rewritten in place), and lines after such a place are read again. A
        new file under the old name (a purged and re-created session), or one that holds
        none of them, is read from its first line."""
        if inode != self.inode:
            self.place, self.inode, self.earlier = _Place(), inode, []
            return
        while not self.place.holds(fd, end):
            self.place = self.earlier.pop() if self.earlier else _Place()

    def moved(self, start: _Place, fd: int) -> None:
        """Take `start`, where this look began, as a place to go back to, and note the bytes
        before where it ended."""
        if start.offset == self.place.offset:
            self.place = start  # nothing read: the bytes before it are as they were
            return
        self.earlier = [*self.earlier, start][-_PLACES_KEPT:]
        self.place.checksum = tail_checksum(fd, self.place.offset)


@dataclass
class _Line:
    """A complete line of a log, new since the last look: its number and its JSON value
    (`torn` when it is not JSON)."""

    number: int
    value: Any = None
    torn: bool = False


@dataclass
class Follower:
    """Reads what was appended to a session's files since the last look.

    Each look reaches the workspace afresh through its reader (`Folder`), so a session
    folder, or sessions/ itself, swapped for a link while watching is never followed.
    Files are keyed by `(session, name)`.

    What a look finds is printed in the order it was written: events.jsonl is read first,
    then context.jsonl and the new files, and a message of context.jsonl or a new tool
    result is printed just before the first event that names it (the workspace writes the
    file before it records the event). The events print as `show` prints them (`Timeline`).
    """

    workdir: str
    only: str | None
    as_json: bool
    tails: dict[tuple[str, str], _Tail] = field(default_factory=dict)
    known_files: set[tuple[str, str]] = field(default_factory=set)
    # Files and folders that could not be read, said once on stderr until they can be again.
    refused: set[str] = field(default_factory=set)
    # Each session's timeline, made at its first event (see `Timeline`).
    timelines: dict[str, Timeline] = field(default_factory=dict)
    # Since when (time.monotonic) a session's timeline holds a summary's lines.
    held_since: dict[str, float] = field(default_factory=dict)

    def _refuse(self, path: str, message: str) -> None:
        """Say once on stderr that `path` is not read; watching goes on."""
        if path not in self.refused:
            self.refused.add(path)
            print(f"ctxoffload watch: {message}", file=sys.stderr, flush=True)

    def _path(self, *parts: str) -> str:
        return os.path.join(self.workdir, SESSIONS_DIR, *parts)

    def _root(self) -> tuple[str, ...]:
        """The workspace's folder, in each spelling its references hold it: an event's line
        names a file in it relative to it, as `show` does."""
        return tuple(dict.fromkeys([os.path.realpath(self.workdir), self.workdir]))

    def _sessions(self) -> list[str]:
        if self.only is not None:
            return [self.only]
        try:
            with Folder(self.workdir, SESSIONS_DIR) as sessions:
                found = sessions.sessions()
        except OSError as exc:  # Refused and OffloadError too
            self._say(self._path(), exc)
            return []
        self.refused.discard(self._path())
        return found

    def _say(self, path: str, exc: OSError) -> None:
        """Say once why a folder (sessions/ or a session's) is not looked into now."""
        line = refusal(exc, path)
        if line is None and isinstance(exc, Refused):
            # A link (or a file) in the folder's place, perhaps swapped in while watching:
            # never followed, and said, so that silence does not read as "nothing new".
            line = str(exc)
        if line is not None:
            self._refuse(path, line)

    def _look(self, session: str, read: bool) -> list[str]:
        """Look at the files of one session: with `read`, the lines to print for what is new;
        without, only remember where each log ends now."""
        where = self._path(session)
        try:
            with Folder(self.workdir, SESSIONS_DIR, session) as folder:
                if not read:
                    for name in folder.names():
                        self._remember(folder, session, name)
                    out = []
                else:
                    # events.jsonl first: whatever an event names was written before it.
                    events = self._read_new(folder, session, EVENTS_FILE)
                    rows = self._read_new(folder, session, CONTEXT_FILE)
                    files = {
                        name: folder.path(name)
                        for name in folder.names()
                        if self._is_new_file(folder, session, name)
                    }
                    out = self._in_order(session, folder.path(EVENTS_FILE), events, rows, files)
        except OSError as exc:  # gone, a link in its place, or a folder it cannot list
            self._say(where, exc)
            return self._held(session, poll_ended=False)
        self.refused.discard(where)
        return out

    def _remember(self, folder: Folder, session: str, name: str) -> None:
        """Take a file as seen: a log as read up to its end now."""
        try:
            st = folder.stat(name)
        except FileNotFoundError:
            return
        if name.startswith(".") or not stat.S_ISREG(st.st_mode):
            return
        self.known_files.add((session, name))
        if name in (EVENTS_FILE, CONTEXT_FILE):
            self.tails[(session, name)] = _Tail(_ends_now(folder, name, st), st.st_ino)

    def _is_new_file(self, folder: Folder, session: str, name: str) -> bool:
        """Whether `name` is a tool result not announced yet (one hard-linked elsewhere is
        said once on stderr instead, and never announced)."""
        key = (session, name)
        if key in self.known_files or not is_tool_result_name(name):
            return False
        try:
            st = folder.stat(name)  # a second link is looked at again for a moment
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(st.st_mode):
            return False  # a folder, a link, a FIFO: not a file of the workspace
        self.known_files.add(key)
        path = folder.path(name)
        refused = hard_linked(st, path)
        if refused is not None:
            self._refuse(path, hard_links_refused(path, refused.links))
            return False
        return True

    def start(self, from_start: bool) -> None:
        """Remember where every file ends now (or start at 0 with `from_start`)."""
        if from_start:
            return
        for session in self._sessions():
            self._look(session, read=False)

    def poll(self) -> list[str]:
        """The lines to print for everything new."""
        out: list[str] = []
        for session in self._sessions():
            out.extend(self._look(session, read=True))
        return out

    def flush(self) -> list[str]:
        """The lines every timeline still holds (watching ends)."""
        out: list[str] = []
        for timeline in self.timelines.values():
            out.extend(timeline.flush())
        self.held_since.clear()
        return out

    def _read_new(self, folder: Folder, session: str, name: str) -> list[_Line]:
        """The complete lines appended to a log since the last look."""
        tail = self.tails.setdefault((session, name), _Tail())
        path = folder.path(name)
        try:
            opened = open_in(folder, name)  # no link followed; a hard-linked file is never read
        except CliError as exc:  # more than one hard link, or cannot be read
            self._refuse(path, str(exc))
            return []
        if opened is None:
            return []  # gone, or a link or special file: nothing of the workspace's to read
        self.refused.discard(path)
        self.known_files.add((session, name))
        fd, st = opened
        out: list[_Line] = []
        try:
            # What `show` and `grep` read: a batch past the committed end is one being written,
            # or one a kill cut before its commit, which the next writer trims.
            end = committed_end(folder, name, fd, st.st_size)
            tail.resync(fd, st.st_ino, end)
            start = tail.place
            place = tail.place = _Place(start.offset, start.lines)
            # Complete lines only: one still being written is read whole at a later look.
            for raw in iter_lines(fd, place.offset, end):
                if place.lines is None:  # lines there before watch started: counted once
                    place.lines = sum(c.count(b"\n") for c in iter_chunks(fd, 0, place.offset))
                place.offset += len(raw) + 1
                place.lines += 1
                if not raw.strip():
                    continue
                try:
                    out.append(_Line(place.lines, load_json(raw)))
                except ValueError:  # not JSON, or nested deeper than any workspace writes
                    out.append(_Line(place.lines, torn=True))
            tail.moved(start, fd)
        finally:
            os.close(fd)
        return out

    def _in_order(
        self,
        session: str,
        events_path: str,
        events: list[_Line],
        rows: list[_Line],
        files: dict[str, str],
    ) -> list[str]:
        """The lines for new events, messages and files, each message and file just before
        the first event that names it; what no event names yet comes last."""
        context_path = self._path(session, CONTEXT_FILE)
        out: list[str] = []
        for line in events:
            if line.torn:
                out.append(self._line(session, "torn", {"file": events_path}))
                continue
            event = line.value
            if not is_event(event):
                continue  # what `show` skips too (`ctxoffload verify` reports it)
            named = event.get("reference")
            if isinstance(named, str) and named.endswith(CONTEXT_FILE):
                span = event.get("lines")
                last = span[-1] if isinstance(span, list) and span else None
                while rows and isinstance(last, int) and rows[0].number <= last:
                    out.append(self._row(session, context_path, rows.pop(0)))
            elif isinstance(named, str) and (name := os.path.basename(named)) in files:
                out.append(self._line(session, "file", {"file": files.pop(name)}))
            out.extend(self._event(session, event))
        out.extend(self._held(session, poll_ended=True))
        out.extend(self._row(session, context_path, row) for row in rows)
        out.extend(self._line(session, "file", {"file": path}) for path in files.values())
        return out

    def _row(self, session: str, path: str, row: _Line) -> str:
        if row.torn:
            return self._line(session, "torn", {"file": path})
        return self._line(session, "message", row.value, row.number)

    def _event(self, session: str, event: dict[str, Any]) -> list[str]:
        if self.as_json:
            return [self._line(session, "event", event)]
        timeline = self.timelines.get(session)
        if timeline is None:
            described = self._started_by_agent(session)
            timeline = self.timelines[session] = Timeline(
                by_agent=described, session=session, root=session_roots(self._root(), session)
            )
        if by_agent(event):
            timeline.by_agent = True
        lines = timeline.add(event)
        if lines and lines[0] == NOT_BY_AGENT:
            lines[0] = f"{'':8} {session} {NOT_BY_AGENT}"
        return lines

    def _held(self, session: str, *, poll_ended: bool) -> list[str]:
        """The lines of a summary its timeline held, once no message can hold them: the
        session was not written by an Agent, or none came within `HOLD_SECONDS`."""
        timeline = self.timelines.get(session)
        if timeline is None or not timeline.holding:
            self.held_since.pop(session, None)
            return []
        now = time.monotonic()
        since = self.held_since.setdefault(session, now)
        if (poll_ended and not timeline.by_agent and timeline.compressed) or (
            now - since >= HOLD_SECONDS
        ):
            self.held_since.pop(session, None)
            return timeline.flush()
        return []

    def _started_by_agent(self, session: str) -> bool:
        """Whether an Agent wrote the session: its record opens with `session_start` (or a
        fork or sub-agent's first lines, soon after)."""
        try:
            with Folder(self.workdir, SESSIONS_DIR, session) as folder:
                opened = open_in(folder, EVENTS_FILE)
                if opened is None:
                    return False
                fd, _ = opened
                try:
                    head = os.pread(fd, 1 << 16, 0)
                finally:
                    os.close(fd)
        except (OSError, CliError):
            return False
        return _opens_described(head)

    def _line(self, session: str, what: str, value: Any, number: int = 0) -> str:
        if self.as_json:
            return json_text({"session": session, "type": what, "value": value})
        if what == "message":
            lines = message_lines(value) or [json.dumps(value, ensure_ascii=False)]
            body = " | ".join(line for line in lines[1:4] if line.strip())
            return f"{'':8} {session} {CONTEXT_FILE} line {number} {lines[0]} {body}"[:300]
        if what == "file":
            return f"{'':8} {session} new file {value['file']}"
        return f"{'':8} {session} a line of {value['file']} is not JSON (torn write?)"


# Lines read from a store's log per request while catching up.
STORE_BATCH = 1000


@dataclass
class StoreFollower(Follower):
    """A `Follower` of a store (`SqlWorkspace`; the loop is the store's own): each
    log is read from the line after the last one seen (`read_lines`, an index range in a
    database: a look costs the new lines, however long the log), new tool results found
    by the events that record them. What is found prints as on a folder.

    Between looks the loop awaits `changed`: PostgreSQL's LISTEN/NOTIFY where the store is
    one, else `interval` seconds of sleep.
    """

    store: Any = None
    interval: float = 0.5
    marks: dict[tuple[str, str], int] = field(default_factory=dict)
    # The line before each mark (`_identity`): a log purged and written again restarts at
    # line 1, and holds another line there, or none.
    before_marks: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)

    def _path(self, *parts: str) -> str:
        return "/".join((str(self.store.url), SESSIONS_DIR, *parts))

    def _root(self) -> tuple[str, ...]:
        return (str(self.store.url),)

    async def changed(self) -> None:
        """Return when the store may hold something new: at the next write PostgreSQL
        notifies (a look every `NOTIFIED_LOOK` seconds all the same), else after `interval`
        seconds."""
        import asyncio

        from ..workspace import SqlWorkspace

        if isinstance(self.store, SqlWorkspace) and self.store.notifies:
            await self.store.wait_for_change(NOTIFIED_LOOK)
        else:
            await asyncio.sleep(self.interval)

    async def sessions_now(self) -> list[str]:
        """The sessions to look at now (one listing of the store)."""
        if self.only is not None:
            return [self.only]
        return list(await self.store.list_sessions())

    async def _end(self, reference: str) -> int:
        """The number of the line after a log's last: a few index lookups (doubling, then
        halving), not a read of the log."""
        if not await self._has_line(reference, 1):
            return 1
        low, high = 1, 2
        while await self._has_line(reference, high):
            low, high = high, high * 2
        while high - low > 1:  # line `low` exists, line `high` does not
            middle = (low + high) // 2
            if await self._has_line(reference, middle):
                low = middle
            else:
                high = middle
        return high

    async def _has_line(self, reference: str, number: int) -> bool:
        from ..exceptions import InvalidReference

        try:
            return bool(await self.store.read_lines(reference, number, number))
        except InvalidReference:
            return False

    async def start_store(self, from_start: bool) -> None:
        """Take every log as read up to its end now (or from its start with `from_start`),
        and every tool result as seen."""
        for session in await self.sessions_now():
            for name in (EVENTS_FILE, CONTEXT_FILE):
                reference = self._path(session, name)
                mark = 1 if from_start else await self._end(reference)
                self.marks[(session, name)] = mark
                if mark > 1:
                    before = await self.store.read_lines(reference, mark - 1, mark - 1)
                    self.before_marks[(session, name)] = _identity(before)

    async def _new_lines(self, session: str, name: str) -> tuple[list[_Line], bool]:
        """The lines appended to a log since the last look, from its mark on, and whether
        the log was written again from its first line since (purged and re-created: then
        its lines are read from the first)."""
        from ..exceptions import InvalidReference

        key = (session, name)
        reference = self._path(session, name)
        mark = self.marks.setdefault(key, 1)
        before = self.before_marks.get(key) if mark > 1 else None
        restarted = False
        out: list[_Line] = []
        while True:
            # The line before the mark comes with the new ones (no request more), to check
            # that the log still holds it.
            first = mark - 1 if before is not None else mark
            try:
                raw = await self.store.read_lines(reference, first, first + STORE_BATCH - 1)
            except InvalidReference:  # no such log: not yet, or purged since the last look
                restarted = restarted or mark > 1
                mark = 1
                break
            lines = raw.splitlines(keepends=True)
            full = len(lines) == STORE_BATCH
            if before is not None:
                if not lines or _identity(lines[0]) != before:
                    mark, before, restarted, out = 1, None, True, []
                    continue  # a new log under the old name: read from its first line
                lines, before = lines[1:], None
            for line in lines:
                try:
                    out.append(_Line(mark, load_json(line)) if line.strip() else _Line(mark))
                except ValueError:
                    out.append(_Line(mark, torn=True))
                mark += 1
            if lines:
                self.before_marks[key] = _identity(lines[-1])
            if not full:
                break
        self.marks[key] = mark
        if mark == 1:
            self.before_marks.pop(key, None)
        return [line for line in out if line.torn or line.value is not None], restarted

    def _forget(self, session: str) -> list[str]:
        """Forget what was seen of a session purged and written again: its tool results are
        new, its record a new one (the lines its old timeline still held are returned)."""
        self.known_files = {key for key in self.known_files if key[0] != session}
        self.held_since.pop(session, None)
        timeline = self.timelines.pop(session, None)
        return timeline.flush() if timeline is not None else []

    async def poll_store(self) -> list[str]:
        """The lines to print for everything new in the store."""
        out: list[str] = []
        for session in await self.sessions_now():
            events, events_restarted = await self._new_lines(session, EVENTS_FILE)
            rows, rows_restarted = await self._new_lines(session, CONTEXT_FILE)
            if events_restarted or rows_restarted:
                out.extend(self._forget(session))
            # A new tool result is named by the event recording it (the store writes the
            # file first): found without listing the session's files.
            files: dict[str, str] = {}
            for line in events:
                named = line.value.get("reference") if isinstance(line.value, dict) else None
                name = named.rsplit("/", 1)[-1] if isinstance(named, str) else ""
                if is_tool_result_name(name) and (session, name) not in self.known_files:
                    self.known_files.add((session, name))
                    files[name] = str(named)
            if events and session not in self.timelines and not self.as_json:
                head = await self.store.read_lines(self._path(session, EVENTS_FILE), 1, 1)
                self.timelines[session] = Timeline(
                    by_agent=_opens_described(head),
                    session=session,
                    root=session_roots(self._root(), session),
                )
            out.extend(
                self._in_order(session, self._path(session, EVENTS_FILE), events, rows, files)
            )
        return out

    def _started_by_agent(self, session: str) -> bool:
        return False  # a store's timeline is made in `poll_store`, from its first event


def _watch_store(args: argparse.Namespace, where: Workdir) -> int:
    """`watch` on a database: follow it until Ctrl-C."""
    import asyncio

    from ._bucket import open_store

    store = open_store(where.text)
    follower = StoreFollower("", args.session, args.json, store=store, interval=STORE_POLL_SECONDS)

    async def follow() -> None:
        if args.session is not None:
            checked_session_id(args.session)
            if args.session not in await store.list_sessions():
                if not args.wait:
                    raise CliError(
                        f"no session {said_session(args.session)} in {store.url}: "
                        "`ctxoffload ls` lists the sessions; --wait waits for it to appear"
                    )
                print(
                    f"ctxoffload watch: no session {said_session(args.session)} in "
                    f"{store.url} yet: waiting for it to appear (Ctrl-C to stop)",
                    file=sys.stderr,
                    flush=True,
                )
                while args.session not in await store.list_sessions():
                    await follower.changed()
        await follower.start_store(args.from_start)
        what = f"session {args.session}" if args.session else "all sessions"
        print(f"watching {what} in {store.url} (Ctrl-C to stop)", file=sys.stderr, flush=True)
        while True:
            for line in await follower.poll_store():
                print(line, flush=True)
            await follower.changed()

    from ..exceptions import OffloadError

    try:
        asyncio.run(follow())
    except KeyboardInterrupt:
        _print_held(follower)
    except OffloadError as exc:  # the store cannot be read: said, not a traceback
        raise CliError(str(exc)) from None
    return 0


# How often `watch` looks at a database.
STORE_POLL_SECONDS = 0.5

# How often `watch` looks at a PostgreSQL database that notifies each write: a look whatever
# it says, in case a notification was missed (the listening connection lost and opened again).
NOTIFIED_LOOK = 5.0


def run(args: argparse.Namespace) -> int:
    """Follow the workspace until Ctrl-C."""
    where = Workdir.of(args)
    from ._bucket import is_database_url

    if is_database_url(where.text):
        return _watch_store(args, where)
    # A bucket is refused with one line: `read_lines` of a log another process wrote reads
    # the whole log there, so a poll would cost the log, not what is new.
    if where.is_bucket:
        from ._schemes import check_scheme

        check_scheme(where.text)
        raise CliError(
            f"--workdir {where.text!r}: watch follows a folder or a database (sqlite:///..., "
            "postgresql://...), not a bucket, whose logs it would read whole at every look"
        )
    workdir = open_workspace(where)
    waiting = False
    if args.session is not None:
        waiting = _session_to_watch(workdir, args.session, wait=args.wait)
    sessions_dir = os.path.join(workdir, SESSIONS_DIR)
    follower = Follower(workdir, args.session, args.json)
    try:
        # Under the handler too: remembering where each file ends takes a while in a
        # workspace of many sessions, and Ctrl-C then ends watch as it does later (exit 0).
        follower.start(args.from_start)
        import watchfiles

        # yield_on_timeout: look again every second even if a change notification was lost.
        options: dict[str, Any] = {
            "debounce": 50,
            "step": 20,
            "rust_timeout": 1000,
            "yield_on_timeout": True,
            "raise_interrupt": True,
        }
        if waiting:
            print(
                f"ctxoffload watch: no session {said_session(args.session)} in "
                f"{shown(workdir)} yet: waiting for it to appear (Ctrl-C to stop)",
                file=sys.stderr,
                flush=True,
            )
            for _changes in watchfiles.watch(sessions_dir, recursive=False, **options):
                if session_entry(workdir, args.session) is not None:
                    break
            session_folder(workdir, args.session)  # a folder, not a link or a file
        what = f"session {args.session}" if args.session else "all sessions"
        print(f"watching {what} in {workdir} (Ctrl-C to stop)", file=sys.stderr)
        sys.stderr.flush()
        for line in follower.poll():
            print(line, flush=True)
        for _sessions in watch_sessions(workdir, args.session, **options):
            for line in follower.poll():
                print(line, flush=True)
    except KeyboardInterrupt:
        _print_held(follower)
        return 0
    except Exception as exc:
        # A Ctrl-C that lands while a module is being imported (watchfiles imports `platform`
        # on its first call) comes out wrapped: `RuntimeError: Error calling __set_name__`.
        if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
            _print_held(follower)
            return 0
        raise
    return 0


def _print_held(follower: Follower) -> None:
    """At Ctrl-C, what the timelines still hold (a summary no message has logged yet)."""
    with contextlib.suppress(OSError, ValueError):  # stdout closed by the reader
        for line in follower.flush():
            print(line, flush=True)


def _session_to_watch(workdir: str, session_id: str, *, wait: bool) -> bool:
    """Check the session to watch; returns whether it does not exist yet (then, with `wait`,
    watch waits for it).

    Raises:
        CliError: the id is not a plain name, something other than a folder (a link, a
            file) holds its name, or there is no such session and not `wait`.
    """
    exists = session_entry(workdir, session_id) is not None
    if wait and not exists:
        return True
    if not exists:
        raise CliError(f"{no_session(workdir, session_id)}; --wait waits for it to appear")
    session_folder(workdir, session_id)  # refuses a link or a file in its place
    return False


def _ends_now(folder: Folder, name: str, st: os.stat_result) -> _Place:
    """Where a log's committed part ends now (as `show` reads it), with the checksum of the
    bytes before it; its size when it cannot be read (watch says why when it reads it)."""
    try:
        opened = open_in(folder, name)
    except CliError:
        opened = None
    if opened is None:
        return _Place(st.st_size, None)
    fd, st = opened
    try:
        end = committed_end(folder, name, fd, st.st_size)
        return _Place(end, None, tail_checksum(fd, end))
    finally:
        os.close(fd)


def _identity(line: bytes) -> tuple[int, int]:
    """A line of a store's log, as a watcher remembers it: its length and CRC-32."""
    import zlib

    return len(line), zlib.crc32(line)


def _opens_described(head: bytes) -> bool:
    """Whether the first lines of a record hold an event `by_agent` counts (read as bytes:
    `watch` looks before it parses)."""
    return any(f'"kind":"{kind}"'.encode() in head for kind in _DESCRIBING)


_DESCRIBING = (EventKind.SESSION_START, EventKind.FORK, EventKind.DOOR)
