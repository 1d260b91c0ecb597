"""`ctxoffload verify`: check that a workspace is whole and holds nothing it should not.

Everything is read through the workspace's reader (`Folder`): each folder is reached from the
workdir without following a link, each file opened and checked on its descriptor, the commit
records read as the workspace's readers read them, and data/ files hashed as the recoverability
check of `ctxoffload replay` hashes them (`Folder.sha256`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .._depth import load_json
from .._disk.commit import iter_lines
from .._disk.events import EventKind, is_event
from .._disk.layout import (
    COMMIT_SUFFIX,
    CONTEXT_FILE,
    DATA_DIR,
    DATA_NAME,
    EVENTS_FILE,
    SESSIONS_DIR,
    STATE_FILE,
    TOOL_RESULT_PREFIX,
    TOOL_RESULT_SUFFIX,
    is_data_name,
)
from .._disk.paths import hard_linked, hard_links_reason
from .._disk.read import Folder, Refused
from ..exceptions import OffloadError
from ..text import decode_log_line, is_jsonl
from ._access import open_workspace, session_folder
from ._arguments import EXIT_OK, EXIT_PROBLEMS, Workdir, add_json, add_workdir
from ._commands import COMMAND_HELP
from ._output import Progress, inert, paint, print_json, print_styled, shown
from ._session_name import SessionName

__all__ = ["Report", "register", "run", "verify_workspace"]

# A path into the workspace as references write it (absolute, relative or file://); the part
# from `sessions/` or `data/` on is what must exist in this workspace.
_REFERENCE = re.compile(
    rf"(?:{re.escape(SESSIONS_DIR)}/[A-Za-z0-9][A-Za-z0-9._-]{{0,127}}/"
    rf"(?:{re.escape(TOOL_RESULT_PREFIX)}[A-Za-z0-9._-]+{re.escape(TOOL_RESULT_SUFFIX)}"
    rf"|{'|'.join(re.escape(n) for n in (CONTEXT_FILE, EVENTS_FILE, STATE_FILE))})"
    rf"|{re.escape(DATA_DIR)}/{DATA_NAME.pattern})"
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `verify` to the command line."""
    parser = commands.add_parser(
        "verify",
        help=COMMAND_HELP["verify"],
        description=(
            "Check that every file can be read, every JSONL line parses (a torn last line, "
            "or lines past context.jsonl's committed length, are warnings), each commit "
            "record is whole and matches its log, every data file's sha256 matches its name, "
            "every reference in events, context and state names a file of this workspace "
            "(none outside it), and that no link, FIFO, socket, device or hard-linked file is "
            "inside. Exit 1 when a problem is found."
        ),
    )
    add_workdir(parser)
    add_json(parser)
    parser.add_argument(
        "session", nargs="?", type=SessionName, help="only this session (and data/)"
    )
    parser.set_defaults(run=run)


@dataclass
class Report:
    """What verification found."""

    problems: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    checked: dict[str, int] = field(
        default_factory=lambda: {
            "files": 0,
            "jsonl_lines": 0,
            "data_files": 0,
            "references": 0,
            "artifacts": 0,
        }
    )

    def problem(self, path: str, what: str) -> None:
        self.problems.append({"path": shown(path), "problem": what})

    def warning(self, path: str, what: str) -> None:
        self.warnings.append({"path": shown(path), "warning": what})


def _reason(exc: OSError) -> str:
    """Why a file could not be read, in a few words (`Permission denied`)."""
    cause = exc.__cause__ if isinstance(exc, OffloadError) else exc
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    return str(exc)


