"""What leaves the context and how it comes back."""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..workspace._protocol import Offloader
    from ._retrieval import retrieve_offloaded_content
    from ._tool import RETRIEVAL_TOOL_NAME, retrieval_tool

__all__ = [
    "RETRIEVAL_TOOL_NAME",
    "Offloader",
    "retrieval_tool",
    "retrieve_offloaded_content",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "Offloader": "..workspace._protocol",
        "retrieve_offloaded_content": "._retrieval",
        "RETRIEVAL_TOOL_NAME": "._tool",
        "retrieval_tool": "._tool",
    },
)
