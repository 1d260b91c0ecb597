"""The one light reader of a workspace's files: what the workspaces' read side, the agent's
file tools, the retrieval tool and every `ctxoffload` command read through.

- Opening: `Folder` reaches a folder of the workspace from its workdir one component at a time
  without following a link (`_paths.open_tree`), and opens its files with `_paths`'s verified
  open: no link followed, never blocking on a FIFO, checked on the open descriptor (a regular
  file with one link, a second link looked at again for a moment while the workspace links a
  finished file into place). A refusal is a `Refused` naming the file and why.
- The commit record beside a committed log (`context.jsonl.commit`): its codec and a read that
  retries one torn by a concurrent rewrite.
- JSONL: complete lines up to the committed length, a torn last line skipped and counted,
  a line that is not JSON (or nests deeper than any workspace writes) skipped and counted
  (`JsonLines`); the same rule for a log held in
  memory (`parse_log`: an object store's segments, an in-memory workspace's files).
- The session record: event kinds as named constants, and rebuilding what the model was sent
  at a step from the events alone.

Light on purpose: no pydantic and no `typing` at run time, so `ctxoffload --help` and `grep`
keep their start-up figures; `json` and `zlib` are imported by what needs them (a search of
tool results needs neither: ~1.5 ms of its start-up).
"""

from __future__ import annotations

import itertools
import os
import stat
import time

from ..exceptions import IncompleteRecord, InvalidReference, OffloadError
from .ids import is_session_id
from .layout import COMMIT_SUFFIX, DATA_DIR, EVENTS_FILE, SESSIONS_DIR, is_committed_log
from .paths import (
    Refused,
    file_url_to_path,
    linked_elsewhere,
    open_for_reading,
    open_path,
    workdir_problem,
)

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any

__all__ = [
    "COMMIT_RECORD_SIZE",
    "COMMIT_TAIL",
    "CommitRecord",
    "EventKind",
    "Folder",
    "JsonLines",
    "Refused",
    "check_line_range",
    "commit_mismatch",
    "context_event_sentence",
    "decode_commit_record",
    "encode_commit_record",
    "fidelity_sentence",
    "is_event",
    "iter_chunks",
    "iter_lines",
    "iter_pieces",
    "not_a_reference",
    "open_reference",
    "parse_log",
    "read_commit",
    "read_log",
    "readable_end",
    "rebuild_step",
    "reference_parts",
    "reference_text",
    "take_lines",
    "token_change",
    "workspace_of",
]

_CHUNK = 1 << 20
COMMIT_RECORD_SIZE = 60
# A record written before it carried the checksum of the log's bytes before its end.
_OLD_COMMIT_RECORD_SIZE = 51
# How many of the log's bytes before the committed end the record's identity covers.
COMMIT_TAIL = 64
# A commit record is rewritten in place by one small pwrite; a read that lands in the middle
# of it fails its checksum and is taken again, this many times, 1 ms apart.
_COMMIT_RETRIES = 20
# A tool_result file made under a temporary name (`file_to_link` off Linux) has two links
# for the microseconds between being linked into place and that name being removed:
# `Folder.stat` looks again this often, 1 ms apart, as the verified open does before it
# refuses a second link.
_SETTLE_RETRIES = 20


# -- the commit record ------------------------------------------------------------------------


class CommitRecord(tuple[int, int]):
    """(committed bytes, newlines) from a commit record, and `tail`: the CRC-32 of the last
    `COMMIT_TAIL` bytes of the log before the committed end (None in a record written before
    records carried it). The tail ties the record to its log: one copied from another
    session does not match it."""

    tail: int | None

    def __new__(cls, committed: int, newlines: int, tail: int | None = None) -> CommitRecord:
        record = super().__new__(cls, (committed, newlines))
        record.tail = tail
        return record


def encode_commit_record(committed: int, newlines: int, tail: bytes | None = None) -> bytes:
    """The record saying the first `committed` bytes (`newlines` lines) of a log are committed:
    one fixed-width line `BYTES LINES TAIL CRC32`, where TAIL is the CRC-32 of `tail`, the
    last `COMMIT_TAIL` bytes of the log before `committed` (all of them when fewer). Without
    `tail`, the shorter `BYTES LINES CRC32` of older versions."""
    import zlib

    body = b"%020d %020d" % (committed, newlines)
    if tail is not None:
        body += b" %08x" % zlib.crc32(tail[-COMMIT_TAIL:])
    return body + b" %08x\n" % zlib.crc32(body)


def decode_commit_record(raw: bytes) -> tuple[int, int] | None:
    """(committed bytes, newlines) from a commit record, or None if absent or damaged.

    The pair is a `CommitRecord`, whose `tail` is the checksum of the log's last bytes before
    the committed end (None in a record of an older version), which `commit_mismatch` checks.
    """
    import zlib

    if len(raw) not in (COMMIT_RECORD_SIZE, _OLD_COMMIT_RECORD_SIZE) or not raw.endswith(b"\n"):
        return None
    body, _, crc = raw[:-1].rpartition(b" ")
    try:
        if int(crc, 16) != zlib.crc32(body):
            return None
        fields = body.split(b" ")
        committed, newlines = int(fields[0]), int(fields[1])
        tail = int(fields[2], 16) if len(fields) == 3 else None
    except (ValueError, IndexError):
        return None
    return CommitRecord(committed, newlines, tail)


