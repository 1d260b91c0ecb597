"""ObjectStoreWorkspace: the workspace layout of DESIGN.md section 3 in a bucket (section 10)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from .._disk.batch import new_rows
from .._disk.commit import check_line_range, take_lines
from .._disk.events import ContextBatch
from .._disk.ids import is_session_id, tool_file_stem, validate_session_id
from .._disk.layout import (
    CONTEXT_FILE,
    DATA_DIR,
    EVENTS_FILE,
    SESSIONS_DIR,
    now_iso,
    tool_result_name,
)
from .._disk.payloads import (
    StoreData,
    as_message_list,
    context_rows,
    offload_block,
    render_tool_output,
    tool_output_of,
)
from .._disk.read import reference_text
from .._disk.rows import dumps_line, index_keys, lines_and_keys
from .._disk.scope import SessionScoped, check_reference
from .._disk.writer import event_record
from ..exceptions import ConfigError, InvalidReference, OffloadError, SessionBusyError
from ..references import ContextRef
from ._bucket_store import (
    REMOVING,
    SEGMENTED_LOGS,
    BucketCollector,
    BucketStore,
    checked_url,
    host_name,
    is_secret_name,
    is_workspace_key,
    lease_record,
    refuse_userinfo,
    refuse_userinfo_in_environment,
    session_prefix,
)
from ._core import (
    collect_garbage,
    list_files,
    read_context,
    read_events,
    read_state,
    tool_result_event,
    write_state,
)
from ._datastore import data_name, media_type_of
from ._fork import fork_session
from ._gc import (
    DATA_GRACE_SECONDS,
    GcReport,
)
from ._lease import (
    DEFAULT_LEASE_TTL,
    LEASE_FILE,
    SessionLease,
    holder_record,
    took_over,
)
from ._segments import SegmentLog
from ._store_client import StoreClient, gather_limited, scrub

if TYPE_CHECKING:
    from ._protocol import GarbageCollector, Workspace

__all__ = ["ObjectStoreWorkspace"]

logger = logging.getLogger("ctxoffload")

_INSTALL_HINT = "ObjectStoreWorkspace needs obstore: pip install 'ctxoffload[s3]'"


@dataclass
class _PendingData:
    """Payloads serialisation stored by name, uploaded before the log line naming them."""

    objects: dict[str, tuple[bytes, str | None]] = field(default_factory=dict)
    # The keys of `objects` that were already in the store (re-used, not created).
    reused: set[str] = field(default_factory=set)


class ObjectStoreWorkspace:
    """A workspace in object storage (S3, MinIO, R2, GCS, Azure, memory) for agents on many hosts.

    A `Workspace` and a `GarbageCollector`: the same read side and key layout as `LocalWorkspace`,
    under the URL's prefix: `sessions/<id>/tool_result-<tool_id>.txt`, `data/<sha256>.<ext>`,
    and the logs context.jsonl and events.jsonl as ordered immutable segments (see
    `_segments.py`) so that processes on different machines append to one session without
    a coordinator, with global line numbers. References are URIs such as
    `s3://bucket/prefix/sessions/run-1/tool_result-call_1.txt`; agents read them through
    `retrieve_offloaded_content` (they cannot open a bucket with file tools).

    Credentials and region come from the arguments, else from the usual environment
    variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
    `AWS_REGION`, `AWS_ENDPOINT_URL`, ...; `GOOGLE_*`, `AZURE_*` for the other clouds). They
    never appear in a reference, a repr, an error or a log line.

    Args:
        url: `s3://bucket/prefix` (also `gs://`, `az://`, `memory://`).
        endpoint_url: an S3-compatible endpoint (MinIO, Ceph RGW, R2, a local server).
        region: the bucket's region.
        access_key_id: the access key id.
        secret_access_key: the secret key.
        session_token: a temporary session token.
        options: further obstore configuration for the store (`S3Config`, ...).
        deadline: seconds each request may take, retries with backoff included; past it,
            `OffloadError` and the content stays in the caller's context.
        writer_id: names this writer in the segments it writes (default: host and pid).
        isolate_sessions: keep sessions apart, as `LocalWorkspace(isolate_sessions=True)`
            does: while an agent works in a session, `read_reference` (the retrieval tool)
            refuses another session's references.

    Raises:
        ConfigError: the URL is not usable (credentials inside it, a query, an unknown scheme).
        ImportError: obstore is not installed (`pip install 'ctxoffload[s3]'`).
    """

    MAX_DEADLINE: ClassVar[float] = 86_400.0
    """The longest `deadline` accepted, in seconds (a day): a longer one is a mistake."""

    def __init__(
        self,
        url: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        options: Mapping[str, str] | None = None,
        deadline: float = 30.0,
        writer_id: str | None = None,
        isolate_sessions: bool = False,
    ) -> None:
        self.isolate_sessions = isolate_sessions
        if isinstance(deadline, bool) or not isinstance(deadline, int | float):
            raise ConfigError(f"deadline={deadline!r} must be a number of seconds")
        if not (0 < deadline <= self.MAX_DEADLINE):  # NaN and infinity fail too
            shown = "a very large number" if abs(deadline) >= 1e12 else repr(deadline)
            raise ConfigError(
                f"deadline={shown} must be more than 0 and at most "
                f"{self.MAX_DEADLINE:,.0f} seconds (a day)"
            )
        self.url = checked_url(url)
        if endpoint_url is not None:
            refuse_userinfo("endpoint_url", endpoint_url)
        for option, option_value in (options or {}).items():
            refuse_userinfo(f"options[{option!r}]", option_value)
        refuse_userinfo_in_environment(self.url)
        try:
            from obstore.store import from_url as open_store_untyped
        except ImportError as exc:
            raise ImportError(_INSTALL_HINT) from exc
        config: dict[str, Any] = dict(options or {})
        for name, value in (
            ("endpoint", endpoint_url),
            ("region", region),
            ("access_key_id", access_key_id),
            ("secret_access_key", secret_access_key),
            ("session_token", session_token),
        ):
            if value is not None:
                config[name] = value
        client_options: dict[str, Any] = {
            "connect_timeout": timedelta(seconds=min(deadline, 10)),
            # Bounds each request, so a write in flight at the deadline settles (see
            # StoreClient._attempt) instead of hanging on a store that stopped answering. Two
            # deadlines: a slow answer is waited for rather than abandoned, because a PUT
            # abandoned by the client may still be applied by the store.
            "timeout": timedelta(seconds=2 * deadline),
        }
        endpoint: str = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or ""
        if endpoint.startswith("http://"):
            client_options["allow_http"] = True
        retry_config: dict[str, Any] = {
            "max_retries": 10,
            "retry_timeout": timedelta(seconds=deadline),
            "backoff": {
                "init_backoff": timedelta(milliseconds=50),
                "max_backoff": timedelta(seconds=2),
                "base": 2,
            },
        }
        secrets = [
            s
            for s in (
                secret_access_key,
                session_token,
                os.environ.get("AWS_SECRET_ACCESS_KEY"),
                os.environ.get("AWS_SESSION_TOKEN"),
                *(v for k, v in config.items() if is_secret_name(k) and isinstance(v, str)),
            )
            if s
        ]
        try:
            # The config TypedDicts differ per cloud; the URL's scheme picks one at run time.
            open_store: Any = open_store_untyped
            store = open_store(
                self.url,
                config=config or None,
                client_options=client_options,
                retry_config=retry_config,
            )
        except Exception as exc:
            raise ConfigError(
                f"cannot open object store {self.url!r}: "
                f"{scrub(f'{type(exc).__name__}: {exc}', secrets)}"
            ) from None
        self.deadline = deadline
        self.writer_id = writer_id or f"{host_name()}-{os.getpid()}"
        self._client = StoreClient(
            store, self.url, deadline, secrets, endpoint=scrub(endpoint, ()) or None
        )
        self._logs = SegmentLog(self._client, self.writer_id)
        self._bucket = BucketStore(self._client, self._logs)
        # Per context log: where each message this writer knows of is (`index_keys`), read
        # whole on this object's first append to it and kept up with its own appends, and
        # the lock that makes a lookup and the append after it one step for this process.
        self._context_keys: dict[str, dict[str, int]] = {}
        self._context_locks: dict[str, asyncio.Lock] = {}

    def __repr__(self) -> str:
        return f"ObjectStoreWorkspace(url={self.url!r})"

    # -- layout ---------------------------------------------------------------------------

    def _session_key(self, session_id: str, filename: str) -> str:
        return f"{session_prefix(session_id)}/{filename}"

    def context_path(self, session_id: str) -> str:
        """The reference of the session's context log (`.../sessions/<id>/context.jsonl`)."""
        return self._client.reference(self._session_key(session_id, CONTEXT_FILE))

    def events_path(self, session_id: str) -> str:
        """The reference of the session's events log."""
        return self._client.reference(self._session_key(session_id, EVENTS_FILE))

    async def initialize(self) -> None:
        """Nothing to create in a bucket; present for symmetry with `LocalWorkspace`."""

    # -- writing --------------------------------------------------------------------------

    def _store_into(self, pending: _PendingData) -> StoreData:
        def store(raw: bytes, media_type: str | None) -> str:
            key = f"{DATA_DIR}/{data_name(raw, media_type)}"
            pending.objects.setdefault(key, (raw, media_type))
            return self._client.reference(key)

        return store

    async def _upload_data(self, pending: _PendingData) -> None:
        async def upload(key: str, raw: bytes, media_type: str | None) -> None:
            attributes = {"Content-Type": media_type or "application/octet-stream"}
            if await self._client.put_new(key, raw, attributes):
                return
            pending.reused.add(key)
            # Content-addressed: an existing object holds these bytes. gc() keeps unreferenced
            # objects changed recently; refresh an old one so gc cannot remove it before the
            # line naming it is written (rewriting identical bytes changes nothing else).
            info = await self._client.info(key)
            age = time.time() - info.last_modified.timestamp() if info else DATA_GRACE_SECONDS
            if age > DATA_GRACE_SECONDS / 2:
                await self._client.put(key, raw, attributes)

        await gather_limited(
            [
                functools.partial(upload, key, raw, media)
                for key, (raw, media) in pending.objects.items()
            ],
            8,
        )

    async def _keep_present(self, pending: _PendingData) -> None:
        """After the line naming them is written: store again any re-used object now gone.

        A gc that decided before that line that an object was unused may delete it after
        the writer found it there (see `gc`); once the line is written, every later gc keeps
        it, so one check here closes the gap.
        """

        async def check(key: str) -> None:
            if await self._client.info(key) is None:
                raw, media_type = pending.objects[key]
                attributes = {"Content-Type": media_type or "application/octet-stream"}
                await self._client.put_new(key, raw, attributes)

        await gather_limited([functools.partial(check, key) for key in sorted(pending.reused)], 8)

    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> ContextRef:
        """Append messages, oldest first, to the session's context log as one segment.

        All messages of one call get consecutive global line numbers, whatever other
        processes on other machines append to the same session at the same time.

        Idempotent, as `LocalWorkspace.offload_context` is: a message already in the log
        (same id, same content) is not written again and the span names where it is, so an
        agent resumed after a kill, which offloads again what its killed run had written,
        leaves each message once. The log is read whole on this object's first append to it;
        a message another process writes at the same moment as this one may be there twice.

        Returns:
            The context log's reference, as a `ContextRef` carrying the lines of the batch's
            messages.

        Raises:
            InvalidSessionId: before any I/O.
            InvalidContent: a message cannot be serialised; nothing was written.
            OffloadError: the store failed past the deadline; nothing was appended.
        """
        key = self._session_key(session_id, CONTEXT_FILE)
        ref = self._client.reference(key)
        items = as_message_list(msgs)
        pending = _PendingData()
        store = self._store_into(pending)

        def serialise() -> tuple[list[bytes], list[str | None]]:
            # A message that cannot be stored as given becomes a stand-in line (see
            # context_rows), so one bad message never stops the rest of the batch.
            return lines_and_keys(context_rows(items, store))

        # Serialise before any write, so an item that is not a message leaves the store
        # untouched.
        lines, keys = await asyncio.to_thread(serialise)
        if not lines:
            return ContextRef(ref, 0, -1)
        await self._upload_data(pending)
        async with self._context_locks.setdefault(key, asyncio.Lock()):
            index = await self._context_index(key)
            # The new rows' first line is known once their segment is won: placed then.
            rows = new_rows(lines, keys, (index,), 1)
            payload = b"".join(rows.lines)
            if payload:
                first, _ = await self._logs.append(key, payload)
                index_keys(rows.lines, first, index)
                span = rows.placed_at(first)
            else:
                span = rows.span
        await self._keep_present(pending)
        batch = ContextBatch(
            reference=ref, bytes=len(payload), messages=len(items), **span.event_fields()
        )
        await self._event(session_id, kind=batch.kind, **batch.fields())
        return ContextRef(ref, *span, span.runs)

    async def _context_index(self, key: str) -> dict[str, int]:
        """Where each message of the context log `key` is, as far as this object knows."""
        index = self._context_keys.get(key)
        if index is None:
            index = {}
            data = await self._logs.read(key)
            await asyncio.to_thread(index_keys, data.split(b"\n"), 1, index)
            self._context_keys[key] = index
        return index

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        """Store the whole text of one tool result as `sessions/<id>/tool_result-<tool_id>.txt`.

        Never overwritten: the same id with the same content returns the existing object;
        other content gets `tool_result-<tool_id>.2.txt`, `.3.txt`, ... (put-if-absent, so
        this holds between machines too).

        Returns:
            The object's reference.

        Raises:
            InvalidSessionId: before any I/O.
            InvalidContent: not a tool result, or a payload is not valid base64.
            OffloadError: the store failed past the deadline; nothing is referenced.
        """
        validate_session_id(session_id)
        found = tool_output_of(tool_result)
        pending = _PendingData()
        urls: list[str] = []
        data = await asyncio.to_thread(
            render_tool_output, found.output, self._store_into(pending), urls
        )
        await self._upload_data(pending)
        stem = tool_file_stem(found.tool_id)
        attributes = {"Content-Type": "text/plain; charset=utf-8"}
        n = 1
        while True:
            key = self._session_key(session_id, tool_result_name(stem, n))
            if await self._client.put_new(key, data, attributes):
                break
            existing = await self._client.get(key)
            if existing == data:
                break
            n += 1
        await self._keep_present(pending)
        ref = self._client.reference(key)
        stored = tool_result_event(ref, data, found, urls)
        await self._event(session_id, kind=stored.kind, **stored.fields())
        return ref

    async def offload_data_block(self, block: Any) -> Any:
        """Store a block's base64 payload once as `data/<sha256>.<ext>`.

        Returns:
            The same kind of block with a URL source naming the object's reference; a block
            that already points elsewhere is returned unchanged.

        Raises:
            InvalidContent: malformed base64 or an unsupported block.
            OffloadError: the store failed past the deadline.
        """
        pending = _PendingData()
        result = await asyncio.to_thread(offload_block, block, self._store_into(pending))
        await self._upload_data(pending)
        return result

    async def record_event(self, session_id: str, kind: str, **fields: Any) -> None:
        """Append one line to the session's events log (used by the compressor)."""
        validate_session_id(session_id)
        await self._event(session_id, kind=kind, **fields)

    async def _event(self, session_id: str, *, kind: str, **fields: Any) -> None:
        # An event records what happened; failing to write one must not undo the offload.
        line = dumps_line(event_record(session_id, kind, fields))
        try:
            await self._logs.append(self._session_key(session_id, EVENTS_FILE), line)
        except OffloadError as exc:
            logger.warning("could not record a %s event for session %s: %s", kind, session_id, exc)

    async def write_state(self, session_id: str, state: dict[str, Any]) -> str:
        """Replace the session's state.json (the agent's live context) in one PUT."""
        return await write_state(self._bucket, session_id, state)

    async def fork_session(
        self, source: str, new: str, *, step: int | None = None
    ) -> dict[str, Any]:
        """Start session `new` from `source` at `step`: `ctxoffload.workspace.fork_session`."""
        return await fork_session(self, source, new, step=step)

    # -- one live writer --------------------------------------------------------------------

    async def acquire_lease(
        self, session_id: str, *, agent: str | None = None, ttl: float | None = None
    ) -> SessionLease:
        """Take the session's lease: the object `sessions/{id}/lease.json`.

        It is created with a conditional put, renewed every third of `ttl` (a put
        conditional on its ETag) while the event loop that took it runs, and given up by
        `release()`. A lease past its expiry (its holder died, lost its machine or its
        network) is taken over with a warning; two takers cannot both win. Expiry is judged
        on the store's clock alone (its stamp of the latest renewal against its time now),
        so a machine whose clock is ahead never takes a live lease.

        Args:
            session_id: the session.
            agent: the holder's name, for the error others get.
            ttl: seconds the lease lives without renewal (default 60).

        Raises:
            SessionBusyError: a live holder has it, named in the message.
            OffloadError: the store cannot be reached within the deadline.
        """
        sid = validate_session_id(session_id)
        ttl = DEFAULT_LEASE_TTL if ttl is None else float(ttl)
        if not ttl > 0:
            raise ConfigError(f"ttl={ttl!r} must be a positive number of seconds")
        key = self._session_key(sid, LEASE_FILE)
        where = self._client.reference(key)
        attributes = {"Content-Type": "application/json"}
        holder = holder_record(agent, ttl)
        e_tag, previous = await self._take_lease_after_gc(sid, holder)
        if previous and not previous.get("released"):
            took_over(sid, previous, "it expired without being renewed")
        client = self._client
        current = {"e_tag": e_tag}

        async def renew() -> bool:
            # The put itself is the renewal: the store stamps the object with its own clock.
            tag = await client.put_if(key, dumps_line(holder), attributes, e_tag=current["e_tag"])
            if tag is None:
                found = await client.get_tagged(key)
                if found is None or lease_record(found[0]).get("token") != holder["token"]:
                    return False
                tag = found[1]
            current["e_tag"] = tag
            return True

        async def release() -> None:
            record = {**holder, "released": now_iso()}
            try:
                await client.put_if(key, dumps_line(record), attributes, e_tag=current["e_tag"])
            except OffloadError as exc:
                logger.warning(
                    "could not release the lease %s (it expires by itself): %s", where, exc
                )

        return SessionLease(sid, holder, where, release=release, renew=renew, every=ttl / 3)

    async def _take_lease_after_gc(
        self, session_id: str, holder: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """`BucketStore.take_lease`, waiting while gc holds the lease to remove the session.

        gc takes a session's lease before it deletes the session's objects and deletes the
        lease last: a writer arriving meanwhile waits for that (as on disk it waits for the
        folder's lock), then takes the lease of what is now a fresh session. A gc that died
        holding it is waited for at most `GC_WAIT` seconds, then named as the holder.
        """
        deadline = time.monotonic() + GC_WAIT
        pause = 0.02
        while True:
            try:
                return await self._bucket.take_lease(session_id, holder)
            except SessionBusyError as busy:
                if busy.holder.get(REMOVING) is not True or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)

    # -- reading --------------------------------------------------------------------------

    async def list_sessions(self) -> list[str]:
        """The ids of the sessions in this workspace, sorted."""
        names = await self._client.list_directories(SESSIONS_DIR)
        return sorted(n for n in names if is_session_id(n))

    async def read_context(self, session_id: str) -> list[Any]:
        """Every message offloaded for a session, oldest first, as the JSON written."""
        return await read_context(self._bucket, session_id)

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's events, oldest first."""
        return await read_events(self._bucket, session_id)

    async def read_state(self, session_id: str) -> dict[str, Any] | None:
        """The session's saved live context, or None if there is none."""
        return await read_state(self._bucket, session_id)

    async def list_files(self, session_id: str) -> list[str]:
        """The references of the session's tool_result objects, sorted by name."""
        return await list_files(self._bucket, session_id)

    def reference_key(self, reference: str | os.PathLike[str]) -> list[str]:
        """The parts of a reference's key below the workspace (`["sessions", id, name]`)."""
        return self.key_of(reference).split("/")

    def key_of(self, reference: str | os.PathLike[str]) -> str:
        """The key a reference names, checked to lie in this workspace's layout.

        Accepts a reference as returned (`s3://bucket/prefix/...`) or a key relative to the
        workspace (`sessions/<id>/...`, `data/...`).

        Raises:
            InvalidReference: it is not a reference into this workspace.
        """
        reference = reference_text(reference)
        key = reference
        if reference.startswith(self.url + "/"):
            key = reference[len(self.url) + 1 :]
        elif "://" in reference:
            raise InvalidReference(
                f"reference {reference!r} is outside the workspace {self.url!r}: pass a "
                "reference this workspace returned"
            )
        if is_workspace_key(key):
            return key
        raise InvalidReference(
            f"reference {reference!r} names no object of the workspace {self.url!r}: pass a "
            "reference this workspace returned"
        )

    async def read_reference(self, reference: str | os.PathLike[str]) -> bytes:
        """The bytes behind a reference this workspace returned (a log: all its segments).

        Raises:
            InvalidReference: unknown, or outside the workspace.
            OffloadError: the store failed past the deadline.
        """
        reference = reference_text(reference)
        key = self.key_of(reference)
        if self.isolate_sessions:
            await check_reference(self, reference, key.split("/"))
        if key.rsplit("/", 1)[-1] in SEGMENTED_LOGS:
            segments = await self._logs.segments(key)
            if segments:
                return await self._logs.read(key)
        data = await self._client.get(key)
        if data is None:
            raise InvalidReference(
                f"reference {reference!r} names no object in {self.url!r}: pass a reference "
                "this workspace returned"
            )
        return data

    async def read_lines(self, reference: str | os.PathLike[str], first: int, last: int) -> bytes:
        """Lines `first` to `last` (1-based, inclusive) of what a reference names; see
        `LocalWorkspace.read_lines`. Lines of a log that one segment this workspace appended
        holds are read from that segment alone (one GET); others from the whole log.

        Raises:
            InvalidReference: as `read_reference`.
            OffloadError: the store failed past the deadline.
            ValueError: `first` is below 1 or `last` below `first`.
        """
        check_line_range(first, last)
        reference = reference_text(reference)
        key = self.key_of(reference)
        if self.isolate_sessions:
            await check_reference(self, reference, key.split("/"))
        if key.rsplit("/", 1)[-1] in SEGMENTED_LOGS:
            found = await self._logs.read_lines(key, first, last)
            if found is not None:
                return found
        data = await self.read_reference(reference)
        return take_lines((data,), first - 1, last - first + 1)

    async def download(
        self,
        folder: str | os.PathLike[str],
        *,
        session: str | None = None,
        data: bool = True,
        check: bool = False,
    ) -> list[str]:
        """Copy the workspace, or one session, into a local folder in the on-disk layout.

        Each log's segments become one file (`sessions/<id>/context.jsonl`, events.jsonl),
        line for line, so line numbers in references hold in the copy; tool_result objects,
        state.json and (with `data`) the data/ objects are copied as they are, each file's
        modification time set to its object's. The folder is then readable with the
        `LocalWorkspace` read side, the `ctxoffload` commands and ordinary tools (`grep -n`,
        `jq`). This is how `ctxoffload ... --workdir s3://...` reads a bucket.

        Args:
            folder: an empty or missing folder to fill.
            session: only this session (data/ is still copied unless `data` is False).
            data: copy the data/ objects too.
            check: also read each segment's metadata (one HEAD per segment) and report a
                missing seq or a segment whose stated first line is not where it lies.

        Returns:
            The problems found in the logs (with `check`): one line each, naming the object.

        Raises:
            InvalidSessionId: before any I/O.
            OffloadError: the store failed past the deadline.
        """
        root = os.fspath(folder)
        if session is not None:
            sessions = [session]
        else:
            sessions = await self.list_sessions()
        return await self._bucket.download(root, sessions, data=data, check=check)

    async def store_bytes(self, data: bytes, media_type: str | None = None) -> str:
        """Store raw bytes in data/ under their sha256, once; see `LocalWorkspace.store_bytes`.

        Returns:
            The URI of `data/<sha256>.<ext>`, whose `Content-Type` metadata is the media
            type; `read_bytes` gives back both.

        Raises:
            OffloadError: the store failed past the deadline.
        """
        pending = _PendingData()
        reference = self._store_into(pending)(bytes(data), media_type)
        await self._upload_data(pending)
        return reference

    async def read_bytes(self, reference: str | os.PathLike[str]) -> tuple[bytes, str]:
        """The bytes behind a reference, with the media type stored in its metadata.

        Falls back to the name's extension for an object without a `Content-Type`.

        Raises:
            InvalidReference: unknown, or outside the workspace.
            OffloadError: the store failed past the deadline.
        """
        reference = reference_text(reference)
        key = self.key_of(reference)
        if key.rsplit("/", 1)[-1] in SEGMENTED_LOGS:
            return await self.read_reference(reference), "application/x-ndjson"
        if self.isolate_sessions:
            await check_reference(self, reference, key.split("/"))
        found = await self._client.get_typed(key)
        if found is None:
            raise InvalidReference(
                f"reference {reference!r} names no object in {self.url!r}: pass a reference "
                "this workspace returned"
            )
        data, content_type = found
        return data, content_type or media_type_of(key)

    async def purge_session(self, session_id: str) -> bool:
        """Delete every object of a session. data/ is shared between sessions and kept.

        Do not purge a session that other processes still write to: one that cached the
        end of its log would go on numbering lines after the purged ones.

        Returns:
            Whether there was anything to delete.
        """
        prefix = session_prefix(session_id)
        keys = [i.key for i in await self._client.list_objects(prefix)]
        for log in SEGMENTED_LOGS:
            self._logs.forget(f"{prefix}/{log}")
            self._context_keys.pop(f"{prefix}/{log}", None)
        await self._client.delete(keys)
        return bool(keys)

    async def gc(
        self,
        *,
        older_than: float | None = None,
        max_bytes: int | None = None,
        dry_run: bool = False,
    ) -> GcReport:
        """Remove old sessions, then the oldest until the workspace fits, then unused data.

        1. Sessions whose last activity (the newest object) is more than `older_than`
           seconds old are removed.
        2. With `max_bytes`, the remaining sessions are removed oldest first until they and
           the data/ objects they reference take at most `max_bytes`.
        3. data/ objects no remaining session names are removed, except those changed in
           the last `DATA_GRACE_SECONDS` (a writer refreshes an old object it re-stores).
           Before removing any, data/ and the sessions are listed again, and an object
           refreshed or named since the first listings is kept.

        A session written to after it was measured is kept, and so is a live one
        (`GcReport.sessions_kept` says why): its lease has not expired on the store's clock,
        or a session that stays references its objects (a fork's origin, a sub-agent's
        parent or child). Before deleting a session, gc takes its lease (a conditional put)
        and deletes the lease object last, so no writer takes it meanwhile; sessions that
        name each other (a sub-agent and its parent) are claimed together and go together
        or not at all. Reading every
        session's objects to find references costs one GET per object; judging leases, one
        empty object written and deleted under `.clock/` to read the store's time.

        Returns:
            A `GcReport`.

        Raises:
            ConfigError: a negative `older_than` or `max_bytes`.
            OffloadError: the store failed past the deadline.
        """
        return await collect_garbage(
            BucketCollector(self._client, self._logs, self._context_keys, self._bucket.take_lease),
            older_than=older_than,
            max_bytes=max_bytes,
            dry_run=dry_run,
        )


GC_WAIT = 30.0
"""Seconds a writer waits for gc to finish removing a session whose lease it holds."""


if TYPE_CHECKING:  # mypy checks that ObjectStoreWorkspace is what it is declared to be
    _workspace: type[Workspace] = ObjectStoreWorkspace
    _scoped: type[SessionScoped] = ObjectStoreWorkspace
    _collector: type[GarbageCollector] = ObjectStoreWorkspace
