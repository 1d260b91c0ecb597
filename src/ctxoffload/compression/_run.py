"""`PipelineRun`: one session's run of a pipeline's context managers, and the protocol a
context manager follows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..exceptions import ConfigError
from ..formats import read_messages, read_tool_result
from ..messages import Msg, ToolResultBlock
from ..workspace import ModelCallClock
from ._activation import Activation
from ._compressor import CompressionResult, Compressor
from ._config import ContextConfig

__all__ = ["ContextManager", "Managers", "PipelineRun"]


@runtime_checkable
class ContextManager(Protocol):
    """One strategy of a pipeline.

    `HOOKS` names where it may run; the method for a hook it does not list is never called
    (managers define it anyway, returning their input). `activation` says when it runs.
    """

    HOOKS: ClassVar[frozenset[str]]
    activation: Activation

    async def pre_llm(self, messages: list[Msg], run: PipelineRun) -> list[Msg]:
        """The context to send, given the context about to be sent.

        Args:
            messages: the context, oldest first, as the managers before this one left it.
            run: the session's run: its compressor (counter, offloader, session, events)
                and this manager's state (`run.state(self)`).

        Returns:
            The context to pass on; `messages` itself when nothing changes.
        """
        ...

    async def post_tool(self, result: ToolResultBlock, run: PipelineRun) -> ToolResultBlock:
        """The tool result to put in the context, given the one the tool returned.

        Args:
            result: the tool result, as the managers before this one left it.
            run: the session's run (see `pre_llm`).

        Returns:
            The result to pass on; `result` itself when nothing changes.
        """
        ...


class Managers(Protocol):
    """What a run takes from its pipeline: the managers of each hook and the shared settings
    (a `ContextPipeline` is one)."""

    @property
    def post_tool(self) -> tuple[ContextManager, ...]:
        """The managers run on each tool result, in order."""
        ...

    @property
    def pre_llm(self) -> tuple[ContextManager, ...]:
        """The managers run on the context before each model call, in order."""
        ...

    @property
    def config(self) -> ContextConfig:
        """The settings the managers share (window, summary prompt, reader tools...)."""
        ...


class PipelineRun:
    """One session's run of a `ContextPipeline` (see `ContextPipeline.bind`).

    Attributes:
        pipeline: the pipeline.
        compressor: the engine every manager works through (counter, offloader, session,
            events, summary state).
        model_calls: model calls so far (each non-reactive `pre_llm` with `model_call`).
        reactive: whether the `pre_llm` in progress runs after an overflow.
    """

    def __init__(self, pipeline: Managers, compressor: Compressor) -> None:
        self.pipeline = pipeline
        self.compressor = compressor
        self.model_calls = 0
        self.reactive = False
        self.tools: Sequence[dict[str, Any]] = ()
        self._window_override: int | None = None
        self._reasons: list[str] = []
        self._compression: CompressionResult | None = None
        self._state: dict[int, dict[str, Any]] = {}

    # -- what managers use ------------------------------------------------------------------

    def config(self, base: ContextConfig | None = None) -> ContextConfig:
        """`base` (by default the shared settings), with the shrunk window of a reactive run."""
        cfg = base or self.pipeline.config
        if self._window_override is not None:
            return cfg.model_copy(update={"context_window": self._window_override})
        return cfg

    @property
    def window(self) -> int | None:
        """The context window in effect, or None when no window is known."""
        try:
            return self.compressor.window(self.config())
        except ConfigError:
            return None

    def state(self, manager: ContextManager) -> dict[str, Any]:
        """A manager's own state in this run (a pipeline may be shared by several runs)."""
        return self._state.setdefault(id(manager), {})

    def report(self, reason: str, compression: CompressionResult | None = None) -> None:
        """Say what a manager did, for the `CompressionResult` of this `pre_llm`."""
        self._reasons.append(reason)
        if compression is not None:
            self._compression = compression

    def _count_model_call(self) -> None:
        """One more model call: counted here, and told to an offloader that is a
        `ModelCallClock` (an `InMemoryWorkspace` evicts by turns)."""
        self.model_calls += 1
        offloader = self.compressor.offloader
        if isinstance(offloader, ModelCallClock):
            offloader.note_model_call()

    # -- the hooks --------------------------------------------------------------------------

    def _holds(self, manager: ContextManager, messages: Sequence[Msg]) -> bool:
        rule = manager.activation
        if rule.is_always:
            return True
        counted = sum(1 for m in messages if m.role != "system")
        return rule.holds(
            messages=counted,
            tokens=self.compressor.count(messages, self.tools),
            window=self.window,
        )

    async def pre_llm(
        self,
        messages: Sequence[Msg | Mapping[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] = (),
        reactive: bool = False,
        window: int | None = None,
        model_call: bool = True,
    ) -> CompressionResult:
        """Run the `pre_llm` managers on the context about to be sent.

        Args:
            messages: the whole context, oldest first (`Msg` objects or OpenAI / Anthropic dicts).
            tools: the tool schemas sent with the call (they count against the window).
            reactive: the model reported an overflow: every manager runs, rules ignored.
            window: the window to assume in a reactive run (smaller than the model says).
            model_call: a model call follows (counted for `SlidingWindow(per_turn=N)` and
                for an `InMemoryWorkspace`'s turn-based eviction).

        Returns:
            The context to send (always `Msg` objects), whether anything changed, and why.
        """
        context = read_messages(messages, caller="PipelineRun.pre_llm")
        self.tools = tools
        self.reactive = reactive
        self._window_override = window if reactive else None
        self._reasons = []
        self._compression = None
        if model_call and not reactive:
            self._count_model_call()
        tokens_before = self.compressor.count(context, tools)
        current = list(context)
        try:
            for manager in self.pipeline.pre_llm:
                if not reactive and not self._holds(manager, current):
                    continue
                current = await manager.pre_llm(current, self)
        finally:
            self._window_override = None
            self.reactive = False
        self.compressor.remember_sent(context, current)
        changed = len(current) != len(context) or any(
            a is not b for a, b in zip(current, context, strict=False)
        )
        found = self._compression
        return CompressionResult(
            current,
            changed,
            "; ".join(self._reasons) or "below trigger",
            tokens_before,
            self.compressor.count(current, tools),
            reference=found.reference if found else None,
            line_span=found.line_span if found else None,
            summary=found.summary if found else None,
            summary_source=found.summary_source if found else None,
            compressed_messages=found.compressed_messages if found else 0,
        )

    async def post_tool(
        self,
        result: ToolResultBlock | Mapping[str, Any] | Msg,
        *,
        messages: Sequence[Msg] = (),
        tools: Sequence[dict[str, Any]] = (),
    ) -> ToolResultBlock:
        """Run the `post_tool` managers on one tool result.

        Args:
            result: the result as the tool returned it (or an OpenAI / Anthropic form).
            messages: the context it joins, for activation rules.
            tools: the tool schemas, for activation rules.

        Returns:
            The result to put in the context.
        """
        block = read_tool_result(result, caller="PipelineRun.post_tool")
        self.tools = tools
        for manager in self.pipeline.post_tool:
            if not manager.activation.is_always:
                context = [*messages, Msg(role="tool", content=[block])]
                if not self._holds(manager, context):
                    continue
            block = await manager.post_tool(block, self)
        return block
