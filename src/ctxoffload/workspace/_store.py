"""What the workspace behaviour (`_core`) asks of the thing that holds the files: the stores.

The rules a workspace keeps are written once, in `_core`, against this interface: how an
offload stores its payloads, writes its content and records its event; which version name a
tool result takes; what a session's state is; which sessions gc may remove, and what keeps one
live. A store (the disk, memory, a bucket) implements only the primitives that differ with what
holds the files (`SessionFiles`): put, append, conditional write (`put_new`), list, read,
delete; the data/ payloads an offload stores on the way (`Payloads`); and the steps of gc it
takes its own way (`SessionCollector`). As Strands splits its session repository from its
session manager.

What is left per backend is declared as capabilities (`_protocol`): the lease holder, the
workdir of a disk, the reference key, isolation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from .._disk.batch import Span
    from .._disk.payloads import StoreData
    from ._fence import StateFence
    from ._gc import GcReport, SessionUsage, UnitOutcome

__all__ = ["ImportTarget", "ImportedSession", "Payloads", "SessionCollector", "SessionFiles"]

T = TypeVar("T")


class Payloads(Protocol):
    """The data/ payloads one offload stores while its content is serialised.

    `store` is called (from a worker thread) for each payload met; the payloads must be in
    the store before the line naming them is (`before_line`), and still there after it
    (`after_line`): gc removes a data/ file no line names, so between the two a store guards
    them its own way (a shared lock on the disk; a refresh of a re-used object in a bucket).
    """

    @property
    def store(self) -> StoreData:
        """Store one payload (`raw`, its media type or None) by its sha256; its reference."""
        ...

    async def before_line(self) -> None:
        """Make every payload stored so far durable, before the line naming it is written.

        Raises:
            OffloadError: the store refused a payload; nothing names it.
        """
        ...

    async def after_line(self) -> None:
        """Once the line naming them is written: store again any payload gc removed meanwhile."""
        ...

    def hold_session(self, session_id: str, log: str) -> None:
        """Called from `SessionFiles.run` once an offload has something to write: refuse a log
        it could not append its event to afterwards (a planted link on a disk), before any
        content is written; and hold the session against a purge until the offload ends, so
        that a purge takes its content and the event recording it together, or neither. A
        store without such entries or purges that race does nothing.

        Raises:
            OffloadError: the log is not a file the store would append to.
        """
        ...


class SessionFiles(Protocol):
    """A session's files: put whole or created once, appended to as logs, read, listed;
    sessions listed and deleted; the payloads of an offload stored on the way."""

    def payloads(self) -> contextlib.AbstractAsyncContextManager[Payloads]:
        """The data/ payloads of one offload, guarded from gc while the offload runs, and the
        session it writes to, held (`Payloads.hold_session`) until it ends."""
        ...

    async def put_new(self, session_id: str, name: str, data: bytes) -> str | None:
        """Create the session's file `name` holding `data` unless an entry of that name is
        there (a conditional write: of two writers, one wins); its reference, or None when
        the name is taken (or was, by a file evicted since).

        Raises:
            OffloadError: the store refused the write; no partial file is left.
        """
        ...

    async def read(self, session_id: str, name: str) -> bytes | None:
        """The bytes of the session's file `name`, or None when there is none (or it is not a
        plain file: a planted link is never read)."""
        ...

    async def append(
        self, session_id: str, name: str, lines: Sequence[bytes], *, sync: bool = True
    ) -> Span:
        """Append `lines` (each ending in a newline) to the session's log `name` as one batch:
        consecutive lines, whatever other writers append at the same time; their `Span`.

        `sync=False`: a record of what the context still holds, which nothing that left it
        rests on (`UNSYNCED_KINDS`), or of where content synced itself went (an offload's
        `context` or `tool_result` event): a store that syncs each write to stable storage
        may leave this one to the next synced write to the same log. Every reader sees it at once
        either way; a store with nothing to sync ignores it.

        Raises:
            OffloadError: the store refused the write; the log is as it was.
        """
        ...

    async def append_messages(
        self, session_id: str, lines: Sequence[bytes], keys: Sequence[str | None]
    ) -> Span:
        """Append message lines to the session's context log as `append` does, acknowledged
        only whole (`read_log(commit=True)`); a line whose message key (`message_key`, one per
        line, None for none) the log holds already is not written again (`new_rows`), and the
        `Span` names where it is.

        Raises:
            OffloadError: the store refused the write; the log is as it was.
        """
        ...

    async def run(self, work: Callable[[], T]) -> T:
        """Run the synchronous part of an offload (serialising, storing payloads through
        `Payloads.store`, `Payloads.hold_session`) where it does not stall the event loop: a worker
        thread for a disk (it writes files) and a bucket (it is CPU work); in memory, at
        once, as nothing there blocks."""
        ...

    def event_failure_is_fatal(self, exc: OSError) -> bool:
        """Whether failing to append an event with `exc` must fail the offload it records (a
        planted entry found), rather than be logged as a record lost."""
        ...

    async def list_sessions(self) -> list[str]:
        """The ids of the sessions that have files, sorted."""
        ...

    def reference_key(self, reference: str) -> list[str]:
        """The parts of a reference below the workspace (`["sessions", id, name]`).

        Raises:
            InvalidReference: it names nothing inside the workspace.
        """
        ...

    async def read_reference(self, reference: str) -> bytes:
        """The bytes behind a reference (a log: all of it).

        Raises:
            InvalidReference: the store holds nothing there (on a disk: nothing inside the
                workdir, or not a regular file with one link).
        """
        ...

    async def read_lines(self, reference: str, first: int, last: int) -> bytes:
        """Lines `first` to `last` (1-based, checked) of what a reference names, each with
        its newline; fewer where it ends first. A store reads a log from the latest batch it
        wrote there at or before `first` where it can, so reading back what an append just
        wrote costs that append's size, however long the log.

        Raises:
            InvalidReference: as `read_reference`.
        """
        ...

    async def delete_session(self, session_id: str) -> bool:
        """Remove every file of the session (a reader sees all of it or none, where the store
        can); whether there was any."""
        ...

    async def put(self, session_id: str, name: str, data: bytes) -> str:
        """Replace the session's file `name` in one step (a reader sees the old bytes or the
        new, never part of either), and mark the session as there; the file's reference.

        Raises:
            OffloadError: the store refused the write; the old file is as it was.
        """
        ...

    async def put_fenced(
        self, session_id: str, name: str, data: bytes, fence: StateFence | None
    ) -> str:
        """`put`, but with a `fence` only while the fence's lease is still the session's
        lease, checked by the store in the same step as the write (`_fence`); without one,
        or in a store whose leases cannot lapse (the disk, memory), just `put`.

        Raises:
            SessionBusyError: the lease is another's now (or gone); nothing was written and
                the file is as its new holder left it.
            OffloadError: the store refused the write; the old file is as it was.
        """
        ...

    async def list_names(self, session_id: str) -> list[str]:
        """The names of the session's files (regular files only, on a disk); none when the
        session has no files."""
        ...

    def reference(self, session_id: str, name: str) -> str:
        """The reference of the session's file `name`, as the workspace returns it."""
        ...

    async def read_log(self, session_id: str, name: str, *, commit: bool = False) -> list[Any]:
        """The JSON values of the session's file `name`, by the reader's rule for torn and
        corrupt lines (`parse_log`); none when there is no such file. With `commit`, only
        whole acknowledged batches: a store whose appends are not atomic (the disk) reads
        its commit record; in memory and in a bucket an append is whole or absent."""
        ...


