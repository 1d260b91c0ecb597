"""The leases this process let go of unreleased with their run: a door's host dropped the
run's object (the OpenAI Agents SDK without `wrap`), and the collector, which must not wait,
dropped the lease with it (`ctxoffload._doors.runs`). The next run of the session takes it
over; nothing is wrong then, and `took_over` says so quietly. A lease object something still
references (so its lock was not given up with it) is released by that next run
(`still_kept`)."""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["let_go", "still_kept", "was_let_go"]

_LET_GO: dict[str, tuple[weakref.ref[Any], ...]] = {}
"""The tokens of those leases, the latest kept, each with what `let_go` was given of it."""

_KEPT = 4_096


def let_go(holder: dict[str, Any], *kept: object) -> None:
    """Note that this process let go of the lease `holder` says, unreleased, with its run (no
    writer is left); `kept` (the lease object, and what releases it) is held weakly. No I/O:
    the collector calls it wherever it runs."""
    token = holder.get("token")
    if isinstance(token, str):
        _LET_GO[token] = tuple(weakref.ref(thing) for thing in kept)
        while len(_LET_GO) > _KEPT:
            _LET_GO.pop(next(iter(_LET_GO)), None)


def was_let_go(holder: dict[str, Any]) -> bool:
    """Whether this process let go of the lease `holder` says with its run (`let_go`)."""
    token = holder.get("token")
    return isinstance(token, str) and token in _LET_GO


def still_kept(holder: dict[str, Any]) -> tuple[Any, ...] | None:
    """What `let_go` was given of the lease `holder` says, while all of it is still referenced
    (None: nothing was given, or some of it was collected). The collector let go of that
    lease counting on its object going with its run; one still referenced still holds its
    lock (a folder's stays with its open descriptor), and only releasing it frees it."""
    token = holder.get("token")
    refs = _LET_GO.get(token) if isinstance(token, str) else None
    if not refs:
        return None
    kept = tuple(ref() for ref in refs)
    return None if any(thing is None for thing in kept) else kept
