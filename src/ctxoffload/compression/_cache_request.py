"""A summary request the provider's prompt cache can serve.

The summary request is the largest request of a session. Written as a new prompt (a system
prompt, then a transcript of the messages), no prompt cache can serve any of it, although the
agent's previous request to the same model held those very messages. When the summary model
is the agent's own model, the request here is instead that previous request, unchanged (its
messages, its tool schemas), plus one final user message that asks for the summary of the
messages that leave. Its whole prefix is what the provider cached for the previous call.

The messages that leave must all be in the previous request, and the request must fit the
model's window; otherwise the usual request (`_summarize.summarize`) is made.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._overflow import is_context_overflow
from ..messages import Msg
from ..model import ChatModel
from ..text import message_lines
from ..tokens import TokenCounter
from ._config import CHARS_PER_TOKEN, ContextConfig
from ._summarize import SummaryOutcome, bound_summary
from ._summary_model import Summary
from ._summary_outcome import add_usage
from ._summary_parse import read_summary

__all__ = ["LastRequest", "same_model", "summarize_from_cache"]

logger = logging.getLogger("ctxoffload")

_START_CHARS = 120
"""How much of the first message that stays the instruction quotes, to say where to stop."""


@dataclass(frozen=True)
class LastRequest:
    """What the agent last sent its model: the messages, the tool schemas, the model."""

    messages: tuple[Msg, ...]
    tools: tuple[dict[str, Any], ...]
    model: ChatModel


def same_model(a: ChatModel, b: ChatModel) -> bool:
    """Whether `a` and `b` are one model behind one client: the same object, or the same
    class and model name over the same client object (an adapter built twice on one client).
    """
    if a is b:
        return True
    client_a, client_b = getattr(a, "_client", None), getattr(b, "_client", None)
    return (
        type(a) is type(b)
        and a.model_name == b.model_name
        and client_a is not None
        and client_a is client_b
    )


def _instruction(config: ContextConfig, leaving: int, first_kept: Msg | None) -> str:
    keys = ", ".join(config.summary_schema.get("properties", {}) or ())
    if first_kept is None:
        where = "the whole conversation above"
    else:
        start = " ".join(" ".join(message_lines(first_kept)[1:]).split())[:_START_CHARS]
        where = (
            f"the conversation above from its start up to, not including, the message that "
            f'begins "{start}" ({leaving} messages: they are leaving your context, the later '
            "ones stay as they are)"
        )
    return (
        f"{config.compression_prompt}\n\nDo not call a tool and do not continue the task: "
        f"summarise {where}, with any earlier summary above folded in. Answer with one JSON "
        f"object with the keys {keys}, and nothing else."
    )


def cached_request(
    last: LastRequest, leaving: Sequence[Msg], config: ContextConfig
) -> list[Msg] | None:
    """The previous request plus the instruction, or None when a message that leaves was not
    in it (the previous request cannot serve as the prefix)."""
    sent_ids = [m.id for m in last.messages]
    position = {i: n for n, i in enumerate(sent_ids)}
    if not leaving or any(m.id not in position for m in leaving):
        return None
    after = max(position[m.id] for m in leaving) + 1
    first_kept = next(
        (m for m in last.messages[after:] if m.role != "system"),
        None,
    )
    instruction = Msg(role="user", content=_instruction(config, len(leaving), first_kept))
    return [*last.messages, instruction]


async def summarize_from_cache(
    last: LastRequest,
    leaving: Sequence[Msg],
    *,
    config: ContextConfig,
    counter: TokenCounter,
    window: int | None,
    timeout: float | None = None,
    fill: Callable[[], Summary] | None = None,
) -> SummaryOutcome | None:
    """The summary of `leaving`, asked with the previous request as its prefix; None when
    that request cannot be used or the model does not give a valid summary in one call
    within `timeout` seconds (`summary_timeout` when None; the caller then makes the usual
    request). A field the reply lacks is taken from `fill()` (the extractive summary);
    without `fill`, such a reply is not valid."""
    timeout = config.summary_timeout if timeout is None else timeout
    request = cached_request(last, leaving, config)
    if request is None or timeout <= 0:
        return None
    if counter.count_messages(request) > last.model.context_window:
        return None
    max_chars = config.summary_budget_tokens(window) * CHARS_PER_TOKEN
    try:
        reply = await asyncio.wait_for(
            last.model.generate(
                request, tools=list(last.tools) or None, response_schema=config.summary_schema
            ),
            timeout,
        )
        found = read_summary(reply.message.text)
        summary = bound_summary(
            found.summary(fill() if found.missing and fill is not None else None), max_chars
        )
    except asyncio.TimeoutError:
        logger.warning(
            "the cache-shaped summary request had no answer within summary_timeout=%g s; "
            "asking anew in what is left of it",
            config.summary_timeout,
        )
        return None
    except Exception as exc:
        # An overflow in any shape (`is_context_overflow`) is said as one: the usual request,
        # asked anew, is sized to the model's window and halved while it overflows.
        why = "is over the model's window" if is_context_overflow(exc) else f"failed ({exc})"
        logger.warning("the cache-shaped summary request %s; asking anew", why)
        return None
    return SummaryOutcome(
        summary,
        "model",
        1,
        1,
        reply=found.shape,
        filled=found.missing,
        cut=found.cut,
        usage=add_usage(None, reply.usage) if reply.usage is not None else None,
    )