class _Entries:
    """The entries references name, looked at through the reader: each folder is entered
    once, and a few are kept open (a log's references mostly name its own session).
    `local` turns a reference into a copied bucket (its URI) into the copy's path."""

    _KEPT = 32

    def __init__(self, workdir: str, local: Callable[[str], str]) -> None:
        self.workdir = workdir
        self.local = local
        self.stack = contextlib.ExitStack()
        self.folders: dict[tuple[str, ...], Folder | None] = {}

    def __enter__(self) -> _Entries:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def mode(self, relative: str) -> int | None:
        """The `st_mode` of the entry at `relative` (`sessions/ID/NAME`, `data/NAME`), not
        followed; None when there is none, or a folder on the way is not one."""
        *parts, name = relative.split("/")
        key = tuple(parts)
        if key not in self.folders:
            if len(self.folders) >= self._KEPT:
                self.stack.close()
                self.folders.clear()
            try:
                self.folders[key] = self.stack.enter_context(Folder(self.workdir, *parts))
            except OSError:  # missing, a link, or a folder that cannot be opened
                self.folders[key] = None
        folder = self.folders[key]
        if folder is None:
            return None
        try:
            return folder.stat(name).st_mode
        except OSError:
            return None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _check_references(value: Any, where: str, entries: _Entries, report: Report) -> None:
    for text in _strings(value):
        if f"{SESSIONS_DIR}/" not in text and f"{DATA_DIR}/" not in text:
            continue
        for found in _REFERENCE.finditer(text):
            report.checked["references"] += 1
            mode = entries.mode(found.group(0))
            if mode is None:
                report.problem(where, f"reference {found.group(0)} names no file")
            elif not stat.S_ISREG(mode):
                report.problem(where, f"reference {found.group(0)} is not a regular file")


def _check_jsonl(
    folder: Folder, name: str, entries: _Entries, report: Report, progress: Progress
) -> None:
    path = folder.path(name)
    record = _commit_record(folder, name, report)
    committed, committed_lines = record if record is not None else (None, 0)
    events = name == EVENTS_FILE
    root = entries.workdir
    fd, st = folder.open(name)
    try:
        number = 0
        offset = 0
        past: list[int] = []  # complete lines past the committed length
        torn = 0
        moved: Counter[str] = Counter()  # references into this workspace at another path
        for raw in iter_lines(fd, 0, st.st_size):
            number += 1
            start, offset = offset, offset + len(raw) + 1
            progress.advance(len(raw) + 1)
            if committed is not None and start >= committed:
                past.append(number)
                continue
            if committed is not None and offset > committed:
                report.problem(
                    path,
                    f"its commit record ends inside line {number} (at byte {committed:,}): the "
                    "record does not match the log",
                )
            if not raw.strip():
                continue
            report.checked["jsonl_lines"] += 1
            try:
                value = load_json(raw)
            except ValueError as exc:  # not JSON, or nested deeper than any workspace writes
                report.problem(path, f"line {number} is not valid JSON: {exc}")
                continue
            _check_references(value, f"{path}:{number}", entries, report)
            if events and not is_event(value):
                report.problem(
                    path, f"line {number} is not an event (an object with a kind): readers skip it"
                )
            elif events:
                elsewhere = _check_inside(
                    value.get("reference"), f"{path}:{number}", root, entries.local, report
                )
                if elsewhere is not None:
                    moved[elsewhere] += 1
    finally:
        os.close(fd)
    if offset < st.st_size:  # a last line without its newline
        number += 1
        torn = 1
        progress.advance(st.st_size - offset)
        offset = st.st_size
        report.warning(path, f"line {number} is torn (no newline: a write in progress or killed)")
    for elsewhere, n in moved.items():
        report.warning(
            path,
            f"{n:,} reference{'s name' if n > 1 else ' names'} files of the workspace at "
            f"{elsewhere!r}, not at {root!r} (moved or copied?): checked here by their "
            "path inside the workspace",
        )
    if past:
        lines = f"line {past[0]} is" if len(past) == 1 else f"lines {past[0]}-{past[-1]} are"
        report.warning(
            path,
            f"{lines} past the committed length (a batch never committed: a writer killed "
            "before its commit, or lines added by hand); readers skip them and the next "
            "append removes them",
        )
    if committed is not None and committed > offset:
        report.problem(
            path + COMMIT_SUFFIX,
            f"says {committed:,} bytes of {name} committed, but it holds only "
            f"{offset:,}: committed lines are missing",
        )
    elif committed is not None and committed_lines != number - len(past) - torn:
        report.problem(
            path + COMMIT_SUFFIX,
            f"says {committed_lines:,} lines of {name} committed, but its committed "
            f"part holds {number - len(past) - torn:,}",
        )


