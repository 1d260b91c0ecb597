"""The bucket store: a session's objects under `sessions/<id>/`, its logs as segments
(`SessionFiles`), and the steps of gc that take a bucket's own way (`SessionCollector`):
listings, GETs, a lease taken by a conditional put, deletes.

A bucket has no lock: gc claims a session by taking its lease (a conditional put, as a
writer does) and deletes the lease object last, so no writer takes the session meanwhile;
a data/ object is copied aside before its delete and put back if a session names it by the
end (see `BucketCollector._delete_data`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .._disk.batch import new_rows
from .._disk.commit import parse_log, take_lines
from .._disk.ids import is_session_id, validate_session_id
from .._disk.layout import CONTEXT_FILE, DATA_DIR, LOGS, SESSIONS_DIR, is_data_name, now_iso
from .._disk.paths import write_new_file
from .._disk.rows import dumps_line, index_keys
from ..exceptions import InvalidReference, OffloadError, SessionBusyError
from ._datastore import data_name
from ._gc import (
    DATA_GRACE_SECONDS,
    GcReport,
    SessionUsage,
    UnitOutcome,
    data_names_in,
    names_in,
)
from ._lease import (
    DEFAULT_LEASE_TTL,
    LEASE_FILE,
    busy_error,
    describe_holder,
    holder_record,
    lease_expires,
    lease_record,
    orphaned_here,
)
from ._segments import SegmentLog, segment_log
from ._store_client import ObjectInfo, StoreClient, gather_limited

if TYPE_CHECKING:
    from .._disk.batch import Span
    from .._disk.payloads import StoreData
    from ._store import ImportedSession, ImportTarget, Payloads, SessionCollector, SessionFiles

_T = TypeVar("_T")

__all__ = [
    "IMPORTING",
    "REMOVING",
    "SEGMENTED_LOGS",
    "SESSION_KEY",
    "BucketCollector",
    "BucketStore",
    "data_objects",
    "import_mark",
    "is_workspace_key",
    "marked_sessions",
    "session_prefix",
]

logger = logging.getLogger("ctxoffload")

SEGMENTED_LOGS = LOGS
"""The logs kept as segments (see _segments.py); state.json is one object, replaced whole."""

SESSION_KEY = re.compile(rf"{re.escape(SESSIONS_DIR)}/([^/]+)/([^/]+)")
"""A file of a session: `sessions/<id>/<name>` (group 1 the id, group 2 the name)."""

# Where gc copies the data/ objects it deletes until it has checked that none is named.
_GC_HOLD = ".gc-hold"

REMOVING = "removing"
"""The field of the lease record gc writes while it removes a session: a writer waits for it."""

IMPORTING = ".importing-"
"""The start of the name of the object `sessions/.importing-<id>`, which marks a session an
import is writing (a bucket has no transaction): every listing of the sessions leaves it
out until the import ends, so a session arrives whole or not at all. Beside the sessions'
folders, so the one listing that finds them finds the marks too."""

# Lines appended per segment when an import writes a log: bounded, however long the log.
_IMPORT_BATCH_BYTES = 8 << 20
_IMPORT_BATCH_LINES = 10_000


def session_prefix(session_id: str) -> str:
    """The key prefix of a session's objects, `sessions/<id>` (the id checked first)."""
    return f"{SESSIONS_DIR}/{validate_session_id(session_id)}"


def import_mark(session_id: str) -> str:
    """The key of the object marking a session an import is writing (`IMPORTING`)."""
    return f"{SESSIONS_DIR}/{IMPORTING}{validate_session_id(session_id)}"


def marked_sessions(names: Sequence[str]) -> set[str]:
    """The sessions the objects `names` (directly under sessions/) mark as being imported."""
    return {n[len(IMPORTING) :] for n in names if n.startswith(IMPORTING)}


