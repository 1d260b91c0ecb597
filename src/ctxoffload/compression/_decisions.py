"""What a `Projector` decided about a host's history, as the session's record holds it: the
summary that stands for some of its messages (a `projection` event), the note after a
provider's compaction item (`provider_compaction`), and the messages sent cut
(`projection_cut`).

One path for every decision: the projector that makes one writes it as an event and takes it
from that event (`Decisions.take`), as a restarted process takes it from the session's record
(`Decisions.read`). What a decision sends is what its event holds, so an unbroken run and a
restarted one send the same bytes on every call after the restart.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._disk.events import EventKind, ProjectionCut
from .._disk.records import is_count
from ..formats import to_msgs
from ..messages import Msg

__all__ = ["Cover", "Decisions", "ProviderCut", "cut_record"]


@dataclass(frozen=True)
class ProviderCut:
    """A provider's compaction item in the history (`_provider_compaction.py`): the message
    whose key is `key` carries it; the messages before it (after the leading system ones)
    are not sent, and `note` is sent right after the item's turn."""

    key: str
    note: Msg


@dataclass(frozen=True)
class Cover:
    """A summary's decision: the history's messages from `start` (after the leading system
    messages) up to `start + count` are sent as `messages`; `last_key` is the key of the
    last one covered, so a history that is not the one summarised is seen."""

    start: int
    count: int
    last_key: str
    messages: tuple[Msg, ...]


@dataclass(frozen=True)
class _Cut:
    """A message sent cut: `given` is the digest of the message as the host gave it
    (`given_digest`), `message` what is sent for it."""

    given: str
    message: Msg


class Decisions:
    """A projector's decisions for one session, each taken from its event (`take`).

    Attributes:
        cover: the latest summary decision, if any.
        provider: the latest provider compaction's note, if any.
    """

    def __init__(self) -> None:
        self.cover: Cover | None = None
        self.provider: ProviderCut | None = None
        self._cuts: dict[str, _Cut] = {}

    def read(self, events: Iterable[Mapping[str, Any]]) -> None:
        """Take every decision a session's record holds (its events, oldest first).

        A decision's event of a shape this version does not read (a newer release's, a
        damaged line) is skipped: the decision before it stays, and none at all sends the
        history as it is.
        """
        for event in events:
            self.take(event)

    def take(self, event: Mapping[str, Any]) -> None:
        """Apply the decision `event` records (any other event changes nothing)."""
        kind = event.get("kind")
        if kind == EventKind.PROJECTION:
            self.cover = _cover_of(event) or self.cover
        elif kind == EventKind.PROVIDER_COMPACTION:
            self.provider = _provider_cut(event) or self.provider
        elif kind == EventKind.PROJECTION_CUT:
            self._cuts.update(_cuts_of(event))

    def cut_for(self, key: str, given: Msg) -> Msg | None:
        """What is sent for the history's message `given` (known by `key`) when it was sent
        cut; None when it was not, or when the host changed it since (not the message cut)."""
        cut = self._cuts.get(key)
        if cut is None or cut.given != given_digest(given):
            return None
        return cut.message

    def keep_only(self, keys: Collection[str]) -> None:
        """Forget the cuts of messages a host dropped from its history (bounded memory)."""
        if len(self._cuts) > len(keys):
            self._cuts = {k: v for k, v in self._cuts.items() if k in keys}


def cut_record(cuts: Iterable[tuple[str, Msg, Msg]]) -> ProjectionCut:
    """The event of messages sent cut from now on: each `(key, given, sent)`, the message's
    key across calls, the message as the host gave it and what is sent for it."""
    return ProjectionCut(
        cuts=[
            {
                "key": key,
                "given": given_digest(given),
                "message": sent.model_dump(mode="json"),
            }
            for key, given, sent in cuts
        ]
    )


def given_digest(msg: Msg) -> str:
    """What says a host's message is the one a decision was made for: a digest of what it
    says (its role, name and content), not of when it was made or what marks it carries
    (a host may rebuild its messages on every call, with new timestamps and no metadata)."""
    text = msg.model_dump_json(include={"role", "name", "content"})
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _cover_of(event: Mapping[str, Any]) -> Cover | None:
    """The summary decision a `projection` event records; None when it does not read as one
    (a field missing or of another type, no message, a message `to_msgs` refuses)."""
    start, count = event.get("start"), event.get("covers")
    last_key, messages = event.get("last_key"), event.get("messages")
    if not (is_count(start) and is_count(count) and count > 0 and isinstance(last_key, str)):
        return None
    if not isinstance(messages, list) or not messages:
        return None  # a summary that stands for messages is sent in their place
    try:
        sent = tuple(to_msgs(messages))
    except (ValueError, TypeError):  # InvalidContent, pydantic's ValidationError
        return None
    return Cover(start, count, last_key, sent)


def _provider_cut(event: Mapping[str, Any]) -> ProviderCut | None:
    """The note a `provider_compaction` event records, with the key of the message holding
    the item; None when it does not read as one."""
    note, key = event.get("note"), event.get("item_key")
    if not isinstance(note, dict) or not isinstance(key, str):
        return None
    try:
        return ProviderCut(key, Msg.model_validate(note))
    except (ValueError, TypeError):  # pydantic's ValidationError is a ValueError
        return None


def _cuts_of(event: Mapping[str, Any]) -> dict[str, _Cut]:
    """The cuts a `projection_cut` event records, by key; each that does not read as one (a
    field missing or of another type, a message that is no `Msg`) is left out."""
    cuts = event.get("cuts")
    found: dict[str, _Cut] = {}
    for cut in cuts if isinstance(cuts, list) else ():
        if not isinstance(cut, dict):
            continue
        key, given, message = cut.get("key"), cut.get("given"), cut.get("message")
        if not (isinstance(key, str) and isinstance(given, str) and isinstance(message, dict)):
            continue
        try:
            found[key] = _Cut(given, Msg.model_validate(message))
        except (ValueError, TypeError):
            continue
    return found
