"""The steps of gc that take a bucket's own way (`SessionCollector`): listings, GETs, a lease
taken by a conditional put, deletes.

A bucket has no lock: gc claims a session by taking its lease (a conditional put, as a
writer does) and deletes the lease object last, so no writer takes the session meanwhile;
a data/ object is copied aside before its delete and put back if a session names it by the
end (see `BucketCollector._delete_data`).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .._disk.ids import is_session_id
from .._disk.layout import DATA_DIR, SESSIONS_DIR, is_data_name, now_iso
from .._disk.rows import dumps_line
from ..exceptions import SessionBusyError
from ._bucket_keys import IMPORTING, SEGMENTED_LOGS, data_objects, import_mark, marked_sessions
from ._gc import DATA_GRACE_SECONDS, GcReport, SessionUsage, UnitOutcome, data_names_in, names_in
from ._lease import (
    DEFAULT_LEASE_TTL,
    LEASE_FILE,
    describe_holder,
    holder_record,
    lease_expires,
    lease_record,
    orphaned_here,
)
from ._segments import SegmentLog
from ._store_client import ObjectInfo, StoreClient, gather_limited

if TYPE_CHECKING:
    from ._store import SessionCollector

__all__ = ["REMOVING", "BucketCollector"]

# Where gc copies the data/ objects it deletes until it has checked that none is named.
_GC_HOLD = ".gc-hold"

REMOVING = "removing"
"""The field of the lease record gc writes while it removes a session: a writer waits for it."""


class BucketCollector:
    """One gc run over a bucket: what it listed when it measured is what its later steps
    check against (`listed`, `data`).

    Args:
        client: the bucket.
        logs: the workspace's segmented logs (a removed session's are forgotten).
        context_keys: the workspace's message-id index per context log (forgotten too).
        take_lease: the conditional lease put (`BucketStore.take_lease`).
    """

    def __init__(
        self,
        client: StoreClient,
        logs: SegmentLog,
        context_keys: dict[str, dict[str, int]],
        take_lease: Callable[[str, dict[str, Any]], Awaitable[tuple[str, dict[str, Any]]]],
    ) -> None:
        self._client = client
        self._logs = logs
        self._context_keys = context_keys
        self._take_lease = take_lease
        self._listed: list[ObjectInfo] = []
        self._data: dict[str, ObjectInfo] = {}

    async def recover(self, *, dry_run: bool) -> None:
        """Put back what an earlier gc copied aside and did not finish with, and remove the
        marks of imports killed before they wrote anything (not in a dry run)."""
        if not dry_run:
            await self._recover_held()
            await self._remove_lone_marks()

    async def _remove_lone_marks(self) -> None:
        """Remove each mark of an import (`IMPORTING`) whose session has no object, once it
        is older than `DATA_GRACE_SECONDS`: the import was killed before its lease was
        taken, and the mark would leave out of every listing a session of that name written
        later. A younger one may be an import about to write (a mark whose session has
        objects goes with them: `measure`)."""
        folders, objects = await self._client.list_level(SESSIONS_DIR)
        lone = sorted(n for n in marked_sessions(objects) - set(folders) if is_session_id(n))
        found = await gather_limited(
            [functools.partial(self._client.info, import_mark(n)) for n in lone], 8
        )
        now = await self._client.now() if found else 0.0
        await self._client.delete(
            [
                info.key
                for info in found
                if info is not None and now - info.last_modified.timestamp() > DATA_GRACE_SECONDS
            ]
        )

    async def measure(self) -> tuple[list[SessionUsage], dict[str, int]]:
        """Every session read for the names it holds, with its live lease holder; data/'s
        objects with their sizes. Reading every session's objects costs one GET per object."""
        self._listed = await self._client.list_objects(SESSIONS_DIR)
        by_session: dict[str, list[ObjectInfo]] = {}
        for info in self._listed:
            parts = info.key.split("/")
            if len(parts) >= 3:
                by_session.setdefault(parts[1], []).append(info)
        for info in self._listed:  # a killed import's mark goes with the session it marks
            name = info.key.split("/", 1)[-1]
            marked = name[len(IMPORTING) :] if name.startswith(IMPORTING) else ""
            if "/" not in name and marked in by_session:
                by_session[marked].append(info)
        self._data = {i.key.rsplit("/", 1)[-1]: i for i in await data_objects(self._client)}
        usages = await gather_limited(
            [functools.partial(self._usage, name, objects) for name, objects in by_session.items()],
            4,
        )
        await self._measure_leases(usages, self._listed)
        return usages, {name: info.size for name, info in self._data.items()}

    async def collect_data(
        self, remaining: list[SessionUsage], now: float, report: GcReport
    ) -> None:
        """Delete the data/ objects no session of `remaining` names and not changed in the
        last `DATA_GRACE_SECONDS`, once checked again against fresh listings."""
        data = self._data
        referenced: set[str] = set().union(*(u.references for u in remaining))
        unnamed = {name: info for name, info in data.items() if name not in referenced}
        unused = {
            name
            for name, info in unnamed.items()
            if now - info.last_modified.timestamp() > DATA_GRACE_SECONDS
        }
        report.keep_recent_data(set(unnamed) - unused)
        if unused and not report.dry_run:
            unused, listed = await self._still_unused(unused, data, self._listed)
            unused = await self._delete_data(unused, listed)
        report.data_removed = sorted(unused)
        report.bytes_freed += sum(data[name].size for name in unused)

    async def _still_unused(
        self, unused: set[str], data: dict[str, ObjectInfo], listed: list[ObjectInfo]
    ) -> tuple[set[str], list[ObjectInfo]]:
        """The data/ objects of `unused` that are unused still, checked after the sessions
        were read: the listings that decided it are stale by then.

        A writer that stores an object which is already there refreshes it when it is old
        (a PUT of the same bytes), then appends the line naming it. Listed again, data/ shows
        the refresh; listed again, the sessions show the new line: every session object that
        is new or changed since the first listing is read for data/ names. Only an object
        unchanged in data/ and named by none of them goes. (Listing data/ first narrows what
        is left to a writer whose refresh lands after that listing and whose line lands
        after the second listing of the sessions, while gc sends the delete.)
        """
        again = {i.key.rsplit("/", 1)[-1]: i for i in await data_objects(self._client)}
        unused = {
            name
            for name in unused
            if name in again and again[name].last_modified == data[name].last_modified
        }
        named, listed = await self._named_since(listed)
        return unused - named, listed

    async def _named_since(self, listed: list[ObjectInfo]) -> tuple[set[str], list[ObjectInfo]]:
        """The data/ names in the session objects new or changed since `listed`, and the
        sessions' objects as they are listed now."""
        seen = {i.key: (i.last_modified, i.size) for i in listed}
        now_listed = await self._client.list_objects(SESSIONS_DIR)
        changed = [i for i in now_listed if seen.get(i.key) != (i.last_modified, i.size)]
        bodies = await gather_limited(
            [functools.partial(self._client.get, i.key) for i in changed], 16
        )
        named: set[str] = set()
        for body in bodies:
            if body:
                named |= data_names_in([body])
        return named, now_listed

    async def _delete_data(self, names: set[str], listed: list[ObjectInfo]) -> set[str]:
        """Delete data/ `names`, and put back any that a session names by the end; the names
        deleted for good.

        A writer may still refresh an object after the last check and then write the line
        naming it (an unconditional DELETE cannot tell). So each object is first copied
        aside (`.gc-hold/<run>/`, inside the store), and after the delete the sessions
        changed since `listed` are read once more: an object a new line names is copied
        back. A line written later still is covered by its writer, which makes sure, after
        the line, that the objects it re-used are there (see `_keep_present`). A gc that
        dies on the way leaves its copies to the next gc, which puts them back first.
        """
        if not names:
            return names
        hold = f"{_GC_HOLD}/{uuid.uuid4().hex}"
        ordered = sorted(names)
        copied = await gather_limited(
            [
                functools.partial(self._client.copy, f"{DATA_DIR}/{name}", f"{hold}/{name}")
                for name in ordered
            ],
            8,
        )
        # One gone meanwhile (another gc) is not deleted, nor reported.
        held = {name for name, done in zip(ordered, copied, strict=True) if done}
        await self._client.delete([f"{DATA_DIR}/{name}" for name in sorted(held)])
        named, _ = await self._named_since(listed)
        for name in sorted(held & named):
            await self._client.copy(f"{hold}/{name}", f"{DATA_DIR}/{name}")
        await self._client.delete([f"{hold}/{name}" for name in sorted(held)])
        return held - named

    async def _recover_held(self) -> None:
        """Put back the data/ objects an earlier gc copied aside and did not finish with."""
        stale = await self._client.list_objects(_GC_HOLD)
        for info in stale:
            name = info.key.rsplit("/", 1)[-1]
            if is_data_name(name) and await self._client.info(f"{DATA_DIR}/{name}") is None:
                await self._client.copy(info.key, f"{DATA_DIR}/{name}")
        await self._client.delete([i.key for i in stale])

    async def _usage(self, name: str, objects: list[ObjectInfo]) -> SessionUsage:
        bodies = await gather_limited(
            [functools.partial(self._client.get, i.key) for i in objects], 16
        )
        references: set[str] = set()
        sessions: set[str] = set()
        for body in bodies:
            if body:
                data, named = names_in([body])
                references |= data
                sessions |= named
        return SessionUsage(
            name,
            max(i.last_modified.timestamp() for i in objects),
            sum(i.size for i in objects),
            references,
            [i.key for i in objects],
            sessions=sessions,
        )

    async def _measure_leases(self, usages: list[SessionUsage], listed: list[ObjectInfo]) -> None:
        """Set `lease` of each session whose lease is live on the store's clock
        (`lease_expires`), read after the listing that `listed` is: a lease renewed since is
        live too. The store's time is asked once, and only if there is a lease to judge."""
        names = {u.name for u in usages}
        keys = [
            i.key
            for i in listed
            if i.key.count("/") == 2
            and i.key.endswith(f"/{LEASE_FILE}")
            and i.key.split("/")[1] in names
        ]
        if not keys:
            return
        found = await gather_limited(
            [functools.partial(self._client.get_stamped, key) for key in keys], 16
        )
        now = await self._client.now()
        by_name = {u.name: u for u in usages}
        for key, lease in zip(keys, found, strict=True):
            if lease is None:
                continue
            record = lease_record(lease[0])
            expires = lease_expires(record, lease[2].timestamp())
            if expires is not None and now <= expires and not orphaned_here(record):
                by_name[key.split("/")[1]].lease = describe_holder(record)

    async def remove_unit_if_idle(self, unit: list[SessionUsage]) -> UnitOutcome:
        """Remove a unit of sessions (`removal_units`) unless one was written since it was
        measured or its lease is live: then all stay, as the one written names the others'
        files.

        gc first takes the lease of each itself (as `acquire_lease` does: a live holder
        keeps the session), so no writer takes one while the objects are deleted; the lease
        objects go last.
        """
        outcome = UnitOutcome()
        claims: list[tuple[str, str, dict[str, Any]]] = []
        keys: set[str] = set()
        give_back = True  # unless all are claimed: what stays is free for its next writer
        try:
            for usage in sorted(unit, key=lambda u: u.name):
                why = await self._claim(usage, claims, keys)
                if why is not None:
                    outcome.kept[usage.name] = why
                    break
            else:
                give_back = False
        finally:
            if give_back:
                for lease_key, e_tag, holder in claims:
                    record = dumps_line({**holder, "released": now_iso()})
                    await self._client.put_if(
                        lease_key, record, {"Content-Type": "application/json"}, e_tag=e_tag
                    )
        if outcome.kept:
            return outcome
        await self._client.delete(sorted(keys))
        await self._client.delete(sorted(lease_key for lease_key, _, _ in claims))
        for usage in unit:
            prefix = f"{SESSIONS_DIR}/{usage.name}"
            for log in SEGMENTED_LOGS:
                self._logs.forget(f"{prefix}/{log}")
                self._context_keys.pop(f"{prefix}/{log}", None)
        return outcome

    async def _claim(
        self,
        usage: SessionUsage,
        claims: list[tuple[str, str, dict[str, Any]]],
        keys: set[str],
    ) -> str | None:
        """Take a session's lease for its removal (added to `claims`) and add its objects
        but the lease to `keys`; why it stays when it must (its lease is live, or it was
        written since it was measured)."""
        # A name found in the bucket, not given by a caller: removed as it is, even one that
        # is not a plain name (an object put there by hand; no lease can be taken on it).
        prefix = f"{SESSIONS_DIR}/{usage.name}"
        lease_key = f"{prefix}/{LEASE_FILE}"
        claimed = is_session_id(usage.name)
        if claimed:
            holder = {**holder_record("gc", DEFAULT_LEASE_TTL), REMOVING: True}
            try:
                e_tag, _ = await self._take_lease(usage.name, holder)
            except SessionBusyError as busy:
                return f"its lease is held by {describe_holder(busy.holder)}"
            claims.append((lease_key, e_tag, holder))
        now_there = await self._client.list_objects(prefix)
        measured = set(usage.keys)
        # A new object counts whatever its stamp: S3 stamps to the second, so one written in
        # the second the session was measured in is no later than what was measured.
        if any(
            i.key not in measured or i.last_modified.timestamp() > usage.last_activity
            for i in now_there
            if i.key != lease_key
        ):
            return "it was written while gc ran"
        found = {i.key for i in now_there} | set(usage.keys)
        keys.update(found - {lease_key} if claimed else found)
        return None


if TYPE_CHECKING:  # mypy checks that the collector is what it is declared to be
    _collector: type[SessionCollector] = BucketCollector
