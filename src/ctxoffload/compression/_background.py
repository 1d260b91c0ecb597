"""A summary made in the background, before the trigger (`background_compaction`).

The summary call is the slowest part of a compaction: a model reading tens of thousands of
tokens. With `ContextConfig(background_compaction=True)`, once the context passes
`trigger_ratio - background_lead` of the window, the compressor stores what would leave
(persist before drop: the lines are in context.jsonl before the summary starts) and starts
its summary in an asyncio task. The agent goes on; at the trigger the ready summary is
applied if it still covers the messages to drop, or the oldest of them when the others still
fit under the trigger. Otherwise (a compression came between, a message that would leave is
now pinned, the span changed) it is dropped as stale, and the summary is made as usual.

Nothing is written by the task itself: the messages were stored before it started, and the
summary is recorded only when applied, so cancelling it (`Compressor.aclose`) leaves no half
of anything. A stored line whose message stays in the context is not written again when it
leaves later (the workspace recognises the message).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..messages import Msg
from ._persisted import Persisted
from ._summarize import SummaryOutcome
from ._summary_model import Summary

__all__ = ["Pending"]


@dataclass
class Pending:
    """A background summary under way.

    Attributes:
        task: the summary's task (its outcome, and how it was asked).
        older: the messages it summarises, oldest first (already stored).
        persisted: where they were stored.
        lines: the line of each, read back (None when the offloader cannot read).
        previous: the summary it folds in (a compression in between makes it stale).
        started: `time.monotonic()` when it started.
    """

    task: asyncio.Task[tuple[SummaryOutcome, str]]
    older: list[Msg]
    persisted: Persisted
    lines: Mapping[str, int] | None
    previous: Summary | None
    started: float = field(default_factory=time.monotonic)

    def covers(self, older: list[Msg]) -> int:
        """How many of `older` (the messages to drop now) it covers from the start: all of
        its messages when they are the first of `older`, in order; else 0."""
        ids = [m.id for m in self.older]
        return len(ids) if [m.id for m in older[: len(ids)]] == ids else 0

    async def cancel(self) -> None:
        """Cancel the task and wait for it to end."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