def _import_batches(lines: list[bytes]) -> list[tuple[int, list[bytes]]]:
    """Consecutive runs of `lines`, each with the index of its first line: at most
    `_IMPORT_BATCH_LINES` lines or about `_IMPORT_BATCH_BYTES` bytes (a longer line is a
    batch of its own)."""
    out: list[tuple[int, list[bytes]]] = []
    start, size = 0, 0
    batch: list[bytes] = []
    for n, line in enumerate(lines):
        if batch and (len(batch) >= _IMPORT_BATCH_LINES or size + len(line) > _IMPORT_BATCH_BYTES):
            out.append((start, batch))
            start, batch, size = n, [], 0
        batch.append(line)
        size += len(line)
    if batch:
        out.append((start, batch))
    return out


@dataclass
class _PendingPayloads:
    """Payloads serialisation stored by name (`store`), uploaded before the line naming them
    (`before_line`), checked still there after it (`after_line`)."""

    client: StoreClient
    objects: dict[str, tuple[bytes, str | None]] = field(default_factory=dict)
    # The keys of `objects` that were already in the store (re-used, not created).
    reused: set[str] = field(default_factory=set)

    @property
    def store(self) -> StoreData:
        """Name a payload by its sha256 now; it is uploaded by `before_line`."""

        def store(raw: bytes, media_type: str | None) -> str:
            key = f"{DATA_DIR}/{data_name(raw, media_type)}"
            self.objects.setdefault(key, (raw, media_type))
            return self.client.reference(key)

        return store

    async def before_line(self) -> None:
        """Upload the payloads not in the store yet; refresh a re-used old one, which gc
        keeps while it is recent (`DATA_GRACE_SECONDS`), so gc cannot remove it before the
        line naming it is written (rewriting identical bytes changes nothing else)."""

        async def upload(key: str, raw: bytes, media_type: str | None) -> None:
            attributes = {"Content-Type": media_type or "application/octet-stream"}
            if await self.client.put_new(key, raw, attributes):
                return
            self.reused.add(key)
            info = await self.client.info(key)
            age = time.time() - info.last_modified.timestamp() if info else DATA_GRACE_SECONDS
            if age > DATA_GRACE_SECONDS / 2:
                await self.client.put(key, raw, attributes)

        await gather_limited(
            [
                functools.partial(upload, key, raw, media)
                for key, (raw, media) in self.objects.items()
            ],
            8,
        )

    async def after_line(self) -> None:
        """After the line naming them is written: store again any re-used object now gone.

        A gc that decided before that line that an object was unused may delete it after
        the writer found it there (see `ObjectStoreWorkspace.gc`); once the line is written,
        every later gc keeps it, so one check here closes the gap.
        """

        async def check(key: str) -> None:
            if await self.client.info(key) is None:
                raw, media_type = self.objects[key]
                attributes = {"Content-Type": media_type or "application/octet-stream"}
                await self.client.put_new(key, raw, attributes)

        await gather_limited([functools.partial(check, key) for key in sorted(self.reused)], 8)

    def hold_session(self, session_id: str, log: str) -> None:
        """Nothing to check or hold: an object cannot be a planted link, and a bucket has no
        lock (do not purge a session that is being written to)."""


