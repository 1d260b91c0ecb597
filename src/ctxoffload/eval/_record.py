"""The compactions of a session, read from its record: for each, the messages that left the
context (the span of context.jsonl the events name), the files their tool results are stored
in whole, and the model call made right after it, whose messages `rebuild_step` rebuilds.

Everything here is read through `_disk.read.Folder`: no link followed, nothing written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._disk.events import EventKind, is_event
from .._disk.ids import validate_session_id
from .._disk.layout import CONTEXT_FILE, EVENTS_FILE, SESSIONS_DIR
from .._disk.read import Folder, rebuild_step
from ..exceptions import OffloadError

__all__ = ["Compaction", "SessionRecord", "read_record"]


@dataclass
class Compaction:
    """One compaction of a session, as its record tells it.

    Attributes:
        number: 1-based, in the order the session made them.
        lines: the span of context.jsonl (first, last; 1-based) that left the context.
        left: the messages of that span, each with its line of context.jsonl.
        step: the model call made right after it; None when the session ended first.
        sent: the messages that call was sent (as stored), rebuilt from the record.
        summary_id: the id of the summary message among them, when the record names one.
    """

    number: int
    lines: tuple[int, int]
    left: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    step: int | None = None
    sent: list[dict[str, Any]] = field(default_factory=list)
    summary_id: str | None = None


@dataclass
class SessionRecord:
    """What `eval` reads of a session.

    Attributes:
        workdir: the workspace's folder, as given.
        session: the session id.
        folder: the session's folder, as people see it named.
        compactions: the compactions, oldest first.
        stored: tool call id -> the name of the file (in the session's folder) that holds
            that call's whole result, for every result that was truncated.
        tools: the tools the session's agent was given, as its start recorded them.
    """

    workdir: str
    session: str
    folder: str
    compactions: list[Compaction]
    stored: dict[str, str]
    tools: list[str]
    _files: dict[str, str] = field(default_factory=dict, repr=False)

    def stored_text(self, tool_id: str) -> str | None:
        """The whole text of a tool call's stored result, or None when it was not stored."""
        name = self.stored.get(tool_id)
        if name is None:
            return None
        if name not in self._files:
            try:
                with Folder(self.workdir, SESSIONS_DIR, self.session) as folder:
                    raw = folder.read_bytes(name)
            except (OSError, OffloadError):  # gone, or a planted link: never read through
                return None
            self._files[name] = raw.decode("utf-8", errors="replace")
        return self._files[name]


def _basename(reference: object) -> str | None:
    if not isinstance(reference, str) or not reference:
        return None
    name = reference.replace("\\", "/").rsplit("/", 1)[-1]
    return name if name.startswith("tool_result-") else None


def _span(value: object) -> tuple[int, int] | None:
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and 1 <= value[0] <= value[1]
    ):
        return value[0], value[1]
    return None


def read_record(workdir: str, session: str) -> SessionRecord:
    """The compactions of session `session` of the workspace at `workdir`.

    Raises:
        InvalidSessionId: `session` is not a plain name.
        FileNotFoundError: the workspace has no such session.
        Refused: a file of the session is a planted link or a special file.
    """
    session = validate_session_id(session)
    with Folder(workdir, SESSIONS_DIR, session) as folder:
        events = [e for e in folder.read_log(EVENTS_FILE) if is_event(e)]
        context = folder.read_log(CONTEXT_FILE, commit=True)
        shown = folder.shown
    stored: dict[str, str] = {}
    tools: list[str] = []
    compactions: list[Compaction] = []
    waiting: list[Compaction] = []  # made, not yet followed by a model call
    for event in events:
        kind = event.get("kind")
        if kind == EventKind.SESSION_START and not tools:
            tools = [t for t in event.get("tools") or [] if isinstance(t, str)]
        elif kind in (EventKind.TRUNCATION, EventKind.TOOL_RESULT):
            name = _basename(event.get("reference"))
            tool_id = event.get("tool_id")
            if name is not None and isinstance(tool_id, str):
                stored.setdefault(tool_id, name)
        elif kind == EventKind.COMPRESSION:
            span = _span(event.get("lines"))
            if span is None:
                continue
            first, last = span
            left = [
                (line, context[line - 1])
                for line in range(first, min(last, len(context)) + 1)
                if isinstance(context[line - 1], dict)
            ]
            compaction = Compaction(len(compactions) + 1, span, left)
            compactions.append(compaction)
            waiting.append(compaction)
        elif kind == EventKind.MODEL_CALL and waiting and isinstance(event.get("step"), int):
            summary = event.get("summary")
            for compaction in waiting:
                compaction.step = event["step"]
                compaction.summary_id = summary if isinstance(summary, str) else None
            waiting = []
    for compaction in compactions:
        if compaction.step is not None:
            try:
                compaction.sent = rebuild_step(events, compaction.step)
            except (LookupError, ValueError):
                compaction.step = None
    return SessionRecord(workdir, session, shown, compactions, stored, tools)
