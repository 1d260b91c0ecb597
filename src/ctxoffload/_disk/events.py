"""Every kind of session event, declared once: its fields, its schema version and its one
sentence for people.

A line of events.jsonl is `{"time": ..., "kind": ..., FIELDS..., "writer": {...}}`. Each kind
is a record class (`Truncation`, `Compression`, `Pin`, ...; the machinery is `records.Event`):
the fields a writer may give, and `sentence`, what `ctxoffload show` and `watch`, the viewer
and the `ctxoffload` logger say of it, worded with `wording.py`. This module is where they are
taken from; they are declared by what writes them: `run_events.py` (what a run does: batches,
files, a session's start, doors, messages, calls, forks, sub-agents, memory),
`context_events.py` (what happens to the context: truncations, offloads, summaries,
compressions, clearings, pins, compactions, projections), over `event_kinds.py` (`EventKind`
and the field groups several kinds share).
Writers build a record and write `to_json()`; readers take a line back with `record_of` and
render it with `event_sentence`, so no reader keeps its own `if kind == ...` chain.

Reading is forgiving on purpose: a line is the contract with agents and people, and a newer
release may add kinds and fields. A field this version does not declare is kept in `extra`
(and written back where it was); a kind it does not know reads as an `Event` whose sentence is
its kind; a declared field holds whatever the line held, so each sentence checks a value's
type before it does arithmetic with it. `schema` counts incompatible changes of a kind's
fields (none yet: every kind is at 1); adding an optional field is not one.

Light on purpose: no `dataclasses`, `typing` or `logging` at run time (`grep` and `ls` read
event kinds and keep their start-up figures).
"""

from __future__ import annotations

from .context_events import (
    Artifacts,
    Background,
    ClearThinking,
    ClearToolUses,
    Compact,
    CompactRequest,
    Compression,
    HostCompaction,
    ImageLimit,
    Offload,
    OverWindow,
    Pin,
    Projection,
    ProjectionCut,
    ProviderCompaction,
    Summary,
    Truncation,
    Unpin,
    Window,
)
from .event_kinds import EventKind, is_event
from .records import KINDS, Event
from .run_events import (
    ContextBatch,
    DataFile,
    Door,
    Fork,
    MemoryChange,
    Message,
    ModelCall,
    Replay,
    SessionStart,
    Subagent,
    ToolCall,
    ToolResult,
)

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = [
    "Artifacts",
    "Background",
    "ClearThinking",
    "ClearToolUses",
    "Compact",
    "CompactRequest",
    "Compression",
    "ContextBatch",
    "DataFile",
    "Door",
    "EventKind",
    "Fork",
    "HostCompaction",
    "ImageLimit",
    "MemoryChange",
    "Message",
    "ModelCall",
    "Offload",
    "OverWindow",
    "Pin",
    "Projection",
    "ProjectionCut",
    "ProviderCompaction",
    "Replay",
    "SessionStart",
    "Subagent",
    "Summary",
    "ToolCall",
    "ToolResult",
    "Truncation",
    "Unpin",
    "Window",
    "event_sentence",
    "is_event",
    "record_class",
    "record_of",
]


def record_class(line: Mapping[str, Any]) -> type[Event]:
    """The record class an event line's kind declares; `Event` for a kind this version does
    not know."""
    return KINDS.get(str(line.get("kind")), Event)


def record_of(line: Mapping[str, Any]) -> Event:
    """The record of an event line (see `is_event`), of the class its kind declares
    (`record_class`)."""
    return record_class(line).from_json(line)


def event_sentence(line: Mapping[str, Any]) -> str:
    """What a reader of one line per event says of an event line (the `ctxoffload` logger,
    a command's one-line answer): its sentence and its notes (`Event.one_line`). `show`,
    `watch` and the viewer print the notes under the sentence."""
    return record_of(line).one_line()
