"""What `ctxoffload grep` searches in a workspace: what each session's agent stored (its
tool-result files, then its context.jsonl; events.jsonl with --events) and, when no session is
named, the memories/ folder, leaving the records out (state.json, lease.json, commit records,
files being written: `layout.is_record`, the rule of the agent's Grep). Each file is opened as
every command opens one (`_access.open_in`: no link followed, no hard-linked file read),
sniffed as the agent's Grep sniffs it (`_search.sniff.binary_reason`: a binary file is not
searched, and said on stderr) and searched by the engine (`ctxoffload._search.engine`), or by
ripgrep where it finds the same lines (`_grep_ripgrep.py`): a stored file as the agent's Read
reads it, a log line by the rule of the agent's Grep. With --writers, each line found is given
the agent that wrote it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator

from .._disk.commit import iter_lines, readable_end
from .._disk.layout import (
    CONTEXT_FILE,
    EVENTS_FILE,
    MEMORIES_DIR,
    SESSIONS_DIR,
    is_record,
    is_session_record,
)
from .._disk.paths import open_plain
from .._disk.read import Folder
from .._search.engine import Line, search_bytes, search_lines
from .._search.log import log_search
from .._search.matcher import Matcher
from .._search.sniff import SNIFF_BYTES, binary_reason
from ..exceptions import CliError
from ._access import committed_end, open_in, refusal
from ._arguments import child_path
from ._grep_output import GrepQuery, Hit, Printer
from ._grep_ripgrep import ripgrep_for
from ._output import shown as shown_path

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = ["WorkspaceSearch"]

_UNKNOWN_WRITER: dict[str, Any] = {"agent": None, "session": None, "pid": None}

# A file smaller than this is read in one call and searched in memory: most of a workspace
# of small sessions, where opening a stream, a buffer and a second read for each file
# (`search_lines`) cost more than its search. Below ripgrep's `RG_FROM_BYTES` too.
_READ_WHOLE = 1 << 16

# How deep below memories/ the search goes. Each folder is opened from the workdir down, one
# name at a time without following a link, so a chain of folders costs the square of its
# depth; the memory tool's paths stop at 1,024 characters, and memories nest a few levels.
_MAX_MEMORY_DEPTH = 64


class WorkspaceSearch:
    """One `ctxoffload grep` over a workspace's files: a session at a time, then memories/.

    Args:
        workdir: the workspace's folder, as the user named it (files are shown under it).
        query: what is looked for, and how it is printed.
        matcher: the compiled pattern.
        printer: where the lines found go.
        skip: says on stderr that a file was not searched (and makes the exit status 2).
    """

    def __init__(
        self,
        workdir: str,
        query: GrepQuery,
        matcher: Matcher,
        printer: Printer,
        skip: Callable[[str], None],
    ) -> None:
        self.workdir = workdir
        self.query = query
        self.matcher = matcher
        self.printer = printer
        self.skip = skip
        self.fast = ripgrep_for(query, matcher, printer)
        # Resolved once for the whole search, not again for each folder entered.
        self.root = os.path.realpath(workdir)
        # A session's folder as shown is this and its name (`child_path` of an empty name,
        # made once: `child_path(sessions, session)` is `self._sessions_prefix + session`).
        self._sessions_prefix = child_path(child_path(workdir, SESSIONS_DIR), "")
        # Made at the first context.jsonl searched (it loads `text`, and `re` with it).
        self._search_log: Callable[[Iterable[bytes]], Iterator[Line]] | None = None
        # sessions/, entered once and held while the search lasts: each session's folder is
        # opened in it (no link followed), not from the workdir down again (`close`).
        self._sessions: Folder | None = None
        self._searched_names = _SearchedNames()
        # A session's files are opened by `open_plain` first where no line needs its writer.
        self._quick = not query.writers

    def __enter__(self) -> WorkspaceSearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the sessions/ folder held for the search."""
        if self._sessions is not None:
            self._sessions.__exit__()
            self._sessions = None

    def _sessions_folder(self) -> Folder:
        """sessions/, entered at the first session searched and held until `close`."""
        if self._sessions is None:
            self._sessions = Folder(self.workdir, SESSIONS_DIR, root=self.root).__enter__()
        return self._sessions

    def session(self, session: str) -> None:
        """Search what one session's agent stored, then its context.jsonl (and events.jsonl
        with --events). A file that is not read, or a folder that cannot be listed, is said
        through `skip`; a session removed since it was listed (gc), or a link in its place,
        is passed over."""
        where = self._sessions_prefix + session
        try:
            within = self._sessions or self._sessions_folder()
            folder = Folder(
                self.workdir, SESSIONS_DIR, session, root=self.root, within=within
            ).__enter__()
        except OSError as exc:  # Refused and OffloadError too
            self._refused(exc, where)
            return
        try:
            try:
                searched = self._searched_names
                names = [name for name in folder.names() if searched[name]]
            except OSError as exc:
                self._refused(exc, where)
                return
            names.append(CONTEXT_FILE)
            if self.query.events:
                names.append(EVENTS_FILE)
            if self._quick:
                # The folder shown once (a bucket's copy as its URI): a file's path as shown
                # is its name below it, as `shown` would spell the file's own path.
                prefix = child_path(shown_path(where), "")
                lines, found = self.printer.lines, self._lines
                for name in names:
                    # A regular file with one link (`open_plain`), most of a workspace of
                    # small sessions, is searched without `open_in`'s checks; anything else
                    # is left to `_file`, which opens it again and says why it is not read,
                    # as if this were not tried.
                    path = prefix + name
                    opened = open_plain(folder.fd, name)
                    if opened is None:
                        self._file(folder, name, path, session, None)
                        continue
                    fd = opened[0]
                    try:
                        lines(
                            path, session, found(folder, name, fd, opened[1].st_size, path, session)
                        )
                    finally:
                        os.close(fd)
                return
            # With --writers, each line goes through `emit` with its writer; else a file's
            # lines are printed together (`Printer.lines`).
            emit = _with_writers(folder, self.printer.emit) if self.query.writers else None
            for name in names:
                self._file(folder, name, shown_path(child_path(where, name)), session, emit)
        finally:
            folder.__exit__()

    def memories(self) -> None:
        """Search the files of memories/ and of the folders in it (`_memory_files`). Their
        lines belong to no session, and with --writers to no agent named (the workspace). A
        workspace without memories/ has none to search."""
        emit: Callable[[Hit], None] | None = None
        if self.query.writers:
            printed = self.printer.emit

            def emit(hit: Hit) -> None:
                hit.writer = _UNKNOWN_WRITER
                printed(hit)

        for folder, name, shown in self._memory_files():
            self._file(folder, name, shown, None, emit)

    def _memory_files(self) -> Iterator[tuple[Folder, str, str]]:
        """The files of memories/ and its folders as `(folder, name, shown)`, depth first,
        each folder's entries in name order (as `grep -r` walks them), the records left out
        (a file being written, a folder being removed) and no link followed (a hidden
        folder is no folder here either: `Folder.folders`).

        A folder is listed whole, then opened again to search its files, so at most one
        stays open however deep memories/ is nested; a folder deeper than
        `_MAX_MEMORY_DEPTH` is said through `skip` and not searched.
        """
        stack: list[tuple[tuple[str, ...], str, Iterator[tuple[str, bool]]]] = []

        def enter(parts: tuple[str, ...], where: str) -> None:
            if len(parts) > _MAX_MEMORY_DEPTH:
                self.skip(
                    f"{shown_path(where)}: deeper than {_MAX_MEMORY_DEPTH} folders below "
                    f"memories/, not searched"
                )
                return
            try:
                with Folder(self.workdir, MEMORIES_DIR, *parts, root=self.root) as folder:
                    names = folder.names()
                    folders = set(folder.folders())
            except OSError as exc:  # none kept yet, a link, a folder that cannot be listed
                self._refused(exc, where)
                return
            kept = [name for name in names if not is_record((MEMORIES_DIR, *parts, name))]
            stack.append((parts, where, iter([(name, name in folders) for name in kept])))

        enter((), child_path(self.workdir, MEMORIES_DIR))
        while stack:
            parts, where, entries = stack[-1]
            with contextlib.ExitStack() as scope:
                folder: Folder | None = None
                for name, is_folder in entries:
                    if is_folder:
                        enter((*parts, name), child_path(where, name))
                        break  # its files first; this folder's are taken up after
                    if folder is None:
                        try:
                            folder = scope.enter_context(
                                Folder(self.workdir, MEMORIES_DIR, *parts, root=self.root)
                            )
                        except OSError as exc:  # removed or replaced since it was listed
                            self._refused(exc, where)
                            break
                    yield folder, name, shown_path(child_path(where, name))
                else:
                    stack.pop()

    def _refused(self, exc: OSError, where: str) -> None:
        """Say why a folder was not searched, unless it is simply not there (`refusal`)."""
        line = refusal(exc, where)
        if line is not None:
            self.skip(line)

    def _file(
        self,
        folder: Folder,
        name: str,
        shown: str,
        session: str | None,
        emit: Callable[[Hit], None] | None,
    ) -> None:
        """Report the lines of one file that match, with `query.context` lines around
        each: a session's context.jsonl by `search_log` (read up to its committed length,
        each message under its JSONL line number), any other file's lines by ripgrep where
        it can, else by `search_lines`. A missing file, a link, a folder or a special file is
        passed over (`_access.refusal`); a binary file is said on stderr (`Printer.note`: the
        agent's Grep counts it in a note) and not searched; a file with more than one hard
        link, or one that cannot be read, is said through `skip` and not read. A file under
        `_READ_WHOLE` bytes is read in one call and searched in memory (`search_bytes`)."""
        try:
            opened = open_in(folder, name, shown)
        except CliError as exc:
            self.skip(str(exc))
            return
        if opened is None:
            return
        fd, st = opened
        try:
            found = self._lines(folder, name, fd, st.st_size, shown, session)
            if emit is None:
                self.printer.lines(shown, session, found)
            else:
                for number, text, is_match in found:
                    emit(Hit(shown, number, text, is_match, session))
        finally:
            os.close(fd)

    def _lines(
        self, folder: Folder, name: str, fd: int, size: int, shown: str, session: str | None
    ) -> Iterable[Line]:
        """The lines of the file open at `fd` (`size` bytes by its fstat) to print, found by
        the rule `_file` says; none for a binary file (said) or where ripgrep printed them
        (a failure after printing said through `skip`)."""
        query = self.query
        is_log = name == CONTEXT_FILE and session is not None
        whole: bytes | None = None
        if size < _READ_WHOLE and (is_log or self.fast is None or size < self.fast.from_bytes):
            whole = os.pread(fd, _READ_WHOLE, 0)
            if len(whole) == _READ_WHOLE:  # it grew since its fstat: read as a large file is
                whole = None
        # (`binary_reason` looks at the first `SNIFF_BYTES` of what it is given.)
        why = binary_reason(whole if whole is not None else os.pread(fd, SNIFF_BYTES, 0))
        if why is not None:
            self.printer.note(f"{shown}: binary file ({why}), not searched")
            return ()
        if is_log:
            if whole is not None:
                # A batch never committed is left out (`_access.committed_end`'s rule).
                end = readable_end(folder.fd, name, shown, fd, len(whole), whole)
                # Complete lines only, as `iter_lines` gives them: a last line without its
                # newline is a write in progress, or one a kill cut.
                lines: Iterable[bytes] = whole[:end].split(b"\n")[:-1]
            else:
                end = committed_end(folder, name, fd, size)
                lines = iter_lines(fd, 0, end)
            if self._search_log is None:
                self._search_log = log_search(self.matcher, context=query.context)
            return self._search_log(lines)
        if whole is not None:
            return search_bytes(whole, self.matcher, context=query.context)
        try:
            if self.fast is not None and self.fast.search(fd, shown, session, size):
                return ()
        except CliError as exc:  # ripgrep failed after printing lines
            self.skip(str(exc))
            return ()
        # The file's own offset, which ripgrep may have moved back to its start (`search`).
        return search_lines(
            os.fdopen(fd, "rb", buffering=0, closefd=False), self.matcher, context=query.context
        )


