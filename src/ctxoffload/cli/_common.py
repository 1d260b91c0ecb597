"""What every `ctxoffload` command shares: opening a workspace, printing, progress.

Kept light on purpose: `ctxoffload --help` imports every command module, so nothing here
imports rich, watchfiles or the agent at module level.
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
import sys
import time
from collections.abc import Iterable, Iterator, Sequence

from ..exceptions import CliError

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    # Not at run time: `pathlib` imports urllib.parse and ipaddress, ~4.5 ms that `grep`
    # does without (it works on str paths); the helpers that return a Path import it then.
    from pathlib import Path
    from typing import Any, TextIO

__all__ = [
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_USAGE",
    "CliError",
    "Progress",
    "add_json",
    "add_workdir",
    "cannot_read",
    "child_path",
    "committed_bytes",
    "hard_links_refused",
    "human_bytes",
    "is_plain_file",
    "iso_time",
    "json_lines",
    "message_lines",
    "open_file",
    "open_workspace",
    "paint",
    "path_text",
    "print_json",
    "print_table",
    "session_dir",
    "session_folder",
    "settled_lstat",
    "workdir_of",
]

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


# -- arguments ------------------------------------------------------------------------------


def add_workdir(parser: argparse.ArgumentParser, *, bucket: bool = True) -> None:
    """`--workdir DIR` on a command (it may also be given before the command); `bucket`:
    whether the command reads a bucket URL too."""
    where = "a folder, or a bucket URL such as s3://bucket/prefix" if bucket else "a folder"
    parser.add_argument(
        "--workdir",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help=f"the workspace: {where} (default: $CTXOFFLOAD_WORKDIR, else the current directory)",
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    """`--json`: print machine-readable JSON instead of text."""
    parser.add_argument(
        "--json", action="store_true", default=False, help="print JSON instead of text"
    )


def workdir_text(args: argparse.Namespace) -> str:
    """The workdir asked for, as given: `--workdir`, else `$CTXOFFLOAD_WORKDIR`, else `.`."""
    given = getattr(args, "workdir", None)
    if given is not None:
        return str(given)
    return os.environ.get("CTXOFFLOAD_WORKDIR") or os.getcwd()


def workdir_of(args: argparse.Namespace) -> Path:
    """The workdir asked for, for a command that needs a local folder.

    Raises:
        CliError: the workdir is a bucket URL.
    """
    text = workdir_text(args)
    if is_store_url(text):
        raise CliError(
            f"--workdir {text!r}: `ctxoffload {getattr(args, 'command', '')}` works on a local "
            "folder; ls, show, cat, grep, stats, verify and gc read a bucket"
        )
    from pathlib import Path

    return Path(text)


def local_workdir(
    args: argparse.Namespace,
    *,
    session: str | None = None,
    data: bool = True,
    check: bool = False,
) -> Path:
    """The workdir as a folder: itself, or a temporary copy of a bucket (`s3://...`).

    For a bucket only `session` is copied when it is given, and data/ only with `data`.
    """
    from pathlib import Path

    return Path(_local_workdir_text(args, session=session, data=data, check=check))


def _local_workdir_text(
    args: argparse.Namespace, *, session: str | None, data: bool, check: bool
) -> str:
    """`local_workdir` as `str(Path(...))` would print it, without importing pathlib."""
    text = workdir_text(args)
    if not is_store_url(text):
        return path_text(text)
    from ._bucket import copy_bucket

    return str(copy_bucket(text, session=session, data=data, check=check).folder)


def path_text(text: str) -> str:
    """`str(Path(text))` without importing pathlib: `ws/./x//` -> `ws/x`, `''` -> `'.'`.

    POSIX rules, as pathlib has them: empty and `.` parts dropped, `..` kept, trailing and
    repeated slashes dropped, exactly two leading slashes kept (POSIX leaves `//` to the
    system) and more than two made one.
    """
    if os.name != "posix":  # pragma: no cover - drives and backslashes: pathlib knows them
        from pathlib import Path

        return str(Path(text))
    rest = text.lstrip("/")
    slashes = len(text) - len(rest)
    root = "" if slashes == 0 else "//" if slashes == 2 else "/"
    return root + "/".join(p for p in rest.split("/") if p and p != ".") or "."


def child_path(folder: str, name: str) -> str:
    """`str(Path(folder) / name)` for a `folder` in the form `path_text` gives and a plain
    file name (no `/`, not `.`, `..` or empty)."""
    if folder == ".":
        return name
    return folder + name if folder.endswith("/") else folder + "/" + name


# The answers of Path.exists(), is_dir() and is_symlink(), whose errors reach the user (as
# "cannot access ..."): before Python 3.14 they take ENOENT, ENOTDIR, EBADF and ELOOP from
# stat() (and these Windows errors) for "not there" and raise any other OSError (EACCES,
# ENAMETOOLONG...); from 3.14 on they take every OSError for "not there", as os.path does.
_MISSING_WINERRORS = (21, 123, 1921)  # not ready, invalid name, cannot resolve


def _mode(path: str | os.PathLike[str], *, follow: bool = True) -> int | None:
    """`stat(path).st_mode`, or None where pathlib would say the path is not there."""
    try:
        return os.stat(path, follow_symlinks=follow).st_mode
    except OSError as exc:
        if sys.version_info < (3, 14) and not _missing(exc):
            raise
        return None
    except ValueError:  # a NUL in the path
        return None


def _missing(exc: OSError) -> bool:
    return exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP) or (
        getattr(exc, "winerror", None) in _MISSING_WINERRORS
    )


def _exists(path: str | os.PathLike[str]) -> bool:
    return _mode(path) is not None


def _is_dir(path: str | os.PathLike[str]) -> bool:
    mode = _mode(path)
    return mode is not None and stat.S_ISDIR(mode)


def _is_symlink(path: str | os.PathLike[str]) -> bool:
    mode = _mode(path, follow=False)
    return mode is not None and stat.S_ISLNK(mode)


def shown(path: str | Path) -> str:
    """How a path is printed: the object's URI when it lies in a copy of a bucket."""
    bucket = sys.modules.get("ctxoffload.cli._bucket")  # imported only for a bucket
    return str(bucket.display(path)) if bucket is not None else str(path)


