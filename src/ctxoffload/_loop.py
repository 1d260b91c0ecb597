"""One event loop on a thread of its own, for hosts that call ctxoffload from synchronous code.

The workspace's locks and a pipeline's or projector's state belong to one event loop; a sync
host (Strands' conversation manager, a LangChain `invoke`, `Projector.project_sync`) may call
from any thread, and from inside a loop of its own. Each caller runs its coroutines here, on the
one loop this object starts on first use, and waits for the result.

A projector's sync callers need no thread at all: a `CallerLoop` is run by the thread that calls,
while it waits (a hop to a loop thread and back cost 0.12 ms of CPU, two context switches and
0.14 ms of latency, and a model call through a sync host made two or three).

Blocking work (a file's I/O) is awaited through `off_loop`: in a worker thread, so that a host's
event loop never blocks on a disk, except on a `CallerLoop`'s loop, that of a `LoopThread` made
with `inline_io=True` (one session's work, its caller waiting for it) and the loop `run_private`
makes for one coroutine of sync code, where it runs inline. There a thread hop only adds work:
it cost 0.15-0.18 ms of CPU and four context switches on the 2-core machine of
`bench/bench_peers.py`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["CallerLoop", "LoopLock", "LoopThread", "off_loop", "off_loop_long", "run_private"]

_T = TypeVar("_T")


# The loops whose blocking work runs inline (`LoopThread(inline_io=True)`).
_INLINE: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
# The loops of `CallerLoop`s: run by their caller, while it waits, with nothing on them between.
_CALLER: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


class LoopThread:
    """An event loop on a daemon thread, started on the first `run`, stopped when this object
    is collected (the thread ends with its owner, not with the process).

    Args:
        name: the thread's name.
        inline_io: `off_loop` runs blocking work inline on this loop rather than in a worker
            thread: for a loop that runs one caller's work at a time while that caller waits
            for it (a projector's), where no other work waits for the loop meanwhile.
    """

    def __init__(self, name: str, *, inline_io: bool = False) -> None:
        self._name = name
        self._inline_io = inline_io
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run `coro` on this object's loop and return its result (or raise its exception)."""
        with self._lock:
            if self._loop is None:
                loop = _new_loop()
                if self._inline_io:
                    _INLINE.add(loop)
                threading.Thread(target=_serve, args=(loop,), name=self._name, daemon=True).start()
                weakref.finalize(self, loop.call_soon_threadsafe, loop.stop)
                self._loop = loop
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def later(self, delay: float, work: Callable[[], Any]) -> None:
        """Run `work()` on a worker thread `delay` seconds from now, by a timer of this
        object's loop (nothing waits for it; an error it raises is logged). The loop must
        have run once (`run`)."""
        loop = self._loop
        if loop is None:
            raise RuntimeError(f"{self._name}: a timer set before the loop's first run")

        def due() -> None:
            try:
                future = loop.run_in_executor(None, work)
            except RuntimeError:
                # The interpreter is exiting (its executors shut down before this daemon
                # thread's timers): what the work would release, the exit releases.
                return
            future.add_done_callback(_log_failure)

        # (In an empty context: the timer would keep the caller's until it is due.)
        loop.call_soon_threadsafe(loop.call_later, delay, due, context=contextvars.Context())


def _new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop that holds nothing of its maker's context: a loop's own wake-up
    reader keeps a copy of the context it was made in for as long as the loop lives, and
    a loop lives as long as its owner (a door's hooks, serving one request after another),
    so the first request's context variables (a host's crew, agent and model in CrewAI's
    runtime state, a tracing span) stayed alive with it."""
    return contextvars.Context().run(asyncio.new_event_loop)


def _log_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        logging.getLogger("ctxoffload").warning(
            "a background task of ctxoffload failed: %r", future.exception()
        )


class CallerLoop:
    """One event loop for the sync callers of one piece of work (a projector's), run by the
    thread that calls `run`, while it waits for the result: no thread of its own, no hop.
    Callers from several threads take turns; the loop, and the locks and state on it, stay
    one.

    Between calls the loop does not run, so nothing may be left on it to go on alone (a
    background summary needs a `LoopThread`). A caller on a thread where a loop runs (a sync
    hook called from async code) cannot run another one there: its coroutine runs on the
    same loop, on a thread of this object's own, while it waits. Each coroutine runs in a
    context of its own, as on a loop thread: nothing of the caller's context variables (a
    host's tracing, its streaming callbacks) reaches the work. Blocking work (`off_loop`)
    runs inline: the caller waits for it anyway.

    Args:
        name: the name of the thread made for callers inside a running loop.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._helper: ThreadPoolExecutor | None = None

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run `coro` on this object's loop and return its result (or raise its exception)."""
        with self._lock:
            loop = self._loop
            if loop is None:
                loop = self._loop = _new_loop()
                _INLINE.add(loop)
                _CALLER.add(loop)
                weakref.finalize(self, loop.close)
            # The task is made in an empty context, which it copies.
            task = contextvars.Context().run(loop.create_task, coro)
            if not _loop_runs_here():
                return loop.run_until_complete(task)
            if self._helper is None:
                self._helper = ThreadPoolExecutor(1, thread_name_prefix=self._name)
                weakref.finalize(self, self._helper.shutdown, wait=False)
            return self._helper.submit(loop.run_until_complete, task).result()


async def off_loop_long(work: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """`work(*args, **kwargs)`, blocking work that may take seconds (a host's sync model
    called for a summary), awaited without blocking a loop that anything else needs: inline
    only on a `CallerLoop`'s loop, whose caller waits for all it does and which nothing else
    runs on (a thread hop there only adds work); in a worker thread anywhere else, a
    `LoopThread` made with `inline_io` included, whose loop a background summary shares with
    its caller's next calls. The one rule for every door's sync model."""
    if asyncio.get_running_loop() in _CALLER:
        return work(*args, **kwargs)
    return await asyncio.to_thread(work, *args, **kwargs)


def _loop_runs_here() -> bool:
    """Whether an event loop runs on this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def off_loop(work: Callable[..., _T], /, *args: Any) -> _T:
    """`work(*args)`, blocking work (a file's I/O), awaited without blocking the running loop:
    in a worker thread (`asyncio.to_thread`), or inline on a `CallerLoop`'s loop and on a
    `LoopThread` made with `inline_io=True`, whose caller waits for the result anyway."""
    if asyncio.get_running_loop() in _INLINE:
        return work(*args)
    return await asyncio.to_thread(work, *args)


def run_private(coro: Coroutine[Any, Any, _T]) -> _T:
    """`asyncio.run(coro)` for sync code on a thread where no loop runs: a loop of its own for
    this one coroutine, its caller waiting for the result, so its blocking work (`off_loop`)
    runs inline there rather than in worker threads started, and joined, for each run."""

    async def marked() -> _T:
        _INLINE.add(asyncio.get_running_loop())
        return await coro

    return asyncio.run(marked())


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        try:
            _cancel_left(loop)
        finally:
            loop.close()


def _cancel_left(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still pending on a stopped loop and let it end, as `asyncio.run` does:
    a lease's renewal task, left sleeping on the loop of the door object that was collected,
    was destroyed pending with the loop ("Task was destroyed but it is pending!" on stderr
    at the host's exit). A lease dropped unreleased still expires: only its beat stops."""
    left = asyncio.all_tasks(loop)
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))


class LoopLock:
    """An asyncio lock for whichever loop runs: `lock()` is the one made for the running
    loop, a new one when the object was used on another loop before.

    An `asyncio.Lock` belongs to the first loop it is contended on, and refuses any other
    ("bound to a different event loop"); a host may run each of a conversation's runs on a
    loop of its own (ADK's `Runner.run`, an `asyncio.run` per request). Steps on two loops at
    once are not kept apart: a conversation has one live run (its lease), whose steps share a
    loop.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def __call__(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        held = self._held
        if held is None or held[0] is not loop:
            held = self._held = (loop, asyncio.Lock())
        return held[1]
