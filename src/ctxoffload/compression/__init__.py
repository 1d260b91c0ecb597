"""When and how history is compressed: `ContextConfig`, the split, `Summary`, `Compressor`,
the `Projector` for hosts that keep their own history, and the `ContextPipeline` of managers
(`ToolOutputOffload`, `ToolOutputTruncate`, `SlidingWindow`, `Summarization`, `ImageLimit`,
`ClearToolUses`, `ClearThinking`, `Null`) run under `Activation` rules."""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._compaction import CompressionResult
    from ._compressor import Compressor
    from ._config import ContextConfig
    from ._events import EventCallback, emit_event
    from ._managers import (
        CLEARED_MARK,
        OUTPUTS_CLEARED,
        THINKING_CLEARED,
        Activation,
        ClearThinking,
        ClearToolUses,
        ContextManager,
        ContextPipeline,
        ImageLimit,
        Managers,
        Null,
        PipelineRun,
        SlidingWindow,
        Summarization,
        ToolOutputOffload,
        ToolOutputTruncate,
    )
    from ._notes import is_context_note, is_summary_message, is_window_note
    from ._persisted import Persisted
    from ._projection import Projector
    from ._protect import Protected, is_pinned
    from ._split import (
        MessageCounter,
        Split,
        SplitByCount,
        SplitByTokens,
        SplitStrategy,
        split_by_count,
        split_for_compression,
        turns,
    )
    from ._summarize import extractive_summary
    from ._summary_message import Artifact
    from ._summary_model import Summary
    from ._tool_names import ReaderTools
    from ._truncate import TRUNCATION_MARKER, Truncation, rendered_text
    from ._truncator import FRESH_PREVIEW_FLOOR

__all__ = [
    "CLEARED_MARK",
    "FRESH_PREVIEW_FLOOR",
    "OUTPUTS_CLEARED",
    "THINKING_CLEARED",
    "TRUNCATION_MARKER",
    "Activation",
    "Artifact",
    "ClearThinking",
    "ClearToolUses",
    "CompressionResult",
    "Compressor",
    "ContextConfig",
    "ContextManager",
    "ContextPipeline",
    "EventCallback",
    "ImageLimit",
    "Managers",
    "MessageCounter",
    "Null",
    "Persisted",
    "PipelineRun",
    "Projector",
    "Protected",
    "ReaderTools",
    "SlidingWindow",
    "Split",
    "SplitByCount",
    "SplitByTokens",
    "SplitStrategy",
    "Summarization",
    "Summary",
    "ToolOutputOffload",
    "ToolOutputTruncate",
    "Truncation",
    "emit_event",
    "extractive_summary",
    "is_context_note",
    "is_pinned",
    "is_summary_message",
    "is_window_note",
    "rendered_text",
    "split_by_count",
    "split_for_compression",
    "turns",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "is_context_note": "._notes",
        "is_window_note": "._notes",
        "EventCallback": "._events",
        "emit_event": "._events",
        "rendered_text": "._truncate",
        "Activation": "._managers",
        "CLEARED_MARK": "._managers",
        "OUTPUTS_CLEARED": "._managers",
        "ClearToolUses": "._managers",
        "ClearThinking": "._managers",
        "THINKING_CLEARED": "._managers",
        "Null": "._managers",
        "SlidingWindow": "._managers",
        "Summarization": "._managers",
        "ImageLimit": "._managers",
        "ContextManager": "._managers",
        "Managers": "._managers",
        "ContextPipeline": "._managers",
        "PipelineRun": "._managers",
        "Projector": "._projection",
        "Protected": "._protect",
        "is_pinned": "._protect",
        "ToolOutputOffload": "._managers",
        "ToolOutputTruncate": "._managers",
        "Artifact": "._summary_message",
        "FRESH_PREVIEW_FLOOR": "._truncator",
        "CompressionResult": "._compaction",
        "Persisted": "._persisted",
        "Compressor": "._compressor",
        "is_summary_message": "._notes",
        "ContextConfig": "._config",
        "ReaderTools": "._tool_names",
        "MessageCounter": "._split",
        "Split": "._split",
        "SplitByCount": "._split",
        "SplitByTokens": "._split",
        "SplitStrategy": "._split",
        "split_by_count": "._split",
        "split_for_compression": "._split",
        "turns": "._split",
        "extractive_summary": "._summarize",
        "Summary": "._summary_model",
        "TRUNCATION_MARKER": "._truncate",
        "Truncation": "._truncate",
    },
)
