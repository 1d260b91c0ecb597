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

from .._disk.commit import iter_chunks
from .._disk.ids import SESSION_ID_PATTERN
from .._disk.layout import DATA_NAME, SESSIONS_DIR
from .._disk.read import Folder
from ..exceptions import ConfigError, OffloadError

__all__ = [
    "DATA_GRACE_SECONDS",
    "GcReport",
    "SessionUsage",
    "UnitOutcome",
    "check_limits",
    "data_files",
    "data_names_in",
    "footprint",
    "live_because",
    "named_by_staying",
    "names_in",
    "record_unit",
    "removal_order",
    "removal_units",
    "session_usage",
    "sessions_to_remove",
    "unit_named_by_staying",
]

# An unreferenced data/ file used (stored or re-stored) within this many seconds is kept:
# a writer that has just stored an image has not yet written the log line naming it.
DATA_GRACE_SECONDS = 3600.0

RECENT_DATA = (
    f"no session names it, but it changed within the last {DATA_GRACE_SECONDS / 60:g} "
    "minutes (a writer may not have named it yet)"
)
"""Why gc keeps an unnamed data/ file (`GcReport.data_kept`)."""

# A data/ name anywhere in a file, not only after `data/` (`DATA_REFERENCE`): gc keeps what a
# file names in any form, so a reference written some other way never loses its file.
_DATA_NAME_IN_TEXT = re.compile(DATA_NAME.pattern.encode())
# Another session named in a file: a path or URI through `sessions/<id>/` (a fork's messages
# name its origin's files; `/` may be JSON-escaped or a Windows `\\`), or a link field
# `"session": "<id>"` (a fork's `origin`, a child's `parent`, a parent's `subagent` event),
# quotes JSON-escaped or not. Each pattern begins with a literal, which the regex engine
# scans for fast (one pattern of both, with a look-behind, made gc 5 times slower); what
# that lets through (`subsessions/x/`) only keeps a session longer.
_SESSION_ID = SESSION_ID_PATTERN.encode()
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
        data_kept: the data/ files no remaining session names that gc keeps all the same,
            each with why (`RECENT_DATA`): it changed within the last `DATA_GRACE_SECONDS`,
            and a writer may have stored it and not yet written the line naming it. A later
            gc removes those still unnamed.
    """

    sessions_removed: list[str] = field(default_factory=list)
    data_removed: list[str] = field(default_factory=list)
    bytes_freed: int = 0
    dry_run: bool = False
    sessions_kept: dict[str, str] = field(default_factory=dict)
    data_kept: dict[str, str] = field(default_factory=dict)

    def keep_recent_data(self, names: Iterable[str]) -> None:
        """Say that the unnamed data/ files `names` are kept, being recent: those named as a
        writer names a payload (`DATA_NAME`); a file of another name was put there by
        something else, which no writer is about to name."""
        self.data_kept.update(
            (name, RECENT_DATA) for name in sorted(names) if DATA_NAME.fullmatch(name)
        )


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
    session that stays names (a fork, a sub-agent's parent or child), so those it names in
    turn. A session named by a newer one counts as active as that one and goes only after
    it, and sessions that name each other (a sub-agent and its parent) go together: gc never
    leaves a reference naming no file.

    The lists are in the order to remove and oldest activity first; the dict says why each
    session the limits alone would have removed is kept.
    """
    remaining = sorted(usages, key=lambda u: u.last_activity)
    doomed: list[SessionUsage] = []
    cutoff = None if older_than is None else now - older_than
    if cutoff is not None:
        doomed += _remove_idle(remaining, cutoff)
    newest_removed = None
    if max_bytes is not None:
        for unit in _Links(remaining).removable():
            if footprint(remaining, data_sizes) <= max_bytes:
                break
            for usage in unit:
                remaining.remove(usage)
            doomed += unit
            newest_removed = max(u.last_activity for u in unit)
        if cutoff is not None and newest_removed is not None:
            # One whose newer referrer the budget removed is idle by its own activity now.
            doomed += _remove_idle(remaining, cutoff)
    over = max_bytes is not None and footprint(remaining, data_sizes) > max_bytes
    limited = [
        u
        for u in remaining
        if over
        or (cutoff is not None and u.last_activity < cutoff)
        or (newest_removed is not None and u.last_activity < newest_removed)
    ]
    kept = {}
    for usage in limited:
        why = live_because(usage, remaining)
        if why is not None:
            kept[usage.name] = why
    return doomed, remaining, kept


def _remove_idle(remaining: list[SessionUsage], cutoff: float) -> list[SessionUsage]:
    """Take out of `remaining` (and return, in the order to remove) the sessions idle since
    before `cutoff` that no live session keeps."""
    links = _Links(remaining)
    going = [u for unit in links.removable() if links.active(unit) < cutoff for u in unit]
    for usage in going:
        remaining.remove(usage)
    return going


def live_because(usage: SessionUsage, staying: Iterable[SessionUsage]) -> str | None:
    """Why a session is live, which gc and a purge never remove: its lease is held, or
    sessions that stay (`staying`) name its files. None when it is not."""
    if usage.lease is not None:
        return f"its lease is held by {usage.lease}"
    return named_by_staying(usage, staying)


