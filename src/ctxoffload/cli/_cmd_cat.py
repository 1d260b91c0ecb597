"""`ctxoffload cat`: print a file a workspace reference names, with line numbers."""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import sys
from pathlib import Path

from ._commands import COMMAND_HELP
from ._common import CliError, add_workdir, message_lines, open_workspace

__all__ = ["parse_line_range", "register", "run"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `cat` to the command line."""
    parser = commands.add_parser(
        "cat",
        help=COMMAND_HELP["cat"],
        description=(
            "Print the file a reference names (a path the workspace returned, absolute or "
            "relative, or a file:// URL), with line numbers. A context.jsonl line is shown as "
            "readable message text. Paths outside the workspace are refused."
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
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        raise CliError(f"{path} is not a plain file of the workspace: refused")
    return fd


def run(args: argparse.Namespace) -> int:
    """Print the file."""
    from ..exceptions import InvalidReference

    first, last = parse_line_range(args.lines)
    from ._common import is_store_url, shown, workdir_text

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
        raise CliError(str(exc)) from exc
    fd = _open_regular(path)
    out = sys.stdout
    with os.fdopen(fd, "rb") as f:
        head = f.read(8192)
        if b"\x00" in head:
            size = os.fstat(f.fileno()).st_size
            out.write(f"{shown(path)}: binary file, {size:,} bytes (not printed)\n")
            return 0
        f.seek(0)
        is_log = path.name == "context.jsonl" and not args.raw
        width = 6
        for number, raw in enumerate(f, start=1):
            if number < first:
                continue
            if last is not None and number > last:
                break
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            if not is_log:
                out.write(f"{number:>{width}}\t{text}\n")
                continue
            try:
                lines = message_lines(json.loads(text))
            except ValueError:
                lines = [f"(not JSON: a torn line) {text[:200]}"]
            out.write(f"{number:>{width}}\t{lines[0]}\n")
            for line in lines[1:]:
                out.write(f"{'':>{width}}\t  {line}\n")
    return 0
