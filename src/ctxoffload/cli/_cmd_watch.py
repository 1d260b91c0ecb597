"""`ctxoffload watch`: follow a workspace live, like `tail -f` for events and messages."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from dataclasses import dataclass, field
from typing import Any

from .._depth import load_json
from ..exceptions import CliError
from ..text import is_jsonl, message_lines
from ..workspace import (
    CONTEXT_FILE,
    EVENTS_FILE,
    SESSIONS_DIR,
    EventKind,
    Folder,
    Refused,
    is_tool_result_name,
    iter_lines,
    linked_elsewhere,
)
from ._arguments import add_json, add_workdir, workdir_of
from ._commands import COMMAND_HELP
from ._describe import describe
from ._output import json_text, shown
from ._reading import (
    hard_links_refused,
    no_session,
    open_in,
    open_workspace,
    refusal,
    session_folder,
)
from ._watching import watch_sessions

__all__ = ["Follower", "describe_event", "register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `watch` to the command line."""
    parser = commands.add_parser(
        "watch",
        help=COMMAND_HELP["watch"],
        description=(
            "Print new events.jsonl entries, new context.jsonl messages and new files of one "
            "session or all, as they are written. A line still being written is printed once "
            "it is complete. A file that cannot be read, or has more than one hard link (one "
            "may be outside the workspace: it is never read), is said once on stderr and the "
            "rest is still followed. With --wait, a SESSION that does not exist yet is waited "
            "for (to start watching before the agent starts). Ctrl-C ends it (exit 0)."
        ),
    )
    add_workdir(parser, bucket=False)  # watchfiles follows a local folder
    add_json(parser)
    parser.add_argument("session", nargs="?", help="only this session (default: all)")
    parser.add_argument(
        "--wait",
        action="store_true",
        help="if SESSION does not exist yet, wait for it to appear instead of exit 2",
    )
    parser.add_argument(
        "--from-start", action="store_true", help="print what is already there first"
    )
    parser.set_defaults(run=run)


def describe_event(event: dict[str, Any], session: str, *, by_agent: bool = True) -> str:
    """The lines `show` prints for an event, each with the session after its time."""
    lines = describe(event, by_agent=by_agent)
    return "\n".join(f"{line[:8]} {session}{line[8:]}" for line in lines)


@dataclass
class _Tail:
    offset: int = 0  # where the next line of the log starts
    inode: int = 0