class SessionCollector(Protocol):
    """The steps of gc that a store takes its own way; `_core.collect_garbage` orders them
    and applies the rules between them."""

    async def recover(self, *, dry_run: bool) -> None:
        """Finish what an earlier gc killed on the way left undone, before measuring."""
        ...

    async def measure(self) -> tuple[list[SessionUsage], dict[str, int]]:
        """Every session measured (who holds its lease too), and the size of each data/ file."""
        ...

    async def remove_unit_if_idle(self, unit: list[SessionUsage]) -> UnitOutcome:
        """Remove a unit of sessions unless one was written since it was measured or its
        lease is held: then all of it stays (`UnitOutcome.kept` says why)."""
        ...

    async def collect_data(
        self, remaining: list[SessionUsage], now: float, report: GcReport
    ) -> None:
        """Remove the data/ files no session of `remaining` names (not in a dry run), and
        what killed purges left, into `report`."""
        ...


@dataclass
class ImportedSession:
    """What an import writes of one session (`ImportTarget.write_imported`), references
    already rewritten: the files to create, the lines to append to each log after the
    lines it holds already (`after`), and each context line's message key."""

    session_id: str
    files: dict[str, bytes] = field(default_factory=dict)
    logs: dict[str, list[bytes]] = field(default_factory=dict)
    keys: list[str | None] = field(default_factory=list)
    """One per line of the context log's `logs` entry: its message key, or None."""
    after: dict[str, int] = field(default_factory=dict)
    """The lines each log holds already, which the lines of `logs` follow (none: 0)."""
    fresh: bool = True
    """Whether the store holds nothing of the session (else: a killed import's beginning)."""
    data: set[str] = field(default_factory=set)
    """The data/ names its files and lines name."""

    @property
    def empty(self) -> bool:
        """Whether there is nothing to write: the store holds all of it already."""
        return not self.files and not any(self.logs.values())


class ImportTarget(Protocol):
    """How a store takes the sessions an import writes (`upload`): each whole or not at
    all, as readers see it, and a killed import's beginning finished by the next.

    A database writes a session in one transaction: it has no unfinished import. A bucket
    has no transaction: a session is marked while it is written (`begin_import`), and every
    listing of the sessions leaves a marked one out until `end_import`.
    """

    async def unfinished_imports(self) -> set[str]:
        """The sessions an import began and did not end (killed): left out of listings."""
        ...

    async def begin_import(self, session_id: str) -> None:
        """Mark the session as being imported, before anything of it is written."""
        ...

    async def write_imported(self, session: ImportedSession) -> bool:
        """Write what `session` holds (the whole session in one transaction where the store
        has them): its files as new files, its lines after the lines each log holds.

        Returns:
            False, with nothing written, when the session is no longer as `session` says
            (a file of it is there, a log holds other lines than `after`, or a session
            said `fresh` is there): another writer came meanwhile.

        Raises:
            OffloadError: the store refused a write.
        """
        ...

    async def end_import(self, session_id: str) -> None:
        """Unmark the session: listings show it again (its import is whole)."""
        ...
