"""What a restarted process takes up from a session's record so that it goes on as an
unbroken run would (`Compressor.resume`, called by a `Projector` at its first call and by an
`Agent` resumed from its saved state): the files stored whole since the latest compaction
(the next summary lists them), and what the latest model calls were sent (the messages after
those are the fresh ones, which a compaction keeps and cuts to fit rather than moves out).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._disk.events import EventKind
from ..messages import Msg
from ._summary_message import Artifact, stored_since_compaction

__all__ = ["Taken", "take_up"]


class Taken:
    """What `take_up` read back from a record.

    Attributes:
        stored: the files stored whole since the latest compaction, oldest first.
        before: the ids the model call before the latest was sent; None when there was none.
        latest: the messages the latest model call was sent, in order; empty when none was
            recorded (or its messages are not all in the record).
    """

    __slots__ = ("before", "latest", "stored")

    def __init__(self, stored: list[Artifact], before: set[str] | None, latest: list[Msg]) -> None:
        self.stored = stored
        self.before = before
        self.latest = latest


def take_up(events: Iterable[Mapping[str, Any]]) -> Taken:
    """Read a session's record (its events, oldest first, each `is_event`) for a restarted
    process. A line of another shape (a newer release's, a damaged one) is skipped."""
    events = list(events)
    messages: dict[str, Mapping[str, Any]] = {}
    calls: list[list[str]] = []
    for event in events:
        kind = event.get("kind")
        if kind == EventKind.MESSAGE:
            message = event.get("message")
            if isinstance(message, dict) and isinstance(message.get("id"), str):
                messages[message["id"]] = message
        elif kind == EventKind.MODEL_CALL:
            given = event.get("messages")
            if not isinstance(given, list) or not all(isinstance(i, str) for i in given):
                continue
            # A retry (the same messages again) is the same call's next attempt.
            if given and (not calls or calls[-1] != given):
                calls.append(given)
    latest = _messages(calls[-1], messages) if calls else []
    before = set(calls[-2]) if len(calls) > 1 and latest else None
    return Taken(stored_since_compaction(events), before, latest)


def _messages(ids: Sequence[str], messages: Mapping[str, Mapping[str, Any]]) -> list[Msg]:
    """The messages of a model call as the record holds them; none unless every one reads."""
    found: list[Msg] = []
    for msg_id in ids:
        message = messages.get(msg_id)
        if message is None:
            return []
        try:
            found.append(Msg.model_validate(message))
        except (ValueError, TypeError):  # pydantic's ValidationError is a ValueError
            return []
    return found
