"""The fence on a session's writes: a workspace object that took a session's lease writes the
session only while that lease is still the session's.

Every write of the session through that object (a context batch, a tool result, an event, a
history record, state.json) first asks the lease (`check_writer`): while the lease is surely
still this holder's, known locally with no request (`LeaseTerm`: less than its time to live
since the request that last renewed it was sent; a live holder renews every third of it),
the write goes on at the cost of reading a clock; past that, the store is asked once (the
renewal `SessionLease.still_held` makes, which renews it too); a lease found lost (there, or
by its renewer) refuses this write and every later one with `SessionBusyError` naming the new
holder, before anything is written. So a door, whatever it is, stops writing a session its
run lost, at its next write, in the one place all its writes go through.

That check can pass just before the lease lapses and the write land just after, so state.json,
which a write replaces whole, is also fenced by the store itself, in the same step as the
write:

A lease with a time to live (a bucket, a database) can lapse while its holder still runs (its
process paused, its event loop blocked past the time to live); another writer then takes the
session over. The holder's own check before a write (`SessionLease.still_held`) can pass just
before the lease lapses, so the store itself refuses the late write:

- in a database, the write is one transaction that replaces state.json only if the lease row
  still holds this lease's token (no statement more than an unfenced write);
- in a bucket, which has no transaction over two objects, the PUT is conditional on the ETag of
  the state.json this holder last wrote (`If-None-Match: *` before its first write); when the
  condition fails, the lease object is read: a lease now another's refuses the write, a lease
  still this holder's (the state.json was written by a writer without a lease, or by a stale
  holder after the takeover) lets it write over it, again conditionally;
- on a disk and in memory a lease cannot lapse while its holder runs (the kernel's `flock`
  lasts as long as the lease's descriptor; the memory table as long as the lease object), so
  there is nothing to fence.

The fence belongs to the workspace object that took the lease, from `acquire_lease` until
`release()`: every write of the session's state through that object is fenced, whoever makes
it. Writers sharing one workspace object are one writer to the store.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._disk.wording import describe_holder
from ..exceptions import SessionBusyError

if TYPE_CHECKING:
    from ._lease import LeaseTerm, SessionLease

__all__ = ["StateFence", "check_writer", "fence_refused", "lease_lost"]


@dataclass
class StateFence:
    """A lease a workspace object holds on a session, as its state.json writes are fenced.

    Attributes:
        token: the lease's token, as its record in the store holds it.
        e_tag: in a bucket, the ETag of the state.json this holder last wrote (None before
            its first write); unused elsewhere.
        term: what the holder knows locally of its lease (`LeaseTerm`), against which every
            write of the session is checked (`check_writer`); None: no check.
        lease: the lease, held weakly (a lease dropped unreleased must still lapse): a write
            past the term asks the store through it.
        where: where the lease lives, for the refusal.
    """

    token: str
    e_tag: str | None = None
    term: LeaseTerm | None = None
    lease: weakref.ref[SessionLease] | None = None
    where: str = ""


async def check_writer(fence: StateFence | None, session_id: str, writing: str) -> None:
    """Refuse a write of the session (`writing` says what) when the lease of `fence` was lost:
    it lapsed and another writer took it over. No request while the lease is surely held
    (`LeaseTerm.surely_held`); past that, one renewal asks the store. A lease found lost
    stays lost for this object (until it takes the session's lease again), even once the
    lease object is dropped.

    Raises:
        SessionBusyError: the lease is lost, naming the new holder; nothing was written.
    """
    term = fence.term if fence is not None else None
    if fence is None or term is None or term.surely_held():
        return
    if term.lost_to is None:
        lease = fence.lease() if fence.lease is not None else None
        if lease is None or await lease.still_held() or term.lost_to is None:
            # (Dropped unreleased, or released meanwhile: nothing to check it against.)
            return
    raise lease_lost(session_id, writing, term.lost_to, fence.where)


def lease_lost(
    session_id: str, writing: str, holder: dict[str, Any], where: str
) -> SessionBusyError:
    """The error a write of a session raises once the writer's lease lapsed and was taken
    over: what was not written, and who holds the session now (`holder`, `{}`: nobody)."""
    return SessionBusyError(
        f"session {session_id!r}: {writing} was not written: this writer's lease on the "
        "session lapsed unrenewed (was its process paused, or its event loop blocked?) and "
        f"was taken over ({_holding_now(holder)}; its lease: {where}), so it writes nothing "
        "more to the session; what it wrote before stays. Run again to go on from what the "
        "session holds now, or use another session",
        session_id,
        holder,
    )


def fence_refused(session_id: str, where: str, holder: dict[str, Any]) -> SessionBusyError:
    """The error a write of state.json refused by its fence raises: what was not written, and
    who holds the session now (`holder`, `{}` when no lease is there)."""
    return SessionBusyError(
        f"session {session_id!r}: state.json was not written: this workspace's lease on the "
        f"session lapsed and was taken over ({_holding_now(holder)}; its lease: {where}), so "
        "the session's "
        "state.json is the new holder's and stays as it is. Stop writing this session: take "
        "its lease again to go on from what it holds now, or pass another session_id",
        session_id,
        holder,
    )


def _holding_now(holder: dict[str, Any]) -> str:
    return (
        f"{describe_holder(holder)} holds it now"
        if holder and not holder.get("released")
        else "no writer holds it now"
    )
