"""What leaves the context and how it comes back."""

from ._protocol import Offloader

__all__ = ["Offloader"]
