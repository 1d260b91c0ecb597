"""The object-store calls ObjectStoreWorkspace makes: retried within a deadline, errors scrubbed.

This is the only module that talks to obstore. Every call is retried with exponential
backoff and jitter on network errors, throttling and 5xx answers until its deadline; past
it, `OffloadError` (the caller keeps the content in its context). Error messages name the
object's reference and the store's own message with every configured secret and any
signature replaced by `***`, so credentials never reach an error, a log or a reference.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ..exceptions import OffloadError

if TYPE_CHECKING:
    from obstore.store import ObjectStore

__all__ = ["ObjectInfo", "StoreClient", "gather_limited"]

T = TypeVar("T")

# Signed URLs and authorization headers carry these; a store's error text may quote one.
_SIGNATURE = re.compile(
    r"(X-Amz-(?:Signature|Credential|Security-Token)=|Signature=|Credential=|sig=|token=)[^&\s\"']+",
    re.IGNORECASE,
)
_MESSAGE_CHARS = 400
# How many deadlines a write in flight at the deadline is waited for (see `_attempt`).
_SETTLE_FACTOR = 3.0


class _Unsettled(Exception):
    """A write sent before the deadline has not answered long after it."""


@dataclass(frozen=True)
class ObjectInfo:
    """One listed object: its key (relative to the workspace), size and last change."""

    key: str
    size: int
    last_modified: datetime


class StoreClient:
    """An obstore store plus the workspace's retry, deadline and error policy.

    Args:
        store: the obstore store, already scoped to the workspace's prefix.
        base_url: the workspace URL, used to name objects in errors.
        deadline: seconds each call may take, retries included.
        secrets: strings that must never appear in an error message.
    """

    def __init__(
        self, store: ObjectStore, base_url: str, deadline: float, secrets: Sequence[str]
    ) -> None:
        self.store = store
        self.base_url = base_url
        self.deadline = deadline
        self._secrets = tuple(s for s in secrets if s)

    def reference(self, key: str) -> str:
        """The URI of `key`: the workspace URL, '/', the key."""
        return f"{self.base_url}/{key}"

    def describe(self, exc: BaseException) -> str:
        """`exc` as one short line with secrets and signatures removed."""
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
        for secret in self._secrets:
            text = text.replace(secret, "***")
        text = _SIGNATURE.sub(r"\1***", text)
        if len(text) > _MESSAGE_CHARS:
            text = text[:_MESSAGE_CHARS] + "…"
        return text

    async def _run(self, what: str, key: str, call: Callable[[], Awaitable[T]]) -> T:
        import obstore.exceptions as errors

        until = time.monotonic() + self.deadline
        backoff = 0.05
        write = what in ("create", "write")
        while True:
            remaining = until - time.monotonic()
            try:
                return await self._attempt(call, remaining, write)
            except _Unsettled:
                raise OffloadError(
                    f"cannot {what} {self.reference(key)}: the store has not answered a request "
                    f"sent before the {self.deadline:g} s deadline, even {_SETTLE_FACTOR:g} "
                    "deadlines later; it may still be written: check before writing it again",
                    self.reference(key),
                ) from None
            except (errors.PermissionDeniedError, errors.UnauthenticatedError) as exc:
                raise OffloadError(
                    f"cannot {what} {self.reference(key)}: {self.describe(exc)}: check the "
                    "credentials and the bucket's permissions",
                    self.reference(key),
                ) from None
            except (errors.InvalidPathError, errors.NotSupportedError) as exc:
                raise OffloadError(
                    f"cannot {what} {self.reference(key)}: {self.describe(exc)}",
                    self.reference(key),
                ) from None
            except FileNotFoundError as exc:
                # The calls that expect a missing object handle it themselves; here it means
                # the bucket (or container) is missing, which no retry will fix.
                raise OffloadError(
                    f"cannot {what} {self.reference(key)}: {self.describe(exc)}: check that "
                    "the bucket exists",
                    self.reference(key),
                ) from None
            except (asyncio.TimeoutError, errors.BaseError, OSError) as exc:
                # Network errors, throttling (503 SlowDown, 429) and 5xx: retried until the
                # deadline. Not-found and already-exists never get here: the callers'
                # `call` turns them into values.
                remaining = until - time.monotonic()
                if remaining <= 0:
                    raise OffloadError(
                        f"cannot {what} {self.reference(key)} within the {self.deadline:g} s "
                        f"deadline: {self.describe(exc)}; the content stays where it was",
                        self.reference(key),
                    ) from None
                await asyncio.sleep(min(remaining, backoff * (0.5 + random.random())))
                backoff = min(backoff * 2, 2.0)

    async def _attempt(self, call: Callable[[], Awaitable[T]], remaining: float, write: bool) -> T:
        """One try of `call`, given `remaining` seconds.

        A read that runs out of time is abandoned (its thread finishes unseen). A write
        cannot be called back once it is sent: one abandoned at the deadline could still
        land after the caller was told it failed (seen with a throttled store, whose client
        was still retrying), and an append would then be in the log twice. So a write in
        flight at the deadline is waited for, up to `_SETTLE_FACTOR` more deadlines, and its
        own outcome is the answer: `OffloadError` means that nothing was written.
        """
        task = asyncio.ensure_future(call())
        try:
            return await asyncio.wait_for(asyncio.shield(task), timeout=max(remaining, 0.001))
        except asyncio.TimeoutError:
            if not write:
                task.cancel()
                raise
        done, _ = await asyncio.wait({task}, timeout=_SETTLE_FACTOR * self.deadline)
        if not done:
            raise _Unsettled()
        return task.result()

    async def put_new(self, key: str, data: bytes, attributes: Mapping[str, str]) -> bool:
        """Create `key` only if it does not exist (put-if-absent).

        Returns:
            True if this call created it, False if it already existed.
        """
        created, _ = await self.create(key, data, attributes)
        return created

    async def create(
        self, key: str, data: bytes, attributes: Mapping[str, str]
    ) -> tuple[bool, bool]:
        """`put_new`, also saying whether the request had to be sent more than once.

        Returns:
            (created, retried). When the object already existed and the request was retried,
            the object may be this call's own: an earlier attempt succeeded and its answer
            was lost. Without a retry, another writer made it.
        """
        import obstore
        import obstore.exceptions as errors

        attempts = 0

        async def call() -> bool:
            nonlocal attempts
            attempts += 1
            try:
                await _blocking(
                    obstore.put,
                    self.store,
                    key,
                    data,
                    mode="create",
                    attributes=dict(attributes),
                    use_multipart=False,
                )
            except (errors.AlreadyExistsError, errors.PreconditionError):
                return False
            return True

        created = await self._run("create", key, call)
        return created, attempts > 1

    async def put(self, key: str, data: bytes, attributes: Mapping[str, str]) -> None:
        """Write `key`, replacing what is there (only state.json and hints are replaced)."""
        import obstore

        async def call() -> None:
            await _blocking(
                obstore.put, self.store, key, data, attributes=dict(attributes), use_multipart=False
            )

        await self._run("write", key, call)

    async def get(self, key: str) -> bytes | None:
        """The bytes of `key`, or None if there is no such object."""
        import obstore

        async def call() -> bytes | None:
            try:
                return await _blocking(lambda: bytes(obstore.get(self.store, key).bytes()))
            except FileNotFoundError:
                return None

        return await self._run("read", key, call)

    async def get_typed(self, key: str) -> tuple[bytes, str | None] | None:
        """The bytes of `key` and its `Content-Type` (one GET), or None if it is missing."""
        import obstore

        def fetch() -> tuple[bytes, str | None]:
            result = obstore.get(self.store, key)
            content_type = result.attributes.get("Content-Type")
            return bytes(result.bytes()), None if content_type is None else str(content_type)

        async def call() -> tuple[bytes, str | None] | None:
            try:
                return await _blocking(fetch)
            except FileNotFoundError:
                return None

        return await self._run("read", key, call)

    async def attributes(self, key: str) -> dict[str, str] | None:
        """The metadata of `key` (one HEAD request), or None if there is no such object."""
        import obstore

        async def call() -> dict[str, str] | None:
            try:
                result = await _blocking(obstore.get, self.store, key, options={"head": True})
            except FileNotFoundError:
                return None
            return {str(k): str(v) for k, v in result.attributes.items()}

        return await self._run("read", key, call)

    async def info(self, key: str) -> ObjectInfo | None:
        """The size and last change of `key` (one HEAD request), or None if it is missing."""
        import obstore

        async def call() -> ObjectInfo | None:
            try:
                meta = await _blocking(obstore.head, self.store, key)
            except FileNotFoundError:
                return None
            return ObjectInfo(key, int(meta["size"]), meta["last_modified"])

        return await self._run("read", key, call)

    async def list_objects(self, prefix: str, *, after: str | None = None) -> list[ObjectInfo]:
        """Objects under the path `prefix` (recursively), with keys after `after` only."""
        import obstore

        def listing() -> list[ObjectInfo]:
            stream = obstore.list(self.store, prefix=prefix, offset=after, chunk_size=1000)
            return [
                ObjectInfo(str(meta["path"]), int(meta["size"]), meta["last_modified"])
                for chunk in stream
                for meta in chunk
            ]

        async def call() -> list[ObjectInfo]:
            return await _blocking(listing)

        return await self._run("list", prefix, call)

    async def list_directories(self, prefix: str) -> list[str]:
        """The names of the 'directories' directly under the path `prefix`."""
        import obstore

        async def call() -> list[str]:
            result = await _blocking(obstore.list_with_delimiter, self.store, prefix)
            return [p.rstrip("/").rsplit("/", 1)[-1] for p in result["common_prefixes"]]

        return await self._run("list", prefix, call)

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete `keys` (missing ones are not an error)."""
        import obstore

        if not keys:
            return

        async def call() -> None:
            # One request per 1,000 keys on S3.
            for start in range(0, len(keys), 1000):
                await _blocking(obstore.delete, self.store, list(keys[start : start + 1000]))

        await self._run("delete", keys[0], call)


def _blocking(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> Awaitable[T]:
    """Run one of obstore's blocking calls in a worker thread.

    obstore's `*_async` calls finish on a tokio thread that calls back into Python to resolve
    the awaited future. When that call is a process's last, the callback can still be waking
    the event loop while the interpreter finalizes, and CPython 3.11 then ends the tokio thread
    with `pthread_exit`, which aborts the whole process (SIGABRT after all work was done; seen
    in about 1 of 100 short-lived processes). The blocking calls run the request inside the
    calling thread, with the GIL released, so no tokio thread ever touches Python, and
    `asyncio.run` joins the worker thread before the interpreter finalizes.
    """
    return asyncio.to_thread(func, *args, **kwargs)


def gather_limited(calls: Sequence[Callable[[], Awaitable[T]]], limit: int) -> Awaitable[list[T]]:
    """Run `calls` concurrently, at most `limit` at a time, results in order."""
    semaphore = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[T]]) -> T:
        async with semaphore:
            return await call()

    return asyncio.gather(*(one(c) for c in calls))
