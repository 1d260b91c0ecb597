"""Forks: a new session that starts from exactly what the model was sent at a step of another.

The new session's state.json holds the messages of that step, rebuilt from the origin's
record (`rebuild_step`), so an `Agent(session_id=NEW)` continues from there, with another
config or model if wished. Nothing is copied: the messages keep their references to the
origin's tool_result files, context.jsonl and data/. The new record begins with a `fork`
event naming the origin, then the messages as `message` events, so `ctxoffload show` on the
fork shows what it starts from.
"""

from __future__ import annotations

import logging
from typing import Any

from .._disk.events import EventKind, Fork, Message, is_event
from .._disk.ids import validate_session_id
from .._disk.read import rebuild_step
from ..exceptions import ConfigError, IncompleteRecord
from ._new_session import take_new_session

__all__ = ["fork_session"]

logger = logging.getLogger("ctxoffload")


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
        workspace: the workspace holding both (a `Workspace`: every ctxoffload workspace).
        source: the session forked.
        new: the new session's id; it must not exist yet: the workspace must not list it
            (`list_sessions`: a folder or prefix of that name, whatever it holds).
        step: the model call whose messages the fork starts from (as `ctxoffload show
            SOURCE --step N` prints them); None: the source's saved state (state.json),
            that is, where its last writer stopped.
        take_lease: take the new session's lease while writing it. Pass False when the
            caller already holds it (it made `new` by taking it, so `new` is listed: only
            what was recorded in it then counts).

    Returns:
        The fork's `fork` event: `origin` (`{"session", "step"}`), `messages`, `state`.
        Without `step`, `origin["step"]` is the model call whose reply the copied state
        holds last (None when it holds none: a fork never continued, a record without
        model calls).

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
    if take_lease and new in await workspace.list_sessions():
        raise _exists(new)
    # Everything is read before anything is written: a fork that cannot be made leaves
    # no trace.
    messages, at, agent, model = await _starting_point(workspace, source, step)
    # Checked again under the new session's lease (`take_new_session`): a second fork to
    # the same id checked before the first one wrote, and took the lease after it was
    # released, stops there.
    lease = await take_new_session(workspace, new, agent="fork") if take_lease else None
    try:
        if not take_lease and (
            await workspace.read_events(new) or await workspace.read_state(new) is not None
        ):
            raise _exists(new)
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
        fork = Fork(origin=origin, messages=len(messages), state=str(path))
        await workspace.record_event(new, fork.kind, **fork.fields())
        for message in messages:
            entered = Message(message=message)
            await workspace.record_event(new, entered.kind, **entered.fields())
        return fork.to_json()
    finally:
        if lease is not None:
            await lease.release()


def _exists(new: str) -> ConfigError:
    return ConfigError(
        f"session {new!r} already exists: pick a new id for the fork (or purge it first)"
    )


async def _starting_point(
    workspace: Any, source: str, step: int | None
) -> tuple[list[Any], int | None, Any, Any]:
    """The messages a fork starts from, the step they are of, and the origin's agent and
    model names."""
    if step is None:
        # The state first, then the events: the record of the step the state was saved
        # after is on disk before the state is, so the events read next hold it, whatever a
        # live writer adds meanwhile.
        saved = await workspace.read_state(source)
        if not saved or not isinstance(saved.get("messages"), list):
            raise ConfigError(
                f"session {source!r} has no saved state to fork from: fork it at a model call "
                "of its record instead (step=N; on the command line --step N)"
            )
        messages: list[Any] = saved["messages"]
        at = _step_saved(await _events(workspace, source), messages)
        return messages, at, saved.get("agent"), saved.get("model")
    events = await _events(workspace, source)
    try:
        messages = rebuild_step(events, step)
    except IncompleteRecord:
        raise
    except LookupError as exc:  # no model call at that step
        known = [s for _, s in _model_calls(events)]
        shown = f"steps {min(known)}-{max(known)}" if known else "no model calls"
        raise LookupError(f"session {source!r}: {exc} ({shown} are recorded)") from None
    start: dict[str, Any] = next(
        (e for e in events if e.get("kind") == EventKind.SESSION_START), {}
    )
    return messages, step, start.get("agent"), start.get("model")


async def _events(workspace: Any, source: str) -> list[dict[str, Any]]:
    """The source's events (`is_event`); the lines that are not one are skipped and said."""
    values = await workspace.read_events(source)
    events = [value for value in values if is_event(value)]
    if len(events) < len(values):
        odd = len(values) - len(events)
        logger.warning(
            "session %s: %d line%s of its record %s not an event (a JSON object with a kind): "
            "skipped; `ctxoffload verify` checks the workspace",
            source,
            odd,
            "" if odd == 1 else "s",
            "is" if odd == 1 else "are",
        )
    return events


def _model_calls(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """The model calls of a record that name their step, with it, oldest first."""
    return [
        (e, e["step"])
        for e in events
        if e.get("kind") == EventKind.MODEL_CALL
        and isinstance(e.get("step"), int)
        and not isinstance(e["step"], bool)
    ]


def _step_saved(events: list[dict[str, Any]], messages: list[Any]) -> int | None:
    """The step a saved state was saved after: that of the newest model call whose reply
    the state holds (an Agent saves its state after a step's reply and tool results, and
    the reply's id is in the step's `model_call` event). None when none does."""
    held = {m.get("id") for m in messages if isinstance(m, dict)}
    found = None
    for event, step in _model_calls(events):
        reply = event.get("reply")
        if isinstance(reply, str) and reply in held:
            found = step
    return found
