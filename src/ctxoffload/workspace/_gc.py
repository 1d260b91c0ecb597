"""What `gc` measures and decides, for `LocalWorkspace` and `ObjectStoreWorkspace` alike:
each session's activity, size and data/ references, and which sessions go."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..exceptions import ConfigError, OffloadError
from ._layout import DATA_NAME
from ._reader import Folder, iter_chunks

__all__ = [
    "DATA_GRACE_SECONDS",
    "GcReport",
    "SessionUsage",
    "check_limits",
    "data_files",
    "data_names_in",
    "footprint",
    "session_usage",
    "sessions_to_remove",
]

# An unreferenced data/ file used (stored or re-stored) within this many seconds is kept:
# a writer that has just stored an image has not yet written the log line naming it.
DATA_GRACE_SECONDS = 3600.0

# A data/ name anywhere in a file, not only after `data/` (`DATA_REFERENCE`): gc keeps what a
# file names in any form, so a reference written some other way never loses its file.
_DATA_NAME_IN_TEXT = re.compile(DATA_NAME.pattern.encode())
# A name cut by a chunk boundary is found again in the next chunk's window.
_OVERLAP = 80


@dataclass
class GcReport:
    """What `gc` removed (or, with `dry_run`, would remove).

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
    """One session: when it was last written, its size and the data/ names it holds.

    Attributes:
        keys: in a bucket, the objects it was measured from (removed with it).
    """

    name: str
    last_activity: float
    size: int
    references: set[str]
    keys: list[str] = field(default_factory=list)


def check_limits(older_than: float | None, max_bytes: int | None) -> None:
    """Refuse a negative `gc` limit.

    Raises:
        ConfigError: `older_than` or `max_bytes` is negative.
    """
    for name, value in (("older_than", older_than), ("max_bytes", max_bytes)):
        if value is not None and value < 0:
            raise ConfigError(f"gc {name}={value!r} is negative: pass a value >= 0 or None")


def data_names_in(chunks: Iterable[bytes]) -> set[str]:
    """The data/ file names that consecutive chunks of one file mention."""
    found: set[str] = set()
    tail = b""
    for chunk in chunks:
        window = tail + chunk
        found.update(m.decode() for m in _DATA_NAME_IN_TEXT.findall(window))
        tail = window[-_OVERLAP:]
    return found


def footprint(sessions: Iterable[SessionUsage], data_sizes: Mapping[str, int]) -> int:
    """Bytes the sessions take, with the data/ files they reference."""
    sessions = list(sessions)
    referenced: set[str] = set().union(*(u.references for u in sessions))
    return sum(u.size for u in sessions) + sum(
        size for name, size in data_sizes.items() if name in referenced
    )


def sessions_to_remove(
    usages: Iterable[SessionUsage],
    data_sizes: Mapping[str, int],
    *,
    now: float,
    older_than: float | None,
    max_bytes: int | None,
) -> tuple[list[SessionUsage], list[SessionUsage]]:
    """(to remove, to keep): the sessions idle for more than `older_than` seconds, then the
    oldest until the rest, with the data/ files they reference, take at most `max_bytes`.

    Both lists are oldest activity first.
    """
    remaining = sorted(usages, key=lambda u: u.last_activity)
    doomed: list[SessionUsage] = []
    if older_than is not None:
        cutoff = now - older_than
        doomed = [u for u in remaining if u.last_activity < cutoff]
        remaining = [u for u in remaining if u.last_activity >= cutoff]
    if max_bytes is not None:
        while remaining and footprint(remaining, data_sizes) > max_bytes:
            doomed.append(remaining.pop(0))
    return doomed, remaining


def session_usage(session: Folder) -> SessionUsage:
    """Measure an entered session folder, following no link.

    Every regular file counts towards its size and last activity (the newest mtime, or the
    folder's own), and is read for data/ names. Links, special files and files with other
    hard links are skipped.
    """
    last = os.fstat(session.fd).st_mtime
    size = 0
    references: set[str] = set()
    for name in session.files():
        try:
            fd, st = session.open(name)
        except (FileNotFoundError, OffloadError):
            continue
        try:
            size += st.st_size
            last = max(last, st.st_mtime)
            references |= data_names_in(iter_chunks(fd, 0, st.st_size))
        finally:
            os.close(fd)
    return SessionUsage(session.parts[-1], last, size, references)


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
