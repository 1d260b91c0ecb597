"""Writing an event: to the offloader's record, to the `ctxoffload` logger, to `on_event`."""

from __future__ import annotations

import contextlib
import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from ._disk.events import record_class, record_of
from ._disk.writer import event_record
from ._lease_lost import logged_unless_lease_lost
from .workspace import EventBatches, EventLog, Offloader

__all__ = ["EventCallback", "emit_event", "emit_events"]

logger = logging.getLogger("ctxoffload")

EventCallback = Callable[[dict[str, Any]], Awaitable[None] | None]
"""Receives each event dict as it is written; a plain function or an `async def` one."""

# What each offloader keeps (`_record_of`): a protocol's isinstance check reads every one of
# its methods off the object, 7.5 us for the two asked at each write (every model call).
_RECORDS: weakref.WeakKeyDictionary[Any, tuple[bool, bool]] = weakref.WeakKeyDictionary()


def _record_of(offloader: Offloader | None) -> tuple[bool, bool]:
    """Whether `offloader` keeps a record (`EventLog`), and in one append for several events
    (`EventBatches` too): asked once for each offloader object, when it can be remembered."""
    try:
        known = _RECORDS.get(offloader)
    except TypeError:  # (not weakly referable, or unhashable: asked each time)
        known = None
    if known is None:
        log = isinstance(offloader, EventLog)
        known = (log, log and isinstance(offloader, EventBatches))
        with contextlib.suppress(TypeError):
            _RECORDS[offloader] = known
    return known


async def emit_event(
    offloader: Offloader | None,
    session_id: str,
    on_event: EventCallback | None,
    kind: str,
    fields: Mapping[str, Any],
) -> dict[str, Any]:
    """Write one event through `offloader.record_event`, log it, and tell `on_event`
    (`emit_events` of one).

    Returns:
        The event as written: `time`, `kind`, then `fields`.
    """
    return (await emit_events(offloader, session_id, on_event, [(kind, fields)]))[0]


async def emit_events(
    offloader: Offloader | None,
    session_id: str,
    on_event: EventCallback | None,
    records: Sequence[tuple[str, Mapping[str, Any]]],
) -> list[dict[str, Any]]:
    """Write events, in order, in one append where the offloader can (`EventBatches`), else
    one by one through `record_event`; log each, and tell `on_event` of each.

    Neither a failed write nor a failing callback is raised: the record serves the run and
    must never stop it. An offloader that is not an `EventLog` (a custom one with only the
    three `Offloader` methods) keeps no record.

    Returns:
        The events as written: `time`, `kind`, then the fields.
    """
    events = [event_record(session_id, kind, dict(fields)) for kind, fields in records]
    for event in events:
        _log_event(event)
    # `time` is passed on so that the line written and the dict `on_event` gets agree.
    stamped = [(e["kind"], {k: v for k, v in e.items() if k != "kind"}) for e in events]
    log, batches = _record_of(offloader)
    if batches:
        kinds = ", ".join(sorted({kind for kind, _ in stamped}))
        with logged_unless_lease_lost("could not record a %s event", kinds):
            await cast(EventBatches, offloader).record_events(session_id, stamped)
    elif log:
        for kind, fields in stamped:
            with logged_unless_lease_lost("could not record a %s event", kind):
                await cast(EventLog, offloader).record_event(session_id, kind, **fields)
    if on_event is not None:
        for event in events:
            try:
                result = on_event(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.warning(
                    "the on_event callback failed on a %s event", event["kind"], exc_info=True
                )
    return events


def _log_event(event: Mapping[str, Any]) -> None:
    """Say the event to the `ctxoffload` logger: its sentence, with its notes, at the level
    its kind declares (INFO for what changed the context, WARNING for a request over the
    window, DEBUG for the rest)."""
    # (The level is its kind's: the record, and its sentence, are made only when it is said.)
    level = getattr(logging, record_class(event).log_level)
    if logger.isEnabledFor(level):
        logger.log(level, "%s", record_of(event).one_line())
