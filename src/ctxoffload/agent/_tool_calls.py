"""A step's tool calls around their running: the order they run in, the arguments a model
nested too deep to keep, and the answers of calls that a stopped reply left without one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from .._depth import MAX_DEPTH, RAW_ARGUMENTS, text_form, too_deep
from ..messages import Msg, ToolCallBlock, ToolResultBlock
from ._context_tools import CONTEXT_TOOL_NAMES, PIN_TOOL_NAME

__all__ = [
    "CONCURRENT_CALLS",
    "bounded",
    "run_each",
    "run_in_order",
    "unchanged",
    "unfinished_results",
]

T = TypeVar("T")
R = TypeVar("R")

CONCURRENT_CALLS = 1_000
"""The most tool calls of one step that run at once (and results that go through post_tool
at once): a step that asks for more runs them as the ones before end."""


async def run_each(run: Callable[[T], Awaitable[R]], items: Sequence[T]) -> list[R]:
    """`run` for each of `items` at once, at most `CONCURRENT_CALLS` at a time; the results
    in the order of `items`.

    A step of up to `CONCURRENT_CALLS` items gets a task for each, as `asyncio.gather`
    gives. A longer one (a model that asked for 100,000 calls) gets `CONCURRENT_CALLS`
    tasks, each awaiting one item after another: a task for each item cost more than an
    "ok" tool itself (about 20 us a call on a quiet machine). A sync tool is bounded the
    same either way, by the threads of the loop's executor. Once an item raises, no task
    starts another, and the exception is raised as `gather` raises it (the items under way
    go on, as `gather` leaves them).
    """
    if len(items) <= CONCURRENT_CALLS:
        return list(await asyncio.gather(*(run(item) for item in items)))
    results: list[R | None] = [None] * len(items)
    queue = iter(range(len(items)))
    stopped = False

    async def work() -> None:
        nonlocal stopped
        for index in queue:
            if stopped:
                return
            try:
                results[index] = await run(items[index])
            except BaseException:
                stopped = True
                raise

    await asyncio.gather(*(work() for _ in range(CONCURRENT_CALLS)))
    return results  # type: ignore[return-value]  # (every index was run)


_CONTEXT_TOOLS = -1
"""The part of `run_in_order` that runs the context tools one after another (started first)."""


async def run_in_order(
    calls: Sequence[ToolCallBlock], run: Callable[[ToolCallBlock], Awaitable[ToolResultBlock]]
) -> list[ToolResultBlock]:
    """Run a step's calls with `run` at once, except the context tools (`pin_context`,
    `compact_context`): those run one after another, every pin before any compaction.

    They are the only writers of the context while a step runs. Run at once, a compaction
    would work on the context as it was before a pin beside it and then put its result
    over the pin's (the model told "Pinned", the message gone); pins first, so a message
    pinned in the step stays whatever the compaction moves, in either order of the calls.

    Returns:
        The results, in the order of `calls`.
    """
    results: list[ToolResultBlock | None] = [None] * len(calls)
    context_calls = sorted(
        (i for i, c in enumerate(calls) if c.name in CONTEXT_TOOL_NAMES),
        key=lambda i: calls[i].name != PIN_TOOL_NAME,
    )

    async def run_one(index: int) -> None:
        results[index] = await run(calls[index])

    async def run_part(index: int) -> None:
        if index == _CONTEXT_TOOLS:
            for context_index in context_calls:
                await run_one(context_index)
        else:
            await run_one(index)

    editing = set(context_calls)
    others = (i for i in range(len(calls)) if i not in editing)
    await run_each(run_part, [_CONTEXT_TOOLS, *others])
    return [r for r in results if r is not None]


async def unchanged(result: ToolResultBlock) -> ToolResultBlock:
    """`result` as it is: what a result that stays whole goes through instead of post_tool."""
    return result


def unfinished_results(calls: list[ToolCallBlock], stopped: BaseException, name: str) -> Msg:
    """An error result for each of `calls`, as agent `name`'s tool message, when the reply
    stopped (`stopped` says how) before their results entered the context: a call left
    without a result makes every later request to the model invalid."""
    return Msg(
        role="tool",
        name=name,
        content=[
            ToolResultBlock(
                id=call.id,
                name=call.name,
                output=(
                    f"Error: the reply stopped ({type(stopped).__name__}) before this "
                    "call's result was kept; call the tool again if you still need it"
                ),
                is_error=True,
            )
            for call in calls
        ],
    )


def bounded(reply: Msg) -> Msg:
    """`reply` with the arguments of each call nested deeper than `MAX_DEPTH` kept as text.

    Such arguments could be neither stored nor sent back, and every later save and
    compression would fail on them. As JSON text under `_raw_arguments` (the form that
    arguments a model spelled wrongly take) they are kept whole, go back to the model as it
    sent them, and the tool answers with an error instead of running.
    """
    if isinstance(reply.content, str) or not any(
        too_deep(c.input, MAX_DEPTH) for c in reply.tool_calls
    ):
        return reply
    content = [
        ToolCallBlock(id=b.id, name=b.name, input={RAW_ARGUMENTS: text_form(b.input)})
        if isinstance(b, ToolCallBlock) and too_deep(b.input, MAX_DEPTH)
        else b
        for b in reply.content
    ]
    return reply.model_copy(update={"content": content})
