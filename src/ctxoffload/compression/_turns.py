"""Turns: the groups of messages that must stay together (an assistant message that calls
tools, and the messages carrying those calls' results), and what counts as a user request."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..messages import Msg, ToolCallBlock, ToolResultBlock
from ._notes import is_context_note

__all__ = ["is_user_request", "newest_turns", "turn_start", "turns"]


def is_user_request(msg: Msg) -> bool:
    """Whether `msg` is something a person asked (a user message that is neither tool
    results nor one of ctxoffload's notes)."""
    return msg.role == "user" and not msg.tool_results and not is_context_note(msg)


def turns(messages: Sequence[Msg]) -> list[tuple[int, int, bool]]:
    """Group messages into turns that must not be separated.

    Returns:
        `(start, end, finished)` index ranges covering `messages` in order; `finished` is
        False for a turn whose tool calls are still waiting for results.
    """
    result: list[tuple[int, int, bool]] = []
    i, n = 0, len(messages)
    while i < n:
        start = i
        waiting = _ids_of(messages[i], ToolCallBlock)
        i += 1
        while waiting and i < n:
            answered = _ids_of(messages[i], ToolResultBlock)
            if not answered:
                break
            waiting -= answered
            i += 1
        result.append((start, i, not waiting))
    return result


def turn_start(messages: Sequence[Msg], index: int) -> int:
    """The index where the turn holding `messages[index]` starts (as `turns` groups them).

    Reads back only to the nearest message without tool results: such a message always
    starts a turn, so grouping from there gives the same turns as grouping from the first
    message, and finding the newest turn costs O(turn), not O(history).
    """
    safe = index
    while safe > 0 and _ids_of(messages[safe], ToolResultBlock):
        safe -= 1
    for start, end, _ in turns(messages[safe : index + 1]):
        if start <= index - safe < end:
            return safe + start
    raise IndexError(index)  # pragma: no cover - the turns cover every index


def newest_turns(messages: Sequence[Msg]) -> Iterator[tuple[int, int, bool]]:
    """The turns of `messages`, as `turns` groups them, newest first, found as they are asked
    for: a split that keeps the newest turns stops reading where the reserve is full instead
    of grouping a whole long history first.

    A message without tool results always starts a turn, so the messages are grouped back to
    the nearest such message at a time (as `turn_start` does).
    """
    end = len(messages)
    while end > 0:
        safe = end - 1
        while safe > 0 and _ids_of(messages[safe], ToolResultBlock):
            safe -= 1
        for start, stop, finished in reversed(turns(messages[safe:end])):
            yield safe + start, safe + stop, finished
        end = safe


def _ids_of(msg: Msg, kind: type[ToolCallBlock] | type[ToolResultBlock]) -> set[str]:
    # `msg.tool_calls` without its generator and list: this runs for every message of a
    # history, several times per compression.
    content = msg.content
    if isinstance(content, str):
        return set()
    return {block.id for block in content if isinstance(block, kind)}
