"""Producing the five-field `Summary` of messages that leave the context.

The summary model answers in JSON matching `ContextConfig.summary_schema`; the reply is
validated and retried. Messages that would not fit in the summary model's window are
summarised in chunks, each folding in the summary so far, so no call overflows. When the
model cannot produce a valid summary, an extractive one is built from the messages
themselves; the text of an error never becomes a summary.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from ..exceptions import ContextOverflowError
from ..messages import DataBlock, Msg, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ..model import ChatModel
from ..tokens import TokenCounter
from ._config import ContextConfig
from ._split import is_user_request
from ._summary_model import Summary

__all__ = ["SummaryOutcome", "extractive_summary", "summarize", "transcript_entry"]

logger = logging.getLogger("ctxoffload")

# Share of the summary model's window given to the messages of one call; the rest holds the
# instructions, the summary so far and the reply.
_CHUNK_SHARE = 0.5
_ENTRY_CHAR_CAP = 20_000


@dataclass
class SummaryOutcome:
    """A summary and how it was made."""

    summary: Summary
    source: str  # "model" or "extractive"
    model_calls: int
    chunks: int


def _short(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"


def transcript_entry(msg: Msg, char_cap: int = _ENTRY_CHAR_CAP) -> str:
    """One message as plain text for the summary model."""
    parts: list[str] = []
    for block in msg.blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ThinkingBlock):
            continue  # private reasoning; the visible text carries what matters
        elif isinstance(block, ToolCallBlock):
            parts.append(
                f"[calls tool {block.name} (id {block.id}) with {json.dumps(block.input)}]"
            )
        elif isinstance(block, ToolResultBlock):
            output = block.output
            if not isinstance(output, str):
                output = "\n".join(
                    p.text if isinstance(p, TextBlock) else f"[{p.media_type or 'data'}]"
                    for p in output
                )
            flag = " (error)" if block.is_error else ""
            parts.append(f"[result of {block.name or 'tool'} (id {block.id}){flag}]\n{output}")
        elif isinstance(block, DataBlock):
            parts.append(f"[{block.media_type or 'data'} {block.name or ''}]".replace(" ]", "]"))
    text = "\n".join(parts)
    if len(text) > char_cap:
        omitted = len(text) - char_cap
        text = text[:char_cap] + f"\n[... {omitted:,} more characters, kept in the context log]"
    return f"<{msg.role}>\n{text}\n</{msg.role}>"


def _chunks(entries: list[str], budget: int, counter: TokenCounter) -> list[list[str]]:
    chunks: list[list[str]] = [[]]
    used = 0
    for entry in entries:
        cost = counter.count_text(entry)
        if cost > budget:
            # Cut by characters so one message can never overflow a call on its own.
            keep = max(200, int(len(entry) * budget / cost * 0.9))
            entry = entry[:keep] + "\n[... cut to fit the summary model's window]"
            cost = counter.count_text(entry)
        if chunks[-1] and used + cost > budget:
            chunks.append([])
            used = 0
        chunks[-1].append(entry)
        used += cost
    return chunks


def _request(config: ContextConfig, previous: Summary | None, entries: list[str]) -> list[Msg]:
    keys = ", ".join(config.summary_schema.get("properties", {}) or Summary.model_fields)
    earlier = (
        "A summary of what came before these messages; fold it into yours, keeping what "
        f"still matters:\n{previous.model_dump_json(indent=1)}\n\n"
        if previous is not None
        else ""
    )
    body = (
        f"{earlier}The messages to summarise, oldest first:\n<conversation>\n"
        + "\n".join(entries)
        + "\n</conversation>\n\n"
        + f"Answer with one JSON object with the keys {keys}, and nothing else."
    )
    return [Msg(role="system", content=config.compression_prompt), Msg(role="user", content=body)]


def _parse(text: str) -> Summary:
    cleaned = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", cleaned, flags=re.DOTALL)
    if fenced:
        cleaned = fenced.group(1)
    data = json.loads(cleaned)
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    summary = Summary.model_validate(data)
    if not any(getattr(summary, name).strip() for name in Summary.model_fields):
        raise ValueError("every field of the summary is empty")
    return summary


async def _ask(
    model: ChatModel, request: list[Msg], config: ContextConfig, calls: list[int]
) -> Summary:
    last_error: Exception | None = None
    for _ in range(config.summary_max_retries + 1):
        calls[0] += 1
        try:
            reply = await model.generate(request, response_schema=config.summary_schema)
            return _parse(reply.message.text)
        except ContextOverflowError:
            raise
        except (ValueError, ValidationError) as exc:
            last_error = exc
            logger.warning("summary model returned an invalid summary (%s); retrying", exc)
        except Exception as exc:
            last_error = exc
            logger.warning("summary model call failed (%s); retrying", exc)
    raise RuntimeError(f"no valid summary after {config.summary_max_retries + 1} attempts") from (
        last_error
    )


async def summarize(
    messages: Sequence[Msg],
    *,
    model: ChatModel | None,
    config: ContextConfig,
    counter: TokenCounter,
    previous: Summary | None = None,
    artifacts: Sequence[str] = (),
) -> SummaryOutcome:
    """Summarise `messages`, folding in `previous`; never raises for a model failure.

    Args:
        messages: the messages leaving the context, oldest first.
        model: the summary model; None means extractive only.
        config: prompt, schema and retry count.
        counter: counts tokens to size the chunks.
        previous: the summary of what was compressed before, folded into the new one.
        artifacts: descriptions of offloaded files, for the extractive fallback.
    """
    entries = [transcript_entry(m) for m in messages]
    calls = [0]
    if model is not None and entries:
        budget = int(model.context_window * _CHUNK_SHARE) - counter.count_text(
            config.compression_prompt
        )
        for _attempt in range(3):
            if budget < 256:
                break
            chunks = _chunks(entries, budget, counter)
            try:
                summary = previous
                for chunk in chunks:
                    summary = await _ask(model, _request(config, summary, chunk), config, calls)
                assert summary is not None
                return SummaryOutcome(summary, "model", calls[0], len(chunks))
            except ContextOverflowError:
                # Our count under-estimated the model's tokenizer: halve and retry.
                budget //= 2
            except RuntimeError as exc:
                logger.warning("falling back to an extractive summary: %s", exc)
                break
    summary = extractive_summary(messages, previous=previous, artifacts=artifacts)
    return SummaryOutcome(summary, "extractive", calls[0], 0)


def extractive_summary(
    messages: Sequence[Msg], *, previous: Summary | None = None, artifacts: Sequence[str] = ()
) -> Summary:
    """A summary built from the messages themselves, with no model.

    It keeps the first and latest user requests, the last thing the assistant said, the
    tools used and the errors they reported, and the files offloaded.
    """
    requests = [m.text for m in messages if is_user_request(m) and m.text.strip()]
    statements = [m.text for m in messages if m.role == "assistant" and m.text.strip()]
    tools: Counter[str] = Counter()
    errors: list[str] = []
    for msg in messages:
        for call in msg.tool_calls:
            tools[call.name] += 1
        for result in msg.tool_results:
            if result.is_error and isinstance(result.output, str):
                errors.append(f"{result.name or 'tool'}: {_short(result.output, 200)}")

    overview = []
    if previous is not None:
        overview.append(previous.task_overview)
    if requests:
        overview.append(f"First request: {_short(requests[0], 1500)}")
        if len(requests) > 1:
            overview.append(f"Latest request: {_short(requests[-1], 1500)}")
    state = (
        f"Last assistant message: {_short(statements[-1], 1500)}"
        if statements
        else (previous.current_state if previous is not None else "No assistant reply yet.")
    )
    discoveries = []
    if previous is not None:
        discoveries.append(previous.important_discoveries)
    if tools:
        discoveries.append(
            "Tools used: " + ", ".join(f"{name} x{n}" for name, n in tools.most_common())
        )
    if errors:
        discoveries.append("Errors reported:\n" + "\n".join(f"- {e}" for e in errors[-5:]))
    preserve = []
    if previous is not None:
        preserve.append(previous.context_to_preserve)
    if artifacts:
        preserve.append("Offloaded files:\n" + "\n".join(f"- {a}" for a in artifacts))
    return Summary(
        task_overview="\n".join(overview) or "Not stated in the compressed messages.",
        current_state=state,
        important_discoveries="\n".join(discoveries) or "none",
        next_steps=(
            "Continue with the latest request. This summary was extracted without a summary "
            "model; read the context log named above for the exact messages."
        ),
        context_to_preserve="\n".join(preserve) or "none",
    )
