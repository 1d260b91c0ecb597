"""When and how history is compressed: `ContextConfig`, the split, `Summary`, `Compressor`."""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._compressor import Artifact, CompressionResult, Compressor, is_summary_message
    from ._config import ContextConfig
    from ._readers import ReaderTools
    from ._split import split_for_compression, turns
    from ._summarize import extractive_summary
    from ._summary_model import Summary
    from ._truncate import TRUNCATION_MARKER

__all__ = [
    "TRUNCATION_MARKER",
    "Artifact",
    "CompressionResult",
    "Compressor",
    "ContextConfig",
    "ReaderTools",
    "Summary",
    "extractive_summary",
    "is_summary_message",
    "split_for_compression",
    "turns",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "Artifact": "._compressor",
        "CompressionResult": "._compressor",
        "Compressor": "._compressor",
        "is_summary_message": "._compressor",
        "ContextConfig": "._config",
        "ReaderTools": "._readers",
        "split_for_compression": "._split",
        "turns": "._split",
        "extractive_summary": "._summarize",
        "Summary": "._summary_model",
        "TRUNCATION_MARKER": "._truncate",
    },
)
