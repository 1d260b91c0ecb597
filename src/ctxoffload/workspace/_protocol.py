"""What callers may use from a workspace: the declared `Workspace`, its `Offloader` subset, and
the optional capabilities, each a named protocol.

`LocalWorkspace`, `InMemoryWorkspace` and `ObjectStoreWorkspace` are each a `Workspace`. A
caller that takes a workspace is typed with `Workspace`; one that takes anything content can
go to (the `Agent`, the compressor, the framework adapters) is typed with `Offloader`, the three
methods a custom backend must have, and asks for more only through these protocols
(`isinstance(offloader, EventLog)`), never by looking for a method by name. A backend that has
a capability in name only (a method that cannot work there) raises `NotImplementedError` with
a sentence saying so.

| protocol           | methods                                        | who has it               |
|--------------------|------------------------------------------------|--------------------------|
| `Offloader`        | offload_context, offload_tool_result,          | every backend, and       |
|                    | offload_data_block                             | custom offloaders        |
| `ReferenceReader`  | read_reference                                 | every workspace          |
| `LineReader`       | read_lines                                     | every workspace (not     |
|                    |                                                | part of `Workspace`)     |
| `EventLog`         | record_event, read_events                      | every workspace          |
| `EventBatches`     | record_events                                  | every workspace (not     |
|                    |                                                | part of `Workspace`)     |
| `StateStore`       | write_state, read_state                        | every workspace          |
| `HistoryLog`       | append_history, read_history                   | every workspace (not     |
|                    |                                                | part of `Workspace`)     |
| `Workspace`        | all of the above, and initialize, context_path, | every workspace          |
|                    | list_sessions, read_context, list_files,       |                          |
|                    | store_bytes, read_bytes, purge_session         |                          |
| `GarbageCollector` | gc                                             | Local, ObjectStore       |
| `ModelCallClock`   | note_model_call                                | InMemory (turn eviction) |
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ._gc import GcReport

__all__ = [
    "EventBatches",
    "EventLog",
    "GarbageCollector",
    "HistoryLog",
    "LineReader",
    "ModelCallClock",
    "Offloader",
    "ReferenceReader",
    "StateStore",
    "Workspace",
]


@runtime_checkable
class Offloader(Protocol):
    """Persists content that leaves an agent's context and returns where it went.

    Implementations must be durable before they return: a caller drops content from the
    context only after one of these methods has returned its reference. Every workspace
    implements it; so can a database or any other backend.

    The methods accept ctxoffload's own messages and blocks, plain dicts in the OpenAI /
    Anthropic chat formats, and foreign pydantic models of the same shape.
    """

    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> str:
        """Append `msgs` (oldest first) to the session's context log.

        Args:
            session_id: the session; a plain name (letters, digits, '.', '_', '-').
            msgs: the messages that leave the context, oldest first.

        Returns:
            The reference (for `LocalWorkspace`, the path) of the session's context.jsonl.

        Raises:
            InvalidSessionId: `session_id` is not a plain name (before any I/O).
            OffloadError: the messages could not be stored; nothing may leave the context.
        """
        ...

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        """Store the whole text of one tool result.

        Args:
            session_id: the session; a plain name.
            tool_result: the tool result (a `ToolResultBlock`, a dict or a model of that
                shape); its id names the file.

        Returns:
            The reference of the file that holds it.

        Raises:
            InvalidSessionId: `session_id` is not a plain name (before any I/O).
            OffloadError: the result could not be stored; it stays in the context.
        """
        ...

    async def offload_data_block(self, block: Any) -> Any:
        """Store a binary payload once, by content hash.

        Args:
            block: a data block with inline base64 bytes (a `DataBlock`, or a dict or model
                of that shape).

        Returns:
            A block of the same kind whose source points at the stored copy.

        Raises:
            InvalidContent: the payload is not valid base64.
            OffloadError: the payload could not be stored.
        """
        ...


@runtime_checkable
class ReferenceReader(Protocol):
    """Reads back what a reference names (a path into the workspace, a bucket URL...)."""

    async def read_reference(self, reference: str | os.PathLike[str]) -> bytes:
        """The bytes a reference names.

        Args:
            reference: a reference this workspace returned (a path, a `data/...` name or
                a bucket URL), as a `str` or an `os.PathLike` (the `Path` that
                `LocalWorkspace.context_path` returns).

        Raises:
            InvalidReference: the reference is unknown or points outside the workspace.
        """
        ...


@runtime_checkable
class LineReader(Protocol):
    """Reads some lines of what a reference names without reading what comes before them
    when it can: the compressor reads back only the lines a compaction wrote, so each
    compaction of a long session costs what it wrote, not the whole log. Not part of
    `Workspace`: an offloader without it is read whole."""

    async def read_lines(self, reference: str | os.PathLike[str], first: int, last: int) -> bytes:
        """Lines `first` to `last` (1-based, inclusive, physical lines: what
        `sed -n 'FIRST,LASTp'` prints) of what a reference names, each with its newline;
        fewer, or none, where it ends first.

        Raises:
            InvalidReference: as `read_reference`.
            ValueError: `first` is below 1 or `last` below `first`.
        """
        ...


@runtime_checkable
class EventLog(Protocol):
    """Keeps a session's events (offloads, compressions, model and tool calls), in order."""

    async def record_event(self, session_id: str, kind: str, **fields: Any) -> None:
        """Append one event to the session's events.jsonl, stamped with the time.

        Args:
            session_id: the session.
            kind: what happened (`offload`, `compression`, `model_call`...).
            **fields: the event's other fields, JSON-serialisable.
        """
        ...

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's events, oldest first (none for a session without events).

        Args:
            session_id: the session.
        """
        ...


@runtime_checkable
class EventBatches(Protocol):
    """Appends several events of a session in one write: what one model call records (the
    messages it was sent, the call) costs one append, one flush to disk, not one each.
    Not part of `EventLog`: an event log without it is written one event at a time."""

    async def record_events(
        self, session_id: str, events: Sequence[tuple[str, dict[str, Any]]]
    ) -> None:
        """Append `events`, in order, to the session's events.jsonl in one write, each
        stamped as `record_event` stamps it.

        Args:
            session_id: the session.
            events: each event's kind and its other fields (JSON-serialisable).
        """
        ...


@runtime_checkable
class StateStore(Protocol):
    """Keeps a session's state snapshot, for resuming it."""

    async def write_state(self, session_id: str, state: dict[str, Any]) -> str:
        """Replace the session's state.json in one step.

        Args:
            session_id: the session.
            state: the snapshot, JSON-serialisable.

        Returns:
            The reference of state.json.

        Raises:
            SessionBusyError: this workspace object took the session's lease, and another
                writer has taken it over since: nothing was written (a workspace whose
                leases can lapse refuses such a write; see `acquire_lease`).
        """
        ...

    async def read_state(self, session_id: str) -> dict[str, Any] | None:
        """The session's last state, or None when it has none.

        Args:
            session_id: the session.
        """
        ...


