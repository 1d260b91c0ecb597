"""The workspace behaviour written once, for every store (`_store`): today, a session's
state and events as read back, a payload read back with its media type, the event that
records a stored tool result, and gc.

Which sessions gc removes, in what units, and what keeps one live (its lease, a session that
stays and names its files, a write while gc ran) is decided here; the stores only measure
and remove (`SessionCollector`).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from .._disk.events import ToolResult
from .._disk.ids import validate_session_id
from .._disk.layout import CONTEXT_FILE, EVENTS_FILE, STATE_FILE, is_tool_result_name
from .._disk.payloads import count_lines
from .._disk.read import reference_text
from .._disk.rows import dumps_line
from .._disk.scope import data_files_field
from ._datastore import media_type_of
from ._gc import (
    GcReport,
    check_limits,
    record_unit,
    removal_units,
    sessions_to_remove,
    unit_named_by_staying,
)

if TYPE_CHECKING:
    from .._disk.payloads import ToolOutput
    from ._protocol import ReferenceReader
    from ._store import SessionCollector, SessionFiles

__all__ = [
    "collect_garbage",
    "list_files",
    "read_bytes",
    "read_context",
    "read_events",
    "read_state",
    "tool_result_event",
    "write_state",
]


async def write_state(store: SessionFiles, session_id: str, state: dict[str, Any]) -> str:
    """Replace the session's state.json whole: one JSON line (`StateStore.write_state`).

    Raises:
        InvalidSessionId: `session_id` is not a plain name (before any I/O).
    """
    return await store.put(validate_session_id(session_id), STATE_FILE, dumps_line(state))


async def read_state(store: SessionFiles, session_id: str) -> dict[str, Any] | None:
    """The session's state: the first value of its state.json, or None without one."""
    rows = await store.read_log(validate_session_id(session_id), STATE_FILE)
    return rows[0] if rows else None


async def read_context(store: SessionFiles, session_id: str) -> list[Any]:
    """The session's offloaded messages as stored, oldest first, whole acknowledged batches
    only (`Workspace.read_context`)."""
    return await store.read_log(validate_session_id(session_id), CONTEXT_FILE, commit=True)


async def read_events(store: SessionFiles, session_id: str) -> list[dict[str, Any]]:
    """The session's events, oldest first (`EventLog.read_events`)."""
    return await store.read_log(validate_session_id(session_id), EVENTS_FILE)


async def list_files(store: SessionFiles, session_id: str) -> list[str]:
    """The references of the session's tool_result files, sorted by name
    (`Workspace.list_files`)."""
    sid = validate_session_id(session_id)
    names = sorted(name for name in await store.list_names(sid) if is_tool_result_name(name))
    return [store.reference(sid, name) for name in names]


async def read_bytes(
    reader: ReferenceReader, reference: str | os.PathLike[str]
) -> tuple[bytes, str]:
    """A stored payload and its media type (`Workspace.read_bytes`): the type comes from the
    name's extension, which `store_bytes` chose from the type given (`media_type_of`).

    Raises:
        InvalidReference: as `reader.read_reference`.
    """
    reference = reference_text(reference)
    return await reader.read_reference(reference), media_type_of(reference)


def tool_result_event(
    reference: str, data: bytes, found: ToolOutput, urls: list[str]
) -> ToolResult:
    """The event recording a tool result stored whole at `reference`: its size in bytes and
    lines, whose result it is, and which of its lines name data/ files (`urls`, as
    `render_tool_output` gathered them)."""
    return ToolResult(
        reference=reference,
        bytes=len(data),
        lines=count_lines(data),
        tool_id=found.tool_id,
        tool_name=found.name,
        **data_files_field(urls),
    )


async def collect_garbage(
    store: SessionCollector,
    *,
    older_than: float | None,
    max_bytes: int | None,
    dry_run: bool,
) -> GcReport:
    """Remove the sessions past the limits that are not live, then the unused data/ files.

    See `GarbageCollector.gc`: sessions idle longer than `older_than` go, then the oldest
    until the workspace fits `max_bytes`; a session whose lease is held, or that a staying
    session names, stays, with its unit (sessions that name each other).

    Raises:
        ConfigError: a negative `older_than` or `max_bytes`.
    """
    check_limits(older_than, max_bytes)
    report = GcReport(dry_run=dry_run)
    await store.recover(dry_run=dry_run)
    now = time.time()
    usages, data_sizes = await store.measure()
    doomed, remaining, report.sessions_kept = sessions_to_remove(
        usages, data_sizes, now=now, older_than=older_than, max_bytes=max_bytes
    )
    for unit in removal_units(doomed):
        outcome = unit_named_by_staying(unit, remaining)
        if not outcome.kept and not dry_run:
            outcome = await store.remove_unit_if_idle(unit)
        record_unit(unit, outcome, remaining, report)
    await store.collect_data(remaining, now, report)
    return report
