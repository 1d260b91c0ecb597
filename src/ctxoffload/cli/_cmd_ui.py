"""`ctxoffload ui`: registered here like every command; the viewer itself lives in `cli/ui/`."""

from .ui import register

__all__ = ["register"]
