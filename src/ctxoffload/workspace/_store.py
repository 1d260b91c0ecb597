"""What the workspace behaviour (`_core`) asks of the thing that holds the files: the stores.

The rules a workspace keeps (which sessions gc may remove, what keeps one live) are written
once, in `_core`, against this interface; a store (the disk, a bucket) implements only the
steps that differ with what holds the files: how a session is measured, how it is removed
without racing a writer (an exclusive flock on the disk, a lease taken by a conditional write
in a bucket), how unused data/ files go. As Strands splits its session repository from its
session manager.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ._gc import GcReport, SessionUsage, UnitOutcome

__all__ = ["SessionCollector"]


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
