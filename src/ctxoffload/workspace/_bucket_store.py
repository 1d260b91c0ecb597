"""The bucket store's steps of gc (`SessionCollector`): listings, GETs, a lease taken by a
conditional put, deletes.

A bucket has no lock: gc claims a session by taking its lease (a conditional put, as a
writer does) and deletes the lease object last, so no writer takes the session meanwhile;
a data/ object is copied aside before its delete and put back if a session names it by the
end (see `BucketCollector._delete_data`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .._disk.commit import parse_log
from .._disk.ids import is_session_id, validate_session_id
from .._disk.layout import CONTEXT_FILE, DATA_DIR, EVENTS_FILE, SESSIONS_DIR, is_data_name, now_iso
from .._disk.rows import dumps_line
from ..exceptions import ConfigError, OffloadError, SessionBusyError
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
    orphaned_here,
)
from ._segments import SegmentLog, segment_log
from ._store_client import ObjectInfo, StoreClient, gather_limited

if TYPE_CHECKING:
    from ._store import SessionCollector, SessionFiles

__all__ = [
    "REMOVING",
    "SEGMENTED_LOGS",
    "SESSION_KEY",
    "BucketCollector",
    "BucketStore",
    "checked_url",
    "data_objects",
    "host_name",
    "is_secret_name",
    "is_workspace_key",
    "lease_record",
    "refuse_userinfo",
    "refuse_userinfo_in_environment",
    "session_prefix",
]

logger = logging.getLogger("ctxoffload")

SEGMENTED_LOGS = (CONTEXT_FILE, EVENTS_FILE)
"""The logs kept as segments (see _segments.py); state.json is one object, replaced whole."""

SESSION_KEY = re.compile(rf"{re.escape(SESSIONS_DIR)}/([^/]+)/([^/]+)")
"""A file of a session: `sessions/<id>/<name>` (group 1 the id, group 2 the name)."""

# Where gc copies the data/ objects it deletes until it has checked that none is named.
_GC_HOLD = ".gc-hold"

REMOVING = "removing"
"""The field of the lease record gc writes while it removes a session: a writer waits for it."""


def session_prefix(session_id: str) -> str:
    """The key prefix of a session's objects, `sessions/<id>` (the id checked first)."""
    return f"{SESSIONS_DIR}/{validate_session_id(session_id)}"


