"""The workspace behaviour written once, for every store (`_store`): today, gc.

Which sessions gc removes, in what units, and what keeps one live (its lease, a session that
stays and names its files, a write while gc ran) is decided here; the stores only measure
and remove (`SessionCollector`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ._gc import (
    GcReport,
    check_limits,
    record_unit,
    removal_units,
    sessions_to_remove,
    unit_named_by_staying,
)

if TYPE_CHECKING:
    from ._store import SessionCollector

__all__ = ["collect_garbage"]


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
