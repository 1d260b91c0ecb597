"""`ContextPipeline`: context managers run at `post_tool` and `pre_llm`, under activation rules.

```python
pipeline = ContextPipeline(
    post_tool=[ToolOutputOffload(max_tokens=2500, preview_tokens=1000)],
    pre_llm=[SlidingWindow(max_messages=40, activation=Activation(tokens_exceed=200_000)),
             Summarization(summary_ratio=0.3, preserve_recent_messages=10)],
)
agent = Agent(model=model, offloader=ws, context_management=pipeline)
```

A pipeline is configuration; `bind(compressor)` gives the `PipelineRun` that holds one
session's state (the compressor's summary and artifact trail, which messages the model has
seen, how many model calls were made). The `Compressor` is the shared engine: every manager
offloads, counts and records events through it, so the rules hold for all of them: the
newest turn stays until the model has seen it, nothing leaves the context before it is on
disk when an offloader is present, tool calls stay with their results, and notices name the
tools the agent has.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from .._formats import read_messages, read_tool_result
from ..exceptions import ConfigError
from ..messages import Msg, ToolResultBlock
from ._activation import Activation
from ._compressor import CompressionResult, Compressor
from ._config import ContextConfig

if TYPE_CHECKING:
    from ..model import ChatModel

__all__ = ["ContextManager", "ContextPipeline", "PipelineRun"]

logger = logging.getLogger("ctxoffload")


@runtime_checkable
class ContextManager(Protocol):
    """One strategy of a pipeline.

    `HOOKS` names where it may run; the method for a hook it does not list is never called
    (managers define it anyway, returning their input). `activation` says when it runs.
    """

    HOOKS: ClassVar[frozenset[str]]
    activation: Activation

    async def pre_llm(self, messages: list[Msg], run: PipelineRun) -> list[Msg]:
        """The context to send, given the context about to be sent."""
        ...

    async def post_tool(self, result: ToolResultBlock, run: PipelineRun) -> ToolResultBlock:
        """The tool result to put in the context, given the one the tool returned."""
        ...


class ContextPipeline:
    """Context managers run in order at `post_tool` (after each tool result) and `pre_llm`
    (before each model call), each when its activation rules hold.

    Proactive and reactive: before each model call the `pre_llm` managers run under their
    rules; when the model reports a context overflow, the `Agent` runs them again with the
    rules ignored (`PipelineRun.pre_llm(reactive=True)`) and retries the call once.

    Args:
        post_tool: managers for each tool result (`ToolOutputOffload`, `ToolOutputTruncate`,
            `Null`).
        pre_llm: managers for the context before each model call (`SlidingWindow`,
            `Summarization`, `ImageLimit`, `Null`).
        config: the shared settings: window, summary prompt and template, reader tools,
            preview style; `ContextConfig()` when None.
        name: a name, as templates carry one.
        description: what the pipeline is for.

    Raises:
        ConfigError: a manager placed at a hook it cannot run at.
    """

    def __init__(
        self,
        *,
        post_tool: Sequence[ContextManager] = (),
        pre_llm: Sequence[ContextManager] = (),
        config: ContextConfig | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        self.post_tool: tuple[ContextManager, ...] = tuple(post_tool)
        self.pre_llm: tuple[ContextManager, ...] = tuple(pre_llm)
        for hook, managers in (("post_tool", self.post_tool), ("pre_llm", self.pre_llm)):
            for index, manager in enumerate(managers):
                _check_manager(manager, hook, index)
        self.config = config or ContextConfig()
        self.name = name
        self.description = description

    def __repr__(self) -> str:
        return (
            f"ContextPipeline(name={self.name!r}, post_tool={list(self.post_tool)!r}, "
            f"pre_llm={list(self.pre_llm)!r})"
        )

    @classmethod
    def from_config(cls, config: ContextConfig | None = None) -> ContextPipeline:
        """The pipeline a `ContextConfig` stands for: offload tool results over
        `tool_result_limit` (post_tool); limit images when `max_image_num` is set, then
        summarise past `trigger_ratio` keeping `reserve_ratio` of the window (pre_llm)."""
        from ._history_managers import Summarization
        from ._image_limit import ImageLimit
        from ._tool_output import ToolOutputTruncate

        cfg = config or ContextConfig()
        pre: list[ContextManager] = []
        if cfg.max_image_num is not None:
            pre.append(ImageLimit(max_images=cfg.max_image_num))
        pre.append(Summarization.from_config(cfg))
        return cls(post_tool=[ToolOutputTruncate.from_config(cfg)], pre_llm=pre, config=cfg)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        models: Mapping[str, ChatModel] | None = None,
        config: ContextConfig | None = None,
        source: str = "context pipeline",
    ) -> ContextPipeline:
        """Load a pipeline from a template shaped like OpenSearch's context management.

        `{"name": ..., "description": ..., "hooks": {"post_tool": [...], "pre_llm": [...]}}`,
        each entry `{"type": "SlidingWindow", "config": {...}}`. OpenSearch's type names,
        keys, upper-case hook names and stored metadata are accepted as they are.

        Args:
            data: the parsed template.
            models: summary models by id, for `summary_model` / `summarization_model_id`.
            config: the shared settings (see the class).
            source: how errors name the input.

        Raises:
            ConfigError: an unknown type or key, or an impossible value, with its JSON path
                (`hooks.pre_llm[1].config.summary_ratio: 1.5 is above 0.8`).
        """
        from ._pipeline_load import load_pipeline

        return load_pipeline(cls, data, models=models or {}, config=config, source=source)

    @classmethod
    def from_json_file(
        cls,
        path: str | os.PathLike[str],
        *,
        models: Mapping[str, ChatModel] | None = None,
        config: ContextConfig | None = None,
    ) -> ContextPipeline:
        """Load a pipeline from a JSON file holding one template (see `from_dict`).

        Raises:
            ConfigError: the file is missing, unreadable or not JSON, or the template is
                invalid.
        """
        from ._config import read_json_file

        name = os.fspath(path)
        data = read_json_file(name, "context pipeline")
        return cls.from_dict(data, models=models, config=config, source=f"{name}:")

    def bind(self, compressor: Compressor) -> PipelineRun:
        """A run of this pipeline for one session, on `compressor`'s state."""
        return PipelineRun(self, compressor)


