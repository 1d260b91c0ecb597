"""One live writer per session: the lease every backend gives, and what it records.

A lease says who writes a session now. Readers (the CLI, other agents' file tools) never
look at it and are never blocked.

- On disk (`LocalWorkspace`): `sessions/{id}/lease.json`, held by an open file with an
  exclusive `flock`. The kernel drops the lock when the holder's process ends however it
  ends (kill -9 included), so a dead holder's lease is free at once; the file keeps the
  holder's record (pid, host, agent, start), and a writer that takes a lease its last holder
  never released says so naming it: at INFO when the kernel shows that holder's process has
  ended, as a warning when it may still run.
- In a bucket (`ObjectStoreWorkspace`): the object `sessions/{id}/lease.json`, created with a
  conditional put and renewed (a put conditional on its ETag) every third of its time to
  live while the holder runs. A lease past its expiry is taken over (again a conditional
  put, so two takers cannot both win) naming the holder that let it lapse, at the same level.
  Expiry is judged on the store's clock alone (`lease_expires`): the lease object's last
  change, stamped by the store at the holder's latest renewal, against the store's time
  now; never the holder's clock against the taker's.
- In memory (`InMemoryWorkspace`): a table of the process.

A second live writer gets `SessionBusyError` naming the holder. A holder whose lease lapsed
and was taken over writes nothing more to the session: the workspace object that took the
lease checks it before each write of the session (`LeaseTerm`: no request while the lease
cannot have lapsed yet), and the store refuses its state.json in the same step as the write
(`_fence`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import socket
import sys
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from .._depth import load_json
from .._disk.layout import LEASE_FILE, now_iso
from .._disk.let_go import was_let_go
from .._disk.wording import describe_holder
from ..exceptions import ConfigError, SessionBusyError

__all__ = [
    "CLOCK_RESOLUTION",
    "DEFAULT_LEASE_TTL",
    "LEASE_FILE",
    "LeaseHolder",
    "LeaseTerm",
    "SessionLease",
    "busy_error",
    "describe_holder",
    "holder_ended",
    "holder_record",
    "lease_expires",
    "lease_record",
    "lease_ttl",
    "orphaned_here",
    "take_lease",
    "took_over",
]

logger = logging.getLogger("ctxoffload")

DEFAULT_LEASE_TTL = 60.0
"""Seconds a lease in a bucket lives without renewal; renewed every third of it."""
CLOCK_RESOLUTION = 1.0
"""Seconds added to a bucket lease's time to live before it is judged expired: S3 stamps
objects to the second, so two stamps of the store's clock may differ by up to this much
more than the time between them."""


def lease_record(raw: object) -> dict[str, Any]:
    """The record a lease file, object or row holds; `{}` when it holds none (torn, edited
    by hand, not JSON, nested deeper than any the workspace writes): every store reads it so."""
    if not isinstance(raw, (str, bytes)) or not raw.strip():
        return {}
    try:
        found = load_json(raw)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


# The leases this process holds, by token: a lease recorded with this process's pid and host
# whose token is not here belongs to an object that was dropped without `release()`.
_LIVE: weakref.WeakValueDictionary[str, SessionLease] = weakref.WeakValueDictionary()


def orphaned_here(holder: dict[str, Any]) -> bool:
    """Whether `holder` is a lease of this process whose object is gone (an `Agent` dropped
    without `aclose`, kept only by a reference cycle until now): such a lease is free.

    Runs the cycle collector first, so a dropped agent's lease is let go of now rather than
    at the next collection."""
    if holder.get("pid") != os.getpid() or holder.get("host") != socket.gethostname():
        return False
    gc.collect()
    return holder.get("token") not in _LIVE


def holder_record(agent: str | None, ttl: float | None = None) -> dict[str, Any]:
    """What a lease says of its holder: a token, pid, host, agent, start (and expiry)."""
    record: dict[str, Any] = {
        "token": uuid.uuid4().hex,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "agent": agent,
        "started": now_iso(),
    }
    if ttl is not None:
        # No expiry time by the holder's clock: a taker would compare it with its own.
        record["ttl"] = ttl
    return record


def lease_ttl(ttl: float | None) -> float:
    """A lease's time to live in seconds: `ttl`, or `DEFAULT_LEASE_TTL` for None.

    Raises:
        ConfigError: `ttl` is not a positive number.
    """
    value = DEFAULT_LEASE_TTL if ttl is None else float(ttl)
    if not value > 0:
        raise ConfigError(f"ttl={value!r} must be a positive number of seconds")
    return value


def lease_expires(holder: dict[str, Any], renewed: float) -> float | None:
    """When a bucket lease expires on the store's clock, from its record and `renewed`, the
    store's stamp of its last write; None for a released lease (free now).

    A record without a usable `ttl` (written by hand, or cut short) lives the default.
    """
    if holder.get("released"):
        return None
    ttl = holder.get("ttl")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl < 1e9:
        ttl = DEFAULT_LEASE_TTL
    return renewed + float(ttl) + CLOCK_RESOLUTION


def busy_error(
    session_id: str, holder: dict[str, Any], where: str, *, expires: float | None = None
) -> SessionBusyError:
    """The error a second live writer gets; `expires` is a bucket lease's expiry on the
    store's clock (`lease_expires`)."""
    lapse = (
        f"; it expires at {time.strftime('%H:%M:%S', time.gmtime(expires))} UTC by the "
        "store's clock unless renewed"
        if expires is not None
        else ""
    )
    return SessionBusyError(
        f"session {session_id!r} is being written by {describe_holder(holder)}: its lease is "
        f"{where}{lapse}. Wait for it to stop, pass another session_id, or pass "
        "Agent(..., if_busy='fork') to continue in a fork of its saved state",
        session_id,
        holder,
    )


