"""gc over a SQL database (`SessionCollector`): what one run measured (the database's time
then, data/'s stamps) is what its later steps check against, each under the write lock.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ._gc import DATA_GRACE_SECONDS, GcReport, SessionUsage, UnitOutcome, data_names_in, names_in
from ._lease import describe_holder
from ._sql_rows import delete_sessions, live_holder, lock_session, session_bodies

if TYPE_CHECKING:
    from ._sql_payloads import PayloadPlace
    from ._sql_schema import Connection, Database
    from ._sql_store import SqlStore
    from ._store import SessionCollector


__all__ = [
    "SqlCollector",
]


class SqlCollector:
    """One gc run over a database (`SessionCollector`): what it measured (the database's
    time then, data/'s stamps) is what its later steps check against, each under the write
    lock, so no writer changes a session or takes a lease between a check and a delete."""

    def __init__(self, database: Database, store: SqlStore | None = None) -> None:
        self._database = database
        self._store = store
        self._measured_at = 0.0
        # name -> (size, stored, the folder or bucket holding it; None: the row does)
        self._data: dict[str, tuple[int, float, str | None]] = {}

    async def recover(self, *, dry_run: bool) -> None:
        """Nothing to finish: a removal is one transaction, done or not."""

    async def measure(self) -> tuple[list[SessionUsage], dict[str, int]]:
        """Every session read for the names it holds, with its live lease holder; data/'s
        rows with their sizes; on one snapshot."""

        def read(connection: Connection) -> list[SessionUsage]:
            self._measured_at = connection.execute(f"SELECT {connection.now}").fetchone()[0]
            usages: list[SessionUsage] = []
            sessions = connection.execute("SELECT id, updated FROM sessions ORDER BY id").fetchall()
            for session_id, updated in sessions:
                size = 0
                references: set[str] = set()
                named: set[str] = set()
                for body in session_bodies(connection, session_id):
                    size += len(body)
                    data_found, sessions_found = names_in([body])
                    references |= data_found
                    named |= sessions_found
                usages.append(
                    SessionUsage(session_id, float(updated), size, references, sessions=named)
                )
            by_name = {u.name: u for u in usages}
            for session_id, raw, expires in connection.execute(
                "SELECT session, holder, expires FROM leases"
            ):
                holder = live_holder(raw, expires, self._measured_at)
                if holder is not None and session_id in by_name:
                    by_name[session_id].lease = describe_holder(holder)
            self._data = {
                name: (int(size), float(stored), location)
                for name, size, stored, location in connection.execute(
                    "SELECT name, size, stored, location FROM data"
                )
            }
            return usages

        usages = await self._database.read(read)
        return usages, {name: size for name, (size, _, _) in self._data.items()}

    async def remove_unit_if_idle(self, unit: list[SessionUsage]) -> UnitOutcome:
        """Remove a unit of sessions in one transaction unless one was written since it was
        measured or its lease is live: then all of it stays."""

        def write(connection: Connection) -> UnitOutcome:
            outcome = UnitOutcome()
            for usage in sorted(unit, key=lambda u: u.name):  # one order: no deadlock
                lock_session(connection, usage.name)
            now = connection.execute(f"SELECT {connection.now}").fetchone()[0]
            for usage in sorted(unit, key=lambda u: u.name):
                lease = connection.execute(
                    "SELECT holder, expires FROM leases WHERE session = ?", (usage.name,)
                ).fetchone()
                holder = None if lease is None else live_holder(lease[0], lease[1], now)
                if holder is not None:
                    outcome.kept[usage.name] = f"its lease is held by {describe_holder(holder)}"
                    return outcome
                row = connection.execute(
                    "SELECT updated FROM sessions WHERE id = ?", (usage.name,)
                ).fetchone()
                if row is not None and row[0] > usage.last_activity:
                    outcome.kept[usage.name] = "it was written while gc ran"
                    return outcome
            delete_sessions(connection, [u.name for u in unit])
            return outcome

        return await self._database.write(write)

    async def collect_data(
        self, remaining: list[SessionUsage], now: float, report: GcReport
    ) -> None:
        """Delete the data/ rows no session of `remaining` names and not stored in the last
        `DATA_GRACE_SECONDS`, checked again under the write lock: a row stored since, or
        named by a session written since the measure, stays. With a place configured, the
        payloads there that no row names there are removed too, by the same rules."""
        referenced: set[str] = set().union(*(u.references for u in remaining))
        place = None if self._store is None else self._store.place
        here = None if place is None else place.location
        # A payload kept at a place this workspace was not configured with is not removed
        # (nor its row): gc reaches no folder or bucket the caller did not name.
        unnamed = {
            name: stored
            for name, (_, stored, location) in self._data.items()
            if name not in referenced and location in (None, here)
        }
        unused = {name for name, stored in unnamed.items() if now - stored > DATA_GRACE_SECONDS}
        report.keep_recent_data(set(unnamed) - unused)
        with contextlib.ExitStack() as held:
            if place is not None:
                # A folder's data/ taken exclusively before the database (its writers take
                # it, shared, before theirs): no writer stores there until gc is done.
                await asyncio.to_thread(held.enter_context, place.held_for_gc())
                listed = await place.listing()
                # In the place, and no row names it there: written when the row was
                # already in the database (which keeps the body), or by a writer whose
                # transaction then failed. Kept while a session names it, all the same.
                strays = {
                    name: size
                    for name, (size, written) in listed.items()
                    if (name not in self._data or self._data[name][2] != here)
                    and name not in referenced
                    and now - written > DATA_GRACE_SECONDS
                }
            else:
                strays = {}
            await self._remove_data(sorted(unused), strays, place, report)

    async def _remove_data(
        self,
        unused: list[str],
        strays: dict[str, int],
        place: PayloadPlace | None,
        report: GcReport,
    ) -> None:
        """Delete the rows `unused` (and their payloads in `place`) and the payloads
        `strays` no row names, each checked again under the write lock; into `report`."""
        removed_strays: set[str] = set()
        if (unused or strays) and not report.dry_run:
            candidates = unused
            here = None if place is None else place.location
            measured_at = self._measured_at
            loop = asyncio.get_running_loop()

            def write(connection: Connection) -> set[str]:
                named: set[str] = set()
                changed = connection.execute(
                    "SELECT id FROM sessions WHERE updated >= ?", (measured_at,)
                ).fetchall()
                for (session_id,) in changed:
                    named |= data_names_in(session_bodies(connection, session_id))
                removed: set[str] = set()
                outside: list[str] = []
                for name in candidates:
                    if name in named:
                        continue
                    # Only a row in the database or at this workspace's place (checked
                    # again: the row may have changed since it was measured).
                    row = connection.execute(
                        f"DELETE FROM data WHERE name = ? AND stored < {connection.now} - ? "
                        "AND (location IS NULL OR location = ?) RETURNING location",
                        (name, DATA_GRACE_SECONDS, here),
                    ).fetchone()
                    if row is not None:
                        removed.add(name)
                        if row[0] is not None:
                            outside.append(name)
                for name in strays:
                    if name in named:
                        continue
                    there = connection.execute(
                        "SELECT 1 FROM data WHERE name = ? AND location = ?", (name, here)
                    ).fetchone()
                    if there is None:
                        removed_strays.add(name)
                # Removed from its place in the transaction deleting its row: a writer
                # storing it again waits for the row, then finds it gone and stores it anew.
                if place is not None:
                    place.remove(outside + sorted(removed_strays), loop)
                return removed

            unused = sorted(await self._database.write(write))
        else:
            removed_strays = set(strays)
        report.data_removed = sorted({*unused, *removed_strays})
        report.bytes_freed += sum(self._data[name][0] for name in unused)
        report.bytes_freed += sum(strays[name] for name in removed_strays)


if TYPE_CHECKING:  # mypy checks that the SQL collector is what it is declared
    _collector: type[SessionCollector] = SqlCollector
