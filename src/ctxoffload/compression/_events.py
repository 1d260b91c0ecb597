"""Writing an event: to the offloader's record, to the `ctxoffload` logger, to `on_event`."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .._disk.events import record_of
from .._disk.writer import event_record
from ..workspace import EventLog, Offloader

__all__ = ["EventCallback", "emit_event"]

logger = logging.getLogger("ctxoffload")

EventCallback = Callable[[dict[str, Any]], Awaitable[None] | None]
"""Receives each event dict as it is written; a plain function or an `async def` one."""


async def emit_event(
    offloader: Offloader | None,
    session_id: str,
    on_event: EventCallback | None,
    kind: str,
    fields: Mapping[str, Any],
) -> dict[str, Any]:
    """Write one event through `offloader.record_event`, log it, and tell `on_event`.

    Neither a failed write nor a failing callback is raised: the record serves the run and
    must never stop it. An offloader that is not an `EventLog` (a custom one with only the
    three `Offloader` methods) keeps no record.

    Returns:
        The event as written: `time`, `kind`, then `fields`.
    """
    event = event_record(session_id, kind, dict(fields))
    _log_event(event)
    if isinstance(offloader, EventLog):
        try:
            # `time` is passed on so that the line written and the dict `on_event` gets agree.
            stamped = {k: v for k, v in event.items() if k != "kind"}
            await offloader.record_event(session_id, kind, **stamped)
        except Exception as exc:
            logger.warning("could not record a %s event: %s", kind, exc)
    if on_event is not None:
        try:
            result = on_event(event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.warning("the on_event callback failed on a %s event", kind, exc_info=True)
    return event


def _log_event(event: Mapping[str, Any]) -> None:
    """Say the event to the `ctxoffload` logger: its sentence, with its notes, at the level
    its kind declares (INFO for what changed the context, WARNING for a request over the
    window, DEBUG for the rest)."""
    record = record_of(event)
    level = getattr(logging, record.log_level)
    if logger.isEnabledFor(level):
        logger.log(level, "%s", record.one_line())
