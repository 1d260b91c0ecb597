"""A session that must be new: taken under its lease, and only if nothing was recorded in it.

A sub-agent's session, a fork and the fork of a busy session are each a session that did not
exist. Their ids are picked (by a caller, or with a random tag), and two writers may pick one
id at once, or pick the id of a session that ended long ago. The rule, for every one of them:
the workspace must not list the id; then its lease is taken (a second live writer gets
`SessionBusyError`, so two writers cannot both hold it); then, under the lease, nothing may be
recorded in it (a writer that checked before another wrote, and took the lease after that
one released it, stops here). Every write of a workspace records an event, and a fork saves
its state, so an empty record and no state mean nothing was ever written there.
"""

from __future__ import annotations

import uuid
from typing import Any

from .._disk.ids import validate_session_id
from ..exceptions import ConfigError, SessionBusyError
from ._lease import SessionLease, take_lease
from ._protocol import Workspace

__all__ = ["NEW_SESSION_TRIES", "new_session", "random_tag", "take_new_session"]

NEW_SESSION_TRIES = 16
"""Random tags tried by `new_session` before it gives up: with 24 random bits each, the
sixteenth is needed only when the workspace holds millions of sessions of that prefix."""


def random_tag() -> str:
    """Six random hex digits: what tells sessions of one prefix apart."""
    return uuid.uuid4().hex[:6]


class _Exists(Exception):
    """The id is listed, held by another live writer, or has something recorded in it."""


async def _take(workspace: Any, session_id: str, agent: str | None) -> SessionLease | None:
    """The lease of `session_id` if it is new (None: the workspace gives no leases); raises
    `_Exists` (or `SessionBusyError` from `take_lease`) when it is not."""
    if not isinstance(workspace, Workspace):
        # A custom offloader lists nothing and leases nothing: the id's randomness is all
        # there is.
        return None
    if session_id in await workspace.list_sessions():
        raise _Exists(session_id)
    # Looked at before the lease too: something planted under that name is passed over here,
    # not met by `take_lease`, which would warn that the session goes on without a lease.
    await _check_nothing_recorded(workspace, session_id)
    lease = await take_lease(workspace, session_id, agent)
    try:
        # Taking the lease made the id listed (its folder, its lease object): what counts
        # now is whether anything was recorded in it meanwhile.
        await _check_nothing_recorded(workspace, session_id)
    except BaseException:
        if lease is not None:
            await lease.release()
        raise
    return lease


async def _check_nothing_recorded(workspace: Workspace, session_id: str) -> None:
    """Raise `_Exists` if anything was recorded in the session, or if something that is no
    session folder sits under its name (a planted link, a file): it is not new, and nothing
    will be written through it."""
    try:
        recorded = bool(
            await workspace.read_events(session_id) or await workspace.read_state(session_id)
        )
    except OSError as exc:
        raise _Exists(session_id) from exc
    if recorded:
        raise _Exists(session_id)


async def take_new_session(
    workspace: Any, session_id: str, agent: str | None = None
) -> SessionLease | None:
    """Take the lease of session `session_id`, which must not exist yet.

    Args:
        workspace: a `Workspace` (a custom offloader, which lists no sessions, is not
            checked).
        session_id: the new session's id.
        agent: who takes it, for the lease's record.

    Returns:
        The session's lease, held (release it, or hand it to the `Agent` that writes the
        session); None when the workspace gives no leases.

    Raises:
        InvalidSessionId: `session_id` is not a plain name.
        ConfigError: the workspace lists it, or something was recorded in it by the time
            its lease was held.
        SessionBusyError: another live writer holds its lease.
    """
    validate_session_id(session_id)
    try:
        return await _take(workspace, session_id, agent)
    except _Exists:
        raise ConfigError(
            f"session {session_id!r} already exists: pick a new id (or purge it first)"
        ) from None


async def new_session(
    workspace: Any, prefix: str, agent: str | None = None
) -> tuple[str, SessionLease | None]:
    """A new session `{prefix}-{6 hex}`, taken under its lease (see `take_new_session`).

    `prefix` is cut so that the id fits the 128 characters a session id may have. A tag
    whose session exists, or that another writer is taking at the same moment, is drawn
    again.

    Args:
        workspace: where the session is made (any offloader: one that lists no sessions
            gets the first id drawn).
        prefix: what the id starts with.
        agent: who takes it, for the lease's record.

    Returns:
        The id and its lease (None when the workspace gives no leases).

    Raises:
        InvalidSessionId: the id made is not a plain name (`prefix` holds a `/`, ...).
        ConfigError: `NEW_SESSION_TRIES` ids drawn in a row all existed.
    """
    tried: list[str] = []
    for _ in range(NEW_SESSION_TRIES):
        tail = f"-{random_tag()}"
        session_id = validate_session_id(prefix[: 128 - len(tail)] + tail)
        try:
            lease = await _take(workspace, session_id, agent)
        except (_Exists, SessionBusyError):
            tried.append(session_id)
            continue
        return session_id, lease
    raise ConfigError(
        f"found no new session id after {prefix!r}: the {len(tried)} drawn "
        f"({', '.join(tried[:3])}, ...) all exist; purge old sessions of that prefix "
        "(`ctxoffload gc`) and call again"
    )
