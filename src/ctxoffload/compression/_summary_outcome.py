"""`SummaryOutcome`: a summary and how it was made, as a compaction's record says it.

Who wrote it (the model, or the extract and why), how the model's reply was read
(structured JSON or parsed from prose, headings or tags), how many requests it took, and
which fields were filled from the extract or kept though the reply was cut off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model import Usage
from ._summary_model import Summary

__all__ = ["Attempts", "SummaryOutcome", "add_usage"]


def add_usage(total: dict[str, int] | None, usage: Usage) -> dict[str, int]:
    """`total` with one reply's `usage` added: input, output and (where reported) cached
    input tokens, as the record keeps them."""
    added = dict(total or {"input_tokens": 0, "output_tokens": 0})
    added["input_tokens"] += usage.input_tokens
    added["output_tokens"] += usage.output_tokens
    if usage.cached_input_tokens is not None:
        added["cached_input_tokens"] = (
            added.get("cached_input_tokens", 0) + usage.cached_input_tokens
        )
    return added


@dataclass
class Attempts:
    """What asking the summary model came to so far, across chunks and retries.

    Attributes:
        calls: the requests made.
        error: the last failure, as `Type: message` (cut to 300 characters).
        reply: how the last valid reply was written (`SummaryReply.shape`).
        filled: the fields the last valid reply lacked, taken from the extract.
        cut: the fields the last valid reply was cut off in (kept, marked).
        usage: the tokens every reply so far reported, added up (`used`); None while no
            reply reported any.
    """

    calls: int = 0
    error: str | None = None
    reply: str | None = None
    filled: tuple[str, ...] = ()
    cut: tuple[str, ...] = ()
    usage: dict[str, int] | None = None

    def used(self, usage: Usage | None) -> None:
        """Add what one reply reported (a reply that was then refused cost its tokens too)."""
        if usage is None:
            return
        self.usage = add_usage(self.usage, usage)

    def failed(self, exc: BaseException) -> None:
        """Note `exc` as the last failure."""
        text = f"{type(exc).__name__}: {exc}"
        self.error = text if len(text) <= 300 else text[:299] + "…"


@dataclass
class SummaryOutcome:
    """A summary and how it was made.

    Attributes:
        summary: the summary.
        source: "model" or "extractive".
        model_calls: the requests made to the summary model, retries included.
        chunks: how many parts the messages sent were split into.
        sent: how many of the messages (the newest) the summary model was sent.
        sent_tokens: what those cost, as the requests were sized.
        folded: how many older messages were folded in as an extractive summary instead
            (see `ContextConfig.summary_input_tokens`).
        reply: for a model's summary, how its reply was written: "json" (the object alone,
            as structured output gives it), "prose", "headings" or "tags" (parsed).
        filled: the fields the model's reply lacked, taken from the extractive summary.
        cut: the fields the model's reply was cut off in, kept as far as they arrived.
        fallback: for an extractive summary, why: "no_model", "no_messages" (nothing to
            send it), "no_time" (none left of the summary timeout), "timeout", "failed" (no
            valid reply) or "window" (the summary model's window cannot hold a request);
            `ctxoffload show` words each.
        error: the summary model's last error, when it failed.
        timeout: the `summary_timeout` the summary model ran out of (the compaction's whole
            allowance; the model had what was left of it).
        usage: the tokens the summary model's replies reported, added up (input, output,
            cached input); None where none reported any.
    """

    summary: Summary
    source: str  # "model" or "extractive"
    model_calls: int
    chunks: int
    sent: int = 0
    sent_tokens: int = 0
    folded: int = 0
    reply: str | None = None
    filled: tuple[str, ...] = field(default=())
    cut: tuple[str, ...] = field(default=())
    fallback: str | None = None
    error: str | None = None
    timeout: float | None = None
    usage: dict[str, int] | None = None

    def report(self) -> dict[str, int]:
        """What the summary model was sent, for a compaction's event."""
        return {"sent": self.sent, "tokens": self.sent_tokens, "folded": self.folded}

    def origin(self, model: str | None, door: str | None = None) -> dict[str, Any]:
        """Who wrote the summary and how, for a compaction's event (`summary_origin`).

        Args:
            model: the summary model's name as the record gives it (`model_label`), or None.
            door: the door the summary was written through; None until doors say it.
        """
        origin: dict[str, Any] = {
            "source": self.source,
            "model": model if self.source == "model" else None,
            "door": door,
            "attempts": self.model_calls,
            "chunks": self.chunks,
        }
        if self.usage is not None:
            origin["usage"] = self.usage
        if self.source == "model":
            origin |= {"reply": self.reply, "filled": list(self.filled), "cut": list(self.cut)}
        else:
            origin |= {"fallback": self.fallback, "error": self.error, "timeout": self.timeout}
        return origin
