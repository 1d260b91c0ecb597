"""Compaction asked for from outside the agent that writes a session (`ctxoffload compact`).

A request is a `compact_request` event in the session's events.jsonl, written through the
workspace's event API (`request_compaction`), so it reaches the session's writer on every
workspace: a folder, a bucket, a database, memory. Nothing is signalled: the writer (an
`Agent` holding the session's lease) follows the log (`CompactRequests`) at the start of each
step and answers each request with a `compact` event naming it (`requests`), compacted or not
and why. A request nobody answered stays pending, and the next writer of the session serves
it: one that dies before answering loses nothing.

Following costs what was appended since the last look, not the log: the follower reads the
lines after the last one it saw (`LineReader.read_lines`), and every workspace starts such a
read where its previous read of the log ended (bench/bench_compact_requests.py measures it).
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import uuid
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ..exceptions import ConfigError
from .events import Compact, CompactRequest, EventKind, is_event, record_of
from .ids import validate_session_id

__all__ = [
    "MAX_INSTRUCTIONS",
    "CompactRequests",
    "EventLines",
    "EventLog",
    "request_compaction",
    "requester",
]

MAX_INSTRUCTIONS = 4_000
"""The longest instructions a request may carry, in characters: they go into the summary
request, where a page of focus is plenty and a megabyte would crowd out the history."""


class EventLog(Protocol):
    """What a request is written to and read from: `ctxoffload.workspace.EventLog` (every
    workspace), declared again here, where the workspace package cannot be imported."""

    async def record_event(self, session_id: str, kind: str, **fields: Any) -> None:
        """Append one event to the session's events.jsonl."""
        ...

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's events, oldest first."""
        ...


@runtime_checkable
class EventLines(Protocol):
    """A workspace whose events log is read by lines (every ctxoffload workspace): a
    follower reads only what it gained."""

    def events_path(self, session_id: str) -> Any:
        """The reference of the session's events.jsonl."""
        ...

    async def read_lines(self, reference: str | os.PathLike[str], first: int, last: int) -> bytes:
        """Lines `first` to `last` of what a reference names (`LineReader`)."""
        ...


# Lines read per look: far more than a step appends; the rest comes at the next look.
_LINES_PER_LOOK = 1_000_000


def requester() -> dict[str, Any]:
    """Who asks, as a `compact_request` names them: the user, the host and the process."""
    try:
        user: str | None = getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (a bare container)
        user = None
    return {"user": user, "host": socket.gethostname(), "pid": os.getpid()}


async def request_compaction(
    workspace: EventLog, session_id: str, instructions: str | None = None
) -> str:
    """Ask the writer of a session to compact its context at its next step.

    Writes a `compact_request` event in the session's record naming who asks (user, host,
    pid) and the instructions. The `Agent` holding the session's lease serves it at the start
    of its next step (one compaction serves every request pending then, their instructions
    joined) and answers with a `compact` event naming the request; a session nobody holds
    serves it when an agent next resumes it, or at once through `ctxoffload compact`, which
    compacts the saved state itself.

    Args:
        workspace: the session's workspace (any `EventLog`).
        session_id: the session; it is not checked to exist (`ctxoffload compact` does).
        instructions: what the summary should focus on and keep, at most
            `MAX_INSTRUCTIONS` characters.

    Returns:
        The request's id, which the answer names.

    Raises:
        InvalidSessionId: `session_id` is not a plain name (before any I/O).
        ConfigError: `instructions` is not a string, or is too long.
    """
    validate_session_id(session_id)
    if instructions is not None and not isinstance(instructions, str):
        raise ConfigError(
            f"instructions must be a string, not {type(instructions).__name__}: pass the text "
            "the summary should focus on"
        )
    if instructions is not None and len(instructions) > MAX_INSTRUCTIONS:
        raise ConfigError(
            f"instructions of {len(instructions):,} characters are too long for a summary "
            f"request: give at most {MAX_INSTRUCTIONS:,} (the facts, paths and decisions to keep)"
        )
    request_id = uuid.uuid4().hex[:12]
    event = CompactRequest(request=request_id, by=requester(), instructions=instructions or None)
    await workspace.record_event(session_id, EventKind.COMPACT_REQUEST, **event.fields())
    return request_id


