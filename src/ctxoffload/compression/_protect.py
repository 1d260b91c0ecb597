"""Which messages no context manager may touch: the system prompt, the latest user request,
pinned messages, and the turns that hold a pin.

Every manager (the compressor's split, `SlidingWindow`, `ImageLimit`, `ClearToolUses`,
`ClearThinking`) asks `Protected` before it moves, summarises, clears or cuts a message.
A pin is a mark in the message's metadata (`PIN_MARK`), so it travels with the message into
context.jsonl, events.jsonl and state.json, and a resumed session has its pins back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .._disk.layout import PIN_MARK
from ..messages import Msg
from ._turns import is_user_request, turns

__all__ = ["Protected", "is_pinned", "pinned_copy", "unpinned_copy"]


def is_pinned(msg: Msg) -> bool:
    """Whether `msg` carries a pin (see `PipelineRun.pin`)."""
    return isinstance(msg.metadata.get(PIN_MARK), dict)


def pinned_copy(msg: Msg, by: str) -> Msg:
    """`msg` with a pin (`by` says who pinned it: "api" or "agent"); `msg` if it has one."""
    if is_pinned(msg):
        return msg
    return msg.model_copy(update={"metadata": {**msg.metadata, PIN_MARK: {"by": by}}})


def unpinned_copy(msg: Msg) -> Msg:
    """`msg` without its pin; `msg` if it has none."""
    if not is_pinned(msg):
        return msg
    metadata = {k: v for k, v in msg.metadata.items() if k != PIN_MARK}
    return msg.model_copy(update={"metadata": metadata})


@dataclass(frozen=True)
class Protected:
    """The ids of the messages of one context that no manager may touch.

    Computed once per `pre_llm` (`PipelineRun.protected`) and by the compressor's split.

    Attributes:
        ids: the system prompt, the latest user request, each pinned message and every
            message of a turn that holds a pin (a tool call stays with its results).
        pinned_ids: the pinned messages and their turns only (what counts against
            `pin_ratio`, and what a manager never cuts).
    """

    ids: frozenset[str]
    pinned_ids: frozenset[str]

    @classmethod
    def of(cls, messages: Sequence[Msg]) -> Protected:
        """The protected messages of `messages` (a whole context, or its conversation)."""
        pinned: set[str] = set()
        # The turns are worked out only when something is pinned (a long history, else,
        # would be grouped on every split for nothing).
        if any(is_pinned(m) for m in messages):
            for start, end, _ in turns(messages):
                group = messages[start:end]
                if any(is_pinned(m) for m in group):
                    pinned.update(m.id for m in group)
        implicit = {m.id for m in messages[:1] if m.role == "system"}
        latest = next((m for m in reversed(messages) if is_user_request(m)), None)
        if latest is not None:
            implicit.add(latest.id)
        return cls(frozenset(pinned | implicit), frozenset(pinned))

    def __contains__(self, msg: object) -> bool:
        return isinstance(msg, Msg) and msg.id in self.ids

    def is_pinned(self, msg: Msg) -> bool:
        """Whether `msg` is pinned or in a turn that holds a pin (never cut, never moved)."""
        return msg.id in self.pinned_ids

    def split_off(self, leaving: Iterable[Msg]) -> tuple[list[Msg], list[Msg]]:
        """(the messages of `leaving` that may leave, the pinned ones that stay), in order.

        The latest user request is not among either's pinned list: the split keeps it in
        a place of its own (`Split.pinned`).
        """
        free: list[Msg] = []
        kept: list[Msg] = []
        for msg in leaving:
            (kept if msg.id in self.pinned_ids else free).append(msg)
        return free, kept
