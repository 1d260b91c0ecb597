"""`ctxoffload verify`: check that a workspace is whole and holds nothing it should not."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import stat
import sys
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
            "Check that every JSONL line parses (a torn last line is a warning), every data "
            "file's sha256 matches its name, every reference in events, context and state "
            "names a file of this workspace, and that no link, FIFO, socket, device or "
            "hard-linked file is inside. Exit 1 when a problem is found."
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
    with open(path, "rb") as f:
        number = 0
        for raw in f:
            number += 1
            progress.advance(len(raw))
            if not raw.endswith(b"\n"):
                report.warning(
                    path, f"line {number} is torn (no newline: a write in progress or killed)"
                )
                break
            if not raw.strip():
                continue
            report.checked["jsonl_lines"] += 1
            try:
                value = json.loads(raw)
            except ValueError as exc:
                report.problem(path, f"line {number} is not valid JSON: {exc}")
                continue
            _check_references(value, f"{path}:{number}", root, report)


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
            if relative[0] == "data" and len(relative) == 2:
                _check_data(path, report, progress)
            elif relative[0] == "sessions" and path.suffix == ".jsonl":
                _check_jsonl(path, root, report, progress)
            elif relative[0] == "sessions" and path.name == "state.json":
                _check_state(path, root, report)
                progress.advance(path.stat().st_size)
            else:
                progress.advance(path.stat().st_size)
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
            paint(f"{len(report.problems)} problems", "red")
            if report.problems
            else paint("ok", "green")
        )
        print(
            f"{verdict}: {c['files']:,} files, {c['jsonl_lines']:,} JSONL lines, "
            f"{c['data_files']:,} data files, {c['references']:,} references checked"
            + (f"; {len(report.warnings)} warnings" if report.warnings else "")
        )
    return EXIT_PROBLEMS if report.problems else EXIT_OK
