"""How a `ctxoffload` command meets Ctrl-C and SIGTERM: SIGTERM raises KeyboardInterrupt as
Ctrl-C does, so every command ends the same way on either (its cleanup run, one line, exit
130); and a step that must not be cut in half holds both until it is done.

Both are written as classes rather than with `contextlib`, whose import (2-5 ms) is more
than a tenth of what `ctxoffload --help` costs over `import argparse`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from types import FrameType
else:
    # `signal` brings `enum`, 10 ms or more of every command's start-up (a plain `grep` does
    # without it); the interpreter has imported `_signal`, whose functions `signal` re-exports.
    import _signal as signal

__all__ = ["signals_held", "sigterm_interrupts"]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


class sigterm_interrupts:  # (used as a function: `with sigterm_interrupts():`)
    """SIGTERM raises KeyboardInterrupt while the block runs; the handler before it is put
    back after (a test runs commands in its own process). Outside the main thread, where no
    handler can be set, nothing changes."""

    def __enter__(self) -> None:
        try:
            self._previous = signal.signal(signal.SIGTERM, _interrupt)
            self._set = True
        except ValueError:  # not the main thread
            self._set = False

    def __exit__(self, *exc: object) -> None:
        if self._set and self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


class signals_held:  # (used as a function: `with signals_held():`)
    """Ctrl-C and SIGTERM wait until the block is done, then raise KeyboardInterrupt: what
    the block does is finished, or (a signal before it began) never started.

    Raises:
        KeyboardInterrupt: after the block, when either signal came while it ran.
    """

    def __enter__(self) -> None:
        self._came: list[int] = []
        self._previous = {
            number: signal.signal(number, self._hold) for number in (signal.SIGINT, signal.SIGTERM)
        }

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        self._came.append(signum)

    def __exit__(self, failed: type[BaseException] | None, *exc: object) -> None:
        for number, handler in self._previous.items():
            if handler is not None:
                signal.signal(number, handler)
        if self._came and failed is None:  # (an error of the block goes on as it is)
            raise KeyboardInterrupt
