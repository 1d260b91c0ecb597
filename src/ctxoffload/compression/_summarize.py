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
from collections.abc import Callable, Mapping, Sequence

from pydantic import ValidationError

from .._overflow import is_context_overflow
from ..exceptions import ContextOverflowError
from ..messages import Msg
from ..model import ChatModel, ModelResponse, model_label
from ..text import defuse, transcript_entry
from ..tokens import TokenCounter
from ._config import CHARS_PER_TOKEN, ContextConfig
from ._summary_extract import EXTRACTIVE_FIELD_CHARS, extractive_summary
from ._summary_model import Summary
from ._summary_outcome import Attempts, SummaryOutcome
from ._summary_parse import is_refusal, parse_summary, read_summary

__all__ = [
    "EXTRACTIVE_FIELD_CHARS",
    "SummaryOutcome",
    "bound_summary",
    "extractive_summary",
    "is_refusal",
    "parse_summary",
    "summarize",
]

logger = logging.getLogger("ctxoffload")

# Share of the summary model's window kept spare in each call, for a provider whose tokenizer
# counts more than ours (a call over the window anyway is halved and asked again). The rest
# holds the instructions, the summary so far, room for the reply (the summary's own bound, but
# at most `_REPLY_SHARE` of the window) and the messages of one chunk.
_SPARE_SHARE = 0.1
_REPLY_SHARE = 0.25
# The most characters of one message the summary model is sent (`transcript_entry`): the
# rest is in the context log, which the summary names.
_ENTRY_CHAR_CAP = 20_000


# Tokens an entry adds around the message's own content: role tags, tool-call and result
# headers, the cut note. Generous, as the estimate only sizes chunks (an overflow halves).
_ENTRY_OVERHEAD_TOKENS = 40


def _take(
    entries: list[str],
    start: int,
    budget: int,
    counter: TokenCounter,
    estimates: Sequence[int] | None = None,
) -> tuple[list[str], int]:
    """The entries from `start` on that fit `budget` tokens together, and where the next chunk
    starts: one entry at least, cut by characters when it alone is over the budget, so that
    one message can never overflow a call on its own.

    `estimates` (one per entry) are their sizes as `_entries_sent` found them, so that no
    entry is encoded again. Without them every entry is counted.
    """
    chunk: list[str] = []
    used = 0
    at = start
    while at < len(entries):
        entry = entries[at]
        cost = estimates[at] if estimates is not None else counter.count_text(entry)
        if cost > budget:
            if chunk:
                break  # (it starts the next chunk, cut to that one's budget)
            keep = max(200, int(len(entry) * budget / cost * 0.9))
            entry = entry[:keep] + "\n[... cut to fit the summary model's window]"
            cost = counter.count_text(entry)
        if chunk and used + cost > budget:
            break
        chunk.append(entry)
        used += cost
        at += 1
    return chunk, at


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
            reply = await _generate(model, request, config)
            attempts.used(reply.usage)
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


async def _generate(model: ChatModel, request: list[Msg], config: ContextConfig) -> ModelResponse:
    """The summary model's reply to `request`.

    The one place a summary model's overflow is recognised, whatever adapter asked it: an
    error `is_context_overflow` reads as one (a provider's 400 in its own words, a host's
    own overflow class) is raised as `ContextOverflowError`, so the request is halved and
    asked again rather than retried whole and then replaced by the extract.

    Raises:
        ContextOverflowError: the model said the request is over its window.
        Exception: any other error of the model's, as it is.
    """
    try:
        return await model.generate(request, response_schema=config.summary_schema)
    except ContextOverflowError:
        raise
    except Exception as exc:
        if not is_context_overflow(exc):
            raise
        raise ContextOverflowError(
            f"summary model {model_label(model)} said the request is over its window "
            f"({type(exc).__name__})"
        ) from exc


def extract(
    messages: Sequence[Msg],
    config: ContextConfig,
    max_chars: int,
    previous: Summary | None = None,
    artifacts: Sequence[str] = (),
    lines: Mapping[str, int] | None = None,
) -> Summary:
    """The extractive summary of `messages` (with `previous` folded in), within `max_chars`:
    what `summarize` falls back to, whole or field by field (`lines`: the line of
    context.jsonl each message is on, by its id, which its discoveries name)."""
    summary = extractive_summary(
        messages, previous=previous, artifacts=_not_listed(artifacts, config), lines=lines
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
    lines: Mapping[str, int] | None = None,
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
        lines: the line of the context log holding each message, by id, when known: an
            extractive summary names where each thing it found is.
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
                    lines,
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
        extract(messages, config, max_chars, previous, artifacts, lines),
        "extractive",
        attempts.calls,
        0,
        fallback=fallback,
        error=attempts.error,
        usage=attempts.usage,
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
    lines: Mapping[str, int] | None = None,
) -> SummaryOutcome | None:
    """The model's summary, in chunks that fit its window; None when it cannot give one."""
    entries, estimates = _entries_sent(messages, counter, input_budget, known_tokens)
    folded = len(messages) - len(entries)
    extracted: list[Summary] = []

    def fill() -> Summary:
        """The extract of every message that leaves, for a field a reply lacks (made once)."""
        if not extracted:
            extracted.append(extract(messages, config, max_chars, earlier, artifacts, lines))
        return extracted[0]

    earlier = previous
    if folded:
        # What leaves beyond the input budget is summarised without a model, and that
        # summary rides in the first request as the summary of what came before.
        previous = bound_summary(
            extractive_summary(
                messages[:folded],
                previous=previous,
                artifacts=_not_listed(artifacts, config),
                lines=lines,
            ),
            max_chars,
        )
    # Each call holds the instructions, the summary so far (counted as it is sent: one a model
    # wrote for the chunk before may be longer in tokens than its bound in characters says),
    # one chunk, and room for the reply, with a share of the window spare.
    window = model.context_window
    reply = min(max_chars // CHARS_PER_TOKEN, int(window * _REPLY_SHARE))
    room = int(window * (1 - _SPARE_SHARE)) - reply
    for share in (1, 2, 4):  # a call over the window anyway: each chunk halved, then quartered
        summary, at, chunks = previous, 0, 0
        try:
            while at < len(entries):
                around = counter.count_messages(_request(config, summary, []))
                budget = (room - around) // share
                if budget < 256:
                    return None
                chunk, at = _take(entries, at, budget, counter, estimates)
                summary = await _ask(
                    model, _request(config, summary, chunk), config, attempts, max_chars, fill
                )
                chunks += 1
            assert summary is not None
            return SummaryOutcome(
                summary,
                "model",
                attempts.calls,
                chunks,
                len(entries),
                sum(estimates),
                folded,
                reply=attempts.reply,
                filled=attempts.filled,
                cut=attempts.cut,
                usage=attempts.usage,
            )
        except ContextOverflowError:
            # Our count under-estimated the model's tokenizer: smaller chunks, from the start.
            continue
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
