"""What leaves the context and how it comes back."""

from ._protocol import Offloader
from ._retrieval import retrieval_tool, retrieve_offloaded_content

__all__ = ["Offloader", "retrieval_tool", "retrieve_offloaded_content"]
