"""A session's figures (`stats`): what it offloaded and kept out of the context, its
compressions and their fidelity, the cache share, and the bytes data/ saves by storing each
payload once."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..._disk.events import EventKind, is_event
from ..._disk.layout import DATA_DIR, DATA_REFERENCE_BYTES, EVENTS_FILE
from ..._disk.read import Folder
from ...exceptions import CliError
from .._access import open_in
from .._output import iso_time, shown
from ._reading import Warnings, own_files, read_folder, read_logged
from ._rows import LastActive, parent_of

__all__ = ["SessionStats", "dedup_savings", "session_stats"]


@dataclass
class SessionStats:
    """What ctxoffload saved in one session (`stats`). A figure read from events.jsonl is
    None when that file cannot be read; each file not read is named in `unreadable`."""

    session: str
    last_activity: str | None = None
    """The newest time a file of the session's own was changed (ISO 8601, UTC), as `ls`."""
    parent: str | None = None
    """The session whose sub-agent started this one."""
    depth: int = 0
    """Its place under the parents listed too (`listing_order`)."""
    activity: float = field(default=0.0, repr=False)
    """`last_activity` to the clock's precision: what orders the list (not shown)."""
    bytes_offloaded: int | None = None
    tokens_kept_out: int | None = None
    truncations: int | None = None
    compressions: int | None = None
    summaries: dict[str, int] | None = None
    """Compressions by the source of their summary (a model, extractive, ...)."""
    artifacts: dict[str, int] | None = None
    """The compressions' fidelity reports, added up."""
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    unreadable: list[str] = field(default_factory=list)
    data_references: int = 0
    data_files: int = 0
    dedup_saved_bytes: int = 0


def session_stats(
    workdir: str, session: str, warnings: Warnings
) -> tuple[SessionStats, Counter[str]]:
    """One session's figures, and the data/ references its files make (to add up the
    bytes the workspace saves by storing each payload once)."""
    stats = SessionStats(session)
    references: Counter[str] = Counter()
    if not read_folder(
        workdir,
        session,
        lambda folder: _read_stats(folder, stats, references, warnings),
        warnings,
        f"session {session} is counted as unreadable",
    ):
        stats.unreadable.append(".")
    saved = dedup_savings(references, workdir)
    stats.data_references, stats.data_files, stats.dedup_saved_bytes = saved
    return stats, references


def _read_stats(
    folder: Folder, stats: SessionStats, references: Counter[str], warnings: Warnings
) -> None:
    then = f"session {stats.session} is counted without it"
    last = max((st.st_mtime for _, st in own_files(folder)), default=0.0)
    stats.last_activity = iso_time(last) if last else None
    stats.activity = last
    counts = read_logged(folder, EVENTS_FILE, warnings, then, _event_counts)
    if counts is None:
        stats.unreadable.append(EVENTS_FILE)
    else:
        last_event = counts.pop("last_event")
        if last_event:  # the record's own clock, which a copy keeps (`event_time`)
            stats.activity = last_event
            stats.last_activity = iso_time(last_event)
        for name, value in counts.items():
            setattr(stats, name, value)
    for name in folder.names():
        try:
            opened = open_in(folder, name)
            if opened is None:
                continue  # a folder, a link, a FIFO: not a file of the session
            fd, _ = opened
            with os.fdopen(fd, "rb") as f:
                for line in f:
                    references.update(m.decode() for m in DATA_REFERENCE_BYTES.findall(line))
            continue
        except CliError as exc:
            why = str(exc)
        except OSError as exc:  # a read that failed after the open (EIO)
            why = f"cannot read {shown(folder.path(name))}: {exc.strerror or exc}"
        warnings.say(folder.path(name), why, then)
        if name not in stats.unreadable:
            stats.unreadable.append(name)


# The events whose tokens before and after say how much left the context.
_TOKENS_KEPT_OUT = (EventKind.TRUNCATION, EventKind.OFFLOAD, EventKind.COMPRESSION)


def _event_counts(events: Iterable[Any]) -> dict[str, Any]:
    """A session's figures from its events, counted in one pass (one line in memory)."""
    offloaded = tokens_out = compressions = truncations = 0
    sources: Counter[str] = Counter()
    artifacts: Counter[str] = Counter()
    reported = cached = 0
    parent: str | None = None
    last = LastActive()
    for event in events:
        if not is_event(event):
            continue
        kind = event.get("kind")
        parent = parent or parent_of(event)
        last.see(event)
        if kind in (EventKind.TOOL_RESULT, EventKind.CONTEXT) and isinstance(
            event.get("bytes"), int
        ):
            offloaded += event["bytes"]
        before, after = event.get("tokens_before"), event.get("tokens_after")
        # A pipeline's ToolOutputOffload writes `offload` events, its SlidingWindow `window`
        # ones: a tool result cut, and history moved out, as the compressor's own events are.
        if kind in _TOKENS_KEPT_OUT and isinstance(before, int):
            tokens_out += max(0, before - (after if isinstance(after, int) else 0))
        if kind == EventKind.COMPRESSION:
            sources[str(event.get("summary_source") or "unknown")] += 1
            _add_fidelity(artifacts, event)
        # The cache share counts only the model calls whose provider said what it cached.
        if (
            kind == EventKind.MODEL_CALL
            and isinstance(event.get("input_tokens"), int)
            and isinstance(event.get("cached_input_tokens"), int)
        ):
            reported += event["input_tokens"]
            cached += event["cached_input_tokens"]
        compressions += kind in (EventKind.COMPRESSION, EventKind.WINDOW)
        truncations += kind in (EventKind.TRUNCATION, EventKind.OFFLOAD)
    return {
        "bytes_offloaded": offloaded,
        "tokens_kept_out": tokens_out,
        "truncations": truncations,
        "compressions": compressions,
        "summaries": dict(sources),
        "artifacts": dict(artifacts),
        "input_tokens": reported,
        "cached_input_tokens": cached,
        "parent": parent,
        "last_event": last.time,
    }


def _add_fidelity(into: Counter[str], event: dict[str, Any]) -> None:
    """Add a compression's fidelity report (its artifacts, the messages read back)."""
    counts, checked = event.get("artifacts"), event.get("recoverable")
    for key, value in (counts if isinstance(counts, dict) else {}).items():
        if isinstance(value, int):
            into[str(key)] += value
    if isinstance(checked, dict):
        for key in ("messages", "verified"):
            if isinstance(checked.get(key), int):
                into[f"messages_{key}" if key == "verified" else "messages_compressed"] += checked[
                    key
                ]


def dedup_savings(references: Counter[str], workdir: str) -> tuple[int, int, int]:
    """The data/ references, the files they name, and the bytes saved by storing each file
    once: what the references would take as copies less what the files take."""
    referenced = stored = 0
    try:
        with Folder(workdir, DATA_DIR) as data:
            for name, count in references.items():
                try:
                    size = data.stat(name).st_size
                except FileNotFoundError:
                    continue
                referenced += size * count
                stored += size
    except FileNotFoundError:
        pass  # no data/ folder: nothing stored
    return sum(references.values()), len(references), referenced - stored