def _commit_record(folder: Folder, name: str, report: Report) -> tuple[int, int] | None:
    """The committed length and line count of a log from its commit record (`<log>.commit`),
    read as the workspace's readers read it (`read_commit`, which takes a record torn by a
    concurrent rewrite again); None when there is none to go by (none at all, or one
    reported as a problem). A link, a special or hard-linked record is reported by the walk.
    """
    record = folder.path(name) + COMMIT_SUFFIX
    try:
        found = folder.committed(name)
        if found is not None:
            return found
        raw = folder.read_bytes(name + COMMIT_SUFFIX)  # to say what is wrong with it
    except (FileNotFoundError, Refused):
        return None
    except OSError as exc:
        report.problem(record, f"cannot read: {_reason(exc)}")
        return None
    if not raw:
        report.warning(
            record, f"is empty (a writer killed before its first commit): {name} is read whole"
        )
        return None
    report.problem(
        record,
        "not a valid commit record (one 60-byte line `BYTES LINES TAIL CRC32`, or 51 bytes "
        "without TAIL, whose checksum "
        f"matches): readers take all of {name} as committed, so a batch cut by a "
        "crash would be read",
    )
    return None


def _check_inside(
    reference: Any, where: str, root: str, local: Callable[[str], str], report: Report
) -> str | None:
    """Check that a reference (an event's `reference`) names a file inside the workspace.

    One outside it (`/etc/passwd`, `.../sessions/s/../../../x`) is a problem. One that names
    a workspace file (`sessions/ID/...`, `data/...`) of a workspace at another path is this
    workspace moved or copied: its folder is returned, for one warning per log (the file is
    checked here by the part from `sessions/` or `data/` on).
    """
    if not isinstance(reference, str) or not reference:
        return None
    text = local(reference).removeprefix("file://")
    bases = {os.path.abspath(root), os.path.realpath(root)}
    candidates = [os.path.abspath(text)]
    if not os.path.isabs(text):
        candidates.append(os.path.join(os.path.abspath(root), text))
    # Lexically first, as the workspace maps a reference; then with links resolved, for a
    # workdir reached through a link (/tmp on macOS) in one spelling and not the other.
    for resolve in (os.path.normpath, os.path.realpath):
        for candidate in candidates:
            path = resolve(candidate)
            if any(path.startswith(base.rstrip(os.sep) + os.sep) for base in bases):
                return None
    elsewhere = _WORKSPACE_FILE.search(os.path.normpath(candidates[0]))
    if elsewhere is not None:
        return elsewhere.group(1) or os.sep
    report.problem(where, f"reference {reference!r} names a file outside the workspace")
    return None


# A whole path that ends in a file of a workspace; group 1 is that workspace's folder.
_WORKSPACE_FILE = re.compile(rf"^(.*?)/?(?<![^/])(?:{_REFERENCE.pattern})$")


def _check_state(folder: Folder, name: str, entries: _Entries, report: Report) -> None:
    try:
        value = load_json(folder.read_bytes(name))
    except ValueError as exc:
        report.problem(folder.path(name), f"not valid JSON: {exc}")
        return
    _check_references(value, folder.path(name), entries, report)


def _check_data(folder: Folder, name: str, report: Report, progress: Progress) -> None:
    report.checked["data_files"] += 1
    if not is_data_name(name):
        if not name.startswith(".tmp"):
            report.problem(folder.path(name), "not named by a sha256: a foreign file in data/")
        return
    digest = folder.sha256(name, progress.advance)
    if digest != name.split(".", 1)[0]:
        report.problem(folder.path(name), f"content hashes to {digest}, not to its name")


