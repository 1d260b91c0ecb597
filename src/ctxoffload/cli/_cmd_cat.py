"""`ctxoffload cat`: print a file a workspace reference names, with line numbers."""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from ._commands import COMMAND_HELP
from ._common import (
    EXIT_PROBLEMS,
    CliError,
    add_workdir,
    cannot_read,
    committed_bytes,
    hard_links_refused,
    message_lines,
    open_file,
    open_workspace,
    shown,
)

__all__ = ["parse_line_range", "register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `cat` to the command line."""
    parser = commands.add_parser(
        "cat",
        help=COMMAND_HELP["cat"],
        description=(
            "Print the file a reference names (a path the workspace returned, absolute or "
            "relative, or a file:// URL), with line numbers. A context.jsonl line is shown as "
            "readable message text (a line that is not JSON is marked: a torn line when it is "
            "the last one and has no newline yet, a corrupt line otherwise). Paths outside "
            "the workspace, links, special files and files with more than one hard link (one "
            "may be outside) are refused. Exit 1 when --lines starts after the end of the file "
            "(its length is said on stderr), 2 when the file is refused or cannot be read, 0 "
            "otherwise."
        ),
    )
    add_workdir(parser)
    parser.add_argument("reference", help="a path or file:// URL inside the workspace")
    parser.add_argument(
        "--lines", metavar="A:B", help="only lines A to B (1-based, inclusive; A: or :B open)"
    )
    parser.add_argument(
        "--raw", action="store_true", help="print context.jsonl lines as stored JSON"
    )
    parser.set_defaults(run=run)


def parse_line_range(text: str | None) -> tuple[int, int | None]:
    """`'5:9'` -> (5, 9); `'5:'` -> (5, None); `':9'` -> (1, 9); `'7'` -> (7, 7)."""
    if text is None:
        return 1, None
    first_text, sep, last_text = text.partition(":")
    try:
        first = int(first_text) if first_text.strip() else 1
        last = (int(last_text) if last_text.strip() else None) if sep else first
    except ValueError:
        raise CliError(f"--lines {text!r} is not A:B with line numbers, e.g. 10:20") from None
    if first < 1 or (last is not None and last < first):
        raise CliError(
            f"--lines {text!r} is empty or starts before line 1: use A:B with 1 <= A <= B"
        )
    return first, last


def _open_regular(path: Path) -> int:
    """The file `resolve_reference` checked, opened and checked again on its descriptor.

    Raises:
        CliError: it has more than one hard link or cannot be read (`open_file`), or it is
            no longer a regular file (replaced since).
    """
    opened = open_file(path)
    if opened is None:
        raise CliError(f"{shown(path)} is not a plain file of the workspace: refused")
    return opened[0]


def _why_refused(exc: Exception, workdir: Path) -> str | None:
    """Why `resolve_reference` refused a reference inside the workspace, when the cause is
    a file that cannot be read or a hard-linked file; None otherwise (its own message
    stands: outside the workspace, missing, a link...)."""
    from ..exceptions import OffloadError

    refused = exc.__cause__
    if not isinstance(refused, OffloadError) or refused.path is None:
        return None
    path = Path(workdir, refused.path)  # the workspace names it relative to the workdir
    cause = refused.__cause__
    if isinstance(cause, OSError) and cause.errno in (errno.EACCES, errno.EPERM):
        return cannot_read(path, cause)
    try:
        st = os.lstat(path)  # only to name the reason: no byte of it is read
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        return hard_links_refused(path, st.st_nlink)
    return None


def run(args: argparse.Namespace) -> int:
    """Print the file."""
    from ..exceptions import InvalidReference

    first, last = parse_line_range(args.lines)
    from ._common import is_store_url, workdir_text

    session = None
    reference = args.reference
    bucket = is_store_url(workdir_text(args))
    if bucket:
        # Copy only what the reference needs: its session, or data/.
        found = re.search(r"(?:^|/)sessions/([^/]+)/", args.reference)
        session = found.group(1) if found else None
    workspace = open_workspace(
        args, session=session, data=session is None and "data/" in args.reference
    )
    try:
        if bucket:
            from ._bucket import local_reference

            reference = local_reference(reference)
        path = workspace.resolve_reference(reference)
    except InvalidReference as exc:
        raise CliError(_why_refused(exc, workspace.workdir) or str(exc)) from exc
    fd = _open_regular(path)
    with os.fdopen(fd, "rb") as f:
        head = f.read(8192)
        if b"\x00" in head:
            size = os.fstat(f.fileno()).st_size
            sys.stdout.write(f"{shown(path)}: binary file, {size:,} bytes (not printed)\n")
            return 0
        f.seek(0)
        is_log = path.name == "context.jsonl"
        committed = committed_bytes(path) if is_log else None
        lines = _print_lines(f, first, last, is_log=is_log and not args.raw, committed=committed)
    if args.lines is not None and lines < first:
        raise CliError(
            f"{shown(path)} has {lines:,} line{'' if lines == 1 else 's'}: "
            f"--lines {args.lines} starts after its end",
            EXIT_PROBLEMS,
        )
    return 0


def _print_lines(
    f: Any, first: int, last: int | None, *, is_log: bool, committed: int | None = None
) -> int:
    """Print lines `first` to `last` of `f`, numbered. Returns how many lines were read: the
    file's length when it ends before line `last`. Lines past `committed` bytes (a batch a
    context.jsonl's commit record does not cover) are marked, raw JSON included."""
    out = sys.stdout
    width = 6
    number = 0
    read = 0
    for number, raw in enumerate(f, start=1):
        read += len(raw)
        if number < first:
            continue
        if last is not None and number > last:
            break
        text = raw.decode("utf-8", errors="replace").rstrip("\n")
        mark = (
            "(not committed: readers skip it) "
            if committed is not None and read > committed
            else ""
        )
        if not is_log:
            out.write(f"{number:>{width}}\t{mark}{text}\n")
            continue
        try:
            lines = message_lines(json.loads(text))
        except ValueError:
            # Only a last line without its newline is torn (being written, or cut by a
            # crash); a bad line that ends in a newline was written whole, and is corrupt.
            what = "a torn line" if not raw.endswith(b"\n") else "a corrupt line"
            lines = [f"(not JSON: {what}) {text[:200]}"]
        out.write(f"{number:>{width}}\t{mark}{lines[0]}\n")
        for line in lines[1:]:
            out.write(f"{'':>{width}}\t  {line}\n")
    return number