@dataclass
class Follower:
    """Reads what was appended to a session's files since the last look.

    Each look reaches the workspace afresh through its reader (`Folder`), so a session
    folder, or sessions/ itself, swapped for a link while watching is never followed.
    Files are keyed by `(session, name)`.
    """

    workdir: str
    only: str | None
    as_json: bool
    tails: dict[tuple[str, str], _Tail] = field(default_factory=dict)
    known_files: set[tuple[str, str]] = field(default_factory=set)
    # Files and folders that could not be read, said once on stderr until they can be again.
    refused: set[str] = field(default_factory=set)
    # Whether an Agent wrote each session (see `describe`), found on its first event.
    by_agent: dict[str, bool] = field(default_factory=dict)

    def _refuse(self, path: str, message: str) -> None:
        """Say once on stderr that `path` is not read; watching goes on."""
        if path not in self.refused:
            self.refused.add(path)
            print(f"ctxoffload watch: {message}", file=sys.stderr, flush=True)

    def _path(self, *parts: str) -> str:
        return os.path.join(self.workdir, SESSIONS_DIR, *parts)

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
        out: list[str] = []
        where = self._path(session)
        try:
            with Folder(self.workdir, SESSIONS_DIR, session) as folder:
                for name in folder.names():
                    if name.startswith("."):
                        continue
                    out.extend(self._file(folder, session, name, read))
        except OSError as exc:  # gone, a link in its place, or a folder it cannot list
            self._say(where, exc)
            return out
        self.refused.discard(where)
        return out

    def _file(self, folder: Folder, session: str, name: str, read: bool) -> list[str]:
        key = (session, name)
        try:
            st = folder.stat(name)  # a second link is looked at again for a moment
        except FileNotFoundError:
            return []
        if not stat.S_ISREG(st.st_mode):
            return []  # a folder, a link, a FIFO: not a file of the workspace
        if not read:
            self.known_files.add(key)
            if is_jsonl(name):
                self.tails[key] = _Tail(st.st_size, st.st_ino)
            return []
        out: list[str] = []
        if key not in self.known_files:
            self.known_files.add(key)
            if is_tool_result_name(name):
                if linked_elsewhere(st):
                    self._refuse(
                        folder.path(name), hard_links_refused(folder.path(name), st.st_nlink)
                    )
                else:
                    out.append(self._line(session, "file", {"file": folder.path(name)}))
        if is_jsonl(name):
            out.extend(self._read_new(folder, session, name))
        return out

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

    def _read_new(self, folder: Folder, session: str, name: str) -> list[str]:
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
        fd, st = opened
        lines: list[bytes] = []
        try:
            if st.st_ino != tail.inode or st.st_size < tail.offset:
                # A new file under the old name (a purged and re-created session).
                tail.offset, tail.inode = 0, st.st_ino
            # Complete lines only: one still being written is read whole at a later look.
            for raw in iter_lines(fd, tail.offset, st.st_size):
                tail.offset += len(raw) + 1
                lines.append(raw)
        finally:
            os.close(fd)
        out = []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                value = load_json(raw)
            except ValueError:  # not JSON, or nested deeper than any workspace writes
                out.append(self._line(session, "torn", {"file": path}))
                continue
            if name == EVENTS_FILE and isinstance(value, dict):
                line = self._line(session, "event", value)
                if line:  # what `show` does not print either (a system prompt, ...)
                    out.append(line)
            elif name == CONTEXT_FILE:
                out.append(self._line(session, "message", value))
        return out

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
        return b'"kind":"session_start"' in head or b'"kind":"fork"' in head

    def _line(self, session: str, what: str, value: Any) -> str:
        if self.as_json:
            return json_text({"session": session, "type": what, "value": value})
        if what == "event":
            if value.get("kind") in (EventKind.SESSION_START, EventKind.FORK):
                self.by_agent[session] = True
            by_agent = self.by_agent.setdefault(session, self._started_by_agent(session))
            return describe_event(value, session, by_agent=by_agent)
        if what == "message":
            lines = message_lines(value) or [json.dumps(value, ensure_ascii=False)]
            body = " | ".join(line for line in lines[1:4] if line.strip())
            return f"{'':8} {session} {CONTEXT_FILE} {lines[0]} {body}"[:300]
        if what == "file":
            return f"{'':8} {session} new file {value['file']}"
        return f"{'':8} {session} a line of {value['file']} is not JSON (torn write?)"


def run(args: argparse.Namespace) -> int:
    """Follow the workspace until Ctrl-C."""
    workdir_of(args)  # a bucket cannot be watched: one clear line instead of a copy
    workdir = open_workspace(args)
    waiting = False
    if args.session is not None:
        waiting = _session_to_watch(workdir, args.session, wait=args.wait)
    sessions_dir = os.path.join(workdir, SESSIONS_DIR)
    follower = Follower(workdir, args.session, args.json)
    follower.start(args.from_start)
    try:
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
                f"ctxoffload watch: no session {args.session!r} in {shown(workdir)} "
                "yet: waiting for it to appear (Ctrl-C to stop)",
                file=sys.stderr,
                flush=True,
            )
            for _changes in watchfiles.watch(sessions_dir, recursive=False, **options):
                if _exists(workdir, args.session):
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
        return 0
    except Exception as exc:
        # A Ctrl-C that lands while a module is being imported (watchfiles imports `platform`
        # on its first call) comes out wrapped: `RuntimeError: Error calling __set_name__`.
        if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
            return 0
        raise
    return 0


def _session_to_watch(workdir: str, session_id: str, *, wait: bool) -> bool:
    """Check the session to watch; returns whether it does not exist yet (then, with `wait`,
    watch waits for it).

    Raises:
        CliError: the id is not a plain name, something other than a folder (a link, a
            file) holds its name, or there is no such session and not `wait`.
    """
    from ..exceptions import InvalidSessionId
    from ..workspace import validate_session_id

    try:
        validate_session_id(session_id)
    except InvalidSessionId as exc:
        raise CliError(str(exc)) from exc
    exists = _exists(workdir, session_id)
    if wait and not exists:
        return True
    if not exists:
        raise CliError(f"{no_session(workdir, session_id)}; --wait waits for it to appear")
    session_folder(workdir, session_id)  # refuses a link or a file in its place
    return False


def _exists(workdir: str, session_id: str) -> bool:
    """Whether sessions/ holds an entry of that name (of any kind: a link too)."""
    try:
        with Folder(workdir, SESSIONS_DIR) as sessions:
            sessions.stat(session_id)
    except FileNotFoundError:
        return False
    return True
