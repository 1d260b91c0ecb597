"""What leaves the context and how it comes back."""

from ._protocol import Offloader
from ._retrieval import retrieve_offloaded_content
from ._tool import RETRIEVAL_TOOL_NAME, retrieval_tool

__all__ = ["RETRIEVAL_TOOL_NAME", "Offloader", "retrieval_tool", "retrieve_offloaded_content"]
