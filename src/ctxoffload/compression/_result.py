"""What a compression did: `CompressionResult`, returned by `Compressor.maybe_compress` and the
pipeline's runs."""

from __future__ import annotations

from dataclasses import dataclass

from .._disk.wording import spans_text
from ..messages import Msg
from ._summary_model import Summary

__all__ = ["CompressionResult"]


@dataclass
class CompressionResult:
    """What `Compressor.maybe_compress` did.

    Attributes:
        messages: the context to send next (unchanged when nothing was compressed).
        compressed: whether older messages were replaced by a summary.
        reason: why, in a few words ("below trigger", "compressed", "offload failed", ...).
        tokens_before: tokens of the context given: exact, or, when the count stopped past
            the trigger (`ContextTokenTracker.count_past`), an estimate.
        tokens_after: tokens of `messages`.
        reference: where the compressed messages went (context.jsonl), if anywhere.
        line_span: the lines of that file this compression's messages are on, from the
            first to the last.
        spans: those lines exactly, as runs of consecutive lines: more than one when some
            were in the file already (a run killed in the middle of a compression, resumed),
            with other messages between; `spans_text()` spells them.
        summary: the new summary.
        summary_source: "model" or "extractive".
        compressed_messages: how many messages left the context.
        tokens_before_exact: whether `tokens_before` is an exact count.
        tokens_before_bounds: when it is an estimate, the least and the most the exact
            count can be (see `TokenCount`); None when it is exact.
    """

    messages: list[Msg]
    compressed: bool
    reason: str
    tokens_before: int
    tokens_after: int
    reference: str | None = None
    line_span: tuple[int, int] | None = None
    summary: Summary | None = None
    summary_source: str | None = None
    compressed_messages: int = 0
    tokens_before_exact: bool = True
    tokens_before_bounds: tuple[int, int] | None = None
    spans: tuple[tuple[int, int], ...] = ()

    def spans_text(self) -> str:
        """The lines the compressed messages are on, as text: `"1-40, 52-60"`, or `""`."""
        return spans_text(self.spans)
