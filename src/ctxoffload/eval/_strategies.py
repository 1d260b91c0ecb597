"""The context a probe is asked after, under each strategy a user can choose, built from one
recorded session: its compactions say what left and when; each strategy says what the model
would have been sent instead.

- `summary`: what the session's compactions sent (the summary naming the files, the artifact
  index, the messages kept): ctxoffload as recorded.
- `clearing`: nothing summarised; every message that left stays, each tool output replaced by
  a placeholder naming the file that holds it (ctxoffload's clearing of old tool outputs).
- `window`: a sliding window: the messages kept, no summary, and no copy of what left, so the
  read-back tools find nothing.
- `langchain`: what LangChain's summarization does: the messages that left are summarised by
  the model under evaluation, with a prompt of the same intent as LangChain's (our own
  words, `SUMMARY_PROMPT`), the summary replaces them, and nothing is kept on disk.
"""

from __future__ import annotations

import copy
from typing import Any

from ..messages import Msg
from ..model import ChatModel
from ._record import Compaction, SessionRecord

__all__ = [
    "STRATEGIES",
    "SUMMARY_PROMPT",
    "keeps_files",
    "strategy_context",
    "summarised_context",
    "write_summary",
]

STRATEGIES = ("summary", "clearing", "window", "langchain")
"""The strategies `--strategies` compares, in the order reports list them."""

_SUMMARY_OPENINGS = ("<context_summary>", "<conversation_summary>")


def keeps_files(strategy: str) -> bool:
    """Whether a strategy keeps what left readable in the workspace (a sliding window keeps
    no copy)."""
    return strategy not in ("window", "langchain")


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
    if strategy in ("window", "langchain"):
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


SUMMARY_PROMPT = """\
The conversation below, between a user and an AI agent using tools, is about to be removed \
from the agent's context to make room; your summary will stand in its place, and nothing else \
of it will be kept. Write the summary the agent needs to carry on: the user's goal and \
constraints, what has been done and what it showed, what is still to do. Keep exact names, \
paths, commands and numbers that matter. Reply with the summary only.

{previous}<conversation>
{conversation}
</conversation>"""
"""The summarization prompt of the `langchain` strategy: the intent of LangChain's
summarization (replace older messages with a summary the agent continues from), in our own
words."""

SUMMARY_OPENING = "A summary of the conversation so far, which was removed from your context:"
_OUTPUT_CHARS = 2_000
"""What of one tool output the summariser sees: its first characters (LangChain summarises
the messages themselves; a huge output would not fit a summary call either)."""
_CONVERSATION_CHARS = 16_000
"""The most the summariser is sent of the messages leaving, newest kept (about 4,000 tokens,
LangChain's default budget for the messages it summarises)."""


def _plain(message: dict[str, Any], record: SessionRecord) -> str:
    role = str(message.get("role"))
    parts: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "tool_call":
            parts.append(f"(calls {block.get('name')} with {block.get('input')})")
        elif kind == "tool_result":
            whole = record.stored_text(str(block.get("id")))
            output = whole if whole is not None else str(block.get("output"))
            cut = output[:_OUTPUT_CHARS] + ("..." if len(output) > _OUTPUT_CHARS else "")
            parts.append(f"(result of {block.get('name')}: {cut})")
    return f"[{role}] " + "\n".join(parts)


def summary_request(
    record: SessionRecord, compaction: Compaction, previous: str | None
) -> list[Msg]:
    """The one message asking for the `langchain` summary at `compaction`: the messages that
    left there (tool outputs whole, as LangChain would hold them, each cut at 2,000
    characters) and the summary written at the compaction before, to be folded in."""
    text = "\n\n".join(
        _plain(message, record) for _, message in compaction.left if not _is_summary(message)
    )
    text = text[-_CONVERSATION_CHARS:]
    before = f"<earlier_summary>\n{previous}\n</earlier_summary>\n\n" if previous else ""
    return [Msg(role="user", content=SUMMARY_PROMPT.format(previous=before, conversation=text))]


async def write_summary(
    model: ChatModel, record: SessionRecord, compaction: Compaction, previous: str | None
) -> tuple[str, int]:
    """The `langchain` summary of what left at `compaction`, written by `model`, and the
    tokens the call spent.

    Raises:
        ModelError: the call failed.
    """
    response = await model.generate(summary_request(record, compaction, previous))
    usage = response.usage
    tokens = usage.input_tokens + usage.output_tokens if usage is not None else 0
    return response.message.text.strip(), tokens


def summarised_context(
    record: SessionRecord, compaction: Compaction, summary: str
) -> list[dict[str, Any]]:
    """The messages a probe is asked after under `langchain`: what opens the context, the
    summary in place of everything that left, then the messages kept."""
    kept = strategy_context(record, compaction, "langchain")
    head = 0
    while head < len(kept) and kept[head].get("role") == "system":
        head += 1
    note = {"role": "user", "content": f"{SUMMARY_OPENING}\n\n{summary}"}
    return [*kept[:head], note, *kept[head:]]
