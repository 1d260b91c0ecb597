"""`ClearThinking`: the thinking blocks of older assistant turns moved to context.jsonl.

Anthropic's `clear_thinking` context edit on ctxoffload's rules: the messages whose thinking
leaves are appended whole to context.jsonl first (persist before drop), and the thinking
blocks that stay are the same objects, byte for byte (providers check their signatures).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..._disk import events
from ...messages import Msg, ThinkingBlock, ToolResultBlock
from ._activation import Activation, SettingError, check_int

if TYPE_CHECKING:
    from ._run import PipelineRun

__all__ = ["THINKING_CLEARED", "ClearThinking"]

THINKING_CLEARED = "ctxoffload_thinking_cleared"
"""The metadata key on a message whose thinking was cleared: `{"reference": the context log,
"line": its line there, "blocks": how many}`."""


def _keep(value: Any) -> int | None:
    if value is None or value == "all":
        return None
    if isinstance(value, Mapping):
        if value.get("type") == "all":
            return None
        if value.get("type") != "thinking_turns" or set(value) - {"type", "value"}:
            raise SettingError(
                "keep",
                f'{dict(value)!r} is not \'all\' or {{"type": "thinking_turns", "value": N}}',
            )
        value = value.get("value")
    return check_int("keep", value, minimum=1)


def _has_thinking(msg: Msg) -> bool:
    return not isinstance(msg.content, str) and any(
        isinstance(b, ThinkingBlock) for b in msg.content
    )


class ClearThinking:
    """Keep the thinking blocks of the newest `keep` assistant turns that have any; move the
    older ones out of the context.

    The messages whose thinking leaves are appended whole to context.jsonl first; if that
    fails, nothing is cleared. Each such message keeps its text and tool calls, and its
    metadata names the file and line that hold its thinking (`METADATA_KEY`). The
    thinking that stays is left untouched, byte for byte, and so is the thinking of pinned
    messages and of the turn the model has not seen. Anthropic's key and amounts
    (`{"type": "thinking_turns", "value": N}`, `"all"`) are accepted as they are.

    Args:
        keep: the newest assistant turns with thinking whose thinking stays; "all" or None
            (the default) keeps every one, as without this manager.
        activation: when the manager runs (see `Activation`).

    Raises:
        ConfigError: an impossible setting, named with the value and what is allowed.
    """

    HOOKS: ClassVar[frozenset[str]] = frozenset({"pre_llm"})
    METADATA_KEY: ClassVar[str] = THINKING_CLEARED
    """The key this manager sets in the metadata of a message whose thinking it cleared.
    Its value is `{"reference": the context log, "line": its line there, "blocks": how
    many}`."""

    def __init__(
        self,
        *,
        keep: int | str | Mapping[str, Any] | None = None,
        activation: Activation | None = None,
    ) -> None:
        self.keep = _keep(keep)
        self.activation = Activation.from_value(activation)

    def __repr__(self) -> str:
        return f"ClearThinking(keep={'all' if self.keep is None else self.keep!r})"

    async def post_tool(self, result: ToolResultBlock, run: PipelineRun) -> ToolResultBlock:
        """Not a post_tool manager: the result unchanged."""
        return result

    async def pre_llm(self, messages: list[Msg], run: PipelineRun) -> list[Msg]:
        """The context with the thinking of older turns moved to context.jsonl."""
        if self.keep is None:
            return messages
        thinking = [i for i, m in enumerate(messages) if m.role == "assistant" and _has_thinking(m)]
        clearable = run.clearable(messages)
        older = [i for i in thinking[: max(0, len(thinking) - self.keep)] if clearable[i]]
        if not older:
            return messages
        leaving = [messages[i] for i in older]
        persisted = await run.compressor.persist(leaving, on_failure="keeping their thinking")
        if persisted.failure is not None:
            run.report(f"ClearThinking: offload failed: {persisted.failure}")
            return messages
        # Each message's line as the log holds it (one stored already, by a run killed and
        # resumed, is where it was: not where its place in this batch would put it).
        lines = persisted.found_at or {}
        after = list(messages)
        blocks = 0
        for i in older:
            msg = messages[i]
            assert not isinstance(msg.content, str)
            content = [b for b in msg.content if not isinstance(b, ThinkingBlock)]
            removed = len(msg.content) - len(content)
            blocks += removed
            mark = {
                "reference": persisted.reference,
                "line": lines.get(msg.id),
                "blocks": removed,
            }
            after[i] = msg.model_copy(
                update={"content": content, "metadata": {**msg.metadata, THINKING_CLEARED: mark}}
            )
        tokens_before = run.compressor.count(messages, run.tools)
        tokens_after = run.compressor.count(after, run.tools)
        await run.compressor.event(
            events.ClearThinking(
                messages=len(older),
                blocks=blocks,
                kept=self.keep,
                reference=persisted.reference,
                lines=persisted.lines,
                **persisted.apart,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
            )
        )
        run.report(f"ClearThinking: moved the thinking of {len(older)} turns out")
        return after
