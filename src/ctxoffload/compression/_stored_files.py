"""The files the workspace stored for one session: the one answer to "is this a file the
workspace stored?", which the artifact index asks of each path that leaves (such a file holds
what left, and is the only place that does: it leads the index's order and never makes way).

It is decided by what the workspace itself wrote, never by where a printed string points: a
tool can print a thousand paths under the session's folder, named just as the workspace names
its files. The truth is the session's record (`stored_references`): the `tool_result` events
the workspace writes for each tool result it stores (and the data/ files of its blocks), the
`data` events of the files a door's store put in data/, and the `offload` events of the
blocks the compressor stored one by one. What this run stored is known without reading it:
the references the offloader gave back, which the artifact trail holds (`SummaryState.
artifacts`, which also carries those of a resumed session). The record is read only when a
value that leaves is named as the workspace names its files (`tool_result-*.txt`, a data/
file) and is neither known nor looked up in it before: at most once a compaction, and not
again for the same values, whatever a tool prints.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from .._disk import layout
from .._disk.event_kinds import EventKind
from .._disk.layout import is_tool_result_name

__all__ = ["StoredFiles", "stored_references"]

logger = logging.getLogger("ctxoffload")

# Each kind of event that names files the workspace stored, and its fields that name them.
_NAMING = {
    EventKind.TOOL_RESULT: ("reference", "data_files"),
    EventKind.DATA: ("reference",),
    EventKind.OFFLOAD: ("references",),
}


def stored_references(events: Iterable[Any]) -> set[str]:
    """The references of the files a session's record (its events) says the workspace
    stored: tool results whole, and data/ files (a line of another shape is skipped)."""
    found: set[str] = set()
    for event in events:
        kind = event.get("kind") if isinstance(event, Mapping) else None
        for name in _NAMING.get(kind, ()) if isinstance(kind, str) else ():
            value = event.get(name)
            # `reference` names one file; `references` and `data_files` list them.
            listed = value if name != "reference" and isinstance(value, list) else [value]
            if name == "reference" or isinstance(value, list):
                found.update(r for r in listed if isinstance(r, str) and r)
    return found


def may_be_stored(value: str) -> bool:
    """Whether `value` is named as the workspace names the files it stores: a tool result's
    file (`tool_result-*.txt`) or a data/ file (its sha256 and extension)."""
    name = value.rpartition("/")[2]
    if is_tool_result_name(name):
        return True
    # (A data/ name is 64 hexadecimal digits and an extension: most values are not, at once.)
    return len(name) > 65 and name[64] == "." and layout.DATA_NAME.fullmatch(name) is not None


class StoredFiles:
    """The files the workspace stored for one compressor's session (see the module).

    Args:
        read_events: reads the session's record (None: the offloader keeps none; then what
            this run stored is all that is known).
        noted: the references this run knows it stored (the artifact trail's paths).
    """

    def __init__(
        self,
        read_events: Callable[[], Awaitable[list[Any]]] | None,
        noted: Callable[[], Iterable[str]],
    ) -> None:
        self._read_events = read_events
        self._noted = noted
        self._known: set[str] = set()
        # The values looked up in the record at its latest reading and not found there: no
        # reason to read it again for them (a tool's made-up paths, carried by the index from
        # one compaction to the next); only those of the latest reading are kept.
        self._looked_up: set[str] = set()

    def files(self) -> frozenset[str]:
        """The references known as files the workspace stored (after `learn`)."""
        return frozenset(self._known)

    async def learn(self, values: Iterable[str]) -> None:
        """Know, of `values` (what a compaction's artifacts name), which are files the
        workspace stored: from what this run noted, and from the session's record when one
        named as a stored file is not known (read once for all of them)."""
        known = self._known
        known.update(self._noted())
        unknown = {v for v in values if v not in known and may_be_stored(v)}
        if unknown <= self._looked_up or self._read_events is None:
            return
        try:
            known.update(stored_references(await self._read_events()))
        except Exception as exc:  # the record unreadable: what this run stored is known
            logger.warning("could not read the session's record of stored files: %s", exc)
            return
        self._looked_up = unknown - known
