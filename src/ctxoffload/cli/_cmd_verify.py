"""`ctxoffload verify`: check that a workspace is whole and holds nothing it should not."""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import re
import stat
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._commands import COMMAND_HELP
from ._common import (
    EXIT_OK,
    EXIT_PROBLEMS,
    Progress,
    add_json,
    add_workdir,
    open_workspace,
    paint,
    print_json,
    session_dir,
    shown,
)

__all__ = ["register", "run", "verify_workspace"]

# A path into the workspace as references write it (absolute, relative or file://); the part
# from `sessions/` or `data/` on is what must exist in this workspace.
_REFERENCE = re.compile(
    r"(?:sessions/[A-Za-z0-9][A-Za-z0-9._-]{0,127}/(?:tool_result-[A-Za-z0-9._-]+\.txt"
    r"|context\.jsonl|events\.jsonl|state\.json)|data/[0-9a-f]{64}\.[A-Za-z0-9]+)"
)
_CHUNK = 1 << 20


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
    parser.add_argument("session", nargs="?", help="only this session (and data/)")
    parser.set_defaults(run=run)


@dataclass
class Report:
    """What verification found."""

    problems: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    checked: dict[str, int] = field(
        default_factory=lambda: {"files": 0, "jsonl_lines": 0, "data_files": 0, "references": 0}
    )

    def problem(self, path: Path | str, what: str) -> None:
        self.problems.append({"path": shown(path), "problem": what})

    def warning(self, path: Path | str, what: str) -> None:
        self.warnings.append({"path": shown(path), "warning": what})


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _check_references(value: Any, where: str, root: Path, report: Report) -> None:
    for text in _strings(value):
        if "sessions/" not in text and "data/" not in text:
            continue
        for found in _REFERENCE.finditer(text):
            report.checked["references"] += 1
            target = root / found.group(0)
            try:
                mode = target.lstat().st_mode
            except OSError:
                report.problem(where, f"reference {found.group(0)} names no file")
                continue
            if not stat.S_ISREG(mode):
                report.problem(where, f"reference {found.group(0)} is not a regular file")


def _check_jsonl(path: Path, root: Path, report: Report, progress: Progress) -> None:
    record = _commit_record(path, report)
    committed, committed_lines = record if record is not None else (None, 0)
    events = path.name == "events.jsonl"
    with open(path, "rb") as f:
        number = 0
        offset = 0
        past: list[int] = []  # complete lines past the committed length
        torn = 0
        moved: Counter[str] = Counter()  # references into this workspace at another path
        for raw in f:
            number += 1
            start, offset = offset, offset + len(raw)
            progress.advance(len(raw))
            if not raw.endswith(b"\n"):
                torn = 1
                report.warning(
                    path, f"line {number} is torn (no newline: a write in progress or killed)"
                )
                break
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
                value = json.loads(raw)
            except ValueError as exc:
                report.problem(path, f"line {number} is not valid JSON: {exc}")
                continue
            _check_references(value, f"{path}:{number}", root, report)
            if events and isinstance(value, dict):
                folder = _check_inside(value.get("reference"), f"{path}:{number}", root, report)
                if folder is not None:
                    moved[folder] += 1
    for folder, n in moved.items():
        report.warning(
            path,
            f"{n:,} reference{'s name' if n > 1 else ' names'} files of the workspace at "
            f"{folder!r}, not at {str(root)!r} (moved or copied?): checked here by their "
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
            path.with_name(path.name + COMMIT_SUFFIX),
            f"says {committed:,} bytes of {path.name} committed, but it holds only "
            f"{offset:,}: committed lines are missing",
        )
    elif committed is not None and committed_lines != number - len(past) - torn:
        report.problem(
            path.with_name(path.name + COMMIT_SUFFIX),
            f"says {committed_lines:,} lines of {path.name} committed, but its committed "
            f"part holds {number - len(past) - torn:,}",
        )


COMMIT_SUFFIX = ".commit"


