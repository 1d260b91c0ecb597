"""A lost lease is never taken for a store's failure.

Where a write to the workspace may fail and the run goes on without it (a result kept whole,
an event unrecorded), the failure is caught whatever it is; but `SessionBusyError` from a
lease that lapsed and was taken over means this writer lost the session: it stops, it does not
work around it. Every such catch goes through `logged_unless_lease_lost` (or
`raised_unless_lease_lost`), so no new one forgets to let it through.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

from .exceptions import SessionBusyError

__all__ = ["StoreFailure", "logged_unless_lease_lost", "raised_unless_lease_lost"]

logger = logging.getLogger("ctxoffload")


class StoreFailure:
    """What a `logged_unless_lease_lost` block failed with (None: it did not fail); true
    when it failed."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: Exception | None = None

    def __bool__(self) -> bool:
        return self.error is not None


@contextlib.contextmanager
def logged_unless_lease_lost(
    message: str, *args: object, catching: type[Exception] = Exception
) -> Iterator[StoreFailure]:
    """Log a failure of the block as a warning (`message % args`, then `: ` and the error)
    and go on after it, the failure said by the object yielded; a `SessionBusyError` (the
    writer lost the session) is raised as it is.

    Args:
        message: what could not be done and what is done instead, a `%` format.
        args: its arguments.
        catching: the failures passed over (any by default).
    """
    failure = StoreFailure()
    try:
        yield failure
    except SessionBusyError:
        raise  # (the writer lost the session: it stops, it does not work around it)
    except catching as exc:
        logger.warning("%s: %s", message % args, exc)
        failure.error = exc


@contextlib.contextmanager
def raised_unless_lease_lost(instead: Callable[[Exception], Exception]) -> Iterator[None]:
    """Raise a failure of the block as `instead(error)` (from it); a `SessionBusyError`
    (the writer lost the session) is raised as it is, never said as a store's failure."""
    try:
        yield
    except SessionBusyError:
        raise  # (the writer lost the session: it stops, it does not work around it)
    except Exception as exc:
        raise instead(exc) from exc
