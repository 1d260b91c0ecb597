"""The managers and their pipeline, a room of `compression`: the `ContextManager`s a
`ContextPipeline` runs before each model call under `Activation` rules (`ToolOutputOffload`,
`ToolOutputTruncate`, `SlidingWindow`, `Summarization`, `ImageLimit`, `ClearToolUses`,
`ClearThinking`, `Null`), the `PipelineRun` they share, and the loading of a pipeline from
JSON.

The managers stand on the compaction core (the `Compressor`, `ContextConfig`, the split);
the core never imports them. The rest of the package enters the room through this face, whose
names load on first use (`Activation` alone loads no compressor).
"""

from ..._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._activation import Activation
    from ._clear_thinking import ClearThinking
    from ._clear_tool_uses import ClearToolUses
    from ._history_managers import Null, SlidingWindow, Summarization
    from ._image_limit import ImageLimit
    from ._pipeline import ContextPipeline
    from ._run import ContextManager, Managers, PipelineRun, asked_config, compact_event
    from ._tool_output import ToolOutputOffload, ToolOutputTruncate

__all__ = [
    "Activation",
    "ClearThinking",
    "ClearToolUses",
    "ContextManager",
    "ContextPipeline",
    "ImageLimit",
    "Managers",
    "Null",
    "PipelineRun",
    "SlidingWindow",
    "Summarization",
    "ToolOutputOffload",
    "ToolOutputTruncate",
    "asked_config",
    "compact_event",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "Activation": "._activation",
        "ClearToolUses": "._clear_tool_uses",
        "ClearThinking": "._clear_thinking",
        "Null": "._history_managers",
        "SlidingWindow": "._history_managers",
        "Summarization": "._history_managers",
        "ImageLimit": "._image_limit",
        "ContextManager": "._run",
        "Managers": "._run",
        "PipelineRun": "._run",
        "asked_config": "._run",
        "compact_event": "._run",
        "ContextPipeline": "._pipeline",
        "ToolOutputOffload": "._tool_output",
        "ToolOutputTruncate": "._tool_output",
    },
)
