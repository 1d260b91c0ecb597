"""The context a probe is asked after, under each strategy a user can choose, built from one
recorded session: its compactions say what left and when; each strategy says what the model
would have been sent instead.

- `summary`: what the session's compactions sent (the summary naming the files, the artifact
  index, the messages kept): ctxoffload as recorded.
- `clearing`: nothing summarised; every message that left stays, each tool output replaced by
  a placeholder naming the file that holds it (ctxoffload's clearing of old tool outputs).
- `window`: a sliding window: the messages kept, no summary, and no copy of what left, so the
  read-back tools find nothing.
"""

from __future__ import annotations

import copy
from typing import Any

from ._record import Compaction, SessionRecord

__all__ = ["STRATEGIES", "keeps_files", "strategy_context"]

STRATEGIES = ("summary", "clearing", "window")
"""The strategies `--strategies` compares, in the order reports list them."""

_SUMMARY_OPENINGS = ("<context_summary>", "<conversation_summary>")


def keeps_files(strategy: str) -> bool:
    """Whether a strategy keeps what left readable in the workspace (a sliding window keeps
    no copy)."""
    return strategy != "window"


def _is_summary(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, str) and content.lstrip().startswith(_SUMMARY_OPENINGS)


def _cleared(message: dict[str, Any], line: int, record: SessionRecord) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    cleared = copy.deepcopy(message)
    for block in cleared["content"]:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            stored = record.stored.get(str(block.get("id")))
            where = (
                f"{record.folder}/{stored}"
                if stored
                else f"line {line} of {record.folder}/context.jsonl"
            )
            block["output"] = f"[tool output cleared; read it whole in {where}]"
    return cleared


def strategy_context(
    record: SessionRecord, compaction: Compaction, strategy: str
) -> list[dict[str, Any]]:
    """The messages a probe of `compaction` is asked after, under `strategy`.

    Raises:
        ValueError: `strategy` is not one of `STRATEGIES`.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    if strategy == "summary":
        return compaction.sent
    kept = [
        m for m in compaction.sent if m.get("id") != compaction.summary_id and not _is_summary(m)
    ]
    if strategy == "window":
        return kept
    # Clearing never drops a message: everything that left so far comes back, outputs cleared.
    restored = [
        _cleared(message, line, record)
        for earlier in record.compactions[: compaction.number]
        for line, message in earlier.left
        if not _is_summary(message)
    ]
    seen = {m.get("id") for m in restored}
    kept = [m for m in kept if m.get("id") not in seen]
    # What opens the context (the system prompt, a pinned request) stays first.
    head = 0
    while head < len(kept) and kept[head].get("role") in ("system", "user"):
        head += 1
    return [*kept[:head], *restored, *kept[head:]]
