"""Producing the five-field `Summary` of messages that leave the context.

The summary model answers in JSON matching `ContextConfig.summary_schema`; the reply is
validated and retried. Messages that would not fit in the summary model's window are
summarised in chunks, each folding in the summary so far, so no call overflows. When the
model cannot produce a valid summary, an extractive one is built from the messages
themselves; the text of an error never becomes a summary.

Three bounds hold for every summary:

- time: the whole summarisation (all chunks, all retries) takes at most the `timeout` it is
  given (what a compaction has left of `ContextConfig.summary_timeout`, less the artifact
  index's share), after which the extractive summary is used;
- size: a summary is cut to the budget (`ContextConfig.summary_budget_tokens`, as
  characters) before anyone stores, renders or folds it, by `bound_summary`;
- kind: a reply whose fields only refuse or apologise (`is_refusal`) is an invalid reply,
  retried and then replaced by the extractive summary.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence

from pydantic import ValidationError

from ..exceptions import ContextOverflowError
from ..messages import Msg, ToolCallBlock, ToolResultBlock
from ..model import ChatModel
from ..text import defuse, transcript_entry
from ..tokens import TokenCounter
from ._config import CHARS_PER_TOKEN, ContextConfig
from ._split import is_user_request
from ._summary_model import Summary
from ._summary_outcome import Attempts, SummaryOutcome
from ._summary_parse import is_refusal, parse_summary, read_summary

__all__ = [
    "SummaryOutcome",
    "bound_summary",
    "extractive_summary",
    "is_refusal",
    "parse_summary",
    "summarize",
]

logger = logging.getLogger("ctxoffload")

# Share of the summary model's window given to the messages of one call; the rest holds the
# instructions, the summary so far and the reply.
_CHUNK_SHARE = 0.5
# The most characters of one message the summary model is sent (`transcript_entry`): the
# rest is in the context log, which the summary names.
_ENTRY_CHAR_CAP = 20_000


def _short(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…"


# Tokens an entry adds around the message's own content: role tags, tool-call and result
# headers, the cut note. Generous, as the estimate only sizes chunks (an overflow halves).
_ENTRY_OVERHEAD_TOKENS = 40


def _chunks(
    entries: list[str],
    budget: int,
    counter: TokenCounter,
    estimates: Sequence[int] | None = None,
) -> list[list[str]]:
    """Entries grouped so each group fits `budget` tokens.

    `estimates` (one per entry) are their sizes as `_entries_sent` found them, so that no
    entry is encoded again. Without them every entry is counted.
    """
    chunks: list[list[str]] = [[]]
    used = 0
    for index, entry in enumerate(entries):
        cost = estimates[index] if estimates is not None else counter.count_text(entry)
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
        f"still matters:\n{defuse(previous.model_dump_json(indent=1))}\n\n"
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


def cut_field(text: str, limit: int, why: str = "cut to the summary budget") -> str:
    """A summary field of at most `limit` characters: its start, then a note saying how many
    characters were cut and `why` (where the whole field is, when it is somewhere).

    The cut falls before a space, comma or semicolon in the last third of what is kept, where
    there is one, so that a path or an id at the cut is dropped whole, not left half-written
    (a half path reads as a real, shorter one).
    """
    if len(text) <= limit:
        return text

    def note(cut: int) -> str:
        return f" […{cut:,} characters {why}]"

    keep = max(0, limit - len(note(len(text))))
    at = max(text.rfind(sep, keep - keep // 3, keep) for sep in " ,;\n")
    head = text[: at if at > 0 else keep].rstrip(" ,;\n")
    return head + note(len(text) - len(head))


def bound_summary(summary: Summary, max_chars: int) -> Summary:
    """`summary` with no field over half of `max_chars` and all fields within `max_chars`.

    Each field keeps its start (models write the essentials first) and says how much was
    cut. Fields under their fair share are never cut; the others share what is left.
    """
    values = {name: str(getattr(summary, name)) for name in Summary.model_fields}
    if sum(len(v) for v in values.values()) <= max_chars and all(
        len(v) <= max_chars // 2 for v in values.values()
    ):
        return summary
    caps = dict.fromkeys(values, max_chars // 2)
    # Water-filling: small fields keep all they have; the rest split the remainder evenly.
    remaining = max_chars
    pending = sorted(values, key=lambda name: len(values[name]))
    while pending:
        share = remaining // len(pending)
        name = pending.pop(0)
        caps[name] = min(caps[name], share, len(values[name]))
        remaining -= caps[name]
    return summary.model_copy(
        update={name: cut_field(value, caps[name]) for name, value in values.items()}
    )


async def _ask(
    model: ChatModel,
    request: list[Msg],
    config: ContextConfig,
    attempts: Attempts,
    max_chars: int,
    fill: Callable[[], Summary],
) -> Summary:
    """The model's summary for `request`, asked again on an invalid reply or a failure.

    The reply is read field by field (`read_summary`); a field it lacks is taken from
    `fill()` (the extractive summary), and `attempts` says which, and how the reply was
    written.

    Raises:
        ContextOverflowError: the request is over the model's window.
        RuntimeError: no valid reply after `summary_max_retries` more attempts.
    """
    for _ in range(config.summary_max_retries + 1):
        attempts.calls += 1
        try:
            reply = await model.generate(request, response_schema=config.summary_schema)
            found = read_summary(reply.message.text)
            summary = found.summary(fill() if found.missing else None)
        except ContextOverflowError:
            raise
        except (ValueError, ValidationError) as exc:
            attempts.failed(exc)
            logger.warning("summary model returned an invalid summary (%s); retrying", exc)
            continue
        except Exception as exc:
            attempts.failed(exc)
            logger.warning("summary model call failed (%s); retrying", exc)
            continue
        attempts.reply, attempts.filled, attempts.cut = found.shape, found.missing, found.cut
        if found.missing:
            logger.info(
                "the summary model's reply had no %s: taken from the extractive summary",
                ", ".join(found.missing),
            )
        return bound_summary(summary, max_chars)
    raise RuntimeError(f"no valid summary after {config.summary_max_retries + 1} attempts")


def extract(
    messages: Sequence[Msg],
    config: ContextConfig,
    max_chars: int,
    previous: Summary | None = None,
    artifacts: Sequence[str] = (),
) -> Summary:
    """The extractive summary of `messages` (with `previous` folded in), within `max_chars`:
    what `summarize` falls back to, whole or field by field."""
    summary = extractive_summary(
        messages, previous=previous, artifacts=_not_listed(artifacts, config)
    )
    return bound_summary(summary, max_chars)


async def summarize(
    messages: Sequence[Msg],
    *,
    model: ChatModel | None,
    config: ContextConfig,
    counter: TokenCounter,
    previous: Summary | None = None,
    artifacts: Sequence[str] = (),
    window: int | None = None,
    known_tokens: Callable[[Msg], int | None] | None = None,
    timeout: float | None = None,
) -> SummaryOutcome:
    """Summarise `messages`, folding in `previous`; never raises for a model failure.

    The summary model is sent the newest messages within `summary_input_tokens` (`window`
    by default, and all of them when neither is given); older ones are folded in first as
    an extractive summary.

    Args:
        messages: the messages leaving the context, oldest first.
        model: the summary model; None means extractive only.
        config: prompt, schema, retry count, timeout and budget.
        counter: counts tokens to size the chunks.
        previous: the summary of what was compressed before, folded into the new one.
        artifacts: descriptions of offloaded files, for the extractive fallback.
        window: the context window of the agent whose context is compressed; the summary
            budget is a share of it (`ContextConfig.summary_budget_tokens`).
        known_tokens: a message's token count when it is known already (the compressor's
            tracker has counted it), else None; a message without one is sized by counting
            only what is sent of it.
        timeout: the seconds the model may take, all chunks together; `summary_timeout`
            by default (less when a request before this one spent part of it).
    """
    max_chars = config.summary_budget_tokens(window) * CHARS_PER_TOKEN
    if previous is not None:
        previous = bound_summary(previous, max_chars)
    attempts = Attempts()
    fallback = "no_model" if model is None else None if messages else "no_messages"
    if timeout is not None and timeout <= 0 and model is not None and messages:
        logger.warning(
            "no time is left of summary_timeout=%g s for the summary model; falling back to "
            "an extractive summary",
            config.summary_timeout,
        )
        model, fallback = None, "no_time"
    if model is not None and messages:
        try:
            outcome = await asyncio.wait_for(
                _model_summary(
                    messages,
                    model,
                    config,
                    counter,
                    previous,
                    attempts,
                    max_chars,
                    config.summary_input_budget(window),
                    known_tokens,
                    artifacts,
                ),
                config.summary_timeout if timeout is None else timeout,
            )
        except asyncio.TimeoutError:
            logger.warning(
                "the summary model did not finish within summary_timeout=%g s; falling back "
                "to an extractive summary",
                config.summary_timeout,
            )
            outcome, fallback = None, "timeout"
        if outcome is not None:
            return outcome
        if fallback is None:
            fallback = "failed" if attempts.error is not None else "window"
    return SummaryOutcome(
        extract(messages, config, max_chars, previous, artifacts),
        "extractive",
        attempts.calls,
        0,
        fallback=fallback,
        error=attempts.error,
        timeout=config.summary_timeout if fallback == "timeout" else None,
    )


def _not_listed(artifacts: Sequence[str], config: ContextConfig) -> Sequence[str]:
    """The offloaded files (newest first) an extractive summary names itself: those the
    template's own list (`{artifacts}`, the newest `artifact_trail_limit`) does not show, so
    that no file is named twice in one summary."""
    if "{artifacts}" not in config.summary_template:
        return artifacts
    return artifacts[config.artifact_trail_limit :]


async def _model_summary(
    messages: Sequence[Msg],
    model: ChatModel,
    config: ContextConfig,
    counter: TokenCounter,
    previous: Summary | None,
    attempts: Attempts,
    max_chars: int,
    input_budget: int | None,
    known_tokens: Callable[[Msg], int | None] | None = None,
    artifacts: Sequence[str] = (),
) -> SummaryOutcome | None:
    """The model's summary, in chunks that fit its window; None when it cannot give one."""
    entries, estimates = _entries_sent(messages, counter, input_budget, known_tokens)
    folded = len(messages) - len(entries)
    extracted: list[Summary] = []

    def fill() -> Summary:
        """The extract of every message that leaves, for a field a reply lacks (made once)."""
        if not extracted:
            extracted.append(extract(messages, config, max_chars, earlier, artifacts))
        return extracted[0]

    earlier = previous
    if folded:
        # What leaves beyond the input budget is summarised without a model, and that
        # summary rides in the first request as the summary of what came before.
        previous = bound_summary(
            extractive_summary(
                messages[:folded], previous=previous, artifacts=_not_listed(artifacts, config)
            ),
            max_chars,
        )
    # The previous summary rides along in every request, beside the chunk.
    carried = counter.count_text(previous.model_dump_json(indent=1)) if previous else 0
    budget = (
        int(model.context_window * _CHUNK_SHARE)
        - counter.count_text(config.compression_prompt)
        - min(carried, max_chars // CHARS_PER_TOKEN)
    )
    for _attempt in range(3):
        if budget < 256:
            break
        chunks = _chunks(entries, budget, counter, estimates)
        try:
            summary = previous
            for chunk in chunks:
                summary = await _ask(
                    model, _request(config, summary, chunk), config, attempts, max_chars, fill
                )
            assert summary is not None
            return SummaryOutcome(
                summary,
                "model",
                attempts.calls,
                len(chunks),
                len(entries),
                sum(estimates),
                folded,
                reply=attempts.reply,
                filled=attempts.filled,
                cut=attempts.cut,
            )
        except ContextOverflowError:
            # Our count under-estimated the model's tokenizer: halve and retry.
            budget //= 2
        except RuntimeError as exc:
            logger.warning("falling back to an extractive summary: %s", exc)
            break
    return None


def _entries_sent(
    messages: Sequence[Msg],
    counter: TokenCounter,
    input_budget: int | None,
    known_tokens: Callable[[Msg], int | None] | None,
) -> tuple[list[str], list[int]]:
    """The transcript entries of the newest messages within `input_budget` tokens (the
    newest one at least; all of them without a budget), oldest first, and what each costs.

    A message whose count is known costs that count scaled to what its entry kept of it;
    any other is counted as the entry sent, so the messages that leave are tokenized only
    when a request needs their size, and then only in the part that is sent.
    """
    entries: list[str] = []
    estimates: list[int] = []
    used = 0
    for message in reversed(messages):
        entry, kept = transcript_entry(message, _ENTRY_CHAR_CAP)
        known = known_tokens(message) if known_tokens is not None else None
        cost = (
            int(known * kept) + _ENTRY_OVERHEAD_TOKENS
            if known is not None
            else counter.count_text(entry)
        )
        if entries and input_budget is not None and used + cost > input_budget:
            break
        entries.append(entry)
        estimates.append(cost)
        used += cost
    entries.reverse()
    estimates.reverse()
    return entries, estimates


EXTRACTIVE_FIELD_CHARS = 2_000
"""The most characters one field of an extractive summary holds. Each field is built newest
first and cut at the end, so what is cut is the oldest material, and the size stays the same
however many compressions came before."""

_REQUEST_CHARS = 500
_STATE_CHARS = 600
"""The most characters of the last assistant message an extractive summary quotes: where the
work stands; the message is whole in the context log the summary names."""
_EXTRACTIVE_NEXT_STEPS = (
    "Continue with the latest request. This summary was extracted without a summary "
    "model; read the context log named above for the exact messages."
)
_TOOLS_LINE = re.compile(r"^Tools used: (.*)$", re.MULTILINE)
_TOOL_COUNT = re.compile(r"(\S+) x(\d+)")
_LIST_ITEM = re.compile(r"^- (.+)$", re.MULTILINE)


def _section(text: str, title: str) -> list[str]:
    """The `- item` lines under `title:` in an earlier extractive field."""
    _head, found, rest = text.partition(f"{title}:\n")
    if not found:
        return []
    block = rest.split("\n\n", 1)[0]
    return _LIST_ITEM.findall(block)


def _line_after(text: str, label: str) -> str | None:
    """The text after `label: ` on its own line of an earlier extractive field, if any."""
    found = re.search(rf"^{re.escape(label)}: (.*)$", text, re.MULTILINE)
    return found.group(1) if found else None


def _fit(parts: list[str], limit: int = EXTRACTIVE_FIELD_CHARS) -> str:
    """Join `parts` (newest or most important first) and cut the end to `limit`."""
    text = "\n\n".join(p for p in parts if p.strip())
    return _short(text, limit) if len(text) > limit else text


def _unique(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = item.split(" (", 1)[0]  # a path, without its size and source
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def extractive_summary(
    messages: Sequence[Msg], *, previous: Summary | None = None, artifacts: Sequence[str] = ()
) -> Summary:
    """A summary built from the messages themselves, with no model.

    It keeps the first request ever made and the latest one, the last thing the assistant
    said, how often each tool was used (counts merged with the previous summary's), the
    newest errors, and the offloaded files (each once, newest first). Each field holds at
    most `EXTRACTIVE_FIELD_CHARS` characters, newest material first, so summaries folded
    into one another over many compressions neither grow nor repeat themselves. A previous
    summary written by a model is kept, shortened, after the new material.
    """
    before = (
        previous.model_dump() if previous is not None else dict.fromkeys(Summary.model_fields, "")
    )
    # An earlier extractive summary is merged field by field; a model's is kept, shortened.
    ours = previous is not None and before["next_steps"] == _EXTRACTIVE_NEXT_STEPS
    theirs = previous is not None and not ours
    # Read newest first, and only as far as each field needs: a resumed session may fold
    # in thousands of messages.
    statement = next(
        (m.text for m in reversed(messages) if m.role == "assistant" and m.text.strip()), None
    )
    if statement is not None:
        state = f"Last assistant message: {_short(statement, _STATE_CHARS)}"
    else:
        state = before["current_state"] or "No assistant reply yet."

    def field_text(parts: list[str], name: str) -> str:
        """The field `name`: the new material, then a model's earlier text of it."""
        return _fit([*parts, f"Earlier summary: {before[name]}"] if theirs else parts)

    return Summary(
        task_overview=field_text(_overview(messages, before, ours), "task_overview")
        or "Not stated in the compressed messages.",
        current_state=_fit([state]),
        important_discoveries=field_text(
            _discoveries(messages, before, ours), "important_discoveries"
        )
        or "none",
        next_steps=_EXTRACTIVE_NEXT_STEPS,
        context_to_preserve=field_text(_preserved(artifacts, before, ours), "context_to_preserve")
        or "none",
    )


def _overview(messages: Sequence[Msg], before: dict[str, str], ours: bool) -> list[str]:
    """The task: the latest request, and the first request ever (kept from an earlier
    extractive summary, `ours`)."""
    requests = (m.text for m in messages if is_user_request(m) and m.text.strip())
    newest = (m.text for m in reversed(messages) if is_user_request(m) and m.text.strip())
    first = _line_after(before["task_overview"], "First request") if ours else None
    if first is None:
        first = next((_short(text, _REQUEST_CHARS) for text in requests), None)
    latest = next((_short(text, _REQUEST_CHARS) for text in newest), None)
    if latest is None and ours:
        latest = _line_after(before["task_overview"], "Latest request")
    overview = [f"Latest request: {latest}"] if latest and latest != first else []
    if first:
        overview.append(f"First request: {first}")
    return overview


def _discoveries(messages: Sequence[Msg], before: dict[str, str], ours: bool) -> list[str]:
    """The newest errors first and the tool counts, merged with an earlier extractive
    summary's (`ours`)."""
    tools: Counter[str] = Counter()
    failed: list[ToolResultBlock] = []
    for msg in messages:
        if isinstance(msg.content, str):
            continue
        for block in msg.content:
            if isinstance(block, ToolCallBlock):
                tools[block.name] += 1
            elif isinstance(block, ToolResultBlock) and block.is_error:
                failed.append(block)
    if ours:
        for line in _TOOLS_LINE.findall(before["important_discoveries"]):
            for name, count in _TOOL_COUNT.findall(line):
                tools[name] += int(count)
    # The newest errors first, as many as can be shown (five different ones).
    errors: list[str] = []
    keys: set[str] = set()
    for result in reversed(failed):
        if isinstance(result.output, str) and len(keys) < 5:
            errors.append(f"{result.name or 'tool'}: {_short(result.output, 200)}")
            keys.add(errors[-1].split(" (", 1)[0])  # as `_unique` tells them apart
    errors += _section(before["important_discoveries"], "Errors reported") if ours else []
    discoveries = []
    if errors:
        discoveries.append(
            "Errors reported (newest first):\n" + "\n".join(f"- {e}" for e in _unique(errors)[:5])
        )
    if tools:
        discoveries.append(
            "Tools used: " + ", ".join(f"{name} x{n}" for name, n in tools.most_common())
        )
    return discoveries


def _preserved(artifacts: Sequence[str], before: dict[str, str], ours: bool) -> list[str]:
    """The offloaded files, each once, newest first (the compressor passes its whole trail,
    newest first), with an earlier extractive summary's (`ours`)."""
    files = _unique(
        [*artifacts, *(_section(before["context_to_preserve"], "Offloaded files") if ours else [])]
    )
    preserve = ["Offloaded files:\n" + "\n".join(f"- {a}" for a in files)] if files else []
    return preserve
