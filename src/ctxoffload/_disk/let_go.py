"""The leases this process let go of unreleased with their run: a door's host dropped the
run's object (the OpenAI Agents SDK without `wrap`), and the collector, which must not wait,
dropped the lease with it (`ctxoffload._doors.runs`). The next run of the session takes it
over; nothing is wrong then, and `took_over` says so quietly."""

from __future__ import annotations

from typing import Any

__all__ = ["let_go", "was_let_go"]

_LET_GO: dict[str, None] = {}
"""The tokens of those leases, the latest kept."""

_KEPT = 4_096


def let_go(holder: dict[str, Any]) -> None:
    """Note that this process let go of the lease `holder` says, unreleased, with its run (no
    writer is left). No I/O: the collector calls it wherever it runs."""
    token = holder.get("token")
    if isinstance(token, str):
        _LET_GO[token] = None
        while len(_LET_GO) > _KEPT:
            _LET_GO.pop(next(iter(_LET_GO)), None)


def was_let_go(holder: dict[str, Any]) -> bool:
    """Whether this process let go of the lease `holder` says with its run (`let_go`)."""
    token = holder.get("token")
    return isinstance(token, str) and token in _LET_GO
