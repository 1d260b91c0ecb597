"""One live run per conversation (the `door` event each run opens the record with, and the
lease it takes: opening.py).

A door whose host has runs (an `invoke`, a `Runner.run`, a reply, a connection) takes the
session's lease when a run begins and gives it up when the run ends: a second run of the same
conversation meanwhile is refused with `SessionBusyError`, its advice in the door's own terms
(never the `Agent`'s `if_busy`); a dead holder's lease is taken over as the `Agent` takes it
(`take_lease`). A workspace that cannot be written at all does not stop the run (its writes
fail the same way and leave the content in the context).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Hashable, Iterator
from typing import Any, Generic, TypeVar

from .._disk.ids import child_prefix
from .._disk.let_go import let_go, still_kept, was_let_go
from ..exceptions import SessionBusyError
from ..workspace import SessionLease, new_session, writing_as
from .doors import Door
from .opening import begin_run, door_busy, record_door, record_nested
from .recent import KEPT, RecentKeys

__all__ = ["ANNOUNCED_KEPT", "SESSIONS_KEPT", "HostRuns", "Kept"]

logger = logging.getLogger("ctxoffload")

_T = TypeVar("_T")
_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")

SESSIONS_KEPT = 256
"""How many conversations a door keeps its state of (a projector, the history read), the
least recently used forgotten first once their run is over (`HostRuns.forget_idle`): one door
object serves every conversation of a server, and a conversation forgotten, then back,
projects from its record as one resumed in a new process does."""

ANNOUNCED_KEPT = KEPT
"""How many sessions a `HostRuns` remembers having written the `door` event of, the most
recent kept: a server that opens a session per run must not grow without end, and a session
forgotten then back gets its `door` event again (one more line, nothing lost)."""


class HostRuns:
    """The runs of a door whose host says when a run begins but may never say it ended (a
    LangChain run that raised skips `after_agent`): each holds its session's lease from
    `begin` to `end`, and a run that holds one here without ending is taken for gone once it
    has no call in flight (`active`) for `grace` seconds, so a crashed run never blocks the
    next one, while a live one between two calls is never overtaken.

    The leases are taken, renewed (a bucket's) and released on one loop of this object's own,
    whatever thread or loop the host calls from.

    A host whose runs say whether they are still going, or that keeps an object for each run,
    passes `live` (a run is gone once it says so, at once) and `owner` (the lease is let go of
    when that object is collected) to `begin`: then no run waits out `grace`.

    A host whose runs may stop without a word and go on later, elsewhere (LangGraph's: a run
    that raised, or one stopped at an interrupt and resumed from its checkpoint in another
    process), makes this object with `release_idle`: a run's lease is given up once it has
    had no call in flight for that many seconds, and taken again by its next call (`calling`),
    so another object or process may take the conversation meanwhile, and a run resumed
    anywhere takes its lease at its first call. A call that raised gives it up at once.

    A door that keeps state per conversation between runs (a projector) keeps it in a `Kept`
    of this object (`keep`): whenever a run gives its session up here (it ended, it was
    taken for gone, it was idle past `release_idle`, a call of it raised; a run whose
    `owner` was collected, soon after, on this object's loop), that session's state lets go
    of what only that run needed (`Projector.release`: the whole texts of the outputs it
    cut), so a server keeps per conversation what the next run needs, not the last run's
    outputs.
    `at_run_end` hears of the same moments; it is called with this object's lock held,
    before another run of the session may begin, and must not wait for a lock held while
    this object's methods are called.

    Args:
        workspace: the door's workspace.
        door: the door.
        grace: seconds a run that holds a lease here must stay idle to be taken for gone.
        release_idle: seconds after which an idle run's lease is given up (see above); 0
            keeps it until the run ends.
        at_run_end: called with a run's session once the run has given it up (see above).
    """

    def __init__(
        self,
        workspace: object,
        door: Door,
        *,
        grace: float = 1.0,
        release_idle: float = 0.0,
        at_run_end: Callable[[str], None] | None = None,
    ) -> None:
        from .._loop import LoopThread

        self.workspace = workspace
        self.door = door
        self.grace = grace
        self.release_idle = release_idle
        self._at_run_end = at_run_end
        # The sessions of runs let go of by the collector (`_let_go`), which must not wait:
        # said to `at_run_end` at the next `begin` or `end`.
        self._let_go_of: collections.deque[str] = collections.deque()
        self._kept: list[Kept[Any, Any]] = []  # the doors' state per conversation (`keep`)
        self._loop = LoopThread(f"ctxoffload-{door.name}-runs")
        self._runs: dict[str, _Run] = {}  # session -> the run of this process writing it
        # The sessions whose `door` event this object wrote, the most recent last.
        self._announced = RecentKeys(ANNOUNCED_KEPT)
        self.last_session: str | None = None
        """The session of the run begun last here (a nested run's child session aside); None
        before the first. Where a run the host gave no id of its own went: each door object
        that runs through this one gives it as its `last_session`, for `ctxoffload show`."""
        self._lock = threading.Lock()

    def keep(self, session_of: Callable[[_V], str], release: Callable[[_V], None]) -> Kept[Any, _V]:
        """A door's state per conversation, kept between its runs by this object's rules (see
        `Kept`): `release(state)` whenever a run of `session_of(state)` gives it up here."""
        kept: Kept[Any, _V] = Kept(self, session_of, release)
        self._kept.append(kept)
        return kept

    def begin(
        self,
        session: str,
        run: str,
        *,
        conversation: object = None,
        live: Callable[[], bool] | None = None,
        owner: object = None,
        agent: str | None = None,
        parent: dict[str, Any] | None = None,
    ) -> None:
        """Run `run` begins writing `session`: take its lease (a no-op for the run holding it).

        Args:
            session: the conversation's session.
            run: the run's id.
            conversation: the host's own id of the conversation, recorded.
            agent: who the lease names, for a host whose agents have names (the door's
                name by default): a refusal names the agent holding the session.
            live: whether the run is still going, for a host whose runs say so (then a run
                is taken for gone when it says it is, at once, not after `grace` idle).
            owner: the host's object for the run, held weakly: when it is collected, the
                run's lease is let go of unreleased, as a lease object dropped is (a disk
                lock closes with its descriptor, a taker of this process takes it at once, a
                bucket's or a database's lapses), since the collector may run anywhere and
                must not wait (None: only `end` and the next run end it).
            parent: the run this one is nested in, when it writes a session of its own (an
                agent run as a tool of another, given its own conversation): `{"session",
                "agent"}` of the parent, and `name` and `tool_id` of the call, recorded in
                both records (`record_nested`), as `begin_child` does.

        Raises:
            SessionBusyError: another live run (of this process or another) writes it.
        """
        with self._lock:
            self._begin_locked(session, run, conversation, live, owner, agent, parent)

    def _begin_locked(
        self,
        session: str,
        run: str,
        conversation: object = None,
        live: Callable[[], bool] | None = None,
        owner: object = None,
        agent: str | None = None,
        parent: dict[str, Any] | None = None,
    ) -> None:
        """`begin`, with `_lock` held."""
        self._say_let_go()
        current = self._runs.get(session)
        if current is not None and current.run == run:
            return
        if current is not None:
            if not self._gone(current):
                busy = SessionBusyError("", session, _holder(current))
                raise door_busy(self.door, busy, conversation)
            self._drop(session, current)
        announce = session not in self._announced or parent is not None
        take = functools.partial(
            begin_run,
            self.workspace,
            self.door,
            session,
            conversation=conversation,
            agent=agent,
            announce=announce,
            parent=_door_link(parent),
        )
        try:
            lease = self._on_loop(take())
        except SessionBusyError as busy:
            if not (_release_ended(busy.holder) or _release_let_go(busy.holder)):
                raise
            lease = self._on_loop(take())
        if parent is not None:
            self._on_loop(record_nested(self.workspace, self.door, parent, session))
        self._hold(session, run, lease, live, owner)
        if parent is None:
            self.last_session = session

    def begin_child(
        self,
        parent: str,
        name: str,
        run: str,
        *,
        link: dict[str, Any],
        live: Callable[[], bool] | None = None,
        owner: object = None,
    ) -> str:
        """Run `run`, nested in a live run of session `parent` (an agent the host runs as a
        tool of another, in the parent's configuration), begins: it writes a new session of
        its own, `{parent}--{name}-{6 hex}` as our Agent's sub-agents do, taken under its
        lease, its `door` event naming `link` (the parent's session and agent), and the
        parent's record a `subagent` event naming it (`record_nested`: `link` may add the
        call's `name` and `tool_id`), so the parent reads its files back under
        `isolate_sessions`. Its own context, its own window; the parent's run goes on.
        `live` and `owner` as `begin`'s.

        Returns:
            The child's session.

        Raises:
            ConfigError: no new session id could be drawn (see `new_session`).
        """

        async def take() -> tuple[str, SessionLease | None]:
            session, lease = await new_session(
                self.workspace, child_prefix(parent, name), self.door.name
            )
            with writing_as(self.door.name, session):
                await record_door(self.workspace, self.door, session, parent=_door_link(link))
            await record_nested(self.workspace, self.door, {"name": name, **link}, session)
            return session, lease

        with self._lock:
            session, lease = self._on_loop(take())
            self._hold(session, run, lease, live, owner)
        return session

    def _hold(
        self,
        session: str,
        run: str,
        lease: SessionLease | None,
        live: Callable[[], bool] | None,
        owner: object,
    ) -> None:
        """Keep `run` as the writer of `session`, under `lease` (with `_lock` held)."""
        self._announced.add(session)
        taken = self._runs[session] = _Run(run, lease, live, self)
        token = lease.holder.get("token") if lease is not None else None
        if live is not None and isinstance(token, str):
            _SAY_IF_LIVE[token] = taken
        if owner is not None:
            let_go_of = functools.partial(_let_go, weakref.ref(taken), session)
            taken.owner = weakref.ref(owner, let_go_of)
        if self.release_idle:
            self._watch(session, taken)

    @contextlib.contextmanager
    def calling(self, session: str, run: str, *, conversation: object = None) -> Iterator[None]:
        """A call of run `run` is in flight meanwhile (as `active`), the run's lease taken
        first if this object does not hold it for the run: a run idle for `release_idle`
        seconds gave it up, and a run resumed from the host's saved state, in another process
        or by another object, never began here. An empty `run` (a call outside any run)
        takes nothing.

        Raises:
            SessionBusyError: another live run writes the session now.
        """
        if not run:
            yield
            return
        with self._lock:
            current = self._runs.get(session)
            if current is None or current.run != run:
                self._begin_locked(session, run, conversation)
                current = self._runs[session]
            current.calls += 1
            current.beats += 1
        raised = False
        try:
            yield
        except BaseException:
            raised = True
            raise
        finally:
            with self._lock:
                current.calls -= 1
                current.beats += 1
                current.idle_since = time.monotonic()
                idle = not current.calls and not current.entered
                ours = self._runs.get(session) is current
                if raised and idle and ours and self.release_idle:
                    # A call that raised most often ends its run (LangGraph says nothing
                    # then): the lease goes at once; a retry takes it again.
                    self._drop(session, current)
                elif idle and ours and self.release_idle and not current.watched:
                    self._watch(session, current)

    def _watch(self, session: str, run: _Run) -> None:
        """Give `run`'s lease up once it has been idle for `release_idle` seconds (one watch
        at a time per run: it looks again while calls come and go). The look runs off the
        loop: `begin` holds the lock while it waits on the loop."""
        run.watched = True
        run.idle_since = time.monotonic()
        self._loop.later(self.release_idle, functools.partial(self._idle_check, session, run))

    def _idle_check(self, session: str, run: _Run) -> None:
        # It runs on a worker of the loop's own pool, which the lease's file work needs too:
        # it never waits for the lock (`begin` holds it while that work runs), it looks
        # again a little later.
        if not self._lock.acquire(blocking=False):
            self._loop.later(0.05, functools.partial(self._idle_check, session, run))
            return
        try:
            if self._runs.get(session) is not run:
                run.watched = False
                return
            busy = run.calls or run.entered
            wait = self.release_idle - (time.monotonic() - run.idle_since)
            if not busy and wait <= 0:
                run.watched = False
                self._drop(session, run)
                return
        finally:
            self._lock.release()
        self._loop.later(
            max(wait, 0.0) if not busy else self.release_idle,
            functools.partial(self._idle_check, session, run),
        )

    async def abegin(
        self,
        session: str,
        run: str,
        *,
        conversation: object = None,
        live: Callable[[], bool] | None = None,
        owner: object = None,
        agent: str | None = None,
        parent: dict[str, Any] | None = None,
    ) -> None:
        """`begin` from async code (its waits happen on a worker thread)."""
        await asyncio.to_thread(
            self.begin,
            session,
            run,
            conversation=conversation,
            live=live,
            owner=owner,
            agent=agent,
            parent=parent,
        )

    def end(self, session: str, run: str) -> None:
        """Run `run` has ended: give its session up (nothing when it holds none)."""
        with self._lock:
            self._say_let_go()
            current = self._runs.get(session)
            if current is not None and current.run == run:
                self._drop(session, current)

    def holds(self, session: str) -> bool:
        """Whether a run of this process writes `session` now (begun, not ended)."""
        with self._lock:
            return session in self._runs

    def forget_idle(
        self, kept: collections.OrderedDict[Any, _V], session_of: Callable[[_V], str]
    ) -> list[_V]:
        """Past `SESSIONS_KEPT`, remove from `kept` (a door's state per conversation, the
        least recently used first) the entries whose session no run of this process writes
        (`holds`): a run going on keeps its state, however long ago it began.

        Args:
            kept: the door's state by conversation, the least recently used first.
            session_of: the session an entry's state writes.

        Returns:
            The entries removed, oldest first.
        """
        forgotten: list[_V] = []
        if len(kept) <= SESSIONS_KEPT:
            return forgotten
        for key in list(kept)[: len(kept) - SESSIONS_KEPT]:
            state = kept[key]
            if not self.holds(session_of(state)):
                del kept[key]
                forgotten.append(state)
        return forgotten

    async def aend(self, session: str, run: str) -> None:
        """`end` from async code."""
        await asyncio.to_thread(self.end, session, run)

    @contextlib.contextmanager
    def active(self, session: str, run: str) -> Iterator[None]:
        """A call of run `run` is in flight meanwhile (so the run is live)."""
        current = self._runs.get(session)
        if current is None or current.run != run:
            yield
            return
        current.calls += 1
        current.beats += 1
        try:
            yield
        finally:
            current.calls -= 1
            current.beats += 1

    def enter(self, session: str, run: str, call: Hashable) -> None:
        """A call of run `run` is in flight until `leave(session, run, call)`: for a host whose
        hooks come as a pair before and after a call (ADK's callbacks), not around it.
        Entering a call already in flight changes nothing."""
        current = self._runs.get(session)
        if current is None or current.run != run or call in current.entered:
            return
        current.entered.add(call)
        current.beats += 1

    def leave(self, session: str, run: str, call: Hashable) -> None:
        """The call `enter` named has ended (leaving one that is not in flight changes
        nothing: a host may report the end of a call twice)."""
        current = self._runs.get(session)
        if current is None or current.run != run or call not in current.entered:
            return
        current.entered.discard(call)
        current.beats += 1

    def _gone(self, run: _Run) -> bool:
        """Whether a run holding a lease here is gone: its host's object for it collected (a
        call it left in flight never ends), as it says (`live`), else no call in flight, and
        none begun or ended, for `grace` seconds."""
        if run.owner is not None and run.owner() is None:
            return True
        if run.live is not None:
            return not run.live()
        deadline = time.monotonic() + self.grace
        beats = run.beats
        while time.monotonic() < deadline:
            if run.calls > 0 or run.entered or run.beats != beats:
                return False
            time.sleep(min(0.02, self.grace))
        return run.calls == 0 and not run.entered and run.beats == beats

    def _on_loop(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run `coro` on this object's loop, in a context of its own: what the loop makes (its
        own handles, the task of `coro`, a bucket lease's renewal) keeps the context it was
        made in, and the host's may hold the host's run (the OpenAI Agents SDK's), which must
        be free to go when the run ends."""
        return contextvars.Context().run(self._loop.run, coro)

    def _say_let_go_soon(self) -> None:
        """Say the runs the collector let go of to `at_run_end` on a worker of this object's
        loop, now, rather than at the next `begin` or `end` (a door object per conversation,
        whose next run may be long in coming, or never come). Called by the collector: it
        only sets a timer (a callback queued for the loop, its wake-up byte written)."""
        try:
            self._loop.later(0, self._say_let_go_now)
        except RuntimeError:  # (the loop never ran, or the interpreter is exiting)
            return

    def _say_let_go_now(self) -> None:
        # On a worker of the loop's own pool, as `_idle_check`: it never waits for the lock
        # (`begin` holds it while the lease's work runs on that pool), it looks again later.
        if not self._lock.acquire(blocking=False):
            self._loop.later(0.05, self._say_let_go_now)
            return
        try:
            self._say_let_go()
        finally:
            self._lock.release()

    def _say_let_go(self) -> None:
        """Say to `at_run_end` the runs the collector let go of since (with `_lock` held),
        but for a session a run of this object writes again meanwhile."""
        while self._let_go_of:
            session = self._let_go_of.popleft()
            if session not in self._runs:
                self._run_ended(session)

    def _run_ended(self, session: str) -> None:
        """A run of `session` gave it up here (with `_lock` held): say so to the door."""
        for kept in self._kept:
            kept.run_ended(session)
        if self._at_run_end is not None:
            self._at_run_end(session)

    def _drop(self, session: str, run: _Run) -> None:
        self._runs.pop(session, None)  # (the collector may have dropped it: `_let_go`)
        lease = run.lease  # once: the collector may let go of it meanwhile (`_let_go`)
        if lease is not None:
            self._on_loop(lease.release())
        self._run_ended(session)


class Kept(Generic[_K, _V]):
    """A door's state per conversation kept between its runs (a projector, the history it
    read), by the door's key, the least recently used first: made when a conversation's
    first call needs it (`get_or_make`), released when a run of its session gives the
    session up (`HostRuns.keep`), and past `SESSIONS_KEPT` forgotten once no run of it is
    going on (`HostRuns.forget_idle`). One door object serves every conversation of a
    server; a conversation forgotten, then back, projects from its record as one resumed in
    a new process does.

    Safe to call from any thread: `get_or_make` takes this object's lock, then the runs'
    lock (to see which are going on); a run's end, said with the runs' lock held, takes
    neither (one look-up of the entries, then the state's own `release`).
    """

    def __init__(
        self, runs: HostRuns, session_of: Callable[[_V], str], release: Callable[[_V], None]
    ) -> None:
        self._runs = runs
        self._session_of = session_of
        self._release = release
        self._kept: collections.OrderedDict[_K, _V] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get_or_make(
        self,
        key: _K,
        make: Callable[[], _V],
        *,
        usable: Callable[[_V], bool] | None = None,
    ) -> tuple[_V, list[_V]]:
        """The state kept for `key`, made by `make` if there is none (or if `usable` says the
        one kept is not), now the most recently used; and the entries forgotten to make room
        for a new one, oldest first (the door drops what else it keeps of them)."""
        with self._lock:
            state = self._kept.get(key)
            if state is not None and (usable is None or usable(state)):
                self._kept.move_to_end(key)
                return state, []
            state = self._kept[key] = make()
            self._kept.move_to_end(key)
            return state, self._runs.forget_idle(self._kept, self._session_of)

    def get(self, key: _K) -> _V | None:
        """The state kept for `key` (None: none), its place among the recent left as it is."""
        return self._kept.get(key)

    def values(self) -> list[_V]:
        """The states kept, the least recently used first."""
        return list(self._kept.values())

    def __contains__(self, key: object) -> bool:
        return key in self._kept

    def __len__(self) -> int:
        return len(self._kept)

    def run_ended(self, session: str) -> None:
        """A run of `session` gave it up: its state lets go of what only that run needed."""
        for state in list(self._kept.values()):  # (one step: another thread may add one)
            if self._session_of(state) == session:
                self._release(state)


class _Run:
    """A run of this process holding a session: its id, lease, calls in flight, how to ask
    whether it is still going (None: the host does not say), and the `HostRuns` holding it."""

    __slots__ = (
        "__weakref__",
        "beats",
        "calls",
        "entered",
        "held_by",
        "idle_since",
        "lease",
        "live",
        "owner",
        "run",
        "watched",
    )

    def __init__(
        self,
        run: str,
        lease: SessionLease | None,
        live: Callable[[], bool] | None = None,
        held_by: HostRuns | None = None,
    ) -> None:
        self.run = run
        self.lease = lease
        self.live = live
        self.held_by = None if held_by is None else weakref.ref(held_by)
        self.owner: weakref.ref[Any] | None = None  # the host's object for the run
        self.calls = 0  # around `active`
        self.entered: set[Hashable] = set()  # between `enter` and `leave`
        self.beats = 0
        self.watched = False  # an idle watch is on (`HostRuns.release_idle`)
        self.idle_since = 0.0  # when its last call in flight ended (monotonic)


_SAY_IF_LIVE: weakref.WeakValueDictionary[str, _Run] = weakref.WeakValueDictionary()
"""The runs of this process whose host says whether they are going (`live`), by their
lease's token. A run that ended may keep its lease while the host still holds its object (the
OpenAI Agents SDK's streamed result keeps its run): a run refused by it takes the session."""


def _release_ended(holder: dict[str, Any]) -> bool:
    """Give up the lease of `holder` when it is a run of this process whose host says it
    ended; whether it was. The lease is released on the loop of the `HostRuns` that took it,
    without that object's lock (a release is idempotent; its stale entry is dropped when the
    session is next begun there), so two of them never wait on each other."""
    token = holder.get("token")
    run = _SAY_IF_LIVE.get(token) if isinstance(token, str) else None
    lease = run.lease if run is not None else None
    if run is None or lease is None or run.live is None or run.live():
        return False
    runs = run.held_by() if run.held_by is not None else None
    if runs is None:
        return False
    runs._on_loop(lease.release())
    return True


def _release_let_go(holder: dict[str, Any]) -> bool:
    """Whether the lease `holder` says is free to take again because the collector let go of
    it with its run (`_let_go`), maybe on another thread while this run was taking it: then
    it went with its object, or, if something still references that object (its lock was
    not given up with it), it is released here, on the loop of the `HostRuns` that took it
    (as `_release_ended` does)."""
    if not was_let_go(holder):
        return False
    kept = still_kept(holder)
    if kept is not None:
        lease, runs = kept
        runs._on_loop(lease.release())
    return True


def _door_link(link: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a nested run's `door` event says of its parent: its session and agent."""
    if link is None:
        return None
    return {key: link[key] for key in ("session", "agent") if key in link}


def _holder(run: _Run) -> dict[str, Any]:
    """What `run`'s lease says of its holder, read here so that a refusal's traceback (whose
    frames a caller may keep) holds no lease alive."""
    lease = run.lease
    return dict(lease.holder) if lease is not None else {}


def _let_go(run: weakref.ref[_Run], session: str, owner: object) -> None:
    """The host's object for `run` was collected: drop the run's lease unreleased, and the
    run with it (a server's runs of fresh sessions, each begun once, would stay for good).
    Called by the collector wherever it runs (inside a lock of the executor, on any thread):
    assignments, a dict's pop and a timer set, nothing that waits. The lease is noted as let
    go, so the next run that takes it over says so quietly (`let_go`): nothing is wrong
    then."""
    held = run()
    if held is None:
        return
    runs = held.held_by() if held.held_by is not None else None
    lease = held.lease
    if lease is not None:  # noted first: a run taking the session meanwhile finds it let go
        let_go(lease.holder, *((lease, runs) if runs is not None else ()))
    held.lease = lease = None
    if runs is not None and runs._runs.get(session) is held:
        runs._runs.pop(session, None)
        runs._let_go_of.append(session)
        runs._say_let_go_soon()
