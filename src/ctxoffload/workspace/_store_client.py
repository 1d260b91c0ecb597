"""The object-store calls ObjectStoreWorkspace makes: retried within a deadline, errors scrubbed.

This is the only module that talks to obstore. Every call is retried with exponential
backoff and jitter on network errors, throttling and 5xx answers until its deadline; past
it, `OffloadError` (the caller keeps the content in its context). An answer that no retry
can change (no such bucket, access denied, refused credentials, any other 4xx but 408, 409
and 429) is an `OffloadError` at once, naming the cause. Error messages name the object's
reference and the store's own message passed through `scrub`: every configured secret, any
signature and the user part of every URL replaced by `***` (the one masking rule,
`ctxoffload._secrets`), so credentials never reach an error, a log or a reference.

A store that answers 200 to everything (a web console on the port taken for the API) would
read as an empty bucket; the first empty listing, or the first object read without an ETag,
is checked by reading an object that cannot exist, which an S3 API answers 404.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from .._secrets import Secrets
from ..exceptions import OffloadError

if TYPE_CHECKING:
    from obstore.store import ObjectStore

__all__ = ["CLOCK_PREFIX", "ObjectInfo", "StoreClient", "gather_limited", "scrub"]

T = TypeVar("T")

CLOCK_PREFIX = ".clock"
"""Where `StoreClient.now` writes the empty object whose time it reads (outside the layout)."""

_MESSAGE_CHARS = 400
# What an S3 error answer says, as obstore quotes it: the status, the code, the message.
_STATUS = re.compile(r"(?:status code: |status: )(\d{3})")
_CODE = re.compile(r"<Code>([^<]{1,100})</Code>")
_CODE_MESSAGE = re.compile(r"<Message>([^<]{0,200})</Message>")
# 4xx answers a retry can change: a request timeout, a conflict, throttling.
_RETRYABLE_STATUS = {408, 409, 429}
_RETRYABLE_CODES = {"RequestTimeout", "SlowDown", "OperationAborted", "ConditionalRequestConflict"}
_CREDENTIAL_CODES = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "AllAccessDisabled",
}
# How many deadlines a write in flight at the deadline is waited for (see `_attempt`).
_SETTLE_FACTOR = 3.0


class _Unsettled(Exception):
    """A write sent before the deadline has not answered long after it."""


def scrub(text: str, secrets: Sequence[str]) -> str:
    """A store's message as one short line that holds no credential.

    Drops obstore's `Debug source:` dump, joins the lines, and masks each of `secrets` and
    whatever the one masking rule finds (`Secrets.mask`: signatures, tokens, the user part
    of every URL).
    """
    text = " ".join(text.split("Debug source:", 1)[0].split())
    text = Secrets(tuple(s for s in secrets if s)).mask(text)
    if len(text) > _MESSAGE_CHARS:
        text = text[:_MESSAGE_CHARS] + "…"
    return text


@dataclass(frozen=True)
class _Answer:
    """What an S3 error answer quoted in an obstore error says (each part may be missing)."""

    status: int | None
    code: str | None
    message: str | None

    @classmethod
    def of(cls, exc: BaseException) -> _Answer:
        text = str(exc)
        status = _STATUS.search(text)
        code = _CODE.search(text)
        message = _CODE_MESSAGE.search(text)
        return cls(
            int(status.group(1)) if status else None,
            code.group(1).strip() if code else None,
            message.group(1).strip() if message else None,
        )

    @property
    def is_final(self) -> bool:
        """Whether no retry can change this answer (a 4xx other than 408, 409, 429)."""
        if self.code in _RETRYABLE_CODES:
            return False
        return (
            self.status is not None
            and 400 <= self.status < 500
            and (self.status not in _RETRYABLE_STATUS)
        )


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
        self,
        store: ObjectStore,
        base_url: str,
        deadline: float,
        secrets: Sequence[str],
        endpoint: str | None = None,
    ) -> None:
        self.store = store
        self.base_url = base_url
        self.deadline = deadline
        self.endpoint = endpoint
        self._secrets = tuple(s for s in secrets if s)
        # Whether the store has answered as an S3 API does (see `_check_api`).
        self._api_seen = base_url.startswith("memory:")

    def reference(self, key: str) -> str:
        """The URI of `key`: the workspace URL, '/', the key."""
        return f"{self.base_url}/{key}"

    def describe(self, exc: BaseException) -> str:
        """`exc` as one short line with secrets, signatures and URL passwords removed."""
        return scrub(f"{type(exc).__name__}: {exc}", self._secrets)

    @property
    def bucket(self) -> str:
        """The bucket (or container) of the workspace URL."""
        return self.base_url.split("://", 1)[-1].split("/", 1)[0]

    def _final(self, what: str, key: str, exc: BaseException, answer: _Answer) -> OffloadError:
        """The error for an answer that no retry can change, naming its cause and the fix."""
        reference = self.reference(key)
        said = ": ".join(p for p in (answer.code, answer.message) if p) or self.describe(exc)
        if answer.code == "NoSuchBucket" or (answer.status == 404 and answer.code is None):
            text = (
                f"the bucket {self.bucket!r} does not exist ({said}): check the bucket's name "
                "in the URL and the endpoint, or create the bucket"
            )
        elif answer.code in _CREDENTIAL_CODES or answer.status in (401, 403):
            text = (
                f"the store refused the credentials ({said}): check the credentials "
                "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the arguments) and the "
                f"permissions on the bucket {self.bucket!r}"
            )
        else:
            text = f"the store answered {answer.status} ({said}); retrying cannot change that"
        return OffloadError(f"cannot {what} {reference}: {scrub(text, self._secrets)}", reference)

    async def _run(self, what: str, key: str, call: Callable[[], Awaitable[T]]) -> T:
        import obstore.exceptions as errors

        until = time.monotonic() + self.deadline
        backoff = 0.05
        write = what in ("create", "write")
        # The last error the store gave: what a deadline reached in a later try reports.
        last: BaseException | None = None
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
                raise self._final(what, key, exc, _Answer.of(exc)) from None
            except (errors.InvalidPathError, errors.NotSupportedError) as exc:
                raise OffloadError(
                    f"cannot {what} {self.reference(key)}: {self.describe(exc)}",
                    self.reference(key),
                ) from None
            except FileNotFoundError as exc:
                # The calls that expect a missing object handle it themselves; here it means
                # the bucket (or container) is missing, which no retry will fix.
                answer = _Answer.of(exc)
                raise self._final(
                    what, key, exc, _Answer(404, answer.code or "NoSuchBucket", answer.message)
                ) from None
            except (asyncio.TimeoutError, errors.BaseError, OSError) as exc:
                # Network errors, throttling (503 SlowDown, 429) and 5xx: retried until the
                # deadline. Not-found and already-exists never get here: the callers'
                # `call` turns them into values. A 4xx answer is final.
                answer = _Answer.of(exc)
                if answer.is_final:
                    raise self._final(what, key, exc, answer) from None
                if not isinstance(exc, asyncio.TimeoutError) or last is None:
                    last = exc
                remaining = until - time.monotonic()
                if remaining <= 0:
                    raise OffloadError(
                        f"cannot {what} {self.reference(key)} within the {self.deadline:g} s "
                        f"deadline: {self.describe(last)}; the content stays where it was",
                        self.reference(key),
                    ) from None
                await asyncio.sleep(min(remaining, backoff * (0.5 + random.random())))
                backoff = min(backoff * 2, 2.0)

    async def _check_api(self, what: str, key: str) -> None:
        """Refuse a store that answered like no S3 API, once it has looked like one.

        Called when a listing came back empty or an object had no ETag: a web page served
        with 200 to every request parses as an empty listing. Reading an object that cannot
        exist tells the two apart: an S3 API answers 404.
        """
        if self._api_seen:
            return
        probe = f".ctxoffload-probe-{uuid.uuid4().hex}"
        found = await self.get_typed(probe, check=False)
        if found is None:
            self._api_seen = True
            return
        body, content_type = found
        where = self.endpoint or "the endpoint"
        raise OffloadError(
            f"cannot {what} {self.reference(key)}: {where} is not an S3 API endpoint: it answered "
            f"a request for an object that does not exist with {len(body)} bytes of "
            f"{content_type or 'unknown type'} instead of 404 (a web console's port instead of "
            "the API's?): check the endpoint (AWS_ENDPOINT_URL or endpoint_url)",
            self.reference(key),
        )

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
        put = self._conditional_put(key, data, attributes, "create")
        attempts = 0

        async def call() -> bool:
            nonlocal attempts
            attempts += 1
            return await put() is not None

        created = await self._run("create", key, call)
        return created, attempts > 1

    async def put_if(
        self, key: str, data: bytes, attributes: Mapping[str, str], *, e_tag: str | None
    ) -> str | None:
        """Write `key` only if it is absent (`e_tag` None) or still has that ETag.

        Returns:
            The new object's ETag, or None when the condition failed (another writer got
            there first). A request retried after a lost answer may report a failure that
            was its own success: callers read the object back to tell (a lease compares its
            token).
        """
        mode: Any = "create" if e_tag is None else {"e_tag": e_tag}
        return await self._run("create", key, self._conditional_put(key, data, attributes, mode))

    def _conditional_put(
        self, key: str, data: bytes, attributes: Mapping[str, str], mode: Any
    ) -> Callable[[], Awaitable[str | None]]:
        """One attempt at writing `key` under the condition `mode` ("create", or an ETag to
        match): it answers the new ETag ("" when the store gives none), or None when the
        condition failed."""
        import obstore
        import obstore.exceptions as errors

        async def call() -> str | None:
            try:
                result = await _blocking(
                    obstore.put,
                    self.store,
                    key,
                    data,
                    mode=mode,
                    attributes=dict(attributes),
                    use_multipart=False,
                )
            except (errors.AlreadyExistsError, errors.PreconditionError):
                return None
            tag = result.get("e_tag")
            return str(tag) if tag is not None else ""

        return call

    async def get_tagged(self, key: str) -> tuple[bytes, str] | None:
        """The bytes of `key` and its ETag (one GET), or None if it is missing."""
        found = await self.get_stamped(key)
        return None if found is None else (found[0], found[1])

    async def get_stamped(self, key: str) -> tuple[bytes, str, datetime] | None:
        """The bytes of `key`, its ETag and its last change by the store's clock (one GET),
        or None if it is missing."""
        import obstore

        def fetch() -> tuple[bytes, str, datetime]:
            result = obstore.get(self.store, key)
            meta = result.meta
            return bytes(result.bytes()), str(meta.get("e_tag") or ""), meta["last_modified"]

        async def call() -> tuple[bytes, str, datetime] | None:
            try:
                return await _blocking(fetch)
            except FileNotFoundError as exc:
                _raise_missing_bucket(exc)
                return None

        return await self._run("read", key, call)

    async def now(self) -> float:
        """The store's clock now, as a `time.time()` value: the last change of an object
        written for the purpose (then deleted), so that times stamped by the store are
        compared with a time of the same clock, never with this machine's.

        Raises:
            OffloadError: the store refused the write or failed past the deadline.
        """
        key = f"{CLOCK_PREFIX}/{uuid.uuid4().hex}"
        await self.put(key, b"", {"Content-Type": "application/octet-stream"})
        try:
            found = await self.info(key)
        finally:
            await self.delete([key])
        if found is None:
            raise OffloadError(
                f"{self.reference(key)} vanished right after it was written: the store does "
                "not keep what it is given; check the bucket's lifecycle rules",
                self.reference(key),
            )
        return found.last_modified.timestamp()

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
        found = await self.get_typed(key)
        return None if found is None else found[0]

    async def get_typed(self, key: str, *, check: bool = True) -> tuple[bytes, str | None] | None:
        """The bytes of `key` and its `Content-Type` (one GET), or None if it is missing.

        With `check`, an answer without an ETag (which every S3 object has) first makes sure
        the endpoint is an S3 API (see `_check_api`).
        """
        import obstore

        def fetch() -> tuple[bytes, str | None, bool]:
            result = obstore.get(self.store, key)
            content_type = result.attributes.get("Content-Type")
            return (
                bytes(result.bytes()),
                None if content_type is None else str(content_type),
                result.meta.get("e_tag") is not None,
            )

        async def call() -> tuple[bytes, str | None, bool] | None:
            try:
                return await _blocking(fetch)
            except FileNotFoundError as exc:
                _raise_missing_bucket(exc)
                return None

        found = await self._run("read", key, call)
        if found is None:
            self._api_seen = True  # a 404: what an S3 API answers
            return None
        body, content_type, tagged = found
        if check and not tagged:
            await self._check_api("read", key)
        elif tagged:
            self._api_seen = True
        return body, content_type

    async def attributes(self, key: str) -> dict[str, str] | None:
        """The metadata of `key` (one HEAD request), or None if there is no such object."""
        import obstore

        async def call() -> dict[str, str] | None:
            try:
                result = await _blocking(obstore.get, self.store, key, options={"head": True})
            except FileNotFoundError as exc:
                _raise_missing_bucket(exc)
                return None
            return {str(k): str(v) for k, v in result.attributes.items()}

        return await self._run("read", key, call)

    async def head(self, key: str) -> tuple[dict[str, str], int] | None:
        """The metadata and size of `key` (one HEAD request), or None if it is missing."""
        import obstore

        async def call() -> tuple[dict[str, str], int] | None:
            try:
                result = await _blocking(obstore.get, self.store, key, options={"head": True})
            except FileNotFoundError as exc:
                _raise_missing_bucket(exc)
                return None
            attributes = {str(k): str(v) for k, v in result.attributes.items()}
            return attributes, int(result.meta["size"])

        return await self._run("read", key, call)

    async def info(self, key: str) -> ObjectInfo | None:
        """The size and last change of `key` (one HEAD request), or None if it is missing."""
        import obstore

        async def call() -> ObjectInfo | None:
            try:
                meta = await _blocking(obstore.head, self.store, key)
            except FileNotFoundError as exc:
                _raise_missing_bucket(exc)
                return None
            return ObjectInfo(key, int(meta["size"]), meta["last_modified"])

        return await self._run("read", key, call)

    async def _list(self, prefix: str, call: Callable[[], Awaitable[list[T]]]) -> list[T]:
        """Run the listing `call`; one that comes back empty first makes sure the endpoint is
        an S3 API (see `_check_api`)."""
        found = await self._run("list", prefix, call)
        if found:
            self._api_seen = True
        else:
            await self._check_api("list", prefix)
        return found

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

        return await self._list(prefix, call)

    async def list_level(self, prefix: str) -> tuple[list[str], list[str]]:
        """The names directly under the path `prefix`, in one listing: its 'directories',
        and its objects."""
        import obstore

        async def call() -> list[tuple[bool, str]]:
            result = await _blocking(obstore.list_with_delimiter, self.store, prefix)
            found = [(True, p.rstrip("/").rsplit("/", 1)[-1]) for p in result["common_prefixes"]]
            found += [(False, str(m["path"]).rsplit("/", 1)[-1]) for m in result["objects"]]
            return found

        found = await self._list(prefix, call)
        return [n for folder, n in found if folder], [n for folder, n in found if not folder]

    async def copy(self, source: str, target: str) -> bool:
        """Copy `source` to `target` in the store (replacing it), metadata included.

        Returns:
            False if there is no `source`.
        """
        import obstore

        async def call() -> bool:
            try:
                await _blocking(obstore.copy, self.store, source, target)
            except FileNotFoundError as exc:
                _raise_missing_bucket(exc)
                return False
            return True

        return await self._run("write", target, call)

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


def _raise_missing_bucket(exc: FileNotFoundError) -> None:
    """Raise `exc` again if it is a missing bucket, not a missing object (see `_run`)."""
    if "NoSuchBucket" in str(exc):
        raise exc


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
