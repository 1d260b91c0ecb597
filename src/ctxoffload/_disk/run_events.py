"""The records of what a run does (declared in `events.py`'s words: one class a kind, its
fields and its sentence): batches and files stored, a session's start, a door, messages,
model and tool calls, replays, forks, sub-agents and memory changes. Import them from
`events.py`.
"""

from __future__ import annotations

from .event_kinds import EventKind, MovedLines, moved_into
from .records import Event
from .wording import (
    duration,
    error_text,
    figure,
    first_line,
    plural,
    quoted,
    said,
)

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ContextBatch",
    "DataFile",
    "Door",
    "Fork",
    "MemoryChange",
    "Message",
    "ModelCall",
    "Replay",
    "SessionStart",
    "Subagent",
    "ToolCall",
    "ToolResult",
]


# Written by every workspace.


class ContextBatch(MovedLines):
    """A batch of messages appended to context.jsonl."""

    kind = EventKind.CONTEXT
    bytes: int
    messages: int

    def sentence(self) -> str:
        size = f"({figure(self.bytes)} bytes)"
        return f"appended {plural(self.messages, 'message')} {size}{moved_into(self)}"


class ToolResult(Event):
    """A tool's whole result stored in its own file."""

    kind = EventKind.TOOL_RESULT
    reference: str
    bytes: int
    lines: int
    tool_id: str
    tool_name: str | None
    data_files: list[str]

    def sentence(self) -> str:
        return (
            f"stored the whole result of {self.tool_name or 'a tool'} ({said(self.tool_id)}): "
            f"{plural(self.lines, 'line')}, {plural(self.bytes, 'byte')}, in "
            f"{said(self.reference)}"
        )


class DataFile(Event):
    """A data/ file an agent holds only a reference to (written by the adapters)."""

    kind = EventKind.DATA
    reference: str
    bytes: int
    media_type: str | None
    key: str

    def sentence(self) -> str:
        media = self.media_type or "bytes"
        size = f", {figure(self.bytes)} bytes" if self.bytes is not None else ""
        return f"stored a data file ({media}{size}): {said(self.reference)}"


# Written by the Agent's session record.


class SessionStart(Event):
    """An Agent starting (or resuming) a session: its configuration."""

    kind = EventKind.SESSION_START
    agent: str | None
    version: str
    model: str
    summary_model: str | None
    context_window: int
    config: dict[str, Any]
    tools: list[str]
    restored_messages: int
    first_step: int
    parent: dict[str, Any]

    def _resumed(self) -> bool:
        restored = self.restored_messages
        return isinstance(restored, int) and restored > 0 and not isinstance(self.parent, dict)

    def _who(self) -> str:
        """`agent 'analyst', model scripted (gpt-4o-mini)`: the name quoted, since an agent's
        default name is `agent`."""
        agent = quoted(self.agent, 60) if isinstance(self.agent, str) else "?"
        return f"agent {agent}, model {said(self.model)}"

    def sentence(self) -> str:
        if self._resumed():
            return (
                f"resumed at step {figure(self.first_step)}: "
                f"{plural(self.restored_messages, 'message')} restored"
            )
        return f"session started: {self._who()}"

    def notes(self) -> list[str]:
        window = f"window {figure(self.context_window)} tokens"
        if self._resumed():
            return [f"{self._who()}, {window}"]
        parent = self.parent
        child = (
            [
                f"sub-agent of session {parent.get('session')} (agent {parent.get('agent')}, "
                f"step {parent.get('step')}, call {parent.get('tool_id')})"
            ]
            if isinstance(parent, dict)
            else []
        )
        return [
            f"{window}, summaries by {self.summary_model or 'extraction'}, ctxoffload "
            f"{said(self.version)}",
            f"tools: {', '.join(self.tools or []) or 'none'}",
            *child,
        ]


