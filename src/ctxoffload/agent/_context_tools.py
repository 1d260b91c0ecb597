"""The tools that let the model manage its own context: `pin_context` (and `compact_context`),
and what they answer.

Each is opt-in on the `Agent` and built around one of the agent's methods; their results are
never truncated or offloaded (a pinned text must stay whole).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from ..compression import CompressionResult, PipelineRun, is_pinned
from ..exceptions import PinError
from ..messages import Msg
from ._tools import Tool, as_tool

__all__ = [
    "COMPACT_TOOL_NAME",
    "CONTEXT_TOOL_NAMES",
    "PIN_TOOL_NAME",
    "Context",
    "compact_answer",
    "compact_context_tool",
    "pin_answer",
    "pin_context_tool",
    "pin_with_results",
]

PIN_TOOL_NAME = "pin_context"
COMPACT_TOOL_NAME = "compact_context"
CONTEXT_TOOL_NAMES = frozenset({PIN_TOOL_NAME, COMPACT_TOOL_NAME})
"""Tools whose results stay whole in the context (no post_tool manager runs on them)."""

PinFunction = Callable[[str | None, str | None], Awaitable[str]]
CompactFunction = Callable[[str | None], Awaitable[str]]


def pin_context_tool(pin: PinFunction) -> Tool:
    """The `pin_context` tool, answering through `pin(message_id, text)`."""

    async def pin_context(message_id: str | None = None, text: str | None = None) -> str:
        """Keep something in your context for good: it is never summarised, cleared or
        moved out when the context is compacted. Pin your plan, a todo list, or an
        instruction you must not lose. Pins take room: keep them short.

        Args:
            message_id: the id of a tool call whose call and result must stay (the id you
                gave the call), or of a message. If several of your calls have that id, you
                are told their message ids: pin one of those.
            text: a text to keep, such as your plan or todo list; give this or message_id.
        """
        return await pin(message_id, text)

    return as_tool(pin_context)


def compact_context_tool(compact: CompactFunction) -> Tool:
    """The `compact_context` tool, answering through `compact(instructions)`."""

    async def compact_context(instructions: str | None = None) -> str:
        """Compact your context now: older messages are stored in the workspace and replaced
        by a summary (and old tool outputs by placeholders naming their files). Use it when
        a phase of the work is done and its details are no longer needed. At most once per
        step.

        Args:
            instructions: what the summary should focus on and keep (the facts, paths and
                decisions you still need).
        """
        return await compact(instructions)

    return as_tool(compact_context)


class Context(Protocol):
    """What holds the context the tools edit (an `Agent`): its messages, replaced whole."""

    messages: list[Msg]


def compact_answer(result: CompressionResult) -> str:
    """What `compact_context` answers after a compaction asked for (`Agent.compact`)."""
    if not result.compressed:
        return f"Nothing was compacted: {result.reason}."
    where = f" into {result.reference}" if result.reference else ""
    span = f" (lines {result.spans_text()})" if result.spans else ""
    return (
        f"Compacted: {result.reason}; {result.compressed_messages} messages moved{where}"
        f"{span}; the context went from {result.tokens_before:,} to "
        f"{result.tokens_after:,} tokens."
    )


def _pinned_text_answer(run: PipelineRun, messages: list[Msg], text: str) -> str:
    """What `pin_context(text=...)` answers, once the text's share of the window is checked.

    The text is pinned as this call's result once the results message exists
    (`pin_with_results`); its share is checked now, so a refusal reaches the model as this
    call's error.

    Raises:
        PinError: the pins of `messages` and the text would take more than `pin_ratio` of
            the window.
    """
    window = run.window
    ratio = run.compressor.config.pin_ratio
    after = run.pinned_tokens(messages) + run.compressor.counter.count_text(text)
    if window is not None and after > ratio * window:
        raise PinError(
            f"pinning this text would bring the pins to {after:,} tokens, "
            f"{after / window:.0%} of the {window:,}-token window, over pin_ratio {ratio}: "
            "pin a shorter text (the few lines that matter)"
        )
    return f"Pinned; this text stays in your context whatever is compacted:\n{text}"


async def pin_answer(
    run: PipelineRun,
    context: Context,
    message_id: str | None,
    text: str | None,
    *,
    pin: Callable[[str], Awaitable[Msg]],
) -> str:
    """What `pin_context` answers; a `PinError` becomes the tool's error result.

    A message of the context is pinned at once with `pin`; a call of this step, and a
    text, once the step's results are in the context (`pin_with_results`).
    """
    if (message_id is None) == (text is None):
        raise PinError(
            "pin_context takes message_id or text: give the id of one of your tool calls, "
            "or the text to keep"
        )
    if message_id is not None:
        answer = f"Pinned {message_id}: it stays in your context whatever is compacted."
        named = run.message_named(message_id, context.messages)
        if named.tool_calls and named.id == context.messages[-1].id:
            # A call of this step: its results, which the pin keeps too, are not in the
            # context yet, so its share is measured once they are (`pin_with_results`).
            return answer
        await pin(message_id)
        return answer
    assert text is not None
    return _pinned_text_answer(run, context.messages, text)


async def pin_with_results(run: PipelineRun, context: Context, reply: Msg) -> Msg:
    """Make the pins of a step that wait for its results, now the last message of `context`:
    each `pin_context(text=...)` (the text is its result) and `pin_context(message_id=...)`
    of a call of `reply`, this step's.

    Each is measured with the results in the context, so a big result of the step counts
    against `pin_ratio`; one over the share is refused, and its answer becomes the refusal
    (a `PinError`), so the model is never told "Pinned" about a pin that was not made.
    Returns the results message as it now is.
    """
    for index, call in enumerate(reply.tool_calls):
        results = context.messages[-1]
        answer = results.tool_results[index]
        if call.name != PIN_TOOL_NAME or answer.is_error:
            continue
        message_id = call.input.get("message_id")
        try:
            if message_id is None:
                target = results.id
            else:
                target = str(message_id)
                named = run.message_named(target, context.messages)
                if named.id != reply.id or is_pinned(named):
                    continue  # pinned when the tool ran
            context.messages = await run.pin(target, context.messages, by="agent")
        except PinError as refused:
            refusal = answer.model_copy(
                update={"output": f"Error: PinError: {refused}", "is_error": True}
            )
            answers = list(results.tool_results)
            answers[index] = refusal
            context.messages[-1] = results.model_copy(update={"content": answers})
    return context.messages[-1]
