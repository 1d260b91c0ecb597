"""`ctxoffload cat`: print a file a workspace reference names, with line numbers."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from typing import Any

from .._disk.layout import CONTEXT_FILE, DATA_DIR, SESSIONS_DIR
from .._disk.read import Folder, workspace_of
from .._search.sniff import SNIFF_BYTES, binary_reason
from ..exceptions import CliError
from ._access import committed_end, open_workspace, refusal, session_ids
from ._arguments import EXIT_PROBLEMS, Workdir, add_workdir, is_store_url
from ._commands import COMMAND_HELP
from ._output import raw_stream, shown

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


def _refused(exc: OSError, reference: str, workdir: str, path: str) -> str:
    """What cat says of a reference whose file it could not open: the reader's refusal line
    (other hard links, no permission), else that it names no file of the workspace (missing,
    through a link, a special file)."""
    from .._disk.read import not_a_reference

    said = refusal(exc, path)
    if said is not None:
        return said
    return str(not_a_reference(reference, workdir)) + _named_in_sessions(workdir, reference)


# Where a reference names a file of one session: only that session of a bucket is copied.
_SESSION_IN_REFERENCE = re.compile(rf"(?:^|/){re.escape(SESSIONS_DIR)}/([^/]+)/")


def store_of(reference: str) -> str | None:
    """The workspace URL a store's reference names a file of (`sqlite:///x.db` of
    `sqlite:///x.db/sessions/s/context.jsonl`, `s3://b/p` of `s3://b/p/data/...`), found
    from the reference alone; None when it names no file of a workspace."""
    found = _FILE_IN_STORE.search(reference)
    return reference[: found.start()] if found else None


_FILE_IN_STORE = re.compile(rf"/(?:{re.escape(SESSIONS_DIR)}/[^/]+|{re.escape(DATA_DIR)})/[^/]+\Z")


def _named_in_sessions(workdir: str, reference: str, *, shown_at_most: int = 3) -> str:
    """For a bare file name (`tool_result-call_1.txt`), the sessions' files of that name,
    as a hint to add to the refusal ("" for anything else, or when none is). Only looked
    at, never read: a regular file, not a link."""
    import stat

    if not reference or "/" in reference or reference in (".", ".."):
        return ""
    found = []
    for session in session_ids(workdir):
        try:
            with Folder(workdir, SESSIONS_DIR, session) as folder:
                if stat.S_ISREG(folder.stat(reference).st_mode):
                    found.append(f"{SESSIONS_DIR}/{session}/{reference}")
        except OSError:
            continue
        if len(found) > shown_at_most:
            break
    if not found:
        return ""
    more = ", ..." if len(found) > shown_at_most else ""
    return f"; the sessions hold {reference}: {', '.join(found[:shown_at_most])}{more}"


def run(args: argparse.Namespace) -> int:
    """Print the file."""
    from .._disk.read import reference_parts
    from ..exceptions import InvalidReference

    first, last = parse_line_range(args.lines)
    session = None
    reference = args.reference
    in_no_workspace = False
    where = Workdir.of(args)
    if not where.given and not os.environ.get("CTXOFFLOAD_WORKDIR"):
        # A path a notice printed is enough, from any folder: it names its workspace.
        own = store_of(reference) if is_store_url(reference) else workspace_of(reference)
        if own is not None:
            where = Workdir(own, given=True, command=where.command, copies=where.copies)
        else:
            in_no_workspace = os.path.isabs(reference) or reference.startswith("file:")
    if where.is_bucket:
        # Copy only what the reference needs: its session, or data/.
        found = _SESSION_IN_REFERENCE.search(args.reference)
        session = found.group(1) if found else None
    try:
        workdir = open_workspace(
            where, session=session, data=session is None and f"{DATA_DIR}/" in args.reference
        )
    except CliError as exc:
        if not in_no_workspace:
            raise
        # Said of the path first: the current folder was only the fallback.
        raise CliError(
            f"reference {reference!r} names no file of a workspace (a file of one is "
            f"{SESSIONS_DIR}/ID/FILE or {DATA_DIR}/FILE in a folder that holds {SESSIONS_DIR}/), "
            f"and the current folder is none: {exc}"
        ) from None
    root = os.path.realpath(workdir)
    try:
        reference = where.copies.local_reference(reference)
        *parts, name = reference_parts(reference, workdir, root)
    except InvalidReference as exc:
        raise CliError(str(exc)) from exc
    path = os.path.join(root, *parts, name)
    with contextlib.ExitStack() as stack:
        # Every folder on the way is opened without following a link; the file is checked
        # on its descriptor.
        try:
            folder = stack.enter_context(Folder(workdir, *parts, root=root))
            fd, st = folder.open(name)
        except OSError as exc:  # Refused and OffloadError are OSErrors too
            raise CliError(_refused(exc, reference, workdir, path)) from None
        f = stack.enter_context(os.fdopen(fd, "rb"))
        head = f.read(SNIFF_BYTES)
        if binary_reason(head) is not None:  # the rule of the agent's Read
            sys.stdout.write(f"{shown(path)}: binary file, {st.st_size:,} bytes (not printed)\n")
            return 0
        f.seek(0)
        is_log = name == CONTEXT_FILE and parts[:1] == [SESSIONS_DIR]
        committed = committed_end(folder, name, f.fileno(), st.st_size) if is_log else None
        # --raw to a pipe or a file: the bytes as stored. On a terminal they stay inert.
        exact = args.raw and not sys.stdout.isatty()
        lines = _print_lines(
            f, first, last, is_log=is_log and not args.raw, committed=committed, exact=exact
        )
    if args.lines is not None and lines < first:
        raise CliError(
            f"{shown(path)} has {lines:,} line{'' if lines == 1 else 's'}: "
            f"--lines {args.lines} starts after its end",
            EXIT_PROBLEMS,
        )
    return 0


def _print_lines(
    f: Any,
    first: int,
    last: int | None,
    *,
    is_log: bool,
    committed: int | None = None,
    exact: bool = False,
) -> int:
    """Print lines `first` to `last` of `f`, numbered. Returns how many lines were read: the
    file's length when it ends before line `last`. Lines past `committed` bytes (a batch a
    context.jsonl's commit record does not cover) are marked, raw JSON included. With
    `exact`, each line's bytes are written as stored, control characters included (the
    stream beneath the inert one); otherwise through the inert stream."""
    out = sys.stdout
    exact_out = raw_stream(sys.stdout).buffer if exact else None
    width = 6
    number = 0
    read = 0
    for number, raw in enumerate(f, start=1):
        read += len(raw)
        if number < first:
            continue
        if last is not None and number > last:
            break
        mark = (
            "(not committed: readers skip it) "
            if committed is not None and read > committed
            else ""
        )
        if exact_out is not None:
            body = raw if raw.endswith(b"\n") else raw + b"\n"
            exact_out.write(f"{number:>{width}}\t{mark}".encode() + body)
            continue
        text = raw.decode("utf-8", errors="replace").rstrip("\n")
        if not is_log:
            out.write(f"{number:>{width}}\t{mark}{text}\n")
            continue
        lines = _message_lines(text, whole=raw.endswith(b"\n"))
        out.write(f"{number:>{width}}\t{mark}{lines[0]}\n")
        for line in lines[1:]:
            out.write(f"{'':>{width}}\t  {line}\n")
    return number


def _message_lines(text: str, *, whole: bool) -> list[str]:
    """A context.jsonl line as `text.message_lines` shows it; a line that is not JSON is
    marked (only a last line without its newline is torn: being written, or cut by a crash;
    a bad line that ends in a newline was written whole, and is corrupt)."""
    import json

    from .._depth import load_json
    from ..text import MAX_DECODED_LINE_BYTES, decode_log_line

    decoded = decode_log_line(text)
    if decoded:
        return decoded
    if decoded is None and len(text) <= MAX_DECODED_LINE_BYTES:
        try:
            json.loads(text)
        except (ValueError, RecursionError):
            what = "a torn line" if not whole else "a corrupt line"
            return [f"(not JSON: {what}) {text[:200]}"]
        try:
            load_json(text)
        except ValueError as exc:  # JSON, deeper than any workspace writes: not decoded
            return [f"(not shown decoded: {exc}) {text[:200]}"]
    return [text]  # JSON that is no message (a number, an empty object), or too long: as is
