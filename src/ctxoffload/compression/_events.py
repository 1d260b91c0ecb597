"""Writing an event: to the offloader's record, to the `ctxoffload` logger, to `on_event`."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .._disk.read import EventKind, context_event_sentence, fidelity_sentence
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


def _tokens(n: Any) -> str:
    """`259432` -> `'259k'`, `3665` -> `'3.7k'`, `812` -> `'812'`."""
    if not isinstance(n, int) or n < 1000:
        return str(n)
    return f"{n / 1000:.1f}k" if n < 10_000 else f"{n // 1000}k"


def _log_event(event: Mapping[str, Any]) -> None:
    kind = event["kind"]
    if kind == EventKind.TRUNCATION:
        logger.info(
            "truncated %s %s→%s tokens into %s",
            event.get("tool_name") or "a tool result",
            _tokens(event.get("tokens_before")),
            _tokens(event.get("tokens_after")),
            event.get("reference") or "nowhere (no offloader)",
        )
    elif kind == EventKind.COMPRESSION:
        lines = event.get("lines")
        span = f" lines {lines[0]}-{lines[1]}" if isinstance(lines, list) and lines else ""
        fidelity = fidelity_sentence(dict(event))
        logger.info(
            "compressed %s messages, %s→%s tokens, into %s%s (%s summary)%s",
            event.get("messages"),
            _tokens(event.get("tokens_before")),
            _tokens(event.get("tokens_after")),
            event.get("reference") or "nowhere (no offloader)",
            span,
            event.get("summary_source"),
            f"; {fidelity}" if fidelity else "",
        )
    elif kind == EventKind.OVER_WINDOW:
        # The request is sent over the window (or refused): a WARNING, not a note.
        logger.warning("%s", context_event_sentence(dict(event)))
    else:
        sentence = context_event_sentence(dict(event))
        if sentence is not None:
            logger.info("%s", sentence)
        else:
            logger.debug("event %s", kind)