def _walk(
    workdir: str, parts: tuple[str, ...], report: Report
) -> Iterator[tuple[tuple[str, ...], str, int]]:
    """`(folder parts, name, size)` of every regular file under `workdir/parts`, reporting
    links and foreign file types; never follows a link."""
    path = os.path.join(workdir, *parts)
    try:
        with Folder(workdir, *parts) as folder:
            names = folder.names()
            for name in names:
                entry = folder.path(name)
                try:
                    st = folder.stat(name)
                except FileNotFoundError:
                    continue  # gone meanwhile (a temporary name)
                except OSError as exc:
                    report.problem(entry, f"cannot read: {_reason(exc)}")
                    continue
                if stat.S_ISLNK(st.st_mode):
                    target = os.readlink(name, dir_fd=folder.fd)
                    report.problem(entry, f"is a symbolic link (to {target}): links are refused")
                elif stat.S_ISDIR(st.st_mode):
                    yield from _walk(workdir, (*parts, name), report)
                elif not stat.S_ISREG(st.st_mode):
                    kind = (
                        "a FIFO"
                        if stat.S_ISFIFO(st.st_mode)
                        else "a socket"
                        if stat.S_ISSOCK(st.st_mode)
                        else "a device"
                    )
                    report.problem(entry, f"is {kind}: only regular files belong in a workspace")
                elif (refused := hard_linked(st, entry)) is not None:
                    report.problem(entry, hard_links_reason(refused.links))
                else:
                    report.checked["files"] += 1
                    if name.startswith(".tmp"):
                        report.warning(entry, "a temporary file left by an interrupted write")
                    yield parts, name, st.st_size
    except FileNotFoundError:
        return
    except OSError as exc:  # Refused and OffloadError too
        report.problem(path, f"cannot be listed: {_reason(exc)}")


def _check_file(
    folder: Folder, name: str, size: int, entries: _Entries, report: Report, progress: Progress
) -> None:
    """Check one file by what it is in the layout."""
    parts = folder.parts
    in_sessions = parts[:1] == (SESSIONS_DIR,)
    if parts == (DATA_DIR,):
        _check_data(folder, name, report, progress)
    elif in_sessions and is_jsonl(name):
        _check_jsonl(folder, name, entries, report, progress)
        if name == EVENTS_FILE:
            _check_artifact_index(folder, report)
    elif in_sessions and name == STATE_FILE:
        _check_state(folder, name, entries, report)
        progress.advance(size)
    elif name.endswith(".jsonl" + COMMIT_SUFFIX) and _is_file(
        folder, name.removesuffix(COMMIT_SUFFIX)
    ):
        progress.advance(size)  # checked with its log
    else:
        # Nothing else to check (a tool_result file): it must open and read.
        fd, _ = folder.open(name)
        try:
            os.read(fd, 1)
        finally:
            os.close(fd)
        progress.advance(size)


def _check_artifact_index(folder: Folder, report: Report) -> None:
    """Re-check the artifact index of every compression of a session: each artifact its
    `artifacts` events place at a line of context.jsonl must be on that line (a line that
    was changed or lost since makes the index point nowhere)."""
    fd, st = folder.open(EVENTS_FILE)
    wanted: dict[int, list[str]] = {}
    try:
        events = [
            _json_or_none(raw)
            for raw in iter_lines(fd, 0, st.st_size)
            if b'"kind": "artifacts"' in raw or b'"kind":"artifacts"' in raw
        ]
    finally:
        os.close(fd)
    for event in events:
        if not is_event(event) or event.get("kind") != EventKind.ARTIFACTS:
            continue
        for entry in event.get("artifacts") or []:
            line, value = (
                (entry.get("line"), entry.get("value")) if isinstance(entry, dict) else (None, None)
            )
            if isinstance(line, int) and isinstance(value, str) and line > 0:
                wanted.setdefault(line, []).append(value.removesuffix(" […]"))
    if not wanted:
        return
    path = folder.path(CONTEXT_FILE)
    try:
        fd, st = folder.open(CONTEXT_FILE)
    except FileNotFoundError:
        report.problem(path, f"is missing, but {EVENTS_FILE} indexes artifacts on its lines")
        return
    try:
        for number, line in enumerate(iter_lines(fd, 0, st.st_size), start=1):
            values = wanted.pop(number, None)
            if values is None:
                continue
            shown_lines = decode_log_line(line.decode("utf-8", errors="replace"))
            text = "\n".join(shown_lines) if shown_lines is not None else ""
            for value in values:
                report.checked["artifacts"] += 1
                # A command of several lines is one entry, its lines joined by " ⏎ ".
                if not all(part in text for part in value.split(" ⏎ ")):
                    report.problem(
                        f"{path}:{number}",
                        f"the artifact index places {value!r} on this line, which does not "
                        "hold it (the line was changed after the compression)",
                    )
            if not wanted:
                break
    finally:
        os.close(fd)
    for number, values in sorted(wanted.items()):
        report.checked["artifacts"] += len(values)
        report.problem(
            f"{path}:{number}",
            f"the artifact index places {len(values)} artifacts on this line, which the "
            "file does not have",
        )