def read_commit(dir_fd: int, name: str, shown: str) -> tuple[int, int] | None:
    """(committed bytes, lines) from the commit record of the log `name` in `dir_fd`.

    None when the log has no record (events.jsonl, a log from before records) or its record
    stays damaged: then the whole log counts.

    Raises:
        Refused: the record is a planted link, a special file or hard-linked.
        OffloadError: it cannot be opened (EACCES...).
    """
    try:
        fd = open_for_reading(dir_fd, name + COMMIT_SUFFIX, shown + COMMIT_SUFFIX)
    except FileNotFoundError:
        return None
    try:
        for _ in range(_COMMIT_RETRIES):
            raw = os.pread(fd, COMMIT_RECORD_SIZE + 1, 0)
            if not raw:
                return None
            record = decode_commit_record(raw)
            if record is not None:
                return record
            time.sleep(0.001)
        return None
    finally:
        os.close(fd)


def commit_mismatch(fd: int, record: tuple[int, int], size: int) -> str | None:
    """Why a commit record cannot describe the log open as `fd`, or None if it may.

    A record is trusted only where it ends: inside the log (`size` bytes, taken after the
    record was read, as writers extend a log before they commit it), on a line boundary
    (offset 0, or the byte before it a newline), and, when it carries one, with the checksum
    of the log's last bytes before its end (`CommitRecord.tail`). One that fails (copied
    from another session, edited, written by a damaged disk) is ignored: the whole log
    counts, and no writer trims into a line. Its line count is the writer's to check
    (`JsonlAppender`), as only it must count the lines.

    Args:
        fd: the log, open for reading.
        record: (committed bytes, lines) as `read_commit` found them; a `CommitRecord`'s
            `tail` is checked too.
        size: the log's size.
    """
    import zlib

    committed, lines = record
    if committed > size:
        return f"says {committed:,} bytes are committed but the log holds only {size:,}"
    if committed > 0 and os.pread(fd, 1, committed - 1) != b"\n":
        return f"says {committed:,} bytes are committed, which ends in the middle of a line"
    if lines > committed:
        return f"says {lines:,} lines are committed in {committed:,} bytes"
    tail = getattr(record, "tail", None)
    if tail is not None:
        start = max(0, committed - COMMIT_TAIL)
        if zlib.crc32(os.pread(fd, committed - start, start)) != tail:
            return (
                "was written for other bytes than the log holds before its end (a record "
                "copied from another session?)"
            )
    return None


def readable_end(dir_fd: int, name: str, shown: str, fd: int, size: int) -> int:
    """Where every reader of the file `name` in `dir_fd` (open as `fd`, `size` bytes) stops
    reading: the one rule for the agent's Read and Grep, the retrieval tool, the workspace's
    `read_reference` and `read_lines`, and the `ctxoffload` commands.

    A committed log (context.jsonl) ends where its commit record says its acknowledged
    batches end, when `commit_mismatch` trusts the record: lines past it are a batch being
    written, or one a kill cut before its commit, which the next `initialize` trims and no
    reader may show. Any other file, or a log whose record is missing, cannot be read or is
    not trusted, ends at `size` (`ctxoffload verify` reports a record it does not trust).

    Args:
        dir_fd: the folder the file is in, open.
        name: the file's name in it.
        shown: how the file is named to people.
        fd: the file, open for reading.
        size: its size, taken after it was opened.
    """
    if not is_committed_log(name):
        return size
    try:
        record = read_commit(dir_fd, name, shown)
    except OSError:  # Refused and OffloadError are OSErrors too
        return size
    if record is None or commit_mismatch(fd, record, size) is not None:
        return size
    return record[0]


# -- lines and JSON lines ---------------------------------------------------------------------


def iter_chunks(fd: int, start: int, end: int) -> Iterator[bytes]:
    """Bytes [start, end) of an open file (less if it ends first), read a megabyte at a time."""
    offset = start
    while offset < end:
        chunk = os.pread(fd, min(_CHUNK, end - offset), offset)
        if not chunk:
            break
        offset += len(chunk)
        yield chunk


def check_line_range(first: int, last: int) -> None:
    """Refuse a line range `read_lines` cannot mean: lines are numbered from 1."""
    if first < 1 or last < first:
        raise ValueError(
            f"lines {first} to {last}: lines are numbered from 1, and the last one asked for "
            "must not come before the first"
        )


def take_lines(chunks: Iterable[bytes], skip: int, count: int) -> bytes:
    """Lines `skip + 1` to `skip + count` of bytes that begin at the start of a line, given
    in chunks: each with its newline (the data's last line may lack one), fewer when the data
    ends first. Chunks past the last line wanted are not asked for, so a reader of a file
    reads from the first line's chunk to the last's and no further."""
    if count <= 0:
        return b""
    taken: list[bytes] = []
    for chunk in chunks:
        start = 0
        if skip:
            newlines = chunk.count(b"\n")
            if newlines < skip:
                skip -= newlines
                continue
            start = _after_newlines(chunk, 0, skip)
            skip = 0
        newlines = chunk.count(b"\n", start)
        if newlines < count:
            taken.append(chunk[start:])
            count -= newlines
            continue
        taken.append(chunk[start : _after_newlines(chunk, start, count)])
        break
    return b"".join(taken)