class Door(Event):
    """A run of a host's conversation beginning to write the session through one of
    ctxoffload's doors (`_doors/doors.py` declares them): what `show` opens a session it
    wrote with, and what `ctxoffload compact` reads to know whether ctxoffload decides what
    the host's model is sent. The line says it all itself, so a reader needs no door."""

    kind = EventKind.DOOR
    log_level = "INFO"
    door: str
    host: str
    adapter: str
    conversation: str | None
    projects: bool
    records: str
    version: str
    parent: dict[str, Any]
    """A run nested in a run of another session (an agent run as a tool of another):
    `{"session": ..., "agent": ...}` of the run it was started in."""

    def sentence(self) -> str:
        # Whole (up to what no host's id reaches): it is what `ctxoffload show` finds the
        # session by, ADK's `app/user/session id` included; `show` folds a long line.
        conversation = (
            f" of {quoted(self.conversation, 300)}" if isinstance(self.conversation, str) else ""
        )
        return f"run{conversation} by {said(self.host)} ({said(self.adapter)})"

    def notes(self) -> list[str]:
        parent = self.parent
        nested = (
            [f"sub-agent of session {parent.get('session')} (agent {parent.get('agent')})"]
            if isinstance(parent, dict)
            else []
        )
        return [f"it records {said(self.records)}", *nested]


class Message(Event):
    """A message that entered the context, whole (`show` prints its text itself)."""

    kind = EventKind.MESSAGE
    message: dict[str, Any]

    def sentence(self) -> str:
        message: dict[str, Any] = self.message if isinstance(self.message, dict) else {}
        return f"message {said(message.get('id'))} ({said(message.get('role'))})"


class ModelCall(Event):
    """One call of the model: the messages it was sent (by id), tokens, outcome."""

    kind = EventKind.MODEL_CALL
    step: int
    attempt: int
    messages: list[str]
    summary: str | None
    tokens_counted: int
    input_tokens: int | None
    output_tokens: int | None
    cached_input_tokens: int | None
    duration_ms: float
    outcome: str
    error: dict[str, Any] | None
    reply: str | None
    tool_calls: list[dict[str, Any]]
    window: dict[str, Any]
    context_window: int
    trigger_tokens: int
    reading: str
    """What the host read, when the event records a read of the host's own store rather than
    a model call (a LlamaIndex agent's memory, read before each step and again within one:
    `memory`); absent for a model call."""

    def sentence(self) -> str:
        reported = self.input_tokens
        tokens = f"{figure(self.tokens_counted)} tokens" + (
            f" ({figure(reported)} reported)" if reported is not None else ""
        )
        attempt = self.attempt
        retried = isinstance(attempt, int) and attempt > 1
        if isinstance(self.reading, str):
            # A read of the same history again is no retry: the host read it twice.
            what = f"{self.reading} read" + (" again" if retried else "")
        else:
            what = "model call" + (f" (attempt {attempt})" if retried else "")
        # `ok` is every call's but a failed or projected one's: said only when it is not.
        outcome = "" if self.outcome == "ok" else f" · {said(self.outcome)}"
        if isinstance(self.error, dict):
            outcome += f": {error_text(self.error)}"
        calls = self.tool_calls or []
        then = f" → {', '.join(c.get('name', '?') for c in calls)}" if calls else ""
        summary = " (one a summary)" if self.summary else ""
        sent = plural(len(self.messages or []), "message")
        # A door that cannot time the call (smolagents sees it after the fact) says nothing
        # of its duration rather than `? ms`.
        took = self.duration_ms
        timed = f" · {duration(took)}" if isinstance(took, (int, float)) else ""
        return f"step {said(self.step)} · {what} · {sent}{summary} · {tokens}{timed}{outcome}{then}"


class ToolCall(Event):
    """One tool call: its arguments, outcome, duration, and error with traceback."""

    kind = EventKind.TOOL_CALL
    nested = True
    step: int
    tool_id: str
    name: str
    arguments: Any
    arguments_ref: dict[str, Any]
    arguments_bytes: int
    duration_ms: float
    outcome: str
    output_chars: int | None
    error: dict[str, Any] | None

    def sentence(self) -> str:
        outcome = said(self.outcome)
        error = self.error
        if isinstance(error, dict):
            what = f"{error.get('type')}: " if error.get("type") else ""
            outcome += f": {what}{first_line(said(error.get('message')))}"
        took = duration(self.duration_ms)
        return f"tool {said(self.name)} ({said(self.tool_id)}) {outcome} · {took}"

    def traceback(self) -> list[str]:
        """The lines of a failed call's traceback (none for a call that did not fail)."""
        error = self.error
        if isinstance(error, dict) and error.get("traceback"):
            return str(error["traceback"]).rstrip().splitlines()
        return []