def _json_or_none(raw: bytes) -> Any:
    try:
        return load_json(raw)
    except ValueError:
        return None  # said by the JSONL check


def _is_file(folder: Folder, name: str) -> bool:
    try:
        return stat.S_ISREG(folder.stat(name).st_mode)
    except OSError:
        return False


def verify_workspace(
    workdir: str, only_session: str | None = None, *, local: Callable[[str], str] = str
) -> Report:
    """Check a workspace (or one session and data/) and return what was found; `local`
    turns a reference into a copied bucket (its URI) into the copy's path."""
    report = Report()
    tops = [(SESSIONS_DIR, only_session), (DATA_DIR,)] if only_session else [()]
    files = [found for top in tops for found in _walk(workdir, top, report)]
    total = sum(size for _, _, size in files)
    by_folder: dict[tuple[str, ...], list[tuple[str, int]]] = {}
    for parts, name, size in files:
        by_folder.setdefault(parts, []).append((name, size))
    with Progress("verify: bytes", total) as progress, _Entries(workdir, local) as entries:
        for parts, names in by_folder.items():
            try:
                with Folder(workdir, *parts) as folder:
                    for name, size in names:
                        try:
                            _check_file(folder, name, size, entries, report, progress)
                        except FileNotFoundError:
                            report.problem(folder.path(name), "was removed while verifying")
                        except OSError as exc:  # Refused and OffloadError too
                            report.problem(folder.path(name), f"cannot read: {_reason(exc)}")
            except OSError as exc:
                report.problem(os.path.join(workdir, *parts), f"cannot be listed: {_reason(exc)}")
    return report


def run(args: argparse.Namespace) -> int:
    """Verify and print the problems found."""
    asked = Workdir.of(args)
    workdir = open_workspace(asked, session=args.session, check=True)
    if args.session is not None:
        session_folder(workdir, args.session)
    report = verify_workspace(workdir, args.session, local=asked.copies.local_reference)
    for problem in asked.copies.problems(workdir):
        where, _, what = problem.partition(": ")
        report.problem(where, what)
    if args.json:
        print_json(
            {
                "ok": not report.problems,
                "problems": report.problems,
                "warnings": report.warnings,
                "checked": report.checked,
            }
        )
    else:
        for p in report.problems:
            print_styled(f"{paint('problem', 'red')}: {inert(p['path'])}: {inert(p['problem'])}")
        for w in report.warnings:
            print_styled(f"{paint('warning', 'yellow')}: {inert(w['path'])}: {inert(w['warning'])}")
        c = report.checked
        verdict = (
            paint(_many(len(report.problems), "problem"), "red")
            if report.problems
            else paint("ok", "green")
        )
        print_styled(
            f"{verdict}: {_many(c['files'], 'file')}, {_many(c['jsonl_lines'], 'JSONL line')}, "
            f"{_many(c['data_files'], 'data file')}, "
            f"{_many(c['references'], 'reference')}"
            + (f", {_many(c['artifacts'], 'artifact')}" if c.get("artifacts") else "")
            + " checked"
            + (f"; {_many(len(report.warnings), 'warning')}" if report.warnings else "")
        )
    return EXIT_PROBLEMS if report.problems else EXIT_OK


def _many(n: int, what: str) -> str:
    """`1 problem`, `2 problems`."""
    return f"{n:,} {what}{'' if n == 1 else 's'}"