def _after_newlines(chunk: bytes, start: int, n: int) -> int:
    """The offset just after the `n`-th newline of `chunk` from `start` (it has that many)."""
    at = start - 1
    for _ in range(n):
        at = chunk.index(b"\n", at + 1)
    return at + 1


def iter_pieces(fd: int, start: int, end: int) -> Iterator[bytes]:
    """Bytes [start, end) of an open file in pieces of about a megabyte that each end at a
    line end (the last may not): for a search over whole pieces that counts lines. A line
    longer than a megabyte comes whole, in one piece, joined once: O(its size)."""
    parts: list[bytes] = []
    for chunk in iter_chunks(fd, start, end):
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:
            parts.append(chunk)
            continue
        parts.append(chunk[:cut])
        yield b"".join(parts)
        parts = [chunk[cut:]] if cut < len(chunk) else []
    if parts:
        yield b"".join(parts)


def iter_lines(fd: int, start: int, end: int, more: bytes = b"") -> Iterator[bytes]:
    """The complete lines (without b'\\n') in bytes [start, end) of an open file.

    `more` is taken as bytes following `end` (lines about to be written after them). A last
    line without its newline is not yielded.
    """
    # Parts of the current unfinished line, joined only once its newline arrives, so an
    # enormous single line costs O(its size), not O(size x chunks).
    parts: list[bytes] = []
    for chunk in itertools.chain(iter_chunks(fd, start, end), (more,) if more else ()):
        if b"\n" not in chunk:
            parts.append(chunk)
            continue
        first, *lines, rest = chunk.split(b"\n")
        parts.append(first)
        yield b"".join(parts)
        yield from lines
        parts = [rest]


class JsonLines:
    """The JSON values of a log's complete lines in bytes [0, end), counting what is skipped.

    Iterate for `(line_number, value)`. After iterating: `torn` says a last line without its
    newline was skipped (a write in progress, or one a kill cut); `corrupt` holds the numbers
    of complete lines that are not JSON (a torn write a later writer closed, a hand edit) or
    nest deeper than any workspace writes (`_depth.READ_DEPTH`: whatever reads the values
    never walks a value deep enough to exhaust the stack); blank lines are skipped silently.

    Args:
        fd: the log, open for reading.
        end: where to stop: the file's size, or the committed length of a committed log.
    """

    def __init__(self, fd: int, end: int) -> None:
        self.fd = fd
        self.end = end
        self.torn = False
        self.corrupt: list[int] = []
        self._held: bytes | None = None

    @classmethod
    def of_bytes(cls, raw: bytes) -> JsonLines:
        """The JSON lines of a log held in memory (read from a bucket, kept by a process)."""
        lines = cls(-1, len(raw))
        lines._held = raw
        return lines

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        # Here, not at the top: a search of tool results reads no JSON (~1.5 ms of start-up).
        from .._depth import load_json

        self.torn = False
        self.corrupt = []
        read = 0
        if self._held is None:
            complete = iter_lines(self.fd, 0, self.end)
        else:
            complete = iter(self._held.split(b"\n")[:-1])
        for number, raw in enumerate(complete, 1):
            read += len(raw) + 1
            if not raw.strip():
                continue
            try:
                value = load_json(raw)
            except ValueError:  # not JSON, or nested deeper than any workspace writes
                self.corrupt.append(number)
                continue
            yield number, value
        self.torn = read < self.end


def read_log(
    dir_fd: int,
    name: str,
    shown: str,
    *,
    commit: bool = False,
    warn: Callable[[str], None] | None = None,
) -> list[Any]:
    """Every complete JSON value of the log `name` in `dir_fd`, in order.

    With `commit`, only the committed batches: a batch being written, or one a kill cut, is
    never seen in part. A missing log is empty. Each line that is not JSON is skipped and
    said through `warn`.

    Raises:
        Refused: the log (or its commit record) is a planted link, a special file or
            hard-linked.
        OffloadError: it cannot be opened.
    """
    try:
        fd = open_for_reading(dir_fd, name, shown)
    except FileNotFoundError:
        return []
    try:
        # The record before the size: a writer extends the log before it commits, so a
        # record read first never lies past the end because of a concurrent append.
        record = read_commit(dir_fd, name, shown) if commit else None
        end = os.fstat(fd).st_size
        if record is not None:
            wrong = commit_mismatch(fd, record, end)
            if wrong is None:
                end = record[0]
            elif warn is not None:
                warn(f"{shown}: its commit record {wrong}: ignored, the whole log is read")
        return _values(JsonLines(fd, end), shown, warn)
    finally:
        os.close(fd)