def is_store_url(text: str) -> bool:
    """Whether a --workdir names object storage (`s3://...`) rather than a folder.

    (String methods only: this runs at every command's start, and `re` is not loaded yet.)
    """
    scheme, sep, _ = text.partition("://")
    return (
        bool(sep)
        and scheme[:1].isalpha()
        and all(c.isalnum() or c in "+.-" for c in scheme)
        and scheme.lower() != "file"
    )


class WorkspaceFolder:
    """The paths of a workspace on disk, for commands that only read files (grep).

    Has the path methods of `LocalWorkspace` (`workdir`, `sessions_dir`, `session_dir`) without
    loading the message model and the writers, so such a command starts in a few milliseconds.
    Its paths are str, spelled as `str(Path(...))` would spell them (importing pathlib
    would cost such a command ~4.5 ms).
    """

    def __init__(self, workdir: str) -> None:
        self.workdir = path_text(workdir)

    @property
    def sessions_dir(self) -> str:
        """`{workdir}/sessions`."""
        return child_path(self.workdir, "sessions")

    def session_dir(self, session_id: str) -> str:
        """`{workdir}/sessions/{session_id}` (validated; not created)."""
        from ..workspace import validate_session_id

        return child_path(self.sessions_dir, validate_session_id(session_id))


def open_workspace(
    args: argparse.Namespace,
    *,
    paths_only: bool = False,
    session: str | None = None,
    data: bool = True,
    check: bool = False,
) -> Any:
    """The existing workspace named by the arguments, checked before anything is read.

    Creates nothing in the workspace. Returns a `LocalWorkspace`, or a `WorkspaceFolder`
    with `paths_only`. A bucket (`--workdir s3://...`) is read through a temporary copy of
    it (see `_bucket.py`): `session`, `data` and `check` say what to copy.

    Raises:
        CliError: the folder is missing, is a file, or is not a workspace.
    """
    workdir = _local_workdir_text(args, session=session, data=data, check=check)
    if not _exists(workdir):
        raise CliError(f"workdir {workdir!r} does not exist: pass --workdir DIR")
    if not _is_dir(workdir):
        raise CliError(f"workdir {workdir!r} is not a folder: pass --workdir DIR")
    sessions = child_path(workdir, "sessions")
    if _is_symlink(sessions) or not _is_dir(sessions):
        raise CliError(
            f"{workdir!r} is not a ctxoffload workspace (it has no sessions/ folder): "
            "pass --workdir DIR or set CTXOFFLOAD_WORKDIR"
        )
    if paths_only:
        return WorkspaceFolder(workdir)
    from ..workspace import LocalWorkspace

    return LocalWorkspace(workdir, fsync=False)