# Written by `ctxoffload replay`, forks and sub-agents.


class Replay(Event):
    """`ctxoffload replay` starting a session it replays a transcript into."""

    kind = EventKind.REPLAY
    log_level = "INFO"
    run: str
    config_name: str
    config: dict[str, Any]
    messages: int
    model_calls: int

    def sentence(self) -> str:
        return (
            f"replay {said(self.run)} ({said(self.config_name)}): "
            f"{plural(self.messages, 'message')}, "
            f"{plural(self.model_calls, 'model call')} of the transcript"
        )


class Fork(Event):
    """The first event of a fork: the session and step it started from."""

    kind = EventKind.FORK
    log_level = "INFO"
    origin: dict[str, Any]
    messages: int
    state: str

    def sentence(self) -> str:
        origin: dict[str, Any] = self.origin if isinstance(self.origin, dict) else {}
        step = origin.get("step")
        at = f" at step {step}" if step is not None else " from its saved state"
        return (
            f"forked from session {said(origin.get('session'))}{at}: "
            f"{plural(self.messages, 'message')} to start from"
        )


class Subagent(Event):
    """A sub-agent started or ended by its parent (`Agent.as_tool`)."""

    kind = EventKind.SUBAGENT
    log_level = "INFO"
    status: str
    step: int
    tool_id: str
    name: str
    session: str
    task_chars: int
    steps: int
    answer_chars: int
    files: int
    duration_ms: float
    error: dict[str, Any]

    def sentence(self) -> str:
        who = f"sub-agent {said(self.name)} (session {said(self.session)})"
        at = f"step {said(self.step)} ·"
        if self.status == "started":
            return f"{at} started {who} for call {said(self.tool_id)}"
        if self.status == "done":
            return (
                f"{at} {who} answered after {plural(self.steps, 'step')}: "
                f"{figure(self.answer_chars)} characters, {figure(self.files)} "
                "stored files named"
            )
        if self.status == "cancelled":
            return f"{at} {who} was cancelled before it answered"
        return f"{at} {who} failed: {error_text(self.error)}"


# Written by the memory tool.


class MemoryChange(Event):
    """A change the memory tool made in `memories/`: which command, on which path (a
    `directory` for a delete or rename of one, with its `files`), and what it removed and
    added (the texts bounded, their lengths whole)."""

    kind = EventKind.MEMORY
    nested = True
    log_level = "INFO"
    command: str
    path: str
    new_path: str | None
    folder: str
    bytes_before: int
    bytes_after: int
    line: int
    directory: bool
    files: int
    removed: str
    added: str
    chars_removed: int
    chars_added: int

    def sentence(self) -> str:
        path = said(self.path)
        sizes = f"{figure(self.bytes_before)}→{figure(self.bytes_after)} bytes"
        command = self.command
        if command == "create":
            what = f"created {path} ({plural(self.bytes_after, 'byte')})"
        elif command == "str_replace":
            what = (
                f"replaced {plural(self.chars_removed, 'character')} with "
                f"{figure(self.chars_added)} at line {figure(self.line)} of {path} ({sizes})"
            )
        elif command == "insert":
            what = (
                f"inserted {plural(self.chars_added, 'character')} after line "
                f"{figure(self.line)} of {path} ({sizes})"
            )
        elif command == "delete":
            files = f"{plural(self.files, 'file')}, " if self.directory else ""
            what = f"deleted {path} ({files}{plural(self.bytes_before, 'byte')})"
        elif command == "rename":
            what = f"renamed {path} to {said(self.new_path)}"
        else:
            what = f"{said(command)} {path}"
        return f"memory: {what} in {said(self.folder)}/"

    def notes(self) -> list[str]:
        """The text removed and the text added, each on a line of its own, quoted (a
        newline or a terminal's escape in a memory is shown as `\\n`, `\\x1b`)."""
        return [
            f"{sign} {quoted(text)}"
            for sign, text in (("-", self.removed), ("+", self.added))
            if isinstance(text, str) and text
        ]