def _commit_record(path: Path, report: Report) -> tuple[int, int] | None:
    """The committed length and line count of a log from its commit record (`<log>.commit`),
    or None when there is none to go by (none at all, or one reported as a problem)."""
    from ..workspace import decode_commit_record as _decode_record

    record = path.with_name(path.name + COMMIT_SUFFIX)
    try:
        fd = os.open(record, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno != errno.ELOOP:  # a link is reported by the walk
            report.problem(record, f"cannot read: {exc.strerror or exc}")
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            return None  # reported by the walk
        # A writer rewrites the record in place with one small pwrite: a read that lands in
        # the middle of it fails its checksum and is taken again, as the workspace does.
        for _ in range(20):
            raw = os.pread(fd, 4096, 0)
            decoded = _decode_record(raw)
            if decoded is not None or not raw:
                break
            time.sleep(0.001)
    except OSError as exc:
        report.problem(record, f"cannot read: {exc.strerror or exc}")
        return None
    finally:
        os.close(fd)
    if not raw:
        report.warning(
            record, f"is empty (a writer killed before its first commit): {path.name} is read whole"
        )
        return None
    if decoded is None:
        report.problem(
            record,
            "not a valid commit record (one 51-byte line `BYTES LINES CRC32` whose checksum "
            f"matches): readers take all of {path.name} as committed, so a batch cut by a "
            "crash would be read",
        )
        return None
    return decoded


def _check_inside(reference: Any, where: str, root: Path, report: Report) -> str | None:
    """Check that a reference (an event's `reference`) names a file inside the workspace.

    One outside it (`/etc/passwd`, `.../sessions/s/../../../x`) is a problem. One that names
    a workspace file (`sessions/ID/...`, `data/...`) of a workspace at another path is this
    workspace moved or copied: its folder is returned, for one warning per log (the file is
    checked here by the part from `sessions/` or `data/` on).
    """
    if not isinstance(reference, str) or not reference:
        return None
    bucket = sys.modules.get("ctxoffload.cli._bucket")  # imported only for a bucket
    text = bucket.local_reference(reference) if bucket is not None else reference
    text = text.removeprefix("file://")
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


def _check_state(path: Path, root: Path, report: Report) -> None:
    try:
        value = json.loads(path.read_bytes())
    except ValueError as exc:
        report.problem(path, f"not valid JSON: {exc}")
        return
    _check_references(value, str(path), root, report)


def _check_data(path: Path, report: Report, progress: Progress) -> None:
    report.checked["data_files"] += 1
    stem = path.name.split(".", 1)[0]
    if not re.fullmatch(r"[0-9a-f]{64}", stem):
        if not path.name.startswith(".tmp"):
            report.problem(path, "not named by a sha256: a foreign file in data/")
        return
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
            progress.advance(len(chunk))
    if digest.hexdigest() != stem:
        report.problem(path, f"content hashes to {digest.hexdigest()}, not to its name")


def _walk(top: Path, report: Report) -> Iterator[Path]:
    """Every regular file under `top`, reporting links and foreign file types; never follows."""
    try:
        entries = list(os.scandir(top))
    except OSError as exc:
        report.problem(top, f"cannot be listed: {exc.strerror or exc}")
        return
    for entry in sorted(entries, key=lambda e: e.name):
        path = Path(entry.path)
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            report.problem(path, f"is a symbolic link (to {os.readlink(path)}): links are refused")
        elif stat.S_ISDIR(st.st_mode):
            yield from _walk(path, report)
        elif not stat.S_ISREG(st.st_mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(st.st_mode)
                else "a socket"
                if stat.S_ISSOCK(st.st_mode)
                else "a device"
            )
            report.problem(path, f"is {kind}: only regular files belong in a workspace")
        elif st.st_nlink > 1:
            report.problem(
                path, f"has {st.st_nlink} hard links: it may be shared with a file outside"
            )
        else:
            report.checked["files"] += 1
            if entry.name.startswith(".tmp"):
                report.warning(path, "a temporary file left by an interrupted write")
            yield path


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _check_readable(path: Path, progress: Progress) -> None:
    """Open and read a file that has nothing else to check (a tool_result file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        os.read(fd, 1)
    finally:
        os.close(fd)
    progress.advance(path.stat().st_size)


def verify_workspace(workdir: Path, only_session: str | None = None) -> Report:
    """Check a workspace (or one session and data/) and return what was found."""
    report = Report()
    root = workdir
    tops = [workdir / "sessions" / only_session, workdir / "data"] if only_session else [workdir]
    files = [p for top in tops if top.is_dir() for p in _walk(top, report)]
    total = sum(p.stat().st_size for p in files)
    with Progress("verify: bytes", total) as progress:
        for path in files:
            relative = path.relative_to(workdir).parts
            try:
                if relative[0] == "data" and len(relative) == 2:
                    _check_data(path, report, progress)
                elif relative[0] == "sessions" and path.suffix == ".jsonl":
                    _check_jsonl(path, root, report, progress)
                elif relative[0] == "sessions" and path.name == "state.json":
                    _check_state(path, root, report)
                    progress.advance(path.stat().st_size)
                elif path.name.endswith(".jsonl" + COMMIT_SUFFIX) and _is_file(
                    path.with_name(path.name.removesuffix(COMMIT_SUFFIX))
                ):
                    progress.advance(path.stat().st_size)  # checked with its log
                else:
                    _check_readable(path, progress)
            except OSError as exc:
                report.problem(path, f"cannot read: {exc.strerror or exc}")
    return report


def run(args: argparse.Namespace) -> int:
    """Verify and print the problems found."""
    workspace = open_workspace(args, session=args.session, check=True)
    if args.session is not None:
        session_dir(workspace, args.session)
    report = verify_workspace(workspace.workdir, args.session)
    bucket = sys.modules.get("ctxoffload.cli._bucket")  # imported only for a bucket
    copy = bucket._copies.get(str(workspace.workdir)) if bucket is not None else None
    for problem in copy.problems if copy is not None else []:
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
            print(f"{paint('problem', 'red')}: {p['path']}: {p['problem']}")
        for w in report.warnings:
            print(f"{paint('warning', 'yellow')}: {w['path']}: {w['warning']}")
        c = report.checked
        verdict = (
            paint(_many(len(report.problems), "problem"), "red")
            if report.problems
            else paint("ok", "green")
        )
        print(
            f"{verdict}: {_many(c['files'], 'file')}, {_many(c['jsonl_lines'], 'JSONL line')}, "
            f"{_many(c['data_files'], 'data file')}, "
            f"{_many(c['references'], 'reference')} checked"
            + (f"; {_many(len(report.warnings), 'warning')}" if report.warnings else "")
        )
    return EXIT_PROBLEMS if report.problems else EXIT_OK


def _many(n: int, what: str) -> str:
    """`1 problem`, `2 problems`."""
    return f"{n:,} {what}{'' if n == 1 else 's'}"
