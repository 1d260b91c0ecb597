"""The `door` event each run of a door opens its record with, the lease it takes first, and
what a refusal says in the host's terms (`HostRuns` holds the runs: runs.py)."""

from __future__ import annotations

import logging
from typing import Any

from .._disk.events import Door as DoorEvent
from .._disk.events import Subagent
from .._disk.wording import describe_holder
from .._version import __version__
from ..exceptions import SessionBusyError
from ..workspace import EventLog, SessionLease, take_lease, take_new_session, writing_as
from .doors import Door

__all__ = ["begin_run", "door_busy", "record_door", "record_nested"]

logger = logging.getLogger("ctxoffload")

_CONVERSATION_CHARS = 200
"""The most of a host's conversation id the `door` event keeps."""


async def begin_run(
    workspace: object,
    door: Door,
    session: str,
    *,
    conversation: object = None,
    agent: str | None = None,
    new: bool = False,
    announce: bool = True,
    parent: dict[str, Any] | None = None,
) -> SessionLease | None:
    """Take `session`'s lease for a run of `door` (None: the workspace gives no leases, or
    cannot be written) and record the run's `door` event.

    Args:
        workspace: the door's workspace.
        door: the door.
        session: the conversation's session.
        conversation: the host's own id of the conversation, recorded (None: it has none).
        agent: who the lease names (the door's name by default).
        new: the session must not exist yet (a fresh session): taken only if nothing was
            recorded in it.
        announce: record the `door` event (False: this process recorded it for an earlier
            run of the session already).
        parent: the run this one is nested in (`{"session", "agent"}`), recorded.

    Raises:
        SessionBusyError: another live run holds the session, in the door's terms.
    """
    try:
        if new:
            lease = await take_new_session(workspace, session, agent or door.name)
        else:
            lease = await take_lease(workspace, session, agent or door.name)
    except SessionBusyError as busy:
        raise door_busy(door, busy, conversation) from None
    if announce:
        with writing_as(agent or door.name, session):  # the event names its writer
            await record_door(workspace, door, session, conversation, parent=parent)
    return lease


def door_busy(door: Door, busy: SessionBusyError, conversation: object = None) -> SessionBusyError:
    """`busy` said for a door: who holds the session, and what to do in the host's terms."""
    named = "" if conversation is None else f" (conversation {_shown(conversation)})"
    return SessionBusyError(
        f"{door.host}: session {busy.session_id!r}{named} is being written by "
        f"{describe_holder(busy.holder)}, another live run; {door.busy}",
        busy.session_id,
        busy.holder,
    )


async def record_door(
    workspace: object,
    door: Door,
    session: str,
    conversation: object = None,
    *,
    parent: dict[str, Any] | None = None,
) -> None:
    """Record that a run of `door` began writing `session` (a workspace that keeps no events,
    or that fails now, is passed over: the run goes on); `parent` names the run it is nested
    in."""
    if not isinstance(workspace, EventLog):
        return
    event = DoorEvent(
        door=door.name,
        host=door.host,
        adapter=door.adapter,
        conversation=None if conversation is None else _shown(conversation, quote=False),
        projects=door.projects,
        records=door.records,
        version=__version__,
        **({"parent": parent} if parent is not None else {}),
    )
    try:
        await workspace.record_event(session, event.kind, **event.fields())
    except OSError as exc:
        logger.warning(
            "could not record the start of a %s run in session %s: %s", door.host, session, exc
        )


async def record_nested(workspace: object, door: Door, link: dict[str, Any], session: str) -> None:
    """Record in the parent's session (`link["session"]`, written as `link["agent"]`) that a
    run nested in one of its tool calls began writing `session`: the `subagent` event our
    Agent writes for its sub-agents, which `isolate_sessions` follows, so the parent reads
    its sub-agent's files back. Passed over like `record_door` when it cannot be written."""
    if not isinstance(workspace, EventLog):
        return
    parent = str(link["session"])
    tool_id = link.get("tool_id")
    event = Subagent(
        status="started",
        name=str(link.get("name") or door.name),
        session=session,
        **({"tool_id": str(tool_id)} if tool_id is not None else {}),
    )
    try:
        with writing_as(str(link.get("agent") or door.name), parent):
            await workspace.record_event(parent, event.kind, **event.fields())
    except OSError as exc:
        logger.warning(
            "could not record in session %s the %s run nested in it: %s", parent, door.host, exc
        )


def _shown(conversation: object, *, quote: bool = True) -> str:
    text = conversation if isinstance(conversation, str) else str(conversation)
    text = text[:_CONVERSATION_CHARS]
    return repr(text) if quote else text