def parse_log(raw: bytes, shown: str, *, warn: Callable[[str], None] | None = None) -> list[Any]:
    """Every complete JSON value of a log held in memory, by `read_log`'s rule: a torn last
    line is skipped, and so is each line that is not JSON, said through `warn`.

    Args:
        raw: the log's bytes (an object store's segments joined, an in-memory file).
        shown: how the log is named to people.
        warn: told about each line skipped as not JSON.
    """
    return _values(JsonLines.of_bytes(raw), shown, warn)


def _values(lines: JsonLines, shown: str, warn: Callable[[str], None] | None) -> list[Any]:
    values = [value for _, value in lines]
    if warn is not None:
        for number in lines.corrupt:
            warn(f"{shown} line {number} is not valid JSON (torn write?): skipped")
    return values


# -- folders of a workspace ---------------------------------------------------------------------


class Folder:
    """A folder of a workspace, reached from its workdir one component at a time without
    following a link, and the files in it, opened the same way.

    Use as a context manager (`with Folder(workdir, "sessions", sid) as folder:`): the
    folder's descriptor is held until the block ends, so a folder swapped for a link
    meanwhile changes nothing that is read through it.

    Args:
        workdir: the workspace's folder as given (it may itself be a link; resolved once).
        parts: the components below it (`"sessions"`, a session id).
        root: `workdir` already resolved (a workspace resolves it once, when it is made, and
            keeps to that folder); None resolves it on entering.

    Raises (on entering):
        FileNotFoundError: a component is missing.
        Refused: a component is a planted link or not a folder.
        OffloadError: a component cannot be opened.
    """

    def __init__(self, workdir: str, *parts: str, root: str | None = None) -> None:
        self.workdir = workdir
        self.parts = parts
        self.root = root
        self.shown = os.path.join(workdir, *parts) if parts else workdir
        self.fd = -1

    def __enter__(self) -> Folder:
        root = self.root if self.root is not None else os.path.realpath(self.workdir)
        self.fd = open_path(root, self.parts, self.workdir, create=False)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def path(self, name: str) -> str:
        """How a file of this folder is named to people."""
        return os.path.join(self.shown, name)

    def names(self) -> list[str]:
        """The names in the folder, sorted (entries of every kind)."""
        with os.scandir(self.fd) as entries:
            return sorted(entry.name for entry in entries)

    def folders(self) -> list[str]:
        """The names of the folders in it (no link), sorted, hidden ones left out."""
        with os.scandir(self.fd) as entries:
            return sorted(
                e.name
                for e in entries
                if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
            )

    def sessions(self) -> list[str]:
        """The names of its folders that are session ids (`is_session_id`), sorted: the
        sessions of a workspace, read from its sessions/ folder. A folder planted there under
        another name (a newline in it, say) is none: no call could name it."""
        return [name for name in self.folders() if is_session_id(name)]

    def files(self) -> list[str]:
        """The names of the regular files in it (no link, FIFO or device), sorted, hidden ones
        (a writer's `.tmp-*`) included."""
        with os.scandir(self.fd) as entries:
            return sorted(e.name for e in entries if e.is_file(follow_symlinks=False))

    def open(self, name: str) -> tuple[int, os.stat_result]:
        """Open a file of the folder for reading: `(descriptor, its fstat)`; close it after.

        Raises:
            FileNotFoundError: there is no such file.
            Refused: a link, a FIFO, socket, device or folder, or a file with other hard
                links (one may be outside the workspace): never read.
            OffloadError: it cannot be opened (EACCES...).
        """
        fd = open_for_reading(self.fd, name, self.path(name))
        return fd, os.fstat(fd)

    def stat(self, name: str) -> os.stat_result:
        """The `lstat` of an entry of the folder, taken on the folder's descriptor (no link
        followed), without opening it.

        A regular file with a second link is looked at again for a moment (the workspace
        links a finished file into place, then drops its temporary name), so a file being
        written is not taken for a hard-linked one; one that keeps its links is returned as
        it is, for the caller to refuse.

        Raises:
            FileNotFoundError: there is no such entry.
            OSError: it cannot be looked at (EACCES...).
        """
        st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        for _ in range(_SETTLE_RETRIES):
            if not linked_elsewhere(st) or not stat.S_ISREG(st.st_mode):
                break
            time.sleep(0.001)
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        return st

    def sha256(self, name: str, progress: Callable[[int], None] | None = None) -> str:
        """The sha256 (hex) of a file of the folder, read in pieces through `open`: what a
        data/ file is named by.

        Args:
            name: the file.
            progress: called with the size of each piece read.

        Raises:
            FileNotFoundError: there is no such file.
            Refused: a link, a FIFO, socket, device or folder, or a file with other hard
                links: never read.
            OffloadError: it cannot be opened (EACCES...).
        """
        import hashlib

        fd, st = self.open(name)
        try:
            digest = hashlib.sha256()
            for chunk in iter_chunks(fd, 0, st.st_size):
                digest.update(chunk)
                if progress is not None:
                    progress(len(chunk))
            return digest.hexdigest()
        finally:
            os.close(fd)

    def read_bytes(self, name: str) -> bytes:
        """The whole of a file of the folder (see `open` for what is refused)."""
        fd, st = self.open(name)
        try:
            return b"".join(iter_chunks(fd, 0, st.st_size))
        finally:
            os.close(fd)

    def committed(self, name: str) -> tuple[int, int] | None:
        """(bytes, lines) the commit record of the log `name` says are committed, or None."""
        return read_commit(self.fd, name, self.path(name))

    def readable_end(self, name: str, fd: int, size: int) -> int:
        """Where a reader of the file `name` (open as `fd`, `size` bytes) stops: the end of
        a committed log's acknowledged batches, else `size` (`readable_end`)."""
        return readable_end(self.fd, name, self.path(name), fd, size)

    def read_log(
        self, name: str, *, commit: bool = False, warn: Callable[[str], None] | None = None
    ) -> list[Any]:
        """`read_log` on a log of this folder."""
        return read_log(self.fd, name, self.path(name), commit=commit, warn=warn)