def _check_manager(manager: Any, hook: str, index: int) -> None:
    hooks = getattr(manager, "HOOKS", None)
    if not isinstance(hooks, frozenset) or not isinstance(
        getattr(manager, "activation", None), Activation
    ):
        raise ConfigError(
            f"{hook}[{index}]: {manager!r} is not a context manager: give a ToolOutputOffload, "
            "ToolOutputTruncate, SlidingWindow, Summarization, ImageLimit or Null, or an "
            "object with HOOKS, activation, pre_llm and post_tool"
        )
    if hook not in hooks:
        where = " or ".join(sorted(hooks))
        raise ConfigError(
            f"{hook}[{index}]: {type(manager).__name__} cannot run at {hook}; it runs at {where}"
        )


class PipelineRun:
    """One session's run of a `ContextPipeline` (see `ContextPipeline.bind`).

    Attributes:
        pipeline: the pipeline.
        compressor: the engine every manager works through (counter, offloader, session,
            events, summary state).
        model_calls: model calls so far (each non-reactive `pre_llm` with `model_call`).
        reactive: whether the `pre_llm` in progress runs after an overflow.
    """

    def __init__(self, pipeline: ContextPipeline, compressor: Compressor) -> None:
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
            messages: the whole context, oldest first (`Msg`s or OpenAI / Anthropic dicts).
            tools: the tool schemas sent with the call (they count against the window).
            reactive: the model reported an overflow: every manager runs, rules ignored.
            window: the window to assume in a reactive run (smaller than the model says).
            model_call: a model call follows (counted for `SlidingWindow(per_turn=N)` and
                for an `InMemoryWorkspace`'s turn-based eviction).

        Returns:
            The context to send (always `Msg`s), whether anything changed, and why.
        """
        context = read_messages(messages, caller="PipelineRun.pre_llm")
        self.tools = tools
        self.reactive = reactive
        self._window_override = window if reactive else None
        self._reasons = []
        self._compression = None
        if model_call and not reactive:
            self.model_calls += 1
            tick = getattr(self.compressor.offloader, "note_model_call", None)
            if callable(tick):
                tick()
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
