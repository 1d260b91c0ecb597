"""`ctxoffload watch`: follow a workspace live, like `tail -f` for events and messages."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._commands import COMMAND_HELP
from ._common import add_json, add_workdir, message_lines, open_workspace, session_dir

__all__ = ["Follower", "describe_event", "register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `watch` to the command line."""
    parser = commands.add_parser(
        "watch",
        help=COMMAND_HELP["watch"],
        description=(
            "Print new events.jsonl entries, new context.jsonl messages and new files of one "
            "session or all, as they are written. A line still being written is printed once "
            "it is complete. Ctrl-C ends it (exit 0)."
        ),
    )
    add_workdir(parser)
    add_json(parser)
    parser.add_argument("session", nargs="?", help="only this session (default: all)")
    parser.add_argument(
        "--from-start", action="store_true", help="print what is already there first"
    )
    parser.set_defaults(run=run)


def describe_event(event: dict[str, Any]) -> str:
    """One line for an events.jsonl entry."""
    kind = str(event.get("kind", "?"))
    reference = event.get("reference")
    parts = [kind]
    before, after = event.get("tokens_before"), event.get("tokens_after")
    if isinstance(before, int) and isinstance(after, int):
        parts.append(f"{before:,}->{after:,} tokens")
    for key in ("tool_name", "bytes", "lines", "summary_source", "messages"):
        value = event.get(key)
        if value is not None:
            parts.append(f"{key}={value:,}" if isinstance(value, int) else f"{key}={value}")
    if reference:
        parts.append(f"-> {reference}")
    return " ".join(parts)


@dataclass
class _Tail:
    offset: int = 0
    inode: int = 0
    partial: bytes = b""


@dataclass
class Follower:
    """Reads what was appended to a session's files since the last look."""

    sessions_dir: Path
    only: str | None
    as_json: bool
    tails: dict[Path, _Tail] = field(default_factory=dict)
    known_files: set[Path] = field(default_factory=set)

    def _session_dirs(self) -> list[Path]:
        if self.only is not None:
            return [self.sessions_dir / self.only]
        try:
            return sorted(
                Path(e.path)
                for e in os.scandir(self.sessions_dir)
                if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
            )
        except FileNotFoundError:
            return []

    def start(self, from_start: bool) -> None:
        """Remember where every file ends now (or start at 0 with `from_start`)."""
        for folder in self._session_dirs():
            for path in self._files(folder):
                self.known_files.add(path)
                if path.suffix == ".jsonl" and not from_start:
                    st = path.lstat()
                    self.tails[path] = _Tail(st.st_size, st.st_ino)
        if from_start:
            self.known_files.clear()

    @staticmethod
    def _files(folder: Path) -> list[Path]:
        try:
            return sorted(
                Path(e.path)
                for e in os.scandir(folder)
                if e.is_file(follow_symlinks=False) and not e.name.startswith(".")
            )
        except FileNotFoundError:
            return []

    def poll(self) -> list[str]:
        """The lines to print for everything new."""
        out: list[str] = []
        for folder in self._session_dirs():
            for path in self._files(folder):
                if path not in self.known_files:
                    self.known_files.add(path)
                    if path.name.startswith("tool_result-"):
                        out.append(self._line(folder.name, "file", {"file": str(path)}))
                if path.suffix == ".jsonl":
                    out.extend(self._read_new(folder.name, path))
        return out

    def _read_new(self, session: str, path: Path) -> list[str]:
        tail = self.tails.setdefault(path, _Tail())
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return []
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return []
            if st.st_ino != tail.inode or st.st_size < tail.offset:
                # A new file under the old name (a purged and re-created session).
                tail.offset, tail.inode, tail.partial = 0, st.st_ino, b""
            f.seek(tail.offset)
            data = f.read()
        tail.offset += len(data)
        data = tail.partial + data
        complete, _, tail.partial = data.rpartition(b"\n")
        if not complete and not _:
            return []
        out = []
        for raw in complete.split(b"\n"):
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except ValueError:
                out.append(self._line(session, "torn", {"file": str(path)}))
                continue
            if path.name == "events.jsonl" and isinstance(value, dict):
                out.append(self._line(session, "event", value))
            elif path.name == "context.jsonl":
                out.append(self._line(session, "message", value))
        return out

    def _line(self, session: str, what: str, value: Any) -> str:
        if self.as_json:
            return json.dumps({"session": session, "type": what, "value": value})
        if what == "event":
            stamp = str(value.get("time", ""))[11:19]
            return f"{stamp} {session} {describe_event(value)}"
        if what == "message":
            lines = message_lines(value)
            body = " | ".join(line for line in lines[1:4] if line.strip())
            return f"{'':8} {session} context.jsonl {lines[0]} {body}"[:300]
        if what == "file":
            return f"{'':8} {session} new file {value['file']}"
        return f"{'':8} {session} a line of {value['file']} is not JSON (torn write?)"


def run(args: argparse.Namespace) -> int:
    """Follow the workspace until Ctrl-C."""
    from ._common import workdir_of

    workdir_of(args)  # a bucket cannot be watched: one clear line instead of a copy
    workspace = open_workspace(args)
    if args.session is not None:
        session_dir(workspace, args.session)
    follower = Follower(workspace.sessions_dir, args.session, args.json)
    follower.start(args.from_start)
    try:
        import watchfiles

        what = f"session {args.session}" if args.session else "all sessions"
        print(f"watching {what} in {workspace.workdir} (Ctrl-C to stop)", file=sys.stderr)
        sys.stderr.flush()
        for line in follower.poll():
            print(line, flush=True)
        watched = workspace.sessions_dir / args.session if args.session else workspace.sessions_dir
        # yield_on_timeout: look again every second even if a change notification was lost.
        for _changes in watchfiles.watch(
            watched,
            debounce=50,
            step=20,
            rust_timeout=1000,
            yield_on_timeout=True,
            raise_interrupt=True,
        ):
            for line in follower.poll():
                print(line, flush=True)
    except KeyboardInterrupt:
        return 0
    return 0
