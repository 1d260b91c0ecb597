"""gc of a workspace: `CollectedWorkspace`, the `StoreWorkspace` of a store gc collects (on a
disk, in a bucket, in a database; memory is bounded by eviction instead), and the rules it runs
(`collect_garbage`, `remove_sessions`).

Which sessions gc removes, in what units, and what keeps one live (its lease, a session that
stays and names its files, a write while gc ran) is decided here; the stores only measure
and remove (`SessionCollector`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._disk.ids import validate_session_id
from ..exceptions import ConfigError
from ._core import StoreWorkspace
from ._gc import (
    GcReport,
    UnitOutcome,
    check_limits,
    live_because,
    record_unit,
    removal_units,
    sessions_to_remove,
    unit_named_by_staying,
)

if TYPE_CHECKING:
    from ._store import SessionCollector

__all__ = ["CollectedWorkspace", "collect_garbage", "remove_sessions"]


async def collect_garbage(
    store: SessionCollector,
    *,
    older_than: float | None,
    max_bytes: int | None,
    dry_run: bool,
) -> GcReport:
    """Remove the sessions past the limits that are not live, then the unused data/ files.

    See `GarbageCollector.gc`: sessions idle longer than `older_than` go, then the oldest
    until the workspace fits `max_bytes`; a session whose lease is held, or that a staying
    session names, stays, with its unit (sessions that name each other).

    Raises:
        ConfigError: a negative `older_than` or `max_bytes`.
    """
    check_limits(older_than, max_bytes)
    report = GcReport(dry_run=dry_run)
    await store.recover(dry_run=dry_run)
    now = time.time()
    usages, data_sizes = await store.measure()
    doomed, remaining, report.sessions_kept = sessions_to_remove(
        usages, data_sizes, now=now, older_than=older_than, max_bytes=max_bytes
    )
    for unit in removal_units(doomed):
        outcome = unit_named_by_staying(unit, remaining)
        if not outcome.kept and not dry_run:
            outcome = await store.remove_unit_if_idle(unit)
        record_unit(unit, outcome, remaining, report)
    await store.collect_data(remaining, now, report)
    return report


async def remove_sessions(
    store: SessionCollector, session_ids: Sequence[str], *, dry_run: bool
) -> GcReport:
    """Remove the sessions named, as gc removes one (`GarbageCollector.remove_sessions`):
    none of them when one is live (its lease is held, or a session that stays names its
    files); each unit of sessions that name each other whole or not at all, checked again
    where no writer can come between (`SessionCollector.remove_unit_if_idle`).

    Raises:
        InvalidSessionId: a name is not a plain name (before any I/O).
        ConfigError: a session named is not in the workspace (nothing is removed).
    """
    names = list(dict.fromkeys(validate_session_id(s) for s in session_ids))
    report = GcReport(dry_run=dry_run)
    await store.recover(dry_run=dry_run)
    usages, _ = await store.measure()
    by_name = {u.name: u for u in usages}
    missing = [name for name in names if name not in by_name]
    if missing:
        raise ConfigError(f"no session {missing[0]!r} in the workspace: nothing was removed")
    doomed = [by_name[name] for name in names]
    staying = [u for u in usages if u.name not in set(names)]
    for usage in doomed:
        why = live_because(usage, staying)
        if why is not None:
            report.sessions_kept[usage.name] = why
    if report.sessions_kept:
        return report
    for unit in removal_units(doomed):
        outcome = UnitOutcome() if dry_run else await store.remove_unit_if_idle(unit)
        record_unit(unit, outcome, staying, report)
    return report


class CollectedWorkspace(StoreWorkspace):
    """A `StoreWorkspace` whose store gc collects (`SessionCollector`): on a disk and in a
    bucket; memory is bounded by eviction instead."""

    def _collector(self) -> SessionCollector:
        """The store's steps of gc, for one run."""
        raise NotImplementedError

    async def gc(
        self,
        *,
        older_than: float | None = None,
        max_bytes: int | None = None,
        dry_run: bool = False,
    ) -> GcReport:
        """Remove old sessions, then the oldest until the workspace fits, then unused data.

        1. Sessions whose last activity (the newest change of their files) is more than
           `older_than` seconds ago are removed.
        2. If `max_bytes` is given, the remaining sessions are removed oldest first until the
           sessions plus the data/ files they reference take at most `max_bytes`.
        3. data/ files that no remaining session references (in context.jsonl, tool_result
           files, events.jsonl or state.json) are removed, except those changed within the
           last `DATA_GRACE_SECONDS` (a writer may have stored one and not yet named it; in a
           bucket a writer refreshes an old object it re-stores, and data/ and the sessions
           are listed again before any removal: an object refreshed or named since is kept).

        It also finishes what a purge or gc killed on the way left (on a disk, folders
        renamed aside, which count in `bytes_freed`; in a bucket, objects copied aside).

        Never removes a live session (`GcReport.sessions_kept` says why each stays): one
        whose lease is held (in a bucket: not expired on the store's clock), or whose files a
        session that stays references (a fork's origin, a sub-agent's parent or child); a
        session referenced by a newer one goes only after it. A session written to after it
        was measured is kept; sessions that name each other go together or not at all.

        Safe while agents write. On a disk a session is removed under the same exclusive
        lock as `purge_session`, and a lease is taken only under that lock held shared, so
        never on a session being removed; data/ files are removed under an exclusive lock on
        data/ that every store shares. In a bucket gc takes a session's lease (a conditional
        put) before deleting it and deletes the lease object last, so no writer takes it
        meanwhile; finding references costs one GET per object, judging leases one empty
        object written and deleted under `.clock/` to read the store's time. A referenced
        file is never removed.

        Args:
            older_than: age in seconds; None skips step 1.
            max_bytes: size budget for the whole workspace; None skips step 2.
            dry_run: remove nothing; report what would be removed.

        Returns:
            A `GcReport`.

        Raises:
            ConfigError: a negative `older_than` or `max_bytes`.
            OffloadError: a planted link, the disk refused a removal, or a bucket failed
                past the deadline.
        """
        return await collect_garbage(
            self._collector(), older_than=older_than, max_bytes=max_bytes, dry_run=dry_run
        )

    async def remove_sessions(
        self, session_ids: Sequence[str], *, dry_run: bool = False
    ) -> GcReport:
        """Remove the sessions named, with the refusals of `gc`: what `ctxoffload purge`
        runs.

        Unlike `purge_session`, which deletes what it is told, a live session is never
        removed: one whose lease is held (an agent still open on it), or whose files a
        session that stays references (a fork's origin, a sub-agent's parent or child:
        name the sessions that reference it too, and they go together). When one named is
        live, none is removed, and `GcReport.sessions_kept` says why for each. data/ files
        stay (other sessions may name them): the next `gc` removes those no session names.

        Args:
            session_ids: the sessions to remove (one named twice counts once).
            dry_run: report what would go, remove nothing.

        Returns:
            A `GcReport`: `sessions_removed` (with `bytes_freed`), or `sessions_kept`.

        Raises:
            InvalidSessionId: a name is not a plain name (before any I/O).
            ConfigError: a session named is not in the workspace (nothing is removed).
            OffloadError: a planted link, the store refused a removal, or a bucket failed
                past the deadline.
        """
        return await remove_sessions(self._collector(), session_ids, dry_run=dry_run)
