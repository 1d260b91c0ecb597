"""How a `ctxoffload` command meets Ctrl-C and SIGTERM: SIGTERM raises KeyboardInterrupt as
Ctrl-C does, so every command ends the same way on either (its cleanup run, one line, exit
130); and a step that must not be cut in half holds both until it is done."""

from __future__ import annotations

import contextlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Iterator
    from types import FrameType
else:
    # `signal` brings `enum`, 10 ms or more of every command's start-up (a plain `grep` does
    # without it); the interpreter has imported `_signal`, whose functions `signal` re-exports.
    import _signal as signal

__all__ = ["signals_held", "sigterm_interrupts"]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while the block runs; the handler before it is put
    back after (a test runs commands in its own process). Outside the main thread, where no
    handler can be set, nothing changes."""
    try:
        previous = signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is done, then raise KeyboardInterrupt: what
    the block does is finished, or (a signal before it began) never started.

    Raises:
        KeyboardInterrupt: after the block, when either signal came while it ran.
    """
    came: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        came.append(signum)

    previous = {number: signal.signal(number, hold) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            if handler is not None:
                signal.signal(number, handler)
    if came:
        raise KeyboardInterrupt
