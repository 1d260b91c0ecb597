"""What the workspace behaviour (`_core`) asks of the thing that holds the files: the stores.

The rules a workspace keeps (what a session's state is, which sessions gc may remove, what
keeps one live) are written once, in `_core`, against this interface; a store (the disk,
memory, a bucket) implements only the steps that differ with what holds the files: how a
file is replaced whole, a log read and a session's files listed (`SessionFiles`); how a
session is measured, how it is removed without racing a writer (an exclusive flock on the
disk, a lease taken by a conditional write in a bucket), how unused data/ files go
(`SessionCollector`). As Strands splits its session repository from its
session manager.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._gc import GcReport, SessionUsage, UnitOutcome

__all__ = ["SessionCollector", "SessionFiles"]


class SessionFiles(Protocol):
    """A session's files, each replaced whole or read as a log of JSON lines."""

    async def put(self, session_id: str, name: str, data: bytes) -> str:
        """Replace the session's file `name` in one step (a reader sees the old bytes or the
        new, never part of either), and mark the session as there; the file's reference.

        Raises:
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