def named_by_staying(usage: SessionUsage, staying: Iterable[SessionUsage]) -> str | None:
    """Why `usage` must stay: sessions that stay (`staying`: those kept, and those whose
    removal failed, as they were written meanwhile) name it. None when none does."""
    names = sorted(u.name for u in staying if u.name != usage.name and usage.name in u.sessions)
    if not names:
        return None
    shown = ", ".join(repr(n) for n in names[:3])
    if len(names) > 3:
        shown += f" and {len(names) - 3} more"
    if len(names) == 1:
        return f"session {shown} references its files"
    return f"sessions {shown} reference its files"


class _Links:
    """The sessions as a graph (a session points at those it names), in units: sessions that
    name each other in a ring (strongly connected components, found by Tarjan's algorithm)
    go together or not at all."""

    def __init__(self, usages: list[SessionUsage]) -> None:
        by_name = {u.name: u for u in usages}
        self._named = {
            u.name: [n for n in sorted(u.sessions) if n in by_name and n != u.name] for u in usages
        }
        # Tarjan gives a unit after every unit it names: namers come last.
        self.units = [[by_name[n] for n in unit] for unit in self._components(list(by_name))]
        unit_of = {u.name: i for i, unit in enumerate(self.units) for u in unit}
        # From namers to named: a unit is as recent as the newest unit naming it, and live
        # (kept whatever the limits) if it or a unit naming it holds a lease.
        self._active = [max(u.last_activity for u in unit) for unit in self.units]
        self._leased = [any(u.lease is not None for u in unit) for unit in self.units]
        for i in reversed(range(len(self.units))):
            for usage in self.units[i]:
                for name in self._named[usage.name]:
                    j = unit_of[name]
                    if j != i:
                        self._active[j] = max(self._active[j], self._active[i])
                        self._leased[j] = self._leased[j] or self._leased[i]
        self._unit_of = unit_of

    def active(self, unit: list[SessionUsage]) -> float:
        """The newest activity of the unit and of every unit naming it."""
        return self._active[self._unit_of[unit[0].name]]

    def removable(self) -> list[list[SessionUsage]]:
        """The units no lease keeps, in the order to remove them: the least recently active
        first (`active`), a unit before those it names (a unit is never more recent than
        one naming it, and Tarjan's order, reversed, breaks the ties)."""
        order = sorted(
            (i for i in range(len(self.units)) if not self._leased[i]),
            key=lambda i: (self._active[i], -i),
        )
        return [sorted(self.units[i], key=lambda u: u.last_activity) for i in order]

    def _components(self, names: list[str]) -> list[list[str]]:
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        found: list[list[str]] = []
        for root in names:
            if root in index:
                continue
            work = [(root, 0)]
            while work:
                name, next_child = work[-1]
                if next_child == 0:
                    index[name] = low[name] = len(index)
                    stack.append(name)
                    on_stack.add(name)
                children = self._named[name]
                while next_child < len(children):
                    child = children[next_child]
                    next_child += 1
                    if child not in index:
                        work[-1] = (name, next_child)
                        work.append((child, 0))
                        break
                    if child in on_stack:
                        low[name] = min(low[name], index[child])
                else:
                    work.pop()
                    if work:
                        parent = work[-1][0]
                        low[parent] = min(low[parent], low[name])
                    if low[name] == index[name]:
                        unit = []
                        while True:
                            member = stack.pop()
                            on_stack.discard(member)
                            unit.append(member)
                            if member == name:
                                break
                        found.append(unit)
        return found


def removal_order(doomed: list[SessionUsage]) -> list[SessionUsage]:
    """`doomed` in the order to remove them (`removal_units`, one after the other)."""
    return [usage for unit in removal_units(doomed) for usage in unit]


def removal_units(doomed: list[SessionUsage]) -> list[list[SessionUsage]]:
    """`doomed` in the units to remove, in the order to remove them: a session before those
    it names, so that a removal that fails (the session was written meanwhile) never leaves
    a reference naming a removed file (`named_by_staying` then keeps what it names);
    otherwise oldest first. Sessions that name each other (a sub-agent and its parent) are
    one unit, oldest first: a backend removes all of them or none (one written meanwhile
    keeps the others, which it names)."""
    return _Links(doomed).removable()


@dataclass
class UnitOutcome:
    """What became of a unit of sessions gc tried to remove.

    Attributes:
        kept: why each session that stays does (empty when the unit was removed); when one
            of the unit must stay, all of them stay.
        gone: the sessions another purge or gc removed meanwhile.
    """

    kept: dict[str, str] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)


def record_unit(
    unit: list[SessionUsage], outcome: UnitOutcome, staying: list[SessionUsage], report: GcReport
) -> None:
    """Put a unit's outcome in `report`: removed, or kept with `staying` (each with its own
    reason, else the sessions of the unit that name it)."""
    present = [u for u in unit if u.name not in outcome.gone]
    for name in sorted(outcome.gone):
        report.sessions_kept[name] = "it was removed by another purge or gc meanwhile"
    if not outcome.kept:
        report.sessions_removed += [u.name for u in present]
        report.bytes_freed += sum(u.size for u in present)
        return
    staying.extend(present)
    for usage in present:
        why = outcome.kept.get(usage.name) or named_by_staying(usage, staying)
        report.sessions_kept[usage.name] = why or "a session of its unit was written"


def unit_named_by_staying(unit: list[SessionUsage], staying: list[SessionUsage]) -> UnitOutcome:
    """The unit stays if a session that stays names one of it (`named_by_staying`)."""
    kept = {}
    for usage in unit:
        why = named_by_staying(usage, staying)
        if why is not None:
            kept[usage.name] = why
    return UnitOutcome(kept)


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
