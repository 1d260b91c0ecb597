"""Claude Code's session transcript (`~/.claude/projects/<project>/<session>.jsonl`), read into
ctxoffload messages.

Each line of the transcript is one record with a `type`. The `user` and `assistant` records
carry `message`, an Anthropic Messages API message, and a `uuid` of their own; one API response
of the assistant is split over several lines (one per content block) that share its
`message.id`, and those are joined back into one message here. Records of other types
(`summary`, `system`, `file-history-snapshot`, ...) and the records of a subagent
(`isSidechain`) are not messages the main agent's model was sent, and are skipped. A
`system` record with `subtype` `compact_boundary` marks where a compaction of Claude Code's
own started a new context (`after_last_compaction`).

`ctxoffload replay` reads transcripts with `from_claude_code`, and so do the Claude Code hooks
(`ctxoffload hook PreCompact`, `ctxoffload.integrations.claude`): this module is the one home
of the format.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .._times import recorded_at
from ..messages import Msg
from .anthropic import from_anthropic

__all__ = ["COMPACT_BOUNDARY", "after_last_compaction", "from_claude_code"]

COMPACT_BOUNDARY = "compact_boundary"
"""The `subtype` of the `system` record Claude Code writes where a compaction starts a new
context."""


def after_last_compaction(rows: Sequence[Any]) -> Sequence[Any]:
    """The records after the last compaction boundary of Claude Code's (all of them when there
    is none): what its context holds now, and what its next compaction replaces."""
    for index in range(len(rows) - 1, -1, -1):
        row = rows[index]
        if isinstance(row, dict) and row.get("subtype") == COMPACT_BOUNDARY:
            return rows[index + 1 :]
    return rows


def from_claude_code(rows: Iterable[Any]) -> list[Msg]:
    """The messages of a Claude Code transcript, oldest first.

    Args:
        rows: the transcript's records, each line parsed (anything that is not a user or
            assistant record of the main agent is skipped).

    Returns:
        One `Msg` per user record, and one per assistant response (its lines joined). Each
        message's `id` is the `uuid` of its first record, so the same transcript read twice
        gives messages with the same ids (what makes appending it to a context log
        idempotent); `metadata["claude_code"]["uuids"]` lists the records it was read from,
        and its `timestamp` is its first record's.

    Raises:
        InvalidContent: a message's content is not Anthropic content (`from_anthropic`).
    """
    messages: list[dict[str, Any]] = []
    uuids: list[list[str]] = []
    times: list[str | None] = []
    last_id: str | None = None
    for row in rows:
        if not isinstance(row, dict) or row.get("type") not in ("user", "assistant"):
            continue
        if row.get("isSidechain"):
            continue  # a subagent's traffic, not what the main agent's model saw
        message = row.get("message") or {}
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant") or content in (None, "", []):
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        uuid = row.get("uuid")
        # One API response is split over several lines that share its id: join them.
        if role == "assistant" and message.get("id") and message.get("id") == last_id:
            messages[-1]["content"].extend(blocks)
            if isinstance(uuid, str):
                uuids[-1].append(uuid)
            continue
        last_id = message.get("id") if role == "assistant" else None
        messages.append({"role": role, "content": blocks})
        uuids.append([uuid] if isinstance(uuid, str) else [])
        times.append(recorded_at(row.get("timestamp")))
    out: list[Msg] = []
    for msg, ids, when in zip(from_anthropic(messages), uuids, times, strict=True):
        if ids:
            metadata = {**msg.metadata, "claude_code": {"uuids": ids}}
            msg = msg.model_copy(update={"id": ids[0], "metadata": metadata})
        if when is not None:
            msg = msg.model_copy(update={"timestamp": when})
        out.append(msg)
    return out