class CompactRequests:
    """The compaction requests of a session not answered yet, followed in its record.

    Each `look` reads only the lines appended since the previous one (the first reads the
    log once). A workspace that cannot read lines back (a custom `EventLog`) is read whole
    at each look.

    Args:
        workspace: the session's workspace.
        session_id: the session.
    """

    def __init__(self, workspace: EventLog, session_id: str) -> None:
        self.workspace = workspace
        self.session_id = validate_session_id(session_id)
        self._next_line = 1  # the first line of events.jsonl not read yet
        self._read = False  # (whether a look read the log)
        self._compact_appends = 0  # the workspace's count when the log was read last
        self._seen = 0  # events read whole (a workspace without read_lines)
        self._pending: dict[str, CompactRequest] = {}
        self.answers: dict[str, Compact] = {}
        """Every answer seen since the follower started, by the request it answers."""

    async def look(self) -> list[CompactRequest]:
        """The requests pending now, oldest first, after reading what was appended since
        the last look (none of it, where the workspace can tell that all of it is its own
        appends and none a compaction's request or answer: `events_unread_are_own`)."""
        if not self._pending and await self._only_own_since():
            return []
        for line in await self._new_lines():
            record = record_of(line)
            if isinstance(record, CompactRequest) and isinstance(record.request, str):
                if record.request not in self.answers:
                    self._pending.setdefault(record.request, record)
            elif isinstance(record, Compact) and isinstance(record.requests, list):
                for request in record.requests:
                    if isinstance(request, str):
                        self._pending.pop(request, None)
                        self.answers[request] = record
        return list(self._pending.values())

    @staticmethod
    def instructions_of(requests: Sequence[CompactRequest]) -> str | None:
        """The instructions of requests one compaction serves, in order, one per line (the
        same text given twice once); None when none has any."""
        texts = [r.instructions for r in requests if isinstance(r.instructions, str)]
        return "\n".join(dict.fromkeys(t for t in texts if t)) or None

    async def _only_own_since(self) -> bool:
        """Whether what was appended since the last read is all the workspace's own, with no
        compaction's request or answer in it (`events_unread_are_own`); before the first
        read, False."""
        own = getattr(self.workspace, "events_unread_are_own", None)
        if not self._read or own is None:
            return False
        return bool(await own(self.session_id, self._next_line, self._compact_appends))

    async def _new_lines(self) -> list[dict[str, Any]]:
        workspace = self.workspace
        count = getattr(workspace, "compact_appends", None)
        # Taken before the read: an append counted after it is read at the next look.
        self._compact_appends = count(self.session_id) if count is not None else 0
        self._read = True
        if not isinstance(workspace, EventLines):
            events = await workspace.read_events(self.session_id)
            new, self._seen = events[self._seen :], len(events)
            return [e for e in new if is_event(e) and e["kind"] in _KINDS]
        first = self._next_line
        try:
            data = await workspace.read_lines(
                workspace.events_path(self.session_id), first, first + _LINES_PER_LOOK - 1
            )
        except (OSError, ValueError):  # no events.jsonl yet (InvalidReference is an OSError)
            return []
        whole = data[: data.rfind(b"\n") + 1]  # a line being written is read at the next look
        self._next_line += whole.count(b"\n")
        return _events_in(whole)


# The kinds a follower parses: every other line is skipped before JSON is read.
_KINDS = frozenset({EventKind.COMPACT_REQUEST, EventKind.COMPACT})


def _events_in(data: bytes) -> list[dict[str, Any]]:
    """The compaction events among whole lines of events.jsonl (a torn line skipped)."""
    found: list[dict[str, Any]] = []
    for line in data.splitlines():
        if b"compact" not in line:  # the cheap test: most lines are messages and calls
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if is_event(value) and value["kind"] in _KINDS:
            found.append(value)
    return found
