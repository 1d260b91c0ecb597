"""What CrewAI's own compaction of a tool result leaves the door: `Deferral`.

CrewAI 1.15's executor (`Agent.use_better_compaction`, on by default) takes a tool result its
LLM counts over a quarter of its usable window (`BaseLLM.is_tool_result_overflowing_threshold`)
out of the conversation into a temporary file of its own, deleted when the run ends, and
leaves a pointer to it. It does so after the door's `after_tool_call` has left the result's
head and the notice naming the file that holds it whole: with `BaseLLM`'s default window
(4,096 tokens, a threshold of 1,024) the 3,000-token head of the guide became CrewAI's pointer,
and the model never read the notice. So what the door leaves must stay under that threshold,
counted as CrewAI counts it (its LLM's `get_input_tokens_count`: a provider's count, LiteLLM's
tokenizer, or one token per four characters), and a result CrewAI would take out the door
stores first, whole, so that nothing ends in a file deleted with the run.
"""

from __future__ import annotations

import importlib
from typing import Any

from .._tokens.bounds import within_bytes
from ..tokens import TokenCounter

__all__ = ["Deferral"]

_AIM = 0.8
"""The share of CrewAI's threshold a cut aims at: the notice, which no head shrinks, and a
count that is not CrewAI's (this door counts with the model's tokenizer) fit in the rest."""

_FLOOR = 64
"""The fewest tokens a cut is given, however small the threshold (the notice then alone)."""


class Deferral:
    """CrewAI's deferral of the tool results of one agent's LLM.

    Args:
        llm: the LLM whose executor passes a result on (`agent.llm`).
        threshold: its deferral threshold, in its own count.
    """

    def __init__(self, llm: Any, threshold: float) -> None:
        self.llm = llm
        self.threshold = threshold

    @classmethod
    def of(cls, agent: Any) -> Deferral | None:
        """The deferral of `agent`'s tool results; None where CrewAI defers none (its
        `use_better_compaction` off, no LLM, an LLM without native tool calls: only the
        native path defers) or its LLM cannot say its window."""
        llm = getattr(agent, "llm", None)
        if not getattr(agent, "use_better_compaction", False) or llm is None:
            return None
        supports = getattr(llm, "supports_function_calling", None)
        if not callable(getattr(llm, "is_tool_result_overflowing_threshold", None)):
            return None
        try:
            if not callable(supports) or not supports():
                return None
            window = int(llm.get_context_window_size())
        except Exception:  # an LLM of the user's that fails to say: CrewAI's own check fails too
            return None
        return cls(llm, window * _share()) if window > 0 else None

    def first_limit(self, limit: int) -> int:
        """The tokens a cut is first given: `limit` (the config's), or less, where a count
        like CrewAI's would put what is left over its threshold."""
        return max(_FLOOR, min(limit, int(self.threshold * _AIM)))

    def passes(self, text: str) -> tuple[bool, int]:
        """Whether CrewAI passes `text` on as it is (and its count of it, 0 when it was not
        asked: a text surely under the threshold by its size, or a count that failed, in
        which case CrewAI defers nothing either)."""
        if within_bytes(text, int(self.threshold * _AIM)):
            return True, 0  # every count here is at most a token per byte
        try:
            over, count = self.llm.is_tool_result_overflowing_threshold(text)
        except Exception:
            return True, 0
        return not over, int(count)

    def next_limit(self, text: str, count: int, counter: TokenCounter) -> int:
        """The tokens a cut is given once CrewAI counted `count` for `text` (what the last
        cut left, or the result): the last one scaled by how CrewAI's count runs against
        `counter`'s on that text."""
        ours = counter.count_text(text)
        return max(_FLOOR, int(ours * self.threshold * _AIM / max(1, count)))


def _share() -> float:
    """The share of the LLM's usable window over which CrewAI defers a tool result (its
    `TOOL_RESULT_CONTEXT_WINDOW_THRESHOLD`)."""
    base_llm = importlib.import_module("crewai.llms.base_llm")
    return float(getattr(base_llm, "TOOL_RESULT_CONTEXT_WINDOW_THRESHOLD", 0.25))