def session_dir(workspace: Any, session_id: str) -> Path:
    """The folder of an existing session of a `LocalWorkspace`; the id is checked before any
    I/O.

    Raises:
        CliError: the id is not a plain name, or there is no such session.
    """
    path: Path = _existing_session(workspace, session_id)
    return path


def session_folder(workspace: WorkspaceFolder, session_id: str) -> str:
    """`session_dir` for a `WorkspaceFolder`: the folder as a str."""
    path: str = _existing_session(workspace, session_id)
    return path


def _existing_session(workspace: Any, session_id: str) -> Any:
    from ..exceptions import InvalidSessionId

    try:
        path = workspace.session_dir(session_id)
    except InvalidSessionId as exc:
        raise CliError(str(exc)) from exc
    if _is_symlink(path) or not _is_dir(path):
        raise CliError(
            f"no session {session_id!r} in {shown(workspace.workdir)!r}: "
            "`ctxoffload ls` lists the sessions"
        )
    return path


# -- output ---------------------------------------------------------------------------------


def print_json(value: Any, out: TextIO | None = None) -> None:
    """Print one JSON document."""
    import json

    stream = out or sys.stdout
    stream.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def is_plain_file(path: Path) -> bool:
    """Whether `path` is a regular file itself (not a link, FIFO, socket or device)."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def json_lines(path: Path, *, command: str = "ctxoffload") -> Iterator[tuple[int, Any]]:
    """`(line_number, value)` for each complete JSON line of a plain file; nothing otherwise.

    A link, FIFO or missing file yields nothing. A last line without its newline (a write
    in progress) is skipped silently; lines that are not JSON are skipped, and said once
    per file on stderr.

    Raises:
        CliError: the file has more than one hard link (another may be outside the
            workspace: its bytes are never read), or it cannot be read (EACCES...).
    """
    import json

    opened = open_file(path)
    if opened is None:
        return
    with os.fdopen(opened[0], "rb") as f:
        bad: list[int] = []
        for number, raw in enumerate(f, start=1):
            if not raw.endswith(b"\n") or not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except ValueError:
                bad.append(number)
                continue
            yield number, value
        if bad:
            print(
                f"{command}: warning: {path} line {bad[0]} is not valid JSON"
                + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
                + ": skipped; `ctxoffload verify` checks the workspace",
                file=sys.stderr,
            )


# -- reading a workspace's files ------------------------------------------------------------

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
# What `open_file` takes for "not a file of the workspace" (verify reports those): missing,
# a symbolic link (O_NOFOLLOW), a socket or device with nothing behind it.
_NOT_A_FILE = frozenset((errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENXIO))
# A tool_result or data/ file has two links for the microseconds between being linked into
# place and its temporary name being removed: a second link is looked at again this often,
# 1 ms apart, before it is refused (as the workspace's own readers do).
_LINK_RETRIES = 20


def committed_bytes(log: str | os.PathLike[str]) -> int | None:
    """How much of a context.jsonl its commit record (`context.jsonl.commit`) says is
    committed; None without a valid record, when the whole file counts. Lines past it are a
    batch never committed, which the workspace's readers skip."""
    from ..workspace import decode_commit_record as _decode_record

    try:
        opened = open_file(os.fspath(log) + ".commit")
    except CliError:
        return None  # `ctxoffload verify` reports a record that cannot be read
    if opened is None:
        return None
    with os.fdopen(opened[0], "rb") as f:
        try:
            decoded = _decode_record(f.read(4096))
        except OSError:
            return None
    return decoded[0] if decoded is not None else None