def holder_ended(holder: dict[str, Any]) -> bool:
    """Whether the kernel shows that the process `holder` names has ended: it ran on this host,
    and no process has its pid now (or only a zombie its parent has not reaped).

    A holder on another host, of this process, or with a pid no process can have is not shown
    ended: whether it still runs is unknown here."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or pid == os.getpid():
        return False
    # Signal 0 only asks whether the pid exists; a pid <= 0 would name a process group.
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid < 2**31:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists, as another user's process (EPERM)
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rpartition(b")")[2].split()[:1]
    except (FileNotFoundError, ProcessLookupError):
        return True  # it ended and was reaped since `kill` found it (ESRCH from the read)
    except OSError:
        return False
    return state == [b"Z"]


def took_over(session_id: str, holder: dict[str, Any], why: str) -> None:
    """Log that a lease its holder never released was taken over.

    INFO when the kernel shows the holder's process has ended (a script that ended without
    closing its agent, run again: nothing is wrong); WARNING when it may still run (a live
    process of this host that let go without `release()`, or a process of another host),
    since then two writers may share the session.
    """
    pid = holder.get("pid")
    if pid == os.getpid() and was_let_go(holder):
        level, state = logging.INFO, "its run ended, and this process let go of it with the run"
    elif holder_ended(holder):
        level, state = logging.INFO, f"its process (pid {pid}) has ended"
    elif holder.get("host") != socket.gethostname():
        level = logging.WARNING
        state = (
            f"it ran on another machine ({holder.get('host')!r}), where it may still run: "
            "stop it if it does"
        )
    else:
        level = logging.WARNING
        state = (
            f"its process (pid {pid}) still runs: close agents with `async with` or "
            "aclose() so that they release their session"
        )
    logger.log(
        level,
        "took over the lease of session %s from %s: %s, and %s; its last writes are on disk",
        session_id,
        describe_holder(holder),
        why,
        state,
    )


_SURE_SHARE = 0.9
"""The share of its time to live a lease is taken as surely still its holder's after its
latest renewal, with no request: the rest is margin for the holder's clock running slower
than the store's, and for the request's own way to the store."""


def _awake_seconds() -> float:
    """Seconds on a clock that counts a suspended machine's sleep (CLOCK_BOOTTIME on Linux,
    CLOCK_MONOTONIC on macOS), else `time.monotonic()`: the store's clock went on while the
    laptop slept, and so must the holder's idea of its lease's age."""
    if _SLEEP_COUNTING_CLOCK is not None:
        return time.clock_gettime(_SLEEP_COUNTING_CLOCK)
    return time.monotonic()


_SLEEP_COUNTING_CLOCK: int | None = getattr(
    time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC if sys.platform == "darwin" else None
)


class LeaseTerm:
    """What a holder knows locally of a lease that can lapse (in a bucket, a database): when it
    was last taken or renewed, its time to live, and whether it was found lost.

    Nobody may take a lease before it expires, and it expires no sooner than its time to live
    after the request that last took or renewed it was sent; so until then (less a margin,
    `_SURE_SHARE`) it is surely still the holder's, and a write needs no request to know it.
    The age is read on two clocks, the larger counting: one that counts a machine's sleep
    (`_awake_seconds`), and the wall clock (a clock set back counts on the first; one set
    forward costs one needless request at most).

    Attributes:
        ttl: the lease's time to live, in seconds.
        lost_to: None while the lease is this holder's; once found taken over, what the store
            holds of the new holder (`{}` when none holds it).
    """

    __slots__ = ("_since", "_since_wall", "lost_to", "ttl")

    def __init__(self, ttl: float, since: tuple[float, float] | None = None) -> None:
        self.ttl = ttl
        self._since, self._since_wall = since if since is not None else self.now()
        self.lost_to: dict[str, Any] | None = None

    @staticmethod
    def now() -> tuple[float, float]:
        """The moment a request that takes or renews the lease is sent, as `renewed` takes it."""
        return _awake_seconds(), time.time()

    def renewed(self, since: tuple[float, float]) -> None:
        """The lease was renewed by a request sent at `since` (`now()` taken before it)."""
        self._since, self._since_wall = max((self._since, self._since_wall), since)

    def age(self) -> float:
        """Seconds since the request that last took or renewed the lease was sent."""
        return max(_awake_seconds() - self._since, time.time() - self._since_wall)

    def surely_held(self) -> bool:
        """Whether the lease is surely still this holder's now, known with no request."""
        return self.lost_to is None and self.age() < self.ttl * _SURE_SHARE


