"""When and how history is compressed: `ContextConfig`, the split, `Summary`, `Compressor`,
the `Projector` for hosts that keep their own history, and the `ContextPipeline` of managers
(`ToolOutputOffload`, `ToolOutputTruncate`, `SlidingWindow`, `Summarization`, `ImageLimit`,
`ClearToolUses`, `ClearThinking`, `Null`) run under `Activation` rules."""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._emit import EventCallback
    from ._compressor import Compressor
    from ._config import ContextConfig
    from ._managers import (
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
    from ._notes import is_context_note, is_summary_message
    from ._persisted import Persisted
    from ._projection import Projector
    from ._protect import Protected, is_pinned
    from ._result import CompressionResult
    from ._split import MessageCounter, Split, SplitByCount, SplitByTokens, SplitStrategy, turns
    from ._summary_message import Artifact
    from ._summary_model import Summary
    from ._tool_names import ReaderTools
    from ._truncate import TRUNCATION_MARKER, Truncation, rendered_text

__all__ = [
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
    "is_context_note",
    "is_pinned",
    "is_summary_message",
    "rendered_text",
    "turns",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "is_context_note": "._notes",
        "EventCallback": ".._emit",
        "rendered_text": "._truncate",
        "Activation": "._managers",
        "ClearToolUses": "._managers",
        "ClearThinking": "._managers",
        "Null": "._managers",
        "SlidingWindow": "._managers",
        "Summarization": "._managers",
        "ImageLimit": "._managers",
        "Managers": "._managers",
        "ContextManager": "._managers",
        "ContextPipeline": "._managers",
        "PipelineRun": "._managers",
        "Projector": "._projection",
        "Protected": "._protect",
        "is_pinned": "._protect",
        "ToolOutputOffload": "._managers",
        "ToolOutputTruncate": "._managers",
        "Artifact": "._summary_message",
        "CompressionResult": "._result",
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
        "turns": "._split",
        "Summary": "._summary_model",
        "TRUNCATION_MARKER": "._truncate",
        "Truncation": "._truncate",
    },
)
