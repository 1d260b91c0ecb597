"""The tools that let the model manage its own context: `pin_context` (and `compact_context`).

Each is opt-in on the `Agent` and built around one of the agent's methods; their results are
never truncated or offloaded (a pinned text must stay whole).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ._tools import Tool, as_tool

__all__ = [
    "COMPACT_TOOL_NAME",
    "CONTEXT_TOOL_NAMES",
    "PIN_TOOL_NAME",
    "compact_context_tool",
    "pin_context_tool",
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