@runtime_checkable
class HistoryLog(Protocol):
    """Keeps a host's saved conversation (an SDK session's items) append-only, in the
    session's history.jsonl: one record per line, never rewritten, read back from any line.

    A host that saves its conversation after every turn pays for the turn, not for the
    conversation: an append writes one line, and a reader that follows the log reads what
    came since its last read (every workspace starts such a read where the previous one, or
    its own latest append, ended). What a record means (items added, one removed, a new
    start) is the caller's; the log only keeps them in order. Not part of `Workspace`: a
    caller that needs it asks with `isinstance`.
    """

    async def append_history(self, session_id: str, record: Any) -> int:
        """Append one record (a JSON value) to the session's history.jsonl as one line,
        whole or absent whatever kills the writer (a reader skips a torn line).

        Args:
            session_id: the session; a plain name.
            record: the record, JSON-serialisable.

        Returns:
            The record's line number (1-based; concurrent writers get consecutive lines).

        Raises:
            InvalidSessionId: `session_id` is not a plain name (before any I/O).
            OffloadError: the store refused the write, or the log is a planted link; the
                log is as it was.
        """
        ...

    async def read_history(self, session_id: str, *, after: int = 0) -> list[tuple[int, Any]]:
        """The session's records after line `after`, oldest first, each with its line number
        (a line that is not whole JSON is skipped, its number kept by those after it); none
        for a session without history.

        Args:
            session_id: the session; a plain name.
            after: the last line already read (0: read from the first).

        Raises:
            InvalidSessionId: `session_id` is not a plain name (before any I/O).
            OffloadError: the log is a planted link, a special file or a hard-linked file.
        """
        ...