def reference_text(reference: object) -> str:
    """A reference as the text every workspace parses: a `str` as it is, an `os.PathLike`
    (the `Path` that `LocalWorkspace.context_path` returns) as its `os.fspath`.

    Raises:
        InvalidReference: neither (bytes paths included), empty, or holding a NUL.
    """
    text = os.fspath(reference) if isinstance(reference, os.PathLike) else reference
    if not isinstance(text, str) or not text or "\x00" in text:
        raise InvalidReference(
            f"reference {reference!r} is not a reference: pass a str or os.PathLike that "
            "the workspace returned"
        )
    return text


def reference_parts(reference: str | os.PathLike[str], workdir: str, root: str) -> list[str]:
    """The path components below a workspace's workdir that a reference names (lexically).

    A reference is a path the workspace returned (absolute, or relative to the current
    folder; a `str` or an `os.PathLike`), a `file://` URL of one (percent-decoded), or a
    path relative to the workdir. Nothing is opened: `open_reference` opens the parts
    without following a link.

    Args:
        reference: the reference.
        workdir: the workdir as given.
        root: the workdir resolved once (it may itself be a link).

    Raises:
        InvalidReference: it names nothing inside the workspace.
    """
    reference = reference_text(reference)
    ref = file_url_to_path(reference) if reference.startswith("file://") else reference
    if "\x00" in ref:  # a `%00` decoded: no path holds a NUL
        raise not_a_reference(reference, workdir)
    given = os.path.abspath(workdir)
    candidates = [os.path.abspath(ref)]
    if not os.path.isabs(ref):
        candidates.append(os.path.join(given, ref))
    for candidate in candidates:
        # normpath is lexical; that is the right reading here because nothing below the
        # workdir is followed when the parts are opened.
        candidate = os.path.normpath(candidate)
        for base in (given, root):
            if candidate.startswith(base.rstrip(os.sep) + os.sep):
                parts = candidate[len(base.rstrip(os.sep)) + 1 :].split(os.sep)
                if parts and all(p not in ("", ".", "..") for p in parts):
                    return parts
    raise not_a_reference(reference, workdir)


def workspace_of(reference: str | os.PathLike[str]) -> str | None:
    """The workspace an absolute path (or a `file://` URL) names a file of, found from the
    path alone: the nearest folder above it that holds a `sessions/` folder and under which
    the path is `sessions/ID/FILE` or `data/FILE`. None for a relative path, or a path in
    no workspace. Nothing below that folder is opened (`open_reference` does that without
    following a link).
    """
    try:
        text = reference_text(reference)
    except InvalidReference:
        return None
    path = file_url_to_path(text) if text.startswith("file://") else text
    if not os.path.isabs(path):
        return None
    parts = os.path.normpath(path).split(os.sep)[1:]
    for cut in range(len(parts) - 2, -1, -1):
        below = parts[cut:]
        if not (
            (below[0] == SESSIONS_DIR and len(below) == 3)
            or (below[0] == DATA_DIR and len(below) == 2)
        ):
            continue
        workdir = os.sep + os.path.join(*parts[:cut]) if cut else os.sep
        sessions = os.path.join(workdir, SESSIONS_DIR)
        if os.path.isdir(sessions) and not os.path.islink(sessions):
            return workdir
    return None


def not_a_reference(reference: str, workdir: str) -> InvalidReference:
    """The error for a reference that names no file of the workspace at `workdir`."""
    return InvalidReference(
        f"reference {reference!r} names no file inside the workspace {workdir!r}: "
        "pass a path this workspace returned"
    )


def open_reference(
    reference: str | os.PathLike[str], workdir: str, root: str
) -> tuple[int, os.stat_result, list[str], int]:
    """Open the file a reference names: `(descriptor, its fstat, its parts below the workdir,
    where reading it stops)`.

    Every component below the workdir is opened without following a link, and the file is
    checked on its descriptor (a regular file with one link). Reading stops at
    `readable_end`: a context.jsonl ends with its last committed batch.

    Raises:
        InvalidReference: it names nothing inside the workspace, or a link, a special file,
            a hard-linked file or one that cannot be opened (the cause says which).
    """
    reference = reference_text(reference)
    parts = reference_parts(reference, workdir, root)
    try:
        with Folder(workdir, *parts[:-1], root=root) as folder:
            fd, st = folder.open(parts[-1])
            end = folder.readable_end(parts[-1], fd, st.st_size)
    except (OSError, OffloadError) as exc:
        raise not_a_reference(reference, workdir) from exc
    return fd, st, parts, end


