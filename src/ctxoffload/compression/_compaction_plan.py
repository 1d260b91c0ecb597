"""The plan of a compaction (what its split step decided), the context in its order, and the
result of a compression that moved nothing out: what `Compaction`'s steps hand each other."""

from __future__ import annotations

from dataclasses import dataclass

from ..messages import Msg
from ..tokens import TokenCount
from ._result import CompressionResult
from ._split import Split

__all__ = ["Plan", "in_order", "unchanged"]


@dataclass
class Plan:
    """What the split step decided: the parts of the context and the reserve."""

    system: Msg | None
    earlier_summary: Msg | None
    earlier_note: Msg | None
    split: Split
    reserve: int
    # Whether `Truncator.fit_fresh` cut the newest turn (its cuts are stored and recorded).
    fresh_cut: bool = False

    @property
    def older(self) -> list[Msg]:
        """The messages that leave, oldest first."""
        return self.split.older

    @property
    def kept(self) -> list[Msg]:
        """The messages that stay verbatim, oldest first."""
        return self.split.kept

    @property
    def pinned(self) -> Msg | None:
        """The latest user request, kept right after the summary, when it was among the
        older messages."""
        return self.split.pinned


def in_order(system: Msg | None, summary: Msg | None, split: Split) -> list[Msg]:
    """A context in its order: system prompt, summary, the pins that would have left (oldest
    first), the latest user request if it would have left, the messages kept."""
    head = [m for m in (system, summary) if m is not None] + split.pins
    return head + ([split.pinned] if split.pinned else []) + split.kept


def unchanged(
    messages: list[Msg], reason: str, counted: TokenCount, tokens_after: int
) -> CompressionResult:
    """The result of a compression that moved nothing out, and why."""
    return CompressionResult(
        messages,
        False,
        reason,
        counted.tokens,
        tokens_after,
        tokens_before_exact=counted.exact,
        tokens_before_bounds=counted.bounds,
    )
