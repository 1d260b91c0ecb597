"""The bucket store: a session's objects under `sessions/<id>/` (where: `_bucket_keys.py`),
its logs as segments (`SessionFiles`), a lease taken by a conditional put, an import written
whole or not at all, and a copy of the workspace in the on-disk layout. gc's own steps over a
bucket are `BucketCollector`'s (`_bucket_collector.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .._disk.batch import new_rows
from .._disk.commit import parse_log, take_lines
from .._disk.ids import is_session_id, validate_session_id
from .._disk.layout import CONTEXT_FILE, DATA_DIR, SESSIONS_DIR, now_iso
from .._disk.paths import write_new_file
from .._disk.rows import dumps_line, index_keys
from ..exceptions import InvalidReference, OffloadError
from ._bucket_keys import (
    SEGMENTED_LOGS,
    SESSION_KEY,
    data_objects,
    import_mark,
    is_workspace_key,
    marked_sessions,
    session_prefix,
)
from ._datastore import data_name
from ._fence import fence_refused
from ._gc import DATA_GRACE_SECONDS
from ._lease import LEASE_FILE, busy_error, lease_expires, lease_record, orphaned_here
from ._segments import SegmentLog, segment_log
from ._store_client import ObjectInfo, StoreClient, gather_limited

if TYPE_CHECKING:
    from .._disk.batch import Span
    from .._disk.payloads import StoreData
    from ._fence import StateFence
    from ._store import ImportedSession, ImportTarget, Payloads, SessionFiles

_T = TypeVar("_T")

__all__ = ["BucketStore"]

logger = logging.getLogger("ctxoffload")

# Lines appended per segment when an import writes a log: bounded, however long the log.
_IMPORT_BATCH_BYTES = 8 << 20
_IMPORT_BATCH_LINES = 10_000


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

    async def append(
        self, session_id: str, name: str, lines: Sequence[bytes], *, sync: bool = True
    ) -> Span:
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

    async def put_fenced(
        self, session_id: str, name: str, data: bytes, fence: StateFence | None
    ) -> str:
        """Replace the session's object `name`, with a `fence` only while the fence's lease
        is the session's lease (`SessionFiles.put_fenced`).

        A bucket has no transaction over two objects, so the PUT is conditional on the ETag
        of the object this holder last wrote (`If-None-Match: *` before its first write):
        one request, as unfenced, while nobody else writes it. When the condition fails the
        lease object is read: another's token refuses the write; this holder's (a writer
        without a lease wrote the object, or a stale holder did after a takeover, or this
        holder's own earlier answer was lost) lets it write again, conditional on the ETag
        found. A stale holder whose last state.json the new holder wrote again byte for
        byte (the same ETag) is not refused by its first write after it; the new holder's
        next write then finds the object changed and writes over it.

        Raises:
            SessionBusyError: the lease is another's now (or gone); nothing was written.
            OffloadError: the store failed past the deadline, or kept changing the object.
        """
        if fence is None:
            return await self.put(session_id, name, data)
        key = f"{session_prefix(session_id)}/{name}"
        lease_key = f"{session_prefix(session_id)}/{LEASE_FILE}"
        attributes = {"Content-Type": "application/json"}
        e_tag = fence.e_tag
        for _ in range(8):
            written = await self._client.put_if(key, data, attributes, e_tag=e_tag)
            if written is not None:
                fence.e_tag = written
                return self._client.reference(key)
            lease = await self._client.get(lease_key)
            holder = lease_record(lease)
            if holder.get("token") != fence.token:
                raise fence_refused(session_id, self._client.reference(lease_key), holder)
            found = await self._client.get_tagged(key)
            if found is not None and found[0] == data:
                fence.e_tag = found[1]  # this holder's own PUT, whose answer was lost
                return self._client.reference(key)
            e_tag = None if found is None else found[1]
        where = self._client.reference(key)
        raise OffloadError(f"could not write {where}: other writers kept changing it", where)

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


if TYPE_CHECKING:  # mypy checks that the bucket store is what it is declared to be
    _files: type[SessionFiles] = BucketStore
    _imports: type[ImportTarget] = BucketStore
