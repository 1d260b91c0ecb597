"""Forks: a new session that starts from exactly what the model was sent at a step of another.

The new session's state.json holds the messages of that step, rebuilt from the origin's
record (`rebuild_step`), so an `Agent(session_id=NEW)` continues from there, with another
config or model if wished. Nothing is copied: the messages keep their references to the
origin's tool_result files, context.jsonl and data/. The new record begins with a `fork`
event naming the origin, then the messages as `message` events, so `ctxoffload show` on the
fork shows what it starts from.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import ConfigError, IncompleteRecord
from ._ids import validate_session_id
from ._lease import LeaseHolder
from ._reader import EventKind, rebuild_step

__all__ = ["fork_session"]


async def fork_session(
    workspace: Any,
    source: str,
    new: str,
    *,
    step: int | None = None,
    take_lease: bool = True,
) -> dict[str, Any]:
    """Make session `new` start from session `source` at `step`.

    Args:
        workspace: the workspace holding both (an `EventLog` and a `StateStore`: every
            ctxoffload workspace).
        source: the session forked.
        new: the new session's id; it must not exist yet.
        step: the model call whose messages the fork starts from (as `ctxoffload show
            SOURCE --step N` prints them); None: the source's saved state (state.json),
            that is, where its last writer stopped.
        take_lease: hold the new session's lease while writing it (pass False when the
            caller already holds it).

    Returns:
        The fork's `fork` event: `origin` (`{"session", "step"}`), `messages`, `state`.

    Raises:
        InvalidSessionId: an id is not a plain name.
        ConfigError: `new` is `source` or exists already, or `source` has no saved state.
        LookupError: the source's record has no model call at `step`.
        IncompleteRecord: a message that step was sent is not in the record.
        SessionBusyError: another writer holds the lease of `new`.
    """
    validate_session_id(source)
    validate_session_id(new)
    if new == source:
        raise ConfigError(f"a fork needs a new session id, not {source!r} itself")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 1):
        raise ConfigError(f"step {step!r} is not a step number: pass 1 or more, or None")
    if await workspace.read_events(new) or await workspace.read_state(new):
        raise ConfigError(
            f"session {new!r} already exists: pick a new id for the fork (or purge it first)"
        )
    # Everything is read before anything is written: a fork that cannot be made leaves
    # no trace.
    messages, at, agent, model = await _starting_point(workspace, source, step)
    lease = None
    if take_lease and isinstance(workspace, LeaseHolder):
        lease = await workspace.acquire_lease(new, agent="fork")
    try:
        origin = {"session": source, "step": at}
        state = {
            "session_id": new,
            "agent": agent,
            "model": model,
            "steps": 0,
            "messages": messages,
            "forked_from": origin,
        }
        path = await workspace.write_state(new, state)
        fields = {"origin": origin, "messages": len(messages), "state": str(path)}
        await workspace.record_event(new, EventKind.FORK, **fields)
        for message in messages:
            await workspace.record_event(new, EventKind.MESSAGE, message=message)
        return {"kind": EventKind.FORK, **fields}
    finally:
        if lease is not None:
            await lease.release()


async def _starting_point(
    workspace: Any, source: str, step: int | None
) -> tuple[list[Any], int | None, Any, Any]:
    """The messages a fork starts from, the step they are of, and the origin's agent and
    model names."""
    events = await workspace.read_events(source)
    steps = [e["step"] for e in events if e.get("kind") == EventKind.MODEL_CALL]
    if step is None:
        saved = await workspace.read_state(source)
        if not saved or not isinstance(saved.get("messages"), list):
            raise ConfigError(
                f"session {source!r} has no saved state to fork from: pass step=N (a model "
                "call of its record) instead"
            )
        messages: list[Any] = saved["messages"]
        at = max((s for s in steps if isinstance(s, int)), default=None)
        agent, model = saved.get("agent"), saved.get("model")
    else:
        try:
            messages = rebuild_step(events, step)
        except IncompleteRecord:
            raise
        except LookupError as exc:  # no model call at that step
            known = [s for s in steps if isinstance(s, int)]
            shown = f"steps {min(known)}-{max(known)}" if known else "no model calls"
            raise LookupError(f"session {source!r}: {exc} ({shown} are recorded)") from None
        at = step
        start: dict[str, Any] = next(
            (e for e in events if e.get("kind") == EventKind.SESSION_START), {}
        )
        agent, model = start.get("agent"), start.get("model")
    return messages, at, agent, model
