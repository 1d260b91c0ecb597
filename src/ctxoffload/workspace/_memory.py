"""InMemoryWorkspace: the same protocol and read side as LocalWorkspace, held in memory."""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any, ClassVar

from .._disk.ids import validate_session_id
from .._disk.scope import SessionScoped
from ..exceptions import ConfigError
from ._core import StoreWorkspace
from ._lease import LEASE_FILE, SessionLease, busy_error, holder_record, orphaned_here
from ._memory_store import MemoryStore

if TYPE_CHECKING:
    from ._protocol import ModelCallClock, Workspace

__all__ = ["InMemoryWorkspace"]

logger = logging.getLogger("ctxoffload")


class InMemoryWorkspace(StoreWorkspace):
    """A workspace that keeps everything in this process's memory (a `Workspace`, and a
    `ModelCallClock` for its turn-based eviction).

    For tests and for serverless functions with no writable disk. References look like
    `memory://{name}/sessions/{id}/tool_result-{tool_id}.txt` and follow the on-disk naming
    rules, so code written against `LocalWorkspace` reads the same. An agent cannot open
    these with file tools; give it `retrieve_offloaded_content` instead.

    Turn-based eviction (off by default): with `evict_after_turns=N`, a tool_result file
    or data/ payload that was neither written nor read during N model calls is dropped at
    the next one, to bound a long-lived process's memory; reading it afterwards raises
    `InvalidReference` saying when it was evicted. The `Agent` (through its pipeline)
    calls `note_model_call` before each model call. Context logs, events and state are the
    session's record and are never evicted.

    The record of evictions is bounded too: the latest `evictions_remembered` evicted
    references are remembered (and their names are not given to new content). A reference
    evicted before those reads as one never held, and a tool_result name that old may be
    used again for another result with the same tool id. `purge_session` forgets the
    session's evictions with its files: a new session of that id starts as a fresh one.

    Args:
        name: distinguishes the references of several in-memory workspaces.
        evict_after_turns: model calls an untouched file survives; None keeps everything.

    Raises:
        ConfigError: `evict_after_turns` is not a positive int.
    """

    evictions_remembered: ClassVar[int] = 10_000
    """How many of the latest evicted references are remembered (about 200 bytes each)."""

    def __init__(
        self,
        name: str = "workspace",
        *,
        evict_after_turns: int | None = None,
        isolate_sessions: bool = False,
    ) -> None:
        if evict_after_turns is not None and (
            isinstance(evict_after_turns, bool)
            or not isinstance(evict_after_turns, int)
            or evict_after_turns < 1
        ):
            raise ConfigError(
                f"evict_after_turns {evict_after_turns!r} is not a positive number of model "
                "calls: pass 1 or more, or None to keep everything"
            )
        self.name = validate_session_id(name)
        self._root = f"memory://{self.name}"
        self._memory = self._files = MemoryStore(
            self._root,
            shown=repr(self),
            evict_after_turns=evict_after_turns,
            evictions_remembered=self.evictions_remembered,
        )
        self.isolate_sessions = isolate_sessions
        self._leases: dict[str, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"InMemoryWorkspace(name={self.name!r})"

    @property
    def evict_after_turns(self) -> int | None:
        """Model calls an untouched file survives; None keeps everything."""
        return self._memory.evict_after_turns

    @property
    def model_calls(self) -> int:
        """The model calls counted so far (`note_model_call`)."""
        return self._memory.model_calls

    async def initialize(self) -> None:
        """Nothing to prepare; present for symmetry with `LocalWorkspace`."""

    def note_model_call(self) -> None:
        """Count a model call, and evict the files untouched for `evict_after_turns` calls."""
        self._memory.note_model_call()

    async def acquire_lease(
        self, session_id: str, *, agent: str | None = None, ttl: float | None = None
    ) -> SessionLease:
        """Take the session's lease (held in this object; `ttl` is ignored).

        Raises:
            SessionBusyError: another lease on this workspace holds the session.
        """
        sid = validate_session_id(session_id)
        where = self._memory.ref(sid, LEASE_FILE)
        holder = holder_record(agent)
        current = self._leases.get(sid)
        if current is not None and orphaned_here(current):
            self._leases.pop(sid, None)
        with self._memory.lock:
            current = self._leases.get(sid)
            if current is not None:
                raise busy_error(sid, current, where)
            self._leases[sid] = holder
        leases, lock = self._leases, self._memory.lock

        def drop() -> None:
            with lock:
                if leases.get(sid) is holder:
                    del leases[sid]

        async def release() -> None:
            drop()

        lease = SessionLease(sid, holder, where, release=release)
        weakref.finalize(lease, drop)
        return lease


if TYPE_CHECKING:  # mypy checks that InMemoryWorkspace is what it is declared to be
    _workspace: type[Workspace] = InMemoryWorkspace
    _scoped: type[SessionScoped] = InMemoryWorkspace
    _clock: type[ModelCallClock] = InMemoryWorkspace
