"""One event loop on a thread of its own, for hosts that call ctxoffload from synchronous code.

The workspace's locks and a pipeline's or projector's state belong to one event loop; a sync
host (Strands' conversation manager, a LangChain `invoke`, `Projector.project_sync`) may call
from any thread, and from inside a loop of its own. Each caller runs its coroutines here, on the
one loop this object starts on first use, and waits for the result.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread"]

_T = TypeVar("_T")


class LoopThread:
    """An event loop on a daemon thread, started on the first `run`, stopped when this object
    is collected (the thread ends with its owner, not with the process)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run `coro` on this object's loop and return its result (or raise its exception)."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=_serve, args=(loop,), name=self._name, daemon=True).start()
                weakref.finalize(self, loop.call_soon_threadsafe, loop.stop)
                self._loop = loop
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def is_current(self) -> bool:
        """Whether the caller runs on this object's loop (where `run` would wait forever)."""
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()
