"""`ContextPipeline`: context managers run at `post_tool` and `pre_llm`, under activation rules.

```python
pipeline = ContextPipeline(
    post_tool=[ToolOutputOffload(max_tokens=2500, preview_tokens=1000)],
    pre_llm=[SlidingWindow(max_messages=40, activation=Activation(tokens_exceed=200_000)),
             Summarization(summary_ratio=0.3, preserve_recent_messages=10)],
)
agent = Agent(model=model, offloader=ws, context_config=pipeline)
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
from typing import TYPE_CHECKING, Any

from ...exceptions import ConfigError
from .._compressor import Compressor
from .._config import ContextConfig, read_json_file
from ._activation import Activation
from ._history_managers import Summarization
from ._image_limit import ImageLimit
from ._pipeline_load import load_pipeline
from ._run import ContextManager, PipelineRun
from ._tool_output import ToolOutputTruncate

if TYPE_CHECKING:
    from ...model import ChatModel

__all__ = ["ContextPipeline"]

logger = logging.getLogger("ctxoffload")


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
            `Summarization`, `ImageLimit`, `ClearToolUses`, `Null`).
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
        template = load_pipeline(data, models=models or {}, source=source)
        return cls(
            post_tool=template.post_tool,
            pre_llm=template.pre_llm,
            config=config,
            name=template.name,
            description=template.description,
        )

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
        name = os.fspath(path)
        data = read_json_file(name, "context pipeline")
        return cls.from_dict(data, models=models, config=config, source=f"{name}:")

    def bind(self, compressor: Compressor) -> PipelineRun:
        """A run of this pipeline for one session, on `compressor`'s state.

        The compressor works under this pipeline's `config` from now on (it is the one
        holder of the run's settings: the managers and the compressor read the same).
        """
        return PipelineRun(self, compressor)


def _check_manager(manager: object, hook: str, index: int) -> None:
    """Refuse what is not a `ContextManager` (a user's object of the wrong shape), or one
    placed at a hook it does not run at."""
    if (
        not isinstance(manager, ContextManager)
        or not isinstance(manager.HOOKS, frozenset)
        or not isinstance(manager.activation, Activation)
    ):
        raise ConfigError(
            f"{hook}[{index}]: {manager!r} is not a context manager: give a ToolOutputOffload, "
            "ToolOutputTruncate, SlidingWindow, Summarization, ImageLimit, ClearToolUses or "
            "Null, or an object with HOOKS, activation, pre_llm and post_tool"
        )
    hooks = manager.HOOKS
    if hook not in hooks:
        where = " or ".join(sorted(hooks))
        raise ConfigError(
            f"{hook}[{index}]: {type(manager).__name__} cannot run at {hook}; it runs at {where}"
        )
