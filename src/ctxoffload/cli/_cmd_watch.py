"""`ctxoffload watch`: follow a workspace live, like `tail -f` for events and messages."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._commands import COMMAND_HELP
from ._common import (
    CliError,
    add_json,
    add_workdir,
    cannot_read,
    hard_links_refused,
    message_lines,
    open_file,
    open_workspace,
    session_dir,
    settled_lstat,
    shown,
)

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
    # Files and folders that could not be read, said once on stderr until they can be again.
    refused: set[Path] = field(default_factory=set)

    def _refuse(self, path: Path, message: str) -> None:
        """Say once on stderr that `path` is not read; watching goes on."""
        if path not in self.refused:
            self.refused.add(path)
            print(f"ctxoffload watch: {message}", file=sys.stderr, flush=True)

    def _scan(self, folder: Path, dirs: bool) -> list[Path]:
        """The folders (`dirs`) or files of `folder`, links and dot names left out."""
        try:
            with os.scandir(folder) as entries:
                found = sorted(
                    Path(e.path)
                    for e in entries
                    if not e.name.startswith(".")
                    and (e.is_dir if dirs else e.is_file)(follow_symlinks=False)
                )
        except FileNotFoundError:
            return []
        except OSError as exc:
            self._refuse(folder, cannot_read(folder, exc))
            return []
        self.refused.discard(folder)
        return found

    def _session_dirs(self) -> list[Path]:
        if self.only is not None:
            return [self.sessions_dir / self.only]
        return self._scan(self.sessions_dir, dirs=True)

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

    def _files(self, folder: Path) -> list[Path]:
        return self._scan(folder, dirs=False)

    def poll(self) -> list[str]:
        """The lines to print for everything new."""
        out: list[str] = []
        for folder in self._session_dirs():
            for path in self._files(folder):
                if path not in self.known_files:
                    self.known_files.add(path)
                    if path.name.startswith("tool_result-"):
                        st = settled_lstat(path)
                        if st is not None and st.st_nlink > 1:
                            self._refuse(path, hard_links_refused(path, st.st_nlink))
                        elif st is not None:
                            out.append(self._line(folder.name, "file", {"file": str(path)}))
                if path.suffix == ".jsonl":
                    out.extend(self._read_new(folder.name, path))
        return out

    def _read_new(self, session: str, path: Path) -> list[str]:
        tail = self.tails.setdefault(path, _Tail())
        try:
            opened = open_file(path)  # no link followed; a hard-linked file is never read
        except CliError as exc:  # more than one hard link, or cannot be read
            self._refuse(path, str(exc))
            return []
        if opened is None:
            return []  # gone, or a link or special file: nothing of the workspace's to read
        self.refused.discard(path)
        fd, st = opened
        with os.fdopen(fd, "rb") as f:
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
    folder = None
    if args.session is not None:
        folder = _session_to_watch(workspace, args.session, wait=args.wait)
    follower = Follower(workspace.sessions_dir, args.session, args.json)
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
        if folder is not None and not os.path.lexists(folder):
            print(
                f"ctxoffload watch: no session {args.session!r} in {shown(workspace.workdir)} "
                "yet: waiting for it to appear (Ctrl-C to stop)",
                file=sys.stderr,
                flush=True,
            )
            for _changes in watchfiles.watch(workspace.sessions_dir, recursive=False, **options):
                if os.path.lexists(folder):
                    break
            session_dir(workspace, args.session)  # a folder, not a link or a file
        what = f"session {args.session}" if args.session else "all sessions"
        print(f"watching {what} in {workspace.workdir} (Ctrl-C to stop)", file=sys.stderr)
        sys.stderr.flush()
        for line in follower.poll():
            print(line, flush=True)
        watched = folder if folder is not None else workspace.sessions_dir
        for _changes in watchfiles.watch(watched, **options):
            for line in follower.poll():
                print(line, flush=True)
    except KeyboardInterrupt:
        return 0
    return 0


def _session_to_watch(workspace: Any, session_id: str, *, wait: bool) -> Path:
    """The folder of `session_id`, which with `wait` may not exist yet (watch waits for it).

    Raises:
        CliError: the id is not a plain name, something other than a folder (a link, a
            file) holds its name, or there is no such session and not `wait`.
    """
    from ..exceptions import InvalidSessionId

    try:
        folder: Path = workspace.session_dir(session_id)
    except InvalidSessionId as exc:
        raise CliError(str(exc)) from exc
    if wait and not os.path.lexists(folder):
        return folder
    try:
        session_dir(workspace, session_id)  # refuses a link or a file in its place
    except CliError as exc:
        if os.path.lexists(folder):
            raise
        raise CliError(f"{exc}; --wait waits for it to appear") from None
    return folder