class SessionLease:
    """A held lease: `release()` (idempotent) gives the session up.

    Attributes:
        session_id: the session held.
        holder: what the lease records of this holder.
        where: where the lease lives (a path or an object URL).
        term: for a lease that can lapse (a bucket's, a database's), what this holder knows
            of it locally (`LeaseTerm`); None where it cannot lapse while its holder runs.

    Args:
        release: gives the lease up in the store.
        renew: renews it in the store: returns None when it is still this holder's, else
            what the store holds of the lease now (`{}`: nothing).
        ttl: its time to live; with `renew`, it is renewed every third of it.
        since: when the request that took it was sent (`LeaseTerm.now`; now by default).
    """

    def __init__(
        self,
        session_id: str,
        holder: dict[str, Any],
        where: str,
        *,
        release: Callable[[], Awaitable[None]],
        renew: Callable[[], Awaitable[dict[str, Any] | None]] | None = None,
        ttl: float | None = None,
        since: tuple[float, float] | None = None,
    ) -> None:
        self.session_id = session_id
        self.holder = holder
        self.where = where
        self._release = release
        self._renew = renew
        self._released = False
        self.term = LeaseTerm(ttl, since) if renew is not None and ttl is not None else None
        self._task: asyncio.Task[None] | None = None
        token = holder.get("token")
        if isinstance(token, str):
            _LIVE[token] = self
        if renew is not None and ttl is not None:
            # The task holds the lease weakly: a lease dropped unreleased stops renewing and
            # expires.
            self._task = asyncio.get_running_loop().create_task(
                _keep(weakref.ref(self), renew, ttl / 3)
            )

    def __repr__(self) -> str:
        state = "released" if self._released else "held"
        return f"SessionLease({self.session_id!r}, {state}, {self.where})"

    @property
    def held(self) -> bool:
        """Whether this lease has not been released (a lost renewal also ends it)."""
        return not self._released

    async def still_held(self) -> bool:
        """Whether this lease is still this holder's, made sure of before a write: a lease
        that renews and has gone unrenewed past its beat (the event loop was blocked: a sync
        call in an async tool) is renewed now, and a renewal refused (another writer took it
        over once it expired) ends it, as a refused beat does."""
        if self._released:
            return False
        renew, term = self._renew, self.term
        if renew is None or term is None or term.age() < term.ttl / 2:
            return True
        since = LeaseTerm.now()
        try:
            taken_by = await renew()
        except Exception as exc:  # the store is away: the next beat tries again
            logger.warning("could not renew the lease of session %s: %s", self.session_id, exc)
            return True
        if taken_by is None:
            term.renewed(since)
            return True
        self._lose(taken_by)
        return False

    def _lose(self, taken_by: dict[str, Any]) -> None:
        """The store refused a renewal: the lease is another's (`taken_by`) or nobody's."""
        if self.term is not None and self.term.lost_to is None:
            self.term.lost_to = taken_by
        if not self._released:
            _lost(self.session_id)
            self._released = True

    async def release(self) -> None:
        """Give the session up; what it wrote stays. Safe to call twice."""
        if self._released:
            return
        self._released = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._release()

    async def __aenter__(self) -> SessionLease:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()