def sessions_folder(workdir: str) -> Folder:
    """The sessions/ folder of the workspace at `workdir`, to enter.

    Raises:
        InvalidReference: `workdir` does not exist, is not a folder, or has no sessions/
            folder: it is not a ctxoffload workspace.
    """
    problem = workdir_problem(workdir)
    if problem is not None:
        raise InvalidReference(problem)
    sessions = os.path.join(workdir, SESSIONS_DIR)
    if os.path.islink(sessions) or not os.path.isdir(sessions):
        raise InvalidReference(
            f"{workdir!r} is not a ctxoffload workspace (it has no {SESSIONS_DIR}/ folder)"
        )
    return Folder(workdir, SESSIONS_DIR)


# -- the session record -----------------------------------------------------------------------


class EventKind:
    """The kinds of events in events.jsonl (each line also has `time` and `kind`)."""

    # Written by every workspace: a batch appended to context.jsonl, a tool result stored.
    CONTEXT = "context"
    TOOL_RESULT = "tool_result"
    # Written by the adapters (Strands' storage, AgentScope's data blocks): a data/ file an
    # agent holds only a reference to; the line names it, so gc keeps it with the session.
    DATA = "data"
    # Written by the Agent's session record (agent/_record.py).
    SESSION_START = "session_start"
    MESSAGE = "message"
    MODEL_CALL = "model_call"
    TOOL_CALL = "tool_call"
    # Written by the compressor and the pipeline's managers.
    TRUNCATION = "truncation"
    OFFLOAD = "offload"
    SUMMARY = "summary"
    COMPRESSION = "compression"
    # Every artifact (path, URL, command, id) of what a compression moved out, and where it
    # is named now: the full artifact index.
    ARTIFACTS = "artifacts"
    WINDOW = "window"
    IMAGE_LIMIT = "image_limit"
    CLEAR_TOOL_USES = "clear_tool_uses"
    CLEAR_THINKING = "clear_thinking"
    # Written by a pin or an unpin (the API or the agent's pin_context tool), and by a
    # compaction the agent asked for (compact_context).
    PIN = "pin"
    UNPIN = "unpin"
    COMPACT = "compact"
    # A summary made in the background before the trigger (`background_compaction`): its
    # `status` is started, applied, stale, failed or cancelled.
    BACKGROUND = "background_summary"
    # A request still over the window once the pre_llm managers ran (`over_window`): its
    # tokens, the window, what they were spent on, and whether it was sent or refused.
    OVER_WINDOW = "over_window"
    # Written by `ctxoffload replay` first in each session it replays into.
    REPLAY = "replay"
    # Written first in a fork (`ctxoffload fork`, `fork_session`): its `origin` session and
    # step; and by an Agent that takes over or forks a busy session.
    FORK = "fork"
    # Written by a parent agent when it starts and ends a sub-agent (`Agent.as_tool`): the
    # child's session, the step and tool call that started it, what came back.
    SUBAGENT = "subagent"


def is_event(value: object) -> bool:
    """Whether a value read from events.jsonl is an event: a JSON object whose `kind` is a
    string. The one test every reader of a record applies before it looks at a field; the
    rest (a line of valid JSON that is a list or a number, a hand edit) is skipped, never
    taken for an event. The other fields may still be missing or of another type: read
    them with `.get` and check their type."""
    return isinstance(value, dict) and isinstance(value.get("kind"), str)


def _count(value: object) -> str:
    """A figure with thousands separators; `?` for one the event does not hold."""
    if value is None:
        return "?"
    return f"{value:,}" if isinstance(value, int) else str(value)


def token_change(event: dict[str, Any]) -> str:
    """`6,760→570 tokens`: an event's `tokens_before` and `tokens_after`.

    A `tokens_before` the compressor estimated (a long history seen for the first time is
    counted only as far as decides) is marked `~`, with its bounds:
    `~4,288,611→28,564 tokens (before: estimated, 160,214 to 17,935,201)`.
    """
    change = f"{_count(event.get('tokens_before'))}→{_count(event.get('tokens_after'))} tokens"
    if event.get("tokens_before_exact") is not False:
        return change
    bounds = event.get("tokens_before_range")
    within = (
        f", {_count(bounds[0])} to {_count(bounds[1])}"
        if isinstance(bounds, list) and len(bounds) == 2
        else ""
    )
    return f"~{change} (before: estimated{within})"


def _files(refs: list[Any], lead: str, more: str = "more") -> str:
    """`{lead}FIRST and N more` for the files an event names; "" for none."""
    if not refs:
        return ""
    return f"{lead}{refs[0]}" + (f" and {len(refs) - 1} {more}" if len(refs) > 1 else "")


def _into(event: dict[str, Any]) -> str:
    """ " into FILE lines A-B" for an event that moved lines into a file ("" without one)."""
    span = event.get("lines")
    where = f" into {event.get('reference')}" if event.get("reference") else ""
    if isinstance(span, list) and len(span) == 2:
        where += f" lines {span[0]}-{span[1]}"
    return where


