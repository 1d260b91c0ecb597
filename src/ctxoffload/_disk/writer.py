"""Provenance: which agent wrote an event, spelled once for every backend.

An `Agent` (and an integration that knows its agent's name) runs its work inside
`writing_as(name, session)`. Every workspace builds its event lines with `event_record`,
which stamps the writer of the moment: `"writer": {"agent": ..., "session": ..., "pid": ...}`.
A context variable carries it, so concurrent agents in one process (sub-agents run as tasks)
each stamp their own name, and it follows the work into worker threads (`asyncio.to_thread`
copies the context).

context.jsonl lines stay each message's own JSON (the format's contract); the `context`
event of the batch that wrote a line names its line span and its writer, so every line has
one (`line_writers`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any

from .layout import now_iso
from .records import line_runs

__all__ = [
    "WRITER_FIELD",
    "current_agent",
    "current_session",
    "current_writer",
    "event_record",
    "line_writers",
    "writing_as",
]

WRITER_FIELD = "writer"
"""The key of an event's provenance: `{"agent": name or null, "session": id, "pid": int}`."""

_WRITER: ContextVar[tuple[str | None, str] | None] = ContextVar("ctxoffload_writer", default=None)


@contextlib.contextmanager
def writing_as(agent: str | None, session: str) -> Iterator[None]:
    """Stamp the events written inside this block (in this task and its threads) as
    written by `agent` working in `session`."""
    token = _WRITER.set((agent, session))
    try:
        yield
    finally:
        # An async generator resumed in another context (a consumer that moved between
        # tasks) cannot reset there; that context never saw the value.
        with contextlib.suppress(ValueError):
            _WRITER.reset(token)


def current_writer(session_id: str) -> dict[str, Any]:
    """The writer of an event written now for `session_id`: the agent inside `writing_as`,
    or `{"agent": None, "session": session_id}` for a workspace used on its own; with the
    process id."""
    found = _WRITER.get()
    agent, session = found if found is not None else (None, session_id)
    return {"agent": agent, "session": session, "pid": os.getpid()}


def current_session() -> str | None:
    """The session of the agent working now (inside `writing_as`), or None."""
    found = _WRITER.get()
    return found[1] if found is not None else None


def current_agent() -> str | None:
    """The name of the agent working now (inside `writing_as`), or None (outside any, or
    an adapter that declared no name)."""
    found = _WRITER.get()
    return found[0] if found is not None else None


def event_record(session_id: str, kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """An event as every backend writes it: `time`, `kind`, the fields, then `writer`
    (kept when the fields already carry one, as `emit_event` passes on)."""
    # (A time the fields carry, as `emit_events` passes on, is kept: none made to be replaced.)
    record = {"time": fields["time"] if "time" in fields else now_iso(), "kind": kind, **fields}
    if WRITER_FIELD not in record:
        record[WRITER_FIELD] = current_writer(session_id)
    return record


def line_writers(events: Iterable[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Who wrote each line of a session's context.jsonl, from its `context` events:
    line number (1-based) -> the writer of the batch that holds it. Lines of batches
    recorded without a writer (an older release) are missing."""
    found: dict[int, dict[str, Any]] = {}
    for event in events:
        writer = event.get(WRITER_FIELD)
        if event.get("kind") != "context" or not isinstance(writer, dict):
            continue
        for first, last in line_runs(event.get("lines"), event.get("spans")):
            for line in range(first, last + 1):
                found.setdefault(line, writer)
    return found