@runtime_checkable
class Workspace(Offloader, ReferenceReader, EventLog, StateStore, Protocol):
    """What every workspace offers, whatever holds its files (a disk, memory, a bucket).

    `LocalWorkspace`, `InMemoryWorkspace` and `ObjectStoreWorkspace` are each one: the three
    `Offloader` methods, `ReferenceReader`, `EventLog` and `StateStore`, and the methods
    below. Two capabilities are optional, each its own protocol: `GarbageCollector` (`gc`;
    `LocalWorkspace` and `ObjectStoreWorkspace`) and `ModelCallClock` (`InMemoryWorkspace`,
    which evicts by turns). Code that needs one asks with `isinstance`.
    """

    async def initialize(self) -> None:
        """Create the workspace's folders; idempotent (offloading works without it)."""
        ...

    def context_path(self, session_id: str) -> Any:
        """Where the session's context.jsonl is (a path, or a reference).

        Args:
            session_id: the session.
        """
        ...

    async def list_sessions(self) -> list[str]:
        """The ids of the sessions that have files, sorted."""
        ...

    async def read_context(self, session_id: str) -> list[Any]:
        """The session's offloaded messages, as stored, oldest first.

        Args:
            session_id: the session.
        """
        ...

    async def list_files(self, session_id: str) -> list[str]:
        """The references of the session's tool_result files.

        Args:
            session_id: the session.
        """
        ...

    async def store_bytes(self, data: bytes, media_type: str | None = None) -> str:
        """Store a payload once, by content hash, under data/.

        Args:
            data: the bytes.
            media_type: their media type, which picks the file's extension; None when
                unknown.

        Returns:
            The reference of the stored copy.
        """
        ...

    async def read_bytes(self, reference: str | os.PathLike[str]) -> tuple[bytes, str]:
        """A stored payload and its media type.

        Args:
            reference: what `store_bytes` (or `offload_data_block`) returned.

        Raises:
            InvalidReference: the reference names no payload of this workspace.
        """
        ...

    async def purge_session(self, session_id: str) -> bool:
        """Remove a session's files.

        Args:
            session_id: the session.

        Returns:
            Whether there was anything to remove.
        """
        ...


@runtime_checkable
class GarbageCollector(Protocol):
    """Removes sessions and data/ files no longer needed, by age or to fit a size."""

    async def gc(
        self,
        *,
        older_than: float | None = None,
        max_bytes: int | None = None,
        dry_run: bool = False,
    ) -> GcReport:
        """Collect what is older than `older_than` seconds, or over `max_bytes` in all.

        Never removes a live session: one whose lease is held, or whose files a session
        that stays references (a fork's origin, a sub-agent's parent or child); the report's
        `sessions_kept` says why each is kept.

        Args:
            older_than: remove sessions not written for this many seconds; None keeps
                every session by age.
            max_bytes: then remove the oldest sessions until the workspace holds at most
                this many bytes; None sets no limit.
            dry_run: report what would go, remove nothing.

        Returns:
            What was (or would be) removed and what it freed, and what was kept as live.
        """
        ...

    async def remove_sessions(
        self, session_ids: Sequence[str], *, dry_run: bool = False
    ) -> GcReport:
        """Remove the sessions named, never a live one: when one named is live (its lease
        is held, or a session not named references its files), none is removed and the
        report's `sessions_kept` says why. data/ files stay for the next `gc`.

        Args:
            session_ids: the sessions to remove.
            dry_run: report what would go, remove nothing.

        Returns:
            What was (or would be) removed and what it freed, or what was kept as live.
        """
        ...


@runtime_checkable
class ModelCallClock(Protocol):
    """Wants to know when a model call is made (`InMemoryWorkspace` evicts by turns)."""

    def note_model_call(self) -> None:
        """One more model call was made."""
        ...