class BucketStore:
    """A session's files in a bucket: `sessions/<id>/<name>` objects, the logs as segments
    (`SegmentLog`).

    Per context log it keeps where each message this writer knows of is (`index_keys`), read
    whole on the first append to it and kept up with its own appends, and the lock that makes
    a lookup and the append after it one step for this process.
    """

    def __init__(self, client: StoreClient, logs: SegmentLog) -> None:
        self._client = client
        self._logs = logs
        self.context_keys: dict[str, dict[str, int]] = {}
        self._context_locks: dict[str, asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def payloads(self) -> AsyncIterator[Payloads]:
        """The payloads of one offload (`SessionFiles.payloads`): named by hash while
        serialising, uploaded before the line naming them, checked after it."""
        yield _PendingPayloads(self._client)

    async def put_new(self, session_id: str, name: str, data: bytes) -> str | None:
        """Create the session's object `name` with a put-if-absent, so of two writers on any
        machines one wins (`SessionFiles.put_new`)."""
        key = f"{session_prefix(session_id)}/{name}"
        attributes = {"Content-Type": "text/plain; charset=utf-8"}
        if await self._client.put_new(key, data, attributes):
            return self._client.reference(key)
        return None

    async def read(self, session_id: str, name: str) -> bytes | None:
        """The bytes of the session's object `name`, or None (`SessionFiles.read`)."""
        return await self._client.get(f"{session_prefix(session_id)}/{name}")

    async def append(self, session_id: str, name: str, lines: Sequence[bytes]) -> Span:
        """Append `lines` to the log `name` as one segment, whose first line is known once its
        place is won (`SegmentLog.append`; `SessionFiles.append`)."""
        first, _ = await self._logs.append(f"{session_prefix(session_id)}/{name}", b"".join(lines))
        return new_rows(lines, None, (), first).span

    async def append_messages(
        self, session_id: str, lines: Sequence[bytes], keys: Sequence[str | None]
    ) -> Span:
        """Append, as one segment, the message lines whose key this object does not know in
        the context log: whole or absent, which is all the commit rule asks
        (`SessionFiles.append_messages`)."""
        key = f"{session_prefix(session_id)}/{CONTEXT_FILE}"
        async with self._context_locks.setdefault(key, asyncio.Lock()):
            index = await self._context_index(key)
            # The new rows' first line is known once their segment is won: placed then.
            rows = new_rows(lines, keys, (index,), 1)
            if not rows.lines:
                return rows.span
            first, _ = await self._logs.append(key, b"".join(rows.lines))
            index_keys(rows.lines, first, index)
            return rows.placed_at(first)

    async def _context_index(self, key: str) -> dict[str, int]:
        """Where each message of the context log `key` is, as far as this object knows."""
        index = self.context_keys.get(key)
        if index is None:
            index = {}
            data = await self._logs.read(key)
            await asyncio.to_thread(index_keys, data.split(b"\n"), 1, index)
            self.context_keys[key] = index
        return index

    async def run(self, work: Callable[[], _T]) -> _T:
        """In a worker thread: serialising is CPU work (`SessionFiles.run`)."""
        return await asyncio.to_thread(work)

    def event_failure_is_fatal(self, exc: OSError) -> bool:
        """A store past its deadline costs the event only
        (`SessionFiles.event_failure_is_fatal`)."""
        return False

    async def list_sessions(self) -> list[str]:
        """The ids of the sessions that have objects, sorted; one an import is writing (or
        was, when it was killed) is left out (`IMPORTING`), in the same listing."""
        folders, objects = await self._client.list_level(SESSIONS_DIR)
        marked = marked_sessions(objects)
        return sorted(n for n in folders if is_session_id(n) and n not in marked)

    # -- imports (`ImportTarget`) -------------------------------------------------------------

    async def unfinished_imports(self) -> set[str]:
        """The sessions marked as being imported: an import runs, or was killed."""
        _, objects = await self._client.list_level(SESSIONS_DIR)
        return {n for n in marked_sessions(objects) if is_session_id(n)}

    async def begin_import(self, session_id: str) -> None:
        """Mark the session as being imported: listings leave it out from now on."""
        record = dumps_line({"importing": session_id, "since": now_iso(), "pid": os.getpid()})
        await self._client.put(
            import_mark(session_id), record, {"Content-Type": "application/json"}
        )

    async def end_import(self, session_id: str) -> None:
        """Unmark the session: its import is whole, listings show it."""
        await self._client.delete([import_mark(session_id)])

    async def write_imported(self, session: ImportedSession) -> bool:
        """Write an imported session's files (each created once: `put_new`), then its logs'
        lines in bounded segments after the segments there; under the import's mark, so no
        listing shows it before it is whole (`ImportTarget.write_imported`).

        Returns:
            False when one of its files is there already (what came before it stays, the
            session still marked).
        """
        sid = session.session_id
        created = await gather_limited(
            [
                functools.partial(self.put_new, sid, name, body)
                for name, body in sorted(session.files.items())
            ],
            8,
        )
        if None in created:
            return False
        for start, batch in _import_batches(session.logs.get(CONTEXT_FILE, [])):
            keys = session.keys[start : start + len(batch)]
            await self.append_messages(sid, batch, keys)
        for log, lines in sorted(session.logs.items()):
            if log != CONTEXT_FILE:
                for _, batch in _import_batches(lines):
                    await self.append(sid, log, batch)
        return True

    def key_of(self, reference: str) -> str:
        """The key a reference names (`ObjectStoreWorkspace.key_of`).

        Raises:
            InvalidReference: it is not a reference into this workspace.
        """
        url = self._client.base_url
        key = reference
        if reference.startswith(url + "/"):
            key = reference[len(url) + 1 :]
        elif "://" in reference:
            raise InvalidReference(
                f"reference {reference!r} is outside the workspace {url!r}: pass a "
                "reference this workspace returned"
            )
        if is_workspace_key(key):
            return key
        raise InvalidReference(
            f"reference {reference!r} names no object of the workspace {url!r}: pass a "
            "reference this workspace returned"
        )

    def reference_key(self, reference: str) -> list[str]:
        """The parts of a reference's key below the workspace (`SessionFiles.reference_key`)."""
        return self.key_of(reference).split("/")

    async def read_reference(self, reference: str) -> bytes:
        """The object a reference names; a log, all its segments (`SessionFiles.read_reference`).

        Raises:
            InvalidReference: unknown, or outside the workspace.
            OffloadError: the store failed past the deadline.
        """
        key = self.key_of(reference)
        if key.rsplit("/", 1)[-1] in SEGMENTED_LOGS:
            segments = await self._logs.segments(key)
            if segments:
                return await self._logs.read(key)
        data = await self._client.get(key)
        if data is None:
            raise InvalidReference(
                f"reference {reference!r} names no object in {self._client.base_url!r}: pass "
                "a reference this workspace returned"
            )
        return data

    async def read_lines(self, reference: str, first: int, last: int) -> bytes:
        """Lines `first` to `last` of what a reference names: lines of a log that one segment
        this object appended holds are read from that segment alone (one GET); others from
        the whole log (`SessionFiles.read_lines`)."""
        key = self.key_of(reference)
        if key.rsplit("/", 1)[-1] in SEGMENTED_LOGS:
            found = await self._logs.read_lines(key, first, last)
            if found is not None:
                return found
        data = await self.read_reference(reference)
        return take_lines((data,), first - 1, last - first + 1)

    async def delete_session(self, session_id: str) -> bool:
        """Delete every object of a session, and forget what this object cached of its logs
        (`SessionFiles.delete_session`)."""
        prefix = session_prefix(session_id)
        keys = [i.key for i in await self._client.list_objects(prefix)]
        for log in SEGMENTED_LOGS:
            self._logs.forget(f"{prefix}/{log}")
            self.context_keys.pop(f"{prefix}/{log}", None)
        await self._client.delete(keys)
        # A killed import's mark goes with what it marked (last: the session stays unlisted
        # until its objects are gone).
        await self._client.delete([import_mark(session_id)])
        return bool(keys)

    async def put(self, session_id: str, name: str, data: bytes) -> str:
        """Replace the session's object `name` in one PUT (`SessionFiles.put`)."""
        key = f"{session_prefix(session_id)}/{name}"
        await self._client.put(key, data, {"Content-Type": "application/json"})
        return self._client.reference(key)

    async def list_names(self, session_id: str) -> list[str]:
        """The names of the session's objects (`SessionFiles.list_names`); a segmented
        log's segments, one level down, are not among them."""
        infos = await self._client.list_objects(session_prefix(session_id))
        return [m.group(2) for i in infos if (m := SESSION_KEY.fullmatch(i.key))]

    def reference(self, session_id: str, name: str) -> str:
        """The reference of the session's object `name` (`s3://bucket/prefix/...`)."""
        return self._client.reference(f"{session_prefix(session_id)}/{name}")

    async def read_log(self, session_id: str, name: str, *, commit: bool = False) -> list[Any]:
        """A log's JSON values, by the reader's rule for torn and corrupt lines; a segmented
        log's segments joined (`SessionFiles.read_log`; a segment is whole or absent, so
        `commit` changes nothing)."""
        key = f"{session_prefix(session_id)}/{name}"
        raw = await (self._logs.read(key) if name in SEGMENTED_LOGS else self._client.get(key))
        return parse_log(raw or b"", self._client.reference(key), warn=logger.warning)

    async def take_lease(
        self, session_id: str, holder: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """Write `holder` as the session's lease unless a live holder has it: (the lease
        object's ETag, the record it replaced, `{}` when there was none).

        A lease is live until `lease_expires` on the store's clock: the store's stamp of its
        latest renewal against the store's time now (`StoreClient.now`, asked only when a
        lease is there and not released). The put is conditional on the ETag read, so of
        two takers one wins.

        Raises:
            SessionBusyError: a live holder has it.
            OffloadError: the store failed past the deadline, or kept changing the lease.
        """
        key = f"{session_prefix(session_id)}/{LEASE_FILE}"
        where = self._client.reference(key)
        attributes = {"Content-Type": "application/json"}
        for _ in range(8):
            found = await self._client.get_stamped(key)
            previous: dict[str, Any] = {}
            if found is not None:
                previous = lease_record(found[0])
                if previous.get("token") == holder["token"]:
                    return found[1], {}  # our own put, whose answer was lost
                expires = lease_expires(previous, found[2].timestamp())
                if (
                    expires is not None
                    and not orphaned_here(previous)
                    and await self._client.now() <= expires
                ):
                    raise busy_error(session_id, previous, where, expires=expires)
            e_tag = await self._client.put_if(
                key,
                dumps_line(holder),
                attributes,
                e_tag=None if found is None else found[1],
            )
            if e_tag is not None:
                return e_tag, previous
        raise OffloadError(
            f"could not take the lease {where}: other writers kept changing it", where
        )

    async def download(
        self, root: str, sessions: list[str], *, data: bool, check: bool
    ) -> list[str]:
        """Copy `sessions` (and, with `data`, data/) into the folder `root` in the on-disk
        layout, each log's segments as one file (`ObjectStoreWorkspace.download`); the
        problems found in the logs with `check`."""
        infos: list[ObjectInfo] = []
        for name in sessions:
            infos.extend(
                await self._client.list_objects(f"{SESSIONS_DIR}/{validate_session_id(name)}")
            )
        if data:
            infos.extend(await data_objects(self._client))
        problems: list[str] = []
        logs: dict[str, list[ObjectInfo]] = {}
        plain: list[ObjectInfo] = []
        for info in infos:
            log = segment_log(info.key)
            if log is not None and log.rsplit("/", 1)[-1] in SEGMENTED_LOGS:
                logs.setdefault(log, []).append(info)
            elif is_workspace_key(info.key):
                plain.append(info)

        resolved = os.path.realpath(root)

        def write(key: str, body: bytes, modified: float) -> None:
            write_new_file(resolved, key.split("/"), body, root, modified=modified)

        async def copy(info: ObjectInfo) -> None:
            body = await self._client.get(info.key)
            if body is not None:  # removed since the listing: nothing to copy
                await asyncio.to_thread(write, info.key, body, info.last_modified.timestamp())

        async def copy_log(log_key: str, segments: list[ObjectInfo]) -> None:
            body = await self._logs.read(log_key)
            newest = max(i.last_modified.timestamp() for i in segments)
            await asyncio.to_thread(write, log_key, body, newest)
            if check:
                problems.extend(await self._logs.check(log_key))

        await gather_limited([functools.partial(copy, i) for i in plain], 16)
        for log_key, segments in sorted(logs.items()):
            await copy_log(log_key, segments)
        return problems


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


async def data_objects(client: StoreClient) -> list[ObjectInfo]:
    """The objects of data/ named as data/ files are (`<sha256>.<ext>`)."""
    return [
        i for i in await client.list_objects(DATA_DIR) if is_data_name(i.key.rsplit("/", 1)[-1])
    ]


def is_workspace_key(key: str) -> bool:
    """Whether `key` names an object of the layout: a data/ file, or a session's file."""
    folder, _, name = key.partition("/")
    if folder == DATA_DIR:
        return is_data_name(name)
    session = SESSION_KEY.fullmatch(key)
    return (
        session is not None
        and is_session_id(session.group(1))
        and not session.group(2).startswith(".")
    )


# -- reaching the bucket: its URL and credentials checked before any I/O ------------------


if (
    TYPE_CHECKING
):  # mypy checks that the bucket store and collector are what they are declared to be
    _collector: type[SessionCollector] = BucketCollector
    _files: type[SessionFiles] = BucketStore
    _imports: type[ImportTarget] = BucketStore