async def _keep(
    ref: weakref.ReferenceType[SessionLease],
    renew: Callable[[], Awaitable[dict[str, Any] | None]],
    every: float,
) -> None:
    """Renew a lease every `every` seconds while it is held and referenced."""
    while True:
        await asyncio.sleep(every)
        lease = ref()
        if lease is None or not lease.held:
            return
        session_id = lease.session_id
        del lease
        since = LeaseTerm.now()
        try:
            taken_by = await renew()
        except Exception as exc:  # the store is away: try again at the next beat
            logger.warning("could not renew the lease of session %s: %s", session_id, exc)
            continue
        lease = ref()
        if taken_by is None:
            if lease is not None and lease.term is not None:
                lease.term.renewed(since)
            del lease
            continue
        if lease is not None:
            lease._lose(taken_by)
        return


def _lost(session_id: str) -> None:
    logger.error(
        "lost the lease of session %s: another writer took it over after it expired (was "
        "this process paused, or its event loop blocked?); this writer's next write of the "
        "session raises SessionBusyError",
        session_id,
    )


async def take_lease(workspace: object, session_id: str, agent: str | None) -> SessionLease | None:
    """The session's lease for a writer about to write it, or None when the workspace gives
    none (a custom offloader) or cannot be written at all.

    A workspace that fails (a full disk, a folder that cannot be made, a bucket away) must
    not stop the run: its writes fail the same way and leave the content in the context.
    Such a failure is logged as a warning and the writer goes on without a lease.

    Raises:
        SessionBusyError: another live writer holds the session.
    """
    if not isinstance(workspace, LeaseHolder):
        return None
    try:
        return await workspace.acquire_lease(session_id, agent=agent)
    except SessionBusyError:
        raise
    except OSError as exc:  # OffloadError among them
        logger.warning(
            "could not take the lease of session %s (%s): going on without one; nothing "
            "stops another writer of this session meanwhile",
            session_id,
            exc,
        )
        return None


@runtime_checkable
class LeaseHolder(Protocol):
    """A workspace that gives one live writer per session (every ctxoffload workspace)."""

    async def acquire_lease(
        self, session_id: str, *, agent: str | None = None, ttl: float | None = None
    ) -> SessionLease:
        """Take the session's lease, or raise `SessionBusyError` naming its live holder."""
        ...
