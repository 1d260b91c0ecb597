"""What leaves the context and how it comes back."""

from ._protocol import Offloader
from ._retrieval import retrieve_offloaded_content

__all__ = ["Offloader", "retrieve_offloaded_content"]