def settled_lstat(path: str | os.PathLike[str]) -> os.stat_result | None:
    """`lstat(path)`, looked at again for a moment while it has a second link (the workspace
    links a finished tool_result into place, then drops its temporary name); None when the
    file is gone."""
    import time

    try:
        st = os.lstat(path)
        for _ in range(_LINK_RETRIES):
            if st.st_nlink <= 1:
                break
            time.sleep(0.001)
            st = os.lstat(path)
    except FileNotFoundError:
        return None
    return st


def hard_links_refused(path: str | os.PathLike[str], links: int) -> str:
    """The one line that says a hard-linked file was not read."""
    return (
        f"{shown(os.fspath(path))}: has {links} hard links: it may be shared with a file "
        "outside the workspace; not read"
    )


def cannot_read(path: str | os.PathLike[str], exc: OSError) -> str:
    """The one line that says a file could not be opened (`cannot read PATH: Permission denied`)."""
    return f"cannot read {shown(os.fspath(path))}: {exc.strerror or exc}"


def open_file(path: str | os.PathLike[str]) -> tuple[int, os.stat_result] | None:
    """Open a file of a workspace for reading: `(descriptor, its fstat)`.

    Opened without following a link and without blocking (a FIFO), then checked on the open
    descriptor, never by path (which races): a regular file with one link. So no byte of a
    link's target or of a hard-linked file (another name of which may be outside the
    workspace) is ever read. One `open` and one `fstat` for a good file: `grep` opens
    thousands.

    Returns:
        None when there is no such file, or it is a symbolic link, FIFO, socket, device or
        folder: not a file of the workspace (`ctxoffload verify` reports those).

    Raises:
        CliError: it has more than one hard link, or it cannot be opened (EACCES...). The
            message is one line naming the file.
    """
    for attempt in range(_LINK_RETRIES + 1):
        try:
            fd = os.open(path, _READ_FLAGS)
        except OSError as exc:
            if exc.errno in _NOT_A_FILE:
                return None
            raise CliError(cannot_read(path, exc)) from None
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_nlink <= 1:
            return fd, st
        os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if attempt < _LINK_RETRIES:
            time.sleep(0.001)
    raise CliError(hard_links_refused(path, st.st_nlink))


_COLOURS = {"red": "31", "green": "32", "yellow": "33", "magenta": "35", "cyan": "36"}


def paint(text: str, colour: str, stream: TextIO | None = None) -> str:
    """`text` in an ANSI colour when `stream` (stdout) is a terminal and NO_COLOR is unset."""
    target = stream or sys.stdout
    if os.environ.get("NO_COLOR") or not target.isatty():
        return text
    return f"\x1b[{_COLOURS[colour]}m{text}\x1b[0m"


