"""ObjectStoreWorkspace: the workspace layout of DESIGN.md section 3 in a bucket (section 10)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from .._disk.ids import validate_session_id
from .._disk.layout import (
    now_iso,
)
from .._disk.read import reference_text
from .._disk.rows import dumps_line
from .._disk.scope import SessionScoped
from .._secrets import is_secret_name
from ..exceptions import ConfigError, InvalidReference, OffloadError, SessionBusyError
from ._bucket_collector import REMOVING, BucketCollector
from ._bucket_keys import SEGMENTED_LOGS, session_prefix
from ._bucket_store import BucketStore
from ._bucket_url import (
    BUCKET_SCHEMES,
    checked_url,
    host_name,
    refuse_userinfo,
    refuse_userinfo_in_environment,
)
from ._collected import CollectedWorkspace
from ._datastore import media_type_of
from ._lease import (
    LEASE_FILE,
    LeaseTerm,
    SessionLease,
    holder_record,
    lease_record,
    lease_ttl,
    took_over,
)
from ._segments import SegmentLog
from ._store_client import StoreClient, scrub
from ._transfer import Uploads

if TYPE_CHECKING:
    from ._protocol import GarbageCollector, Workspace
    from ._store import SessionCollector

__all__ = ["ObjectStoreWorkspace"]

logger = logging.getLogger("ctxoffload")

_INSTALL_HINT = "ObjectStoreWorkspace needs obstore: pip install 'ctxoffload[s3]'"


class ObjectStoreWorkspace(Uploads, CollectedWorkspace):
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

    SCHEMES: ClassVar[tuple[str, ...]] = (*BUCKET_SCHEMES, "memory")
    """The URL schemes it takes, a bucket's and `memory` (a store in this process)."""

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
        self._bucket = self._files = self._imports = BucketStore(self._client, self._logs)

    def __repr__(self) -> str:
        return f"ObjectStoreWorkspace(url={self.url!r})"

    # -- layout ---------------------------------------------------------------------------

    def _session_key(self, session_id: str, filename: str) -> str:
        return f"{session_prefix(session_id)}/{filename}"

    async def initialize(self) -> None:
        """Nothing to create in a bucket; present for symmetry with `LocalWorkspace`."""

    def _collector(self) -> SessionCollector:
        return BucketCollector(
            self._client, self._logs, self._bucket.context_keys, self._bucket.take_lease
        )

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
        so a machine whose clock is ahead never takes a live lease. Until `release()`, this
        object's `write_state` of the session is a PUT conditional on the state.json it last
        wrote, and once another writer took the lease over it raises `SessionBusyError`
        (see "One live writer per session" in the documentation for the limits).

        Args:
            session_id: the session.
            agent: the holder's name, for the error others get.
            ttl: seconds the lease lives without renewal (default 60).

        Raises:
            SessionBusyError: a live holder has it, named in the message.
            OffloadError: the store cannot be reached within the deadline.
        """
        sid = validate_session_id(session_id)
        ttl = lease_ttl(ttl)
        key = self._session_key(sid, LEASE_FILE)
        where = self._client.reference(key)
        attributes = {"Content-Type": "application/json"}
        holder = holder_record(agent, ttl)
        since = LeaseTerm.now()  # (before the request: the store stamps the lease after it)
        e_tag, previous = await self._take_lease_after_gc(sid, holder)
        if previous and not previous.get("released"):
            took_over(sid, previous, "it expired without being renewed")
        client = self._client
        current = {"e_tag": e_tag}

        async def renew() -> dict[str, Any] | None:
            # The put itself is the renewal: the store stamps the object with its own clock.
            tag = await client.put_if(key, dumps_line(holder), attributes, e_tag=current["e_tag"])
            if tag is None:
                found = await client.get_tagged(key)
                if found is None:
                    return {}
                now = lease_record(found[0])
                if now.get("token") != holder["token"]:
                    return now
                tag = found[1]
            current["e_tag"] = tag
            return None

        async def release() -> None:
            record = {**holder, "released": now_iso()}
            try:
                await client.put_if(key, dumps_line(record), attributes, e_tag=current["e_tag"])
            except OffloadError as exc:
                logger.warning(
                    "could not release the lease %s (it expires by itself): %s", where, exc
                )

        return self._fenced_lease(
            sid, holder, where, release=release, renew=renew, ttl=ttl, since=since
        )

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

    def key_of(self, reference: str | os.PathLike[str]) -> str:
        """The key a reference names, checked to lie in this workspace's layout.

        Accepts a reference as returned (`s3://bucket/prefix/...`) or a key relative to the
        workspace (`sessions/<id>/...`, `data/...`).

        Raises:
            InvalidReference: it is not a reference into this workspace.
        """
        return self._bucket.key_of(reference_text(reference))

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
        `jq`). This is how `ctxoffload ... --workdir s3://...` reads a bucket. A file already
        there is never overwritten, and no link in the folder is followed.

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
            OffloadError: the store failed past the deadline, or a folder in `folder` is a
                planted link.
            FileExistsError: a file to write is there already (a link too).
        """
        root = os.fspath(folder)
        if session is not None:
            sessions = [session]
        else:
            sessions = await self.list_sessions()
        return await self._bucket.download(root, sessions, data=data, check=check)

    async def read_bytes(self, reference: str | os.PathLike[str]) -> tuple[bytes, str]:
        """The bytes behind a reference, with the media type stored in its metadata.

        Falls back to the name's extension for an object without a `Content-Type`.

        Raises:
            InvalidReference: unknown, or outside the workspace.
            OffloadError: the store failed past the deadline.
        """
        key = self.key_of(reference)
        if key.rsplit("/", 1)[-1] in SEGMENTED_LOGS:
            return await self.read_reference(reference), "application/x-ndjson"
        reference = await self._within_reach(reference)
        found = await self._client.get_typed(key)
        if found is None:
            raise InvalidReference(
                f"reference {reference!r} names no object in {self.url!r}: pass a reference "
                "this workspace returned"
            )
        data, content_type = found
        return data, content_type or media_type_of(key)


GC_WAIT = 30.0
"""Seconds a writer waits for gc to finish removing a session whose lease it holds."""


if TYPE_CHECKING:  # mypy checks that ObjectStoreWorkspace is what it is declared to be
    _workspace: type[Workspace] = ObjectStoreWorkspace
    _scoped: type[SessionScoped] = ObjectStoreWorkspace
    _collector: type[GarbageCollector] = ObjectStoreWorkspace
