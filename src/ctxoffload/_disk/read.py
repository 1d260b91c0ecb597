"""The one light reader of a workspace's files: what the workspaces' read side, the agent's
file tools, the retrieval tool and every `ctxoffload` command read through.

- Opening: `Folder` reaches a folder of the workspace from its workdir one component at a time
  without following a link (`_paths.open_tree`), and opens its files with `_paths`'s verified
  open: no link followed, never blocking on a FIFO, checked on the open descriptor (a regular
  file with one link, a second link looked at again for a moment while the workspace links a
  finished file into place). A refusal is a `Refused` naming the file and why.
- References: the parts of the workspace a reference names, and the file it opens, read up
  to `readable_end` (`commit.py`: commit records and JSON lines).
- The session record: rebuilding what the model was sent at a step from the events alone
  (`events.py` declares the events).

Light on purpose: no pydantic and no `typing` at run time, so `ctxoffload --help` and `grep`
keep their start-up figures.
"""

from __future__ import annotations

import os
import stat
import time

from ..exceptions import IncompleteRecord, InvalidReference, OffloadError
from .commit import iter_chunks, read_commit, read_log, readable_end
from .ids import is_session_id, session_ids_among
from .layout import DATA_DIR, SESSIONS_DIR
from .paths import (
    DIR_FLAGS,
    Refused,
    file_url_to_path,
    linked_elsewhere,
    open_dir,
    open_for_reading_stat,
    open_path,
    workdir_problem,
)

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

__all__ = [
    "Folder",
    "Refused",
    "not_a_reference",
    "open_reference",
    "rebuild_step",
    "reference_parts",
    "reference_text",
    "sessions_folder",
    "workspace_of",
]

# A tool_result file made under a temporary name (`file_to_link` off Linux) has two links
# for the microseconds between being linked into place and that name being removed:
# `Folder.stat` looks again this often, 1 ms apart, as the verified open does before it
# refuses a second link.
_SETTLE_RETRIES = 20


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
        within: the folder of all of `parts` but the last, entered and held: the last is
            opened in it (no link followed) instead of from the workdir down, one open for
            each of many folders side by side (`ctxoffload grep` over every session).

    Raises (on entering):
        FileNotFoundError: a component is missing.
        Refused: a component is a planted link or not a folder.
        OffloadError: a component cannot be opened.
    """

    def __init__(
        self, workdir: str, *parts: str, root: str | None = None, within: Folder | None = None
    ) -> None:
        self.workdir = workdir
        self.parts = parts
        self.root = root
        self.within = within
        self._shown: str | None = None
        self.fd = -1

    @property
    def shown(self) -> str:
        """The folder as people are shown it: its path from the workdir as given (made when
        first asked for: a folder entered without a refusal to word never needs it)."""
        if self._shown is None:
            parts = self.parts
            self._shown = os.path.join(self.workdir, *parts) if parts else self.workdir
        return self._shown

    def __enter__(self) -> Folder:
        if self.within is not None and self.parts:
            try:
                self.fd = os.open(self.parts[-1], DIR_FLAGS, dir_fd=self.within.fd)
            except OSError:  # opened again to be refused in `open_dir`'s words
                self.fd = open_dir(self.within.fd, self.parts[-1], self.shown, create=False)
            return self
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
        # (`listdir` makes no entry object for each name: a third of the time of `scandir`.)
        return sorted(os.listdir(self.fd))

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
        return session_ids_among(self.folders())

    def linked_sessions(self) -> list[str]:
        """The names of its symbolic links named as session ids, sorted: a session folder
        replaced by a link, which is never followed (`sessions` leaves it out), for a
        command to say so rather than call the session missing."""
        with os.scandir(self.fd) as entries:
            return sorted(e.name for e in entries if e.is_symlink() and is_session_id(e.name))

    def files(self) -> list[str]:
        """The names of the regular files in it (no link, FIFO or device), sorted, hidden ones
        (a writer's `.tmp-*`) included."""
        with os.scandir(self.fd) as entries:
            return sorted(e.name for e in entries if e.is_file(follow_symlinks=False))

    def open(self, name: str, shown: str | None = None) -> tuple[int, os.stat_result]:
        """Open a file of the folder for reading: `(descriptor, its fstat)`; close it after.
        `shown` names it in a refusal (default: `path(name)`).

        Raises:
            FileNotFoundError: there is no such file.
            Refused: a link, a FIFO, socket, device or folder, or a file with other hard
                links (one may be outside the workspace): never read.
            OffloadError: it cannot be opened (EACCES...).
        """
        return open_for_reading_stat(self.fd, name, self.path(name) if shown is None else shown)

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
    # Imported here: every command opens folders through this module, few rebuild a step,
    # and declaring the events costs a search by `ctxoffload grep` a few milliseconds.
    from .events import EventKind, is_event

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
