"""Which session a host's conversation writes: the one mapping rule, and no shared default.

- A host's own id for a conversation (a LangGraph `thread_id`, a pydantic-ai
  `conversation_id`, a Claude Code `session_id`) is mapped by `session_id_for`: a plain name is
  its own session, anything else a safe name with a hash that no id passed as it is can equal.
- A `session_id=` the developer gives a door names the session itself (a plain name, checked
  at construction), as it does for ctxoffload's `Agent`.
- Where the host gives no id and the developer none, each conversation gets a new session of
  its own (`fresh_session`), said once at INFO; never one session shared by every
  conversation that did not say which it is.
"""

from __future__ import annotations

import logging
import uuid

from .._disk.ids import session_id_for, validate_session_id
from ..exceptions import InvalidSessionId
from .doors import Door

__all__ = ["conversation_session", "fresh_session", "given_host_id", "given_session"]

logger = logging.getLogger("ctxoffload")


def conversation_session(host_id: object) -> str:
    """The session of a host's conversation id (mapped once, by the one rule)."""
    return session_id_for(host_id)


def given_host_id(host_id: object) -> str | None:
    """A door's argument that is the host's own id of a conversation (mapped to its session
    by `conversation_session`), checked now: None or a str, whatever its characters.

    Raises:
        InvalidSessionId: it is no str (as `given_session` says of a session's id).
    """
    if host_id is not None and not isinstance(host_id, str):
        raise InvalidSessionId(
            f"session_id must be a str, got {type(host_id).__name__} {host_id!r}: a host's "
            "id of a conversation is mapped to a session whatever its characters"
        )
    return host_id


def given_session(session_id: str | None) -> str | None:
    """A door's `session_id=` argument, checked now: None, or a plain name.

    Raises:
        InvalidSessionId: it is not a plain name (the message says how to pass a host's id).
    """
    return None if session_id is None else validate_session_id(session_id)


def fresh_session(door: Door, why: str) -> str:
    """A new session for a conversation the host names no way, logged once at INFO with
    `why` (what the user could pass to name it)."""
    session = f"{door.name}-{uuid.uuid4().hex[:12]}"
    logger.info(
        "%s: %s, so this conversation gets a session of its own: %s", door.host, why, session
    )
    return session