class BucketStore:
    """A session's files in a bucket: `sessions/<id>/<name>` objects, the logs as segments
    (`SegmentLog`)."""

    def __init__(self, client: StoreClient, logs: SegmentLog) -> None:
        self._client = client
        self._logs = logs

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

        def write(key: str, body: bytes, modified: float) -> None:
            path = os.path.join(root, *key.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(body)
            os.utime(path, (modified, modified))

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
        """Put back what an earlier gc copied aside and did not finish with (not in a dry run)."""
        if not dry_run:
            await self._recover_held()

    async def measure(self) -> tuple[list[SessionUsage], dict[str, int]]:
        """Every session read for the names it holds, with its live lease holder; data/'s
        objects with their sizes. Reading every session's objects costs one GET per object."""
        self._listed = await self._client.list_objects(SESSIONS_DIR)
        by_session: dict[str, list[ObjectInfo]] = {}
        for info in self._listed:
            parts = info.key.split("/")
            if len(parts) >= 3:
                by_session.setdefault(parts[1], []).append(info)
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
        unused = {
            name
            for name, info in data.items()
            if name not in referenced and now - info.last_modified.timestamp() > DATA_GRACE_SECONDS
        }
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


def lease_record(raw: bytes) -> dict[str, Any]:
    """The record a lease object holds; `{}` when it holds none (torn, or not JSON)."""
    try:
        found = json.loads(raw)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


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


def is_secret_name(name: str) -> bool:
    """Whether an option named `name` holds a secret (kept out of every message)."""
    lowered = name.lower()
    return any(word in lowered for word in ("secret", "token", "key", "password", "sas"))


def host_name() -> str:
    """This machine's name as a writer id may hold it (at most 40 plain characters)."""
    try:
        return re.sub(r"[^A-Za-z0-9_.-]", "_", os.uname().nodename)[:40] or "host"
    except AttributeError:  # pragma: no cover - not on POSIX
        return "host"


# The URLs accepted, by scheme: a bucket (or container) and an optional prefix, or memory.
_BUCKET_SCHEMES = ("s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl")
_ACCEPTED = (
    "use s3://BUCKET/PREFIX (also s3a://), gs://BUCKET/PREFIX, az://CONTAINER/PREFIX (also "
    "azure://, abfs://, abfss://, adl://) or memory:// (a store in this process, for tests); "
    "for a folder on disk use LocalWorkspace"
)
# The environment variables each cloud's client reads (obstore reads every one of them).
_ENVIRONMENT_PREFIXES = {
    "s3": "AWS_",
    "s3a": "AWS_",
    "gs": "GOOGLE_",
    "az": "AZURE_",
    "azure": "AZURE_",
    "abfs": "AZURE_",
    "abfss": "AZURE_",
    "adl": "AZURE_",
}


def checked_url(url: str) -> str:
    """`url` in its one spelling (scheme lower-cased, no trailing slash).

    Raises:
        ConfigError: not a bucket URL this workspace takes, or one holding credentials.
    """
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(f"object store url {url!r} is not a URL: {_ACCEPTED}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if "@" in parts.netloc:
        raise ConfigError(
            "object store url holds credentials (user:secret@...): pass them as arguments "
            "or environment variables, never in the URL"
        )
    if parts.query or parts.fragment:
        raise ConfigError(
            f"object store url {parts.scheme}://{parts.netloc}{parts.path} has a query or "
            "fragment: pass options as arguments"
        )
    if scheme == "memory":
        if parts.netloc:
            raise ConfigError(
                f"object store url {url!r} is not accepted: memory:// takes no bucket "
                f"(memory://, or memory:///PREFIX); {_ACCEPTED}"
            )
    elif scheme not in _BUCKET_SCHEMES:
        raise ConfigError(f"object store url {url!r} is not accepted: {_ACCEPTED}")
    elif not parts.netloc or ":" in parts.netloc:
        raise ConfigError(
            f"object store url {url!r} names no bucket (or names a port): {_ACCEPTED}"
        )
    path = parts.path.rstrip("/")
    if any(p in ("", ".", "..") for p in path.split("/")[1:]):
        raise ConfigError(f"object store url {url!r} has an empty, '.' or '..' path component")
    return f"{scheme}://{parts.netloc}{path}"


def _has_userinfo(value: object) -> bool:
    """Whether `value` is a URL with a user (and maybe a password) before its host."""
    if not isinstance(value, str) or "://" not in value:
        return False
    try:
        return "@" in urlsplit(value.strip()).netloc
    except ValueError:
        return True  # not parseable: refuse rather than risk quoting it


def refuse_userinfo(name: str, value: object) -> None:
    """Refuse an option `name` whose URL holds credentials (`ConfigError`)."""
    if _has_userinfo(value):
        raise ConfigError(
            f"{name} holds credentials in its URL (user:secret@...): give the URL without "
            "them, and the credentials as arguments or environment variables"
        )


def refuse_userinfo_in_environment(url: str) -> None:
    """Refuse an endpoint variable with a password, as `endpoint_url=` is refused.

    obstore reads the cloud's variables itself and quotes the endpoint, password included,
    in its error messages; so the variable is named here, never its value.
    """
    prefix = _ENVIRONMENT_PREFIXES.get(url.split("://", 1)[0])
    if prefix is None:
        return
    for name, value in sorted(os.environ.items()):
        if name.upper().startswith(prefix) and _has_userinfo(value):
            raise ConfigError(
                f"the environment variable {name} holds credentials in its URL "
                "(user:secret@...): set it to the URL without them, and give the credentials "
                f"in {prefix}ACCESS_KEY_ID / {prefix}SECRET_ACCESS_KEY or as arguments"
                if prefix == "AWS_"
                else f"the environment variable {name} holds credentials in its URL "
                "(user:secret@...): set it to the URL without them, and give the "
                "credentials as arguments or in their own variables"
            )


if TYPE_CHECKING:  # mypy checks that BucketCollector is what it is declared to be
    _collector: type[SessionCollector] = BucketCollector
    _files: type[SessionFiles] = BucketStore