def _use_rich(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or not stream.isatty():
        return False
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def print_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    right: Sequence[int] = (),
    title: str | None = None,
    out: TextIO | None = None,
) -> None:
    """A table: rich on a terminal when rich is installed, aligned plain text otherwise.

    Args:
        headers: column titles.
        rows: cells; numbers are printed with thousands separators.
        right: indexes of right-aligned columns.
        title: a line printed above the table.
    """
    stream = out or sys.stdout
    cells = [[_cell(v) for v in row] for row in rows]
    if _use_rich(stream):
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for i, header in enumerate(headers):
            # The first column (ids, names) and the numbers are never cut or wrapped, on a
            # narrow terminal too: the other columns wrap instead.
            whole = i == 0 or i in right
            width = max((len(row[i]) for row in cells if i < len(row)), default=0)
            table.add_column(
                header,
                justify="right" if i in right else "left",
                no_wrap=whole,
                min_width=width if whole else None,
                overflow="fold",  # what must give way wraps; nothing is cut with "…"
            )
        for row in cells:
            table.add_row(*row)
        Console(file=stream).print(table)
        return
    if title:
        stream.write(title + "\n")
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=False)]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if i in right else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=False))
        ]
        return "  ".join(parts).rstrip()

    stream.write(line(headers) + "\n")
    for row in cells:
        stream.write(line(row) + "\n")


def _cell(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def human_bytes(n: int) -> str:
    """`1536` -> `'1.5 KB'`."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{n:,} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def iso_time(epoch: float) -> str:
    """A POSIX time as `2026-11-22 10:53:18` UTC."""
    from datetime import datetime, timezone

    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


class Progress:
    """A one-line counter on stderr while long work runs; silent when stderr is not a terminal.

    Args:
        label: what is being done ("verifying").
        total: how many units there are, when known.
        stream: where to draw (stderr by default).
    """

    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None):
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.done = 0
        self._last = 0.0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled and self._last:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def advance(self, n: int = 1, note: str = "") -> None:
        """Count `n` more units done and redraw, at most ten times a second."""
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if self._last and now - self._last < 0.1 and (self.total is None or self.done < self.total):
            return
        self._last = now
        of = f"/{self.total:,}" if self.total is not None else ""
        self.stream.write(f"\r\x1b[K{self.label} {self.done:,}{of} {note}"[:200])
        self.stream.flush()


# -- messages as text -----------------------------------------------------------------------


def message_lines(value: Any) -> list[str]:
    """A context.jsonl message as readable lines: role, text, tool calls and results.

    Understands ctxoffload's own messages and OpenAI / Anthropic dicts; anything else is
    shown as its JSON.
    """
    import json

    from ..formats import to_msg as _to_msg
    from ..messages import DataBlock, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock

    try:
        msg = _to_msg(value)
    except Exception:
        return json.dumps(value, ensure_ascii=False).splitlines() or [""]
    head = f"[{msg.role}]" + (f" {msg.name}" if msg.name else "")
    out = [head]
    for block in msg.blocks:
        if isinstance(block, TextBlock):
            out.extend(block.text.splitlines() or [""])
        elif isinstance(block, ThinkingBlock):
            out.extend("(thinking) " + line for line in block.thinking.splitlines())
        elif isinstance(block, ToolCallBlock):
            args = json.dumps(block.input, ensure_ascii=False)
            out.append(f"-> tool call {block.name} (id {block.id}) {args}")
        elif isinstance(block, ToolResultBlock):
            error = " (error)" if block.is_error else ""
            out.append(f"<- tool result {block.name or '?'} (id {block.id}){error}:")
            if isinstance(block.output, str):
                out.extend(block.output.splitlines())
            else:
                for item in block.output:
                    if isinstance(item, TextBlock):
                        out.extend(item.text.splitlines())
                    else:
                        out.append(_data_line(item))
        elif isinstance(block, DataBlock):
            out.append(_data_line(block))
    return out


def _data_line(block: Any) -> str:
    source = block.source
    where = getattr(source, "url", None) or f"(inline base64, {len(source.data):,} chars)"
    return f"<data url='{where}' name='{block.name or ''}' media_type='{block.media_type or ''}'/>"
