"""The mark a read-back tool carries: what it returns is never offloaded again.

Reading an offloaded file back must not offload it once more (the agent would loop); the
`Agent` and its notices know the read-back tools by this mark, whatever their names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["mark_reader"]

_Function = TypeVar("_Function", bound=Callable[..., Any])


def mark_reader(function: _Function) -> _Function:
    """Mark `function` as a read-back tool (`function.ctxoffload_reader = True`); return it."""
    function.ctxoffload_reader = True  # type: ignore[attr-defined]
    return function
