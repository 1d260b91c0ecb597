"""The arguments a model passes to a read-back tool: taken as they come, and named back.

Models send numbers as strings now and then, and sometimes absurd values; an error names the
value (shortened, so an absurd one cannot flood the answer) and what to pass instead.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import ToolError

__all__ = ["as_int", "plural", "quote"]


def quote(value: object, limit: int = 200) -> str:
    """`repr(value)` for a message, shortened so an absurd argument cannot flood the answer."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def as_int(name: str, value: Any, *, minimum: int) -> int:
    """An integer argument from the model, which sometimes sends numbers as strings.

    Raises:
        ToolError: `value` is not a whole number, or is below `minimum`.
    """
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ToolError(f"{name}={quote(value)} is not a whole number") from None
    if number < minimum:
        raise ToolError(f"{name}={number} must be at least {minimum}")
    return number


def plural(count: int, noun: str) -> str:
    """`1 line`, `2 lines`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
