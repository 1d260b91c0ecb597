"""The split: which messages are compressed and which stay in the context verbatim.

Messages are grouped into *turns* that must stay together: an assistant message that calls
tools plus the messages carrying those calls' results. The newest turns that fit in the
reserve stay; everything older is compressed. A turn whose calls have not all been answered
yet is unfinished and always stays. The latest user request always stays verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..messages import Msg
from ._protect import Protected
from ._turns import is_user_request, newest_turns, turns

__all__ = [
    "MessageCounter",
    "Split",
    "SplitByCount",
    "SplitByTokens",
    "SplitStrategy",
    "is_user_request",
    "split_by_count",
    "split_for_compression",
    "turns",
]


class MessageCounter(Protocol):
    """Anything that counts one message's tokens (a `TokenCounter` or a tracker)."""

    def count_message(self, msg: Msg) -> int:
        """Tokens `msg` costs in a context, overhead included."""
        ...


@dataclass
class Split:
    """The outcome of a split.

    Attributes:
        older: messages to compress, oldest first.
        kept: messages that stay verbatim, oldest first.
        pinned: the latest user request when it would otherwise have been compressed; it
            stays in the context, right after the summary and the pins.
        pins: the pinned messages (and the turns holding them) that would otherwise have
            been compressed, oldest first; they stay in the context, right after the summary.
    """

    older: list[Msg] = field(default_factory=list)
    kept: list[Msg] = field(default_factory=list)
    pinned: Msg | None = None
    pins: list[Msg] = field(default_factory=list)


def split_for_compression(
    messages: Sequence[Msg],
    counter: MessageCounter,
    reserve_tokens: int,
    unseen_from: int | None = None,
) -> Split:
    """Keep the newest turns within `reserve_tokens`; the rest is to be compressed.

    Args:
        messages: the conversation without the system prompt and without an earlier summary.
        counter: counts each message's tokens (cached by the caller's counter if it caches).
        reserve_tokens: the budget for verbatim messages.
        unseen_from: the index of the first message the model has not seen yet (the start of
            a turn); the turns from there on stay whatever they cost, and older turns fill
            what is left of the reserve.
    """
    keep_from = len(messages)
    used = 0
    for index, (start, end, finished) in enumerate(newest_turns(messages)):
        cost = sum(counter.count_message(m) for m in messages[start:end])
        # The newest turn, if its calls are unanswered, is mid-execution: it stays whatever
        # it costs. (An unanswered call further back is a dead one and may be compressed.)
        mid_execution = index == 0 and not finished
        unseen = unseen_from is not None and end > unseen_from
        if not (mid_execution or unseen) and used + cost > reserve_tokens:
            break
        used += cost
        keep_from = start
    return _split_at(messages, keep_from)


def split_by_count(
    messages: Sequence[Msg],
    summary_ratio: float,
    preserve_recent: int,
    unseen_from: int | None = None,
) -> Split:
    """Compress the oldest `summary_ratio` of the messages, keeping `preserve_recent`.

    The count is rounded down to a turn boundary, so a tool call never leaves its results
    behind; when the first turn alone is longer, it is taken whole if `preserve_recent`
    messages still remain after it. The turns from `unseen_from` on, and an unfinished
    newest turn, always stay.

    Args:
        messages: the conversation without the system prompt and without earlier notes.
        summary_ratio: the share of the messages to compress (Strands' and OpenSearch's
            `summary_ratio`).
        preserve_recent: the fewest messages kept verbatim (`preserve_recent_messages`).
        unseen_from: the index of the first message the model has not seen yet.
    """
    n = len(messages)
    limit = min(max(1, int(n * summary_ratio)), n - preserve_recent)
    groups = turns(messages)
    starts = [start for start, _, _ in groups]
    if groups and not groups[-1][2]:
        limit = min(limit, groups[-1][0])
    if unseen_from is not None:
        limit = min(limit, unseen_from)
    boundary = max((s for s in starts if s <= limit), default=0)
    if boundary == 0 and limit > 0:
        # The first turn is longer than the share: take it whole if enough remains after it
        # (limit > 0 means an unseen or unfinished turn starts after it, not inside it).
        later = [s for s in starts if s > 0]
        if later and later[0] <= n - preserve_recent:
            boundary = later[0]
    return _split_at(messages, boundary)


def _split_at(messages: Sequence[Msg], boundary: int) -> Split:
    """Messages before `boundary` are older, the rest kept; the protected ones among the older
    (see `Protected`) stay: the pinned ones as `pins`, the latest user request as `pinned`."""
    protected = Protected.of(messages)
    older, pins = protected.split_off(messages[:boundary])
    kept = list(messages[boundary:])
    pinned: Msg | None = None
    latest = next((m for m in reversed(messages) if is_user_request(m)), None)
    if latest is not None and any(m is latest for m in older):
        older = [m for m in older if m is not latest]
        pinned = latest
    return Split(older=older, kept=kept, pinned=pinned, pins=pins)


class SplitStrategy(Protocol):
    """How a compression divides the conversation: which messages leave and which stay.

    Whatever the strategy, the compressor keeps the turns the model has not seen (from
    `unseen_from` on) and an unfinished newest turn, and never separates a tool call from
    its results; a strategy only chooses how much older history stays.
    """

    @property
    def fits_reserve(self) -> bool:
        """Whether what stays is chosen to fit the reserve (`reserve_ratio x window`).

        Then a tool result's preview larger than the reserve could never stay beside its
        call, and the compressor says so once.
        """
        ...

    def split(
        self,
        messages: Sequence[Msg],
        counter: MessageCounter,
        reserve_tokens: int,
        unseen_from: int | None,
    ) -> Split:
        """Divide `messages` (the conversation without the system prompt and notes).

        Args:
            messages: the conversation, oldest first.
            counter: counts each message's tokens.
            reserve_tokens: the budget for verbatim messages.
            unseen_from: the index of the first message the model has not seen yet.
        """
        ...


@dataclass(frozen=True)
class SplitByTokens:
    """Keep the newest turns within the reserve, compress the rest (`split_for_compression`).

    The split of `ContextConfig`: the context is compressed past `trigger_ratio` of the
    window and what stays fits `reserve_ratio` of it.
    """

    fits_reserve = True

    def split(
        self,
        messages: Sequence[Msg],
        counter: MessageCounter,
        reserve_tokens: int,
        unseen_from: int | None,
    ) -> Split:
        """The newest turns within `reserve_tokens` stay; see `split_for_compression`."""
        return split_for_compression(messages, counter, reserve_tokens, unseen_from)


@dataclass(frozen=True)
class SplitByCount:
    """Compress the oldest `summary_ratio` of the messages, keeping `preserve_recent`.

    The split of a `Summarization(summary_ratio=..., preserve_recent_messages=...)` manager
    (Strands' and OpenSearch's); see `split_by_count`.

    Attributes:
        summary_ratio: the share of the messages to compress.
        preserve_recent: the fewest messages kept verbatim.
    """

    summary_ratio: float
    preserve_recent: int
    fits_reserve = False

    def split(
        self,
        messages: Sequence[Msg],
        counter: MessageCounter,
        reserve_tokens: int,
        unseen_from: int | None,
    ) -> Split:
        """The oldest share leaves, rounded to a turn; the reserve is not used here."""
        return split_by_count(messages, self.summary_ratio, self.preserve_recent, unseen_from)
