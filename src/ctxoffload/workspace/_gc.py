"""What `gc` measures and decides, for `LocalWorkspace` and `ObjectStoreWorkspace` alike:
each session's activity, size, data/ references and links to other sessions, and which
sessions go.

What is live for gc is decided here, once, for every backend (`sessions_to_remove`): a
session whose lease is held, and a session whose files another session that stays names (a
fork names its origin's files, a sub-agent's parent and child name each other). Each backend
only measures (`SessionUsage`) and, when it removes a session, checks the lease again where
no writer can take it meanwhile."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..exceptions import ConfigError, OffloadError
from ._layout import DATA_NAME, SESSIONS_DIR
from ._reader import Folder, iter_chunks

__all__ = [
    "DATA_GRACE_SECONDS",
    "GcReport",
    "SessionUsage",
    "check_limits",
    "data_files",
    "data_names_in",
    "footprint",
    "named_by_staying",
    "names_in",
    "removal_order",
    "session_usage",
    "sessions_to_remove",
]

# An unreferenced data/ file used (stored or re-stored) within this many seconds is kept:
# a writer that has just stored an image has not yet written the log line naming it.
DATA_GRACE_SECONDS = 3600.0

# A data/ name anywhere in a file, not only after `data/` (`DATA_REFERENCE`): gc keeps what a
# file names in any form, so a reference written some other way never loses its file.
_DATA_NAME_IN_TEXT = re.compile(DATA_NAME.pattern.encode())
# Another session named in a file: a path or URI through `sessions/<id>/` (a fork's messages
# name its origin's files; `/` may be JSON-escaped or a Windows `\\`), or a link field
# `"session": "<id>"` (a fork's `origin`, a child's `parent`, a parent's `subagent` event),
# quotes JSON-escaped or not. Each pattern begins with a literal, which the regex engine
# scans for fast (one pattern of both, with a look-behind, made gc 5 times slower); what
# that lets through (`subsessions/x/`) only keeps a session longer.
_SESSION_ID = rb"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}"
_SESSION_PATH = re.compile(SESSIONS_DIR.encode() + rb"(?:/|\\)+(" + _SESSION_ID + rb")(?:/|\\)")
_SESSION_LINK = re.compile(rb'session\\*"\s*:\s*\\*"(' + _SESSION_ID + rb')\\*"')
# A name cut by a chunk boundary is found again in the next chunk's window: the longest
# match (a link field with a 128-character id, escaped) fits in it.
_OVERLAP = 256


@dataclass
class GcReport:
    """What `gc` removed (or, with `dry_run`, would remove).

    Attributes:
        sessions_removed: the ids of the sessions removed, in the order removed (oldest
            activity first, a session after those that named its files).
        data_removed: the data/ file names removed, sorted.
        bytes_freed: the bytes of every file removed.
        dry_run: True when nothing was removed.
        sessions_kept: the sessions the limits would have removed but gc keeps because
            they are live, each with why: `"its lease is held by agent 'coder' (pid 12 on
            host-a, ...)"`, or `"session 'nightly-retry' references its files"`.
    """

    sessions_removed: list[str] = field(default_factory=list)
    data_removed: list[str] = field(default_factory=list)
    bytes_freed: int = 0
    dry_run: bool = False
    sessions_kept: dict[str, str] = field(default_factory=dict)


@dataclass
class SessionUsage:
    """One session: when it was last written, its size and the data/ names it holds.

    Attributes:
        keys: in a bucket, the objects it was measured from (removed with it).
        sessions: the other sessions its files name (`names_in`).
        lease: who holds its lease (`describe_holder`), or None when it is free.
    """

    name: str
    last_activity: float
    size: int
    references: set[str]
    keys: list[str] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    lease: str | None = None


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
    return names_in(chunks)[0]


def names_in(chunks: Iterable[bytes]) -> tuple[set[str], set[str]]:
    """(data/ file names, session ids) that consecutive chunks of one file mention."""
    data: set[str] = set()
    sessions: set[str] = set()
    tail = b""
    for chunk in chunks:
        window = tail + chunk
        data.update(m.decode() for m in _DATA_NAME_IN_TEXT.findall(window))
        sessions.update(m.decode() for m in _SESSION_PATH.findall(window))
        sessions.update(m.decode() for m in _SESSION_LINK.findall(window))
        tail = window[-_OVERLAP:]
    return data, sessions


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
) -> tuple[list[SessionUsage], list[SessionUsage], dict[str, str]]:
    """(to remove, to keep, kept as live): the sessions idle for more than `older_than`
    seconds, then the oldest until the rest, with the data/ files they reference, take at
    most `max_bytes`; never one that is live.

    Live (DESIGN section 7): a session whose lease is held, and a session whose files a
    session that stays names (a fork, a sub-agent's parent or child). So a session named by
    a newer one counts as active as that one and goes only after it: a fork keeps its origin
    as long as the fork stays, and gc never leaves a reference naming no file.

    The lists are oldest activity first; the dict says why each session the limits alone
    would have removed is kept.
    """
    by_name = {u.name: u for u in usages}
    order = sorted(by_name.values(), key=lambda u: u.last_activity)
    keep: dict[str, str] = {}
    for usage in order:
        if usage.lease is not None:
            keep[usage.name] = f"its lease is held by {usage.lease}"
    doomed: list[SessionUsage] = []
    if older_than is not None:
        cutoff = now - older_than
        idle = {u.name for u in order if u.last_activity < cutoff}
        _keep_named(by_name, [n for n in by_name if n not in idle or n in keep], keep)
        doomed = [u for u in order if u.name in idle and u.name not in keep]
    remaining = [u for u in order if u not in doomed]
    passed_over: set[str] = set()
    if max_bytes is not None:
        while footprint(remaining, data_sizes) > max_bytes:
            named = _named_by(remaining)
            going = next((u for u in remaining if u.lease is None and not named.get(u.name)), None)
            if going is None:
                break  # all that is left is live
            passed_over.update(
                u.name for u in remaining[: remaining.index(going)] if u.name not in keep
            )
            remaining.remove(going)
            doomed.append(going)
        if footprint(remaining, data_sizes) > max_bytes:
            passed_over.update(u.name for u in remaining)
    named = _named_by(remaining)
    for name in sorted(passed_over - set(keep)):
        if named.get(name):
            keep[name] = _named_reason(named[name])
    limited = {u.name for u in doomed} | passed_over
    if older_than is not None:
        limited |= {u.name for u in order if u.last_activity < now - older_than}
    kept = {name: why for name, why in keep.items() if name in limited}
    return doomed, remaining, kept


def _named_by(usages: list[SessionUsage]) -> dict[str, list[str]]:
    """For each session, the other sessions of `usages` that name it, oldest first."""
    named: dict[str, list[str]] = {}
    for usage in usages:
        for other in sorted(usage.sessions - {usage.name}):
            named.setdefault(other, []).append(usage.name)
    return named


def _named_reason(names: list[str]) -> str:
    """`session 'b' references its files`, `sessions 'b', 'c' reference its files`."""
    shown = ", ".join(repr(n) for n in names[:3])
    if len(names) > 3:
        shown += f" and {len(names) - 3} more"
    if len(names) == 1:
        return f"session {shown} references its files"
    return f"sessions {shown} reference its files"


def named_by_staying(usage: SessionUsage, staying: Iterable[SessionUsage]) -> str | None:
    """Why `usage` must stay after all: a session that stays (one whose removal failed, as
    it was written meanwhile) names it. None when none does."""
    names = [u.name for u in staying if u.name != usage.name and usage.name in u.sessions]
    return _named_reason(sorted(names)) if names else None


def _keep_named(by_name: Mapping[str, SessionUsage], kept: list[str], keep: dict[str, str]) -> None:
    """Add to `keep` every session the sessions `kept` name, and those they name, and so on
    (a chain of forks or of sub-agents), each with the session that names it."""
    queue = list(kept)
    reached = set(kept)
    while queue:
        name = queue.pop()
        for other in sorted(by_name[name].sessions - {name}):
            if other in by_name and other not in reached:
                reached.add(other)
                keep.setdefault(other, _named_reason([name]))
                queue.append(other)


def removal_order(doomed: list[SessionUsage]) -> list[SessionUsage]:
    """`doomed` in the order to remove them: a session before those it names, so that a
    removal that fails (the session was written meanwhile) never leaves a reference naming
    a removed file; otherwise oldest first. Sessions naming each other (a sub-agent and its
    parent) go oldest first."""
    left = list(doomed)
    ordered: list[SessionUsage] = []
    while left:
        named = _named_by(left)
        going = next((u for u in left if not named.get(u.name)), left[0])
        left.remove(going)
        ordered.append(going)
    return ordered


def session_usage(session: Folder) -> SessionUsage:
    """Measure an entered session folder, following no link.

    Every regular file counts towards its size and last activity (the newest mtime, or the
    folder's own), and is read for data/ names and the other sessions it names. Links,
    special files and files with other hard links are skipped.
    """
    last = os.fstat(session.fd).st_mtime
    size = 0
    references: set[str] = set()
    sessions: set[str] = set()
    for name in session.files():
        try:
            fd, st = session.open(name)
        except (FileNotFoundError, OffloadError):
            continue
        try:
            size += st.st_size
            last = max(last, st.st_mtime)
            data, named = names_in(iter_chunks(fd, 0, st.st_size))
            references |= data
            sessions |= named
        finally:
            os.close(fd)
    return SessionUsage(session.parts[-1], last, size, references, sessions=sessions)


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
