"""The fence on state.json: a workspace that took a session's lease writes its state.json only
while that lease is still the session's, checked by the store in the same step as the write.

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

from dataclasses import dataclass
from typing import Any

from .._disk.wording import describe_holder
from ..exceptions import SessionBusyError

__all__ = ["StateFence", "fence_refused"]


@dataclass
class StateFence:
    """A lease a workspace object holds on a session, as its state.json writes are fenced.

    Attributes:
        token: the lease's token, as its record in the store holds it.
        e_tag: in a bucket, the ETag of the state.json this holder last wrote (None before
            its first write); unused elsewhere.
    """

    token: str
    e_tag: str | None = None


def fence_refused(session_id: str, where: str, holder: dict[str, Any]) -> SessionBusyError:
    """The error a write of state.json refused by its fence raises: what was not written, and
    who holds the session now (`holder`, `{}` when no lease is there)."""
    now = (
        f"{describe_holder(holder)} holds it now"
        if holder and not holder.get("released")
        else "no writer holds it now"
    )
    return SessionBusyError(
        f"session {session_id!r}: state.json was not written: this workspace's lease on the "
        f"session lapsed and was taken over ({now}; its lease: {where}), so the session's "
        "state.json is the new holder's and stays as it is. Stop writing this session: take "
        "its lease again to go on from what it holds now, or pass another session_id",
        session_id,
        holder,
    )