def fidelity_sentence(event: dict[str, Any]) -> str | None:
    """What a compression kept named and could read back, from its event; None for an event
    without the report (another kind, or written before the report existed).

    `artifacts: 28 left, 8 in the summary, 16 indexed, 4 cut (listed in events.jsonl);
    2 of 2 messages read back at their lines`
    """
    counts = event.get("artifacts")
    checked = event.get("recoverable")
    parts: list[str] = []
    if isinstance(counts, dict) and isinstance(counts.get("left"), int):
        named = [
            f"{_count(counts.get(key))} {what}"
            for key, what in (
                ("in_summary", "in the summary"),
                ("in_kept", "still in the context"),
                ("indexed", "indexed"),
            )
            if counts.get(key)
        ]
        cut = counts.get("cut")
        if cut:
            # A clearing leaves the rest in the outputs it stored; a compaction lists them.
            held = (
                "in the stored outputs"
                if event.get("kind") == EventKind.CLEAR_TOOL_USES
                else f"listed in {EVENTS_FILE}"
            )
            named.append(f"{_count(cut)} cut ({held})")
        parts.append(f"artifacts: {_count(counts['left'])} left" + "".join(f", {n}" for n in named))
    if isinstance(checked, dict) and isinstance(checked.get("messages"), int):
        if isinstance(checked.get("verified"), int):
            parts.append(
                f"{_count(checked['verified'])} of {_count(checked['messages'])} messages read "
                "back at their lines"
            )
        else:
            parts.append("messages not read back (the offloader cannot read references)")
    return "; ".join(parts) or None


