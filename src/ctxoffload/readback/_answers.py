"""How every tool entry point answers a failure: as text starting with "Error:", never as an
exception.

A model reads the answer and corrects itself; an exception would end the agent's step (or,
in another framework, the run). One rule for every entry (Read, Grep, Glob, the
`FileToolbox` methods, `retrieve_offloaded_content`), in one place: `answering`.
"""

from __future__ import annotations

import errno
import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

from ..exceptions import CtxOffloadError, ToolError
from ._confine import os_error_message

__all__ = ["answering", "error_answer"]

_Function = TypeVar("_Function", bound=Callable[..., Any])

_NO_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


def _out_of_descriptors(exc: BaseException) -> OSError | None:
    """The `OSError` of a process (or system) out of file descriptors behind `exc`, if any:
    an error that wraps it (an `InvalidReference` from a file that could not be opened)
    would otherwise name a consequence, not the cause."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _NO_DESCRIPTORS:
            return current
        current = current.__cause__ or current.__context__
    return None


def error_answer(exc: Exception) -> str:
    """The `Error: ...` answer to `exc`; `exc` itself is raised again when it is a bug.

    A `ToolError` already says what to do. Running out of file descriptors is said as such
    (with the fix), wherever in the chain of causes it is. Other ctxoffload errors, and
    `OSError`, `TypeError`, `ValueError` (an argument a model wrote of the wrong type or
    value), are answered with their message.
    """
    if isinstance(exc, ToolError):
        return f"Error: {exc}"
    exhausted = _out_of_descriptors(exc)
    if exhausted is not None:
        return "Error: " + os_error_message("cannot open a file", exhausted)
    if isinstance(exc, OSError) and not isinstance(exc, CtxOffloadError):
        return "Error: " + os_error_message("the tool failed", exc)
    if isinstance(exc, CtxOffloadError | TypeError | ValueError):
        return f"Error: {exc}"
    raise exc


def answering(function: _Function) -> _Function:
    """`function` (sync or async) answering its failures with `error_answer` instead of
    raising them; its name, docstring, signature and marks are kept (`functools.wraps`)."""
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def answer_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await function(*args, **kwargs)
            except Exception as exc:
                return error_answer(exc)

        return cast(_Function, answer_async)

    @functools.wraps(function)
    def answer(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            return error_answer(exc)

    return cast(_Function, answer)
