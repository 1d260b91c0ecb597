"""What `LocalWorkspace.gc` measures: sessions' activity, size and data/ references."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field

from ..exceptions import OffloadError
from ._paths import open_dir, open_for_reading

__all__ = ["DATA_GRACE_SECONDS", "GcReport", "SessionUsage", "data_files", "session_usage"]

# An unreferenced data/ file used (stored or re-stored) within this many seconds is kept:
# a writer that has just stored an image has not yet written the log line naming it.
DATA_GRACE_SECONDS = 3600.0

# A data/ file name as it appears in any reference: 64 hex digits and an extension.
_DATA_NAME = re.compile(rb"[0-9a-f]{64}\.[A-Za-z0-9]{1,8}")
_CHUNK = 1 << 20
_OVERLAP = 80


@dataclass
class GcReport:
    """What `LocalWorkspace.gc` removed (or, with `dry_run`, would remove).

    Attributes:
        sessions_removed: the ids of the sessions removed, oldest activity first.
        data_removed: the data/ file names removed, sorted.
        bytes_freed: the bytes of every file removed.
        dry_run: True when nothing was removed.
    """

    sessions_removed: list[str] = field(default_factory=list)
    data_removed: list[str] = field(default_factory=list)
    bytes_freed: int = 0
    dry_run: bool = False


@dataclass
class SessionUsage:
    """One session directory: when it was last written, its size and the data it names."""

    name: str
    last_activity: float
    size: int
    references: set[str]


def _references_in(fd: int) -> set[str]:
    found: set[str] = set()
    tail = b""
    while chunk := os.read(fd, _CHUNK):
        window = tail + chunk
        found.update(m.decode() for m in _DATA_NAME.findall(window))
        tail = window[-_OVERLAP:]
    return found


def session_usage(sessions_fd: int, name: str, shown: str) -> SessionUsage | None:
    """Measure `sessions/{name}`, following no link; None if it is gone.

    Every regular file counts towards its size and last activity (the newest mtime, or the
    directory's own), and is read for data/ names. Links and special files are skipped.

    Raises:
        OffloadError: the entry is a planted link.
    """
    try:
        dir_fd = open_dir(sessions_fd, name, shown, create=False)
    except FileNotFoundError:
        return None
    try:
        last = os.fstat(dir_fd).st_mtime
        size = 0
        references: set[str] = set()
        with os.scandir(dir_fd) as it:
            entries = [e.name for e in it if e.is_file(follow_symlinks=False)]
        for entry in entries:
            try:
                fd = open_for_reading(dir_fd, entry, os.path.join(shown, entry))
            except (FileNotFoundError, OffloadError):
                continue
            try:
                st = os.fstat(fd)
                size += st.st_size
                last = max(last, st.st_mtime)
                references |= _references_in(fd)
            finally:
                os.close(fd)
        return SessionUsage(name, last, size, references)
    finally:
        os.close(dir_fd)


def data_files(data_fd: int) -> dict[str, os.stat_result]:
    """The regular files of data/ (temporary `.tmp-*` files excluded), not followed."""
    files: dict[str, os.stat_result] = {}
    with os.scandir(data_fd) as it:
        for entry in it:
            if entry.name.startswith("."):
                continue
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode):
                files[entry.name] = st
    return files
