"""What the `Agent` does when its session is not its own: a lease lost while it worked is an
error that says what was not written, and a busy session continued in a fork of its saved
state (`if_busy="fork"`)."""

from __future__ import annotations

import logging

from .._disk import events
from ..exceptions import ConfigError, SessionBusyError
from ..workspace import LeaseHolder, fork_session, writing_as
from ._record import SessionRecorder

__all__ = ["continue_in_fork", "lost_lease"]

logger = logging.getLogger("ctxoffload")


def lost_lease(session_id: str, writing: str) -> SessionBusyError:
    """The error of an agent whose lease expired unrenewed while it worked (the process
    paused, or its event loop blocked by a sync call in an async tool) and another writer
    took the session over: it stopped before writing `writing`."""
    return SessionBusyError(
        f"session {session_id!r}: this agent lost the session's lease while it "
        "worked (it was not renewed in time: was the process paused, or the event loop "
        "blocked by a sync call in an async tool?) and another writer took the session "
        f"over; it stopped before writing {writing}, which is not in the session. Ask "
        "again to go on from what the session holds now, or pass another session_id.",
        session_id,
        {},  # (the new holder is not known here; its lease names it)
    )


async def continue_in_fork(
    store: LeaseHolder,
    source: str,
    new: str,
    agent: str,
    record: SessionRecorder,
    busy: SessionBusyError,
) -> None:
    """Fill the new session `new` (its lease held) with a fork of busy `source`'s saved
    state; with nothing saved yet, it starts empty, its record naming the origin."""
    with writing_as(agent, new):
        try:
            await fork_session(store, source, new, take_lease=False)
        except ConfigError:
            await record.emit(events.Fork(origin={"session": source, "step": None}, messages=0))
    logger.warning(
        "session %s is busy (%s): this agent continues in %s, a fork of its saved state",
        source,
        busy,
        new,
    )