def context_event_sentence(event: dict[str, Any]) -> str | None:
    """One sentence for the events that are not a model call, a tool call, a message, a
    truncation or a compression (`ctxoffload show` writes those itself): pins, clearings,
    compactions, background summaries, offloads, windows, image limits, requests over the
    window, replays, data files, context batches, stored tool results, forks and sub-agents;
    as the log, `show` and `watch` print it. None for the other kinds.

    `pinned message 1f3c… (assistant, by api): pins 0→120 tokens, 3% of the 4,000-token
    window`
    """
    kind = event.get("kind")
    if kind in (EventKind.PIN, EventKind.UNPIN):
        window = event.get("window")
        after = event.get("pinned_tokens_after")
        share = (
            f", {after / window:.0%} of the {window:,}-token window"
            if isinstance(window, int) and window > 0 and isinstance(after, int)
            else ""
        )
        verb = "pinned" if kind == EventKind.PIN else "unpinned"
        return (
            f"{verb} message {event.get('message_id')} ({event.get('role')}, by "
            f"{event.get('by')}): pins {_count(event.get('pinned_tokens_before'))}→"
            f"{_count(after)} tokens{share}"
        )
    if kind == EventKind.CLEAR_TOOL_USES:
        refs = event.get("references") or []
        where = _files(refs, "; stored in ", "more files")
        inputs = event.get("inputs_cleared")
        also = f" and {inputs} inputs" if isinstance(inputs, int) and inputs else ""
        ids = ", ".join(str(i) for i in event.get("tool_ids") or [])
        cleared = event.get("cleared")
        plural = "" if cleared == 1 else "s"
        fidelity = fidelity_sentence(event)
        return (
            f"cleared {cleared} tool output{plural} ({ids}){also}, {token_change(event)}"
            f"{where}" + (f"; {fidelity}" if fidelity else "")
        )
    if kind == EventKind.CLEAR_THINKING:
        where = _into(event)
        return (
            f"cleared the thinking of {event.get('messages')} turns ({event.get('blocks')} "
            f"blocks), {token_change(event)}{where}"
        )
    if kind == EventKind.BACKGROUND:
        status = event.get("status")
        what = f"{event.get('messages')} messages{_into(event)}"
        if status == "started":
            return f"started a background summary of {what}"
        if status == "applied":
            waited = event.get("waited_ms")
            wait = f"; the step waited {waited:,.0f} ms" if isinstance(waited, (int, float)) else ""
            return f"applied the background summary of {what}{wait}"
        reason = event.get("reason")
        return f"background summary of {what} {status}" + (f": {reason}" if reason else "")
    if kind == EventKind.COMPACT:
        where = _into(event)
        asked = event.get("instructions")
        focus = f', instructions: "{asked}"' if asked else ""
        return (
            f"compacted on the agent's request ({event.get('reason')}), {token_change(event)}"
            f"{where}{focus}"
        )
    if kind == EventKind.OFFLOAD:
        blocks = event.get("blocks")
        return (
            f"offloaded {_count(blocks)} block{'' if blocks == 1 else 's'} of "
            f"{event.get('tool_name')} ({event.get('tool_id')}), {token_change(event)}"
            + _files(event.get("references") or [], " into ")
        )
    if kind == EventKind.WINDOW:
        pinned = event.get("pinned")
        also = f", {pinned} pinned" if isinstance(pinned, int) and pinned else ""
        fidelity = fidelity_sentence(event)
        return (
            f"sliding window moved {_count(event.get('messages'))} messages{_into(event)}, "
            f"kept {_count(event.get('kept'))} (at most {_count(event.get('max_messages'))})"
            f"{also}" + (f"; {fidelity}" if fidelity else "")
        )
    if kind == EventKind.IMAGE_LIMIT:
        return (
            f"image limit: {_count(event.get('replaced'))} of {_count(event.get('images'))} "
            f"images replaced by their references (at most {_count(event.get('max_images'))} "
            "kept)" + _files(event.get("references") or [], "; stored in ")
        )
    if kind == EventKind.OVER_WINDOW:
        others = event.get("messages")
        parts = ", ".join(
            f"{name} {_count(event.get(field))}"
            for name, field in (
                ("system prompt", "system_tokens"),
                ("tool schemas", "tools_tokens"),
                ("summary", "summary_tokens"),
                ("pins", "pinned_tokens"),
                (f"{_count(others)} other message{'' if others == 1 else 's'}", "messages_tokens"),
            )
        )
        refused = event.get("action") == "refused"
        return (
            f"the request to the model takes {_count(event.get('tokens'))} tokens, over the "
            f"{_count(event.get('window'))}-token window, after the context managers ran: "
            f"{parts}; " + ("refused (over_window='refuse')" if refused else "sent anyway")
        )
    if kind == EventKind.REPLAY:
        return (
            f"replay {event.get('run')} ({event.get('config_name')}): "
            f"{_count(event.get('messages'))} messages, {_count(event.get('model_calls'))} "
            "model calls of the transcript"
        )
    if kind == EventKind.DATA:
        media = event.get("media_type") or "bytes"
        size = f", {_count(event.get('bytes'))} bytes" if event.get("bytes") is not None else ""
        return f"stored a data file ({media}{size}): {event.get('reference')}"
    if kind == EventKind.CONTEXT:
        return (
            f"appended {_count(event.get('messages'))} messages "
            f"({_count(event.get('bytes'))} bytes){_into(event)}"
        )
    if kind == EventKind.TOOL_RESULT:
        return (
            f"stored the whole result of {event.get('tool_name')} ({event.get('tool_id')}): "
            f"{_count(event.get('lines'))} lines, {_count(event.get('bytes'))} bytes, in "
            f"{event.get('reference')}"
        )
    if kind == EventKind.FORK:
        given = event.get("origin")
        origin: dict[str, Any] = given if isinstance(given, dict) else {}
        step = origin.get("step")
        at = f" at step {step}" if step is not None else " from its saved state"
        return (
            f"forked from session {origin.get('session')}{at}: "
            f"{_count(event.get('messages'))} messages to start from"
        )
    if kind == EventKind.SUBAGENT:
        status = event.get("status")
        who = f"sub-agent {event.get('name')} (session {event.get('session')})"
        if status == "started":
            return f"step {event.get('step')} · started {who} for call {event.get('tool_id')}"
        if status == "done":
            steps = event.get("steps")
            return (
                f"step {event.get('step')} · {who} answered after {_count(steps)} "
                f"step{'' if steps == 1 else 's'}: {_count(event.get('answer_chars'))} "
                f"characters, {_count(event.get('files'))} stored files named"
            )
        if status == "cancelled":
            return f"step {event.get('step')} · {who} was cancelled before it answered"
        found = event.get("error")
        error: dict[str, Any] = found if isinstance(found, dict) else {}
        return (
            f"step {event.get('step')} · {who} failed: {error.get('type')}: {error.get('message')}"
        )
    return None


def rebuild_step(events: Iterable[Any], step: int) -> list[dict[str, Any]]:
    """The messages the model was sent at `step`, rebuilt from a session's events.

    Each id in the step's `model_call` event is looked up in the `message` events written
    before it (the latest line for an id wins). When a step called the model more than once
    (a retry after an overflow), the last call is the one rebuilt.

    Args:
        events: the session's events.jsonl entries, oldest first (a value that is not an
            event, `is_event`, is skipped).
        step: the step number (1-based, counted over the whole session).

    Returns:
        The messages as stored (dicts with role, content, id, ...), in the order sent.

    Raises:
        IncompleteRecord: a message the step was sent was never recorded.
        LookupError: no model call at that step.
    """
    known: dict[str, dict[str, Any]] = {}
    rebuilt: list[dict[str, Any]] | None = None
    for event in events:
        if not is_event(event):
            continue
        kind = event.get("kind")
        if kind == EventKind.MESSAGE and isinstance(event.get("message"), dict):
            msg = event["message"]
            known[str(msg.get("id"))] = msg
        elif kind == EventKind.MODEL_CALL and event.get("step") == step:
            ids = event.get("messages")
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise LookupError(f"the model call at step {step} names no list of messages")
            missing = [i for i in ids if i not in known]
            if missing:
                raise IncompleteRecord(
                    f"step {step} was sent message {missing[0]}, which the record does not hold"
                )
            rebuilt = [known[i] for i in ids]
    if rebuilt is None:
        raise LookupError(f"the record has no model call at step {step}")
    return rebuilt