class _SearchedNames(dict[str, bool]):
    """Whether a name in a session's folder is searched as what its agent stored (not its
    context.jsonl, searched last, nor a record: `is_session_record`), judged once for each
    name: the records' names (context.jsonl.commit, events.jsonl, state.json...) come back
    in every session, and a dict finds them without a call. At most `_NAMES_KEPT` names
    are kept (a tool result's name is often seen once); the others are judged each time."""

    def __missing__(self, name: str) -> bool:
        searched = name != CONTEXT_FILE and not is_session_record(name)
        if len(self) < _NAMES_KEPT:
            self[name] = searched
        return searched


_NAMES_KEPT = 1024


def _with_writers(folder: Folder, emit: Callable[[Hit], None]) -> Callable[[Hit], None]:
    """`emit`, each hit first given its writer: a context.jsonl line's is the writer of the
    `context` event whose span holds it; a tool result file's, of the `tool_result` event
    naming it; an events.jsonl line's, its own."""
    from .._disk.events import EventKind, is_event
    from .._disk.writer import WRITER_FIELD, line_writers

    try:
        events = [e for e in folder.read_log(EVENTS_FILE) if is_event(e)]
    except (OSError, ValueError):
        events = []
    by_line = line_writers(events)
    by_file: dict[str, dict[str, Any]] = {}
    for event in events:
        writer, reference = event.get(WRITER_FIELD), event.get("reference")
        kind = event.get("kind")
        if (
            kind == EventKind.TOOL_RESULT
            and isinstance(writer, dict)
            and isinstance(reference, str)
        ):
            by_file.setdefault(os.path.basename(reference), writer)

    def emit_with_writer(hit: Hit) -> None:
        name = os.path.basename(hit.path)
        if name == CONTEXT_FILE:
            hit.writer = by_line.get(hit.line, _UNKNOWN_WRITER)
        elif name == EVENTS_FILE:
            event = events[hit.line - 1] if 0 < hit.line <= len(events) else {}
            found = event.get(WRITER_FIELD)
            hit.writer = found if isinstance(found, dict) else _UNKNOWN_WRITER
        else:
            hit.writer = by_file.get(name, _UNKNOWN_WRITER)
        emit(hit)

    return emit_with_writer
