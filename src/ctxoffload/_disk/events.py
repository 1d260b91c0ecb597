"""Every kind of session event, declared once: its fields, its schema version and its one
sentence for people.

A line of events.jsonl is `{"time": ..., "kind": ..., FIELDS..., "writer": {...}}`. Each kind
is a record class below (`Truncation`, `Compression`, `Pin`, ...; the machinery is
`records.Event`): the fields a writer may give, and `sentence`, what `ctxoffload show` and
`watch`, the viewer and the `ctxoffload` logger say of it, worded with `wording.py`.
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

from .layout import EVENTS_FILE
from .records import KINDS, Event
from .wording import (
    duration,
    error_text,
    fidelity_parts,
    fidelity_sentence,
    figure,
    files_text,
    first_line,
    into_text,
    lines_text,
    plural,
    quoted,
    said,
    token_change,
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
    "record_of",
]


class EventKind:
    """The kinds of events in events.jsonl (each line also has `time` and `kind`)."""

    # Written by every workspace: a batch appended to context.jsonl, a tool result stored.
    CONTEXT = "context"
    TOOL_RESULT = "tool_result"
    # Written by the adapters (Strands' storage, AgentScope's data blocks): a data/ file an
    # agent holds only a reference to; the line names it, so gc keeps it with the session.
    DATA = "data"
    # Written by the Agent's session record (agent/_record.py).
    SESSION_START = "session_start"
    # Written by a host's door (LangChain's middleware, the Claude Code hooks, the MCP
    # proxy...) when a run of the host's conversation begins writing the session: which door,
    # which conversation, whether ctxoffload decides what the host's model is sent, and what
    # the door records (`_doors/`).
    DOOR = "door"
    MESSAGE = "message"
    MODEL_CALL = "model_call"
    TOOL_CALL = "tool_call"
    # Written by the compressor and the pipeline's managers.
    TRUNCATION = "truncation"
    OFFLOAD = "offload"
    SUMMARY = "summary"
    COMPRESSION = "compression"
    # Every artifact (path, URL, command, id) of what a compression moved out, and where it
    # is named now: the full artifact index.
    ARTIFACTS = "artifacts"
    WINDOW = "window"
    IMAGE_LIMIT = "image_limit"
    CLEAR_TOOL_USES = "clear_tool_uses"
    CLEAR_THINKING = "clear_thinking"
    # Written by a pin or an unpin (the API or the agent's pin_context tool), and by a
    # compaction the agent asked for (compact_context).
    PIN = "pin"
    UNPIN = "unpin"
    COMPACT = "compact"
    # Written by `ctxoffload compact` (`request_compaction`) from outside the agent: who
    # asked, and the instructions. The session's lease holder serves it at its next step and
    # answers with a `compact` event naming the `request`; until then it is pending.
    COMPACT_REQUEST = "compact_request"
    # A summary made in the background before the trigger (`background_compaction`): its
    # `status` is started, applied, stale, failed or cancelled.
    BACKGROUND = "background_summary"
    # A request still over the window once the pre_llm managers ran (`over_window`): its
    # tokens, the window, what they were spent on, and whether it was sent or refused.
    OVER_WINDOW = "over_window"
    # Written by `ctxoffload replay` first in each session it replays into.
    REPLAY = "replay"
    # Written first in a fork (`ctxoffload fork`, `fork_session`): its `origin` session and
    # step; and by an Agent that takes over or forks a busy session.
    FORK = "fork"
    # Written by a parent agent when it starts and ends a sub-agent (`Agent.as_tool`): the
    # child's session, the step and tool call that started it, what came back.
    SUBAGENT = "subagent"
    # Written by a `Projector` (a host that keeps its own history): which of the host's
    # messages a summary stands for, and the summary, re-applied on every later call.
    PROJECTION = "projection"
    # Written by the memory tool, in the session of the agent that changed a memory file:
    # the command, the path, and what changed (bounded).
    MEMORY = "memory"
    # Written by a hook of a host that compacts its own context (`ctxoffload hook PreCompact`
    # for Claude Code): the messages it was about to drop, appended to context.jsonl, and
    # the text that names them (the artifact index) for the context after it.
    HOST_COMPACTION = "host_compaction"
    # Written when a model's response carries its provider's own compaction (Anthropic's
    # `compaction` block, the Responses API's `compaction` item), by the Agent and by a
    # `Projector`: the messages the item replaces, appended to context.jsonl, and the note
    # with their artifact index put right after the item.
    PROVIDER_COMPACTION = "provider_compaction"


def is_event(value: object) -> bool:
    """Whether a value read from events.jsonl is an event: a JSON object whose `kind` is a
    string. The one test every reader of a record applies before it looks at a field; the
    rest (a line of valid JSON that is a list or a number, a hand edit) is skipped, never
    taken for an event. The other fields may still be missing or of another type: read
    them with `.get` and check their type."""
    return isinstance(value, dict) and isinstance(value.get("kind"), str)


def _into(event: Event) -> str:
    """ " into FILE lines A-B" for an event that moved lines into a file ("" without one)."""
    return into_text(event.field("reference"), event.field("lines"), event.field("spans"))


# -- the records --------------------------------------------------------------------------------


def record_of(line: Mapping[str, Any]) -> Event:
    """The record of an event line (see `is_event`), of the class its kind declares or an
    `Event` for a kind this version does not know."""
    return KINDS.get(str(line.get("kind")), Event).from_json(line)


def event_sentence(line: Mapping[str, Any]) -> str:
    """What a reader of one line per event says of an event line (the `ctxoffload` logger,
    a command's one-line answer): its sentence and its notes (`Event.one_line`). `show`,
    `watch` and the viewer print the notes under the sentence."""
    return record_of(line).one_line()


class _MovedLines(Event):
    """The fields of an event that put messages in a log: the file, and its line span
    `[first, last]` (with each run in `spans` when the lines are not consecutive)."""

    reference: str | None
    lines: list[int]
    spans: list[list[int]]


class _TokenChange(Event):
    """The fields of an event that changed the context's tokens (`token_change` words them):
    before and after, and whether `before` was estimated, within what bounds."""

    tokens_before: int
    tokens_after: int
    tokens_before_exact: bool
    tokens_before_range: list[int]
    tokens_before_uncounted: int


class _Fidelity(Event):
    """The fields of an event that moved messages out and checked what it left readable
    (`fidelity_sentence` words them): the artifact counts, and the messages read back at
    their lines."""

    artifacts: dict[str, Any]
    recoverable: dict[str, Any]

    def fidelity(self) -> str | None:
        """The check as a sentence (None without one); the artifacts cut from the index are
        listed in events.jsonl (the `artifacts` event)."""
        return fidelity_sentence(self.to_json(), f"listed in {EVENTS_FILE}")

    def fidelity_parts(self) -> list[str]:
        """`fidelity`'s parts (what stayed named, what was read back), each on its own."""
        return fidelity_parts(self.to_json(), f"listed in {EVENTS_FILE}")


# Written by every workspace.


class ContextBatch(_MovedLines):
    """A batch of messages appended to context.jsonl."""

    kind = EventKind.CONTEXT
    bytes: int
    messages: int

    def sentence(self) -> str:
        return (
            f"appended {plural(self.messages, 'message')} ({figure(self.bytes)} bytes){_into(self)}"
        )


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

    def sentence(self) -> str:
        conversation = (
            f" of {quoted(self.conversation, 40)}" if isinstance(self.conversation, str) else ""
        )
        return f"run{conversation} by {said(self.host)} ({said(self.adapter)})"

    def notes(self) -> list[str]:
        return [f"it records {said(self.records)}"]


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

    def sentence(self) -> str:
        reported = self.input_tokens
        tokens = f"{figure(self.tokens_counted)} tokens" + (
            f" ({figure(reported)} reported)" if reported is not None else ""
        )
        attempt = self.attempt
        again = f" (attempt {attempt})" if isinstance(attempt, int) and attempt > 1 else ""
        # `ok` is every call's but a failed or projected one's: said only when it is not.
        outcome = "" if self.outcome == "ok" else f" · {said(self.outcome)}"
        if isinstance(self.error, dict):
            outcome += f": {error_text(self.error)}"
        calls = self.tool_calls or []
        then = f" → {', '.join(c.get('name', '?') for c in calls)}" if calls else ""
        summary = " (one a summary)" if self.summary else ""
        sent = plural(len(self.messages or []), "message")
        return (
            f"step {said(self.step)} · model call{again} · {sent}{summary} · {tokens} · "
            f"{duration(self.duration_ms)}{outcome}{then}"
        )


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


# Written by the compressor and the pipeline's managers.


class Truncation(_TokenChange):
    """A tool result cut to fit, its whole output stored."""

    kind = EventKind.TRUNCATION
    nested = True
    log_level = "INFO"
    tool_id: str
    tool_name: str | None
    tool: str
    reference: str | None
    lines_shown: int
    lines_total: int
    last_line_partial: bool
    bytes_total: int
    kept_sha256: str
    unit: str
    reason: str

    def sentence(self) -> str:
        return (
            f"truncated {self.tool_name or self.tool or 'a tool result'} "
            f"{token_change(self.to_json())}{self._shown()}"
        )

    def _shown(self) -> str:
        """`, 14 of 212 lines shown`; when the last line shown is cut,
        `, 1 of 2 lines shown and part of line 2`; when every line is kept (an image or a file
        left), `, all 2 lines shown, non-text parts stored`."""
        shown, total = self.lines_shown, self.lines_total
        if not isinstance(shown, int):
            return ""
        if self.last_line_partial is True and shown == 1:
            return f", part of line 1 of {figure(total)} shown"
        if self.last_line_partial is True and shown > 1:
            whole = f"{figure(shown - 1)} of {plural(total, 'line')} shown and part"
            return f", {whole} of line {figure(shown)}"
        if shown == total:
            # Every line of the text kept: what left is not text (an image, a file), and
            # its `<data .../>` line names where it went.
            return f", all {plural(total, 'line')} shown, non-text parts stored"
        return f", {figure(shown)} of {plural(total, 'line')} shown"

    def notes(self) -> list[str]:
        return [f"whole output in {self.reference or 'nowhere (no offloader)'}"]


class Offload(_TokenChange):
    """Blocks of a tool result (images, files) moved out, its references kept."""

    kind = EventKind.OFFLOAD
    log_level = "INFO"
    tool_id: str
    tool_name: str | None
    blocks: int
    references: list[str]
    bytes: int
    kept_sha256: str

    def sentence(self) -> str:
        return (
            f"offloaded {plural(self.blocks, 'block')} of {said(self.tool_name)} "
            f"({said(self.tool_id)}), "
            f"{token_change(self.to_json())}" + files_text(self.references, " into ")
        )


class Summary(_MovedLines):
    """A summary, whole, written just before its compression (`show` prints its fields)."""

    kind = EventKind.SUMMARY
    compression: int
    source: str
    request: str | None
    summary: dict[str, Any]

    def sentence(self) -> str:
        return f"summary {figure(self.compression)} ({said(self.source)}){_into(self)}"


class Compression(_MovedLines, _TokenChange, _Fidelity):
    """History summarized and moved out of the context."""

    kind = EventKind.COMPRESSION
    log_level = "INFO"
    messages: int
    kept: int
    pinned: int
    summary_source: str
    summary_model: str | None
    summary_model_calls: int
    summary_input: dict[str, Any]

    def sentence(self) -> str:
        count = self.messages
        what = plural(count, "message") if isinstance(count, int) else "history"
        also = f", {figure(self.kept)} kept" if isinstance(self.kept, int) else ""
        if self.summary_model:
            by = f"summary by {said(self.summary_model)}"
        else:
            by = f"{said(self.summary_source)} summary" if self.summary_source else "summary"
        return f"compressed {what}, {token_change(self.to_json())} ({by}{also})"

    def notes(self) -> list[str]:
        where = str(self.reference or "nowhere (no offloader)")
        where += lines_text(self.lines, self.spans)
        # The report's parts on lines of their own: each fits a terminal's width.
        return [f"moved to {where}", *self.fidelity_parts()]


class Artifacts(Event):
    """The full artifact index of a compression (its line sums it up)."""

    kind = EventKind.ARTIFACTS
    compression: int
    reference: str | None
    artifacts: list[Any]

    def sentence(self) -> str:
        listed = self.artifacts if isinstance(self.artifacts, list) else []
        return f"listed {plural(len(listed), 'artifact')} moved out{_into(self)}"


class Window(_MovedLines, _Fidelity):
    """The sliding window moving messages out."""

    kind = EventKind.WINDOW
    log_level = "INFO"
    messages: int
    kept: int
    pinned: int
    max_messages: int

    def sentence(self) -> str:
        pinned = self.pinned
        also = f", {pinned} pinned" if isinstance(pinned, int) and pinned else ""
        fidelity = self.fidelity()
        return (
            f"sliding window moved {plural(self.messages, 'message')}{_into(self)}, "
            f"kept {figure(self.kept)} (at most {figure(self.max_messages)})"
            f"{also}" + (f"; {fidelity}" if fidelity else "")
        )


class ImageLimit(Event):
    """Images past the limit replaced by their references."""

    kind = EventKind.IMAGE_LIMIT
    log_level = "INFO"
    images: int
    replaced: int
    max_images: int
    references: list[str]

    def sentence(self) -> str:
        return (
            f"image limit: {figure(self.replaced)} of {figure(self.images)} images "
            f"replaced by their references (at most {figure(self.max_images)} kept)"
            + files_text(self.references, "; stored in ")
        )


class ClearToolUses(_TokenChange):
    """Old tool outputs cleared from the context, stored."""

    kind = EventKind.CLEAR_TOOL_USES
    log_level = "INFO"
    cleared: int
    tool_ids: list[str]
    tool_names: list[str]
    inputs_cleared: int
    references: list[str]
    kept: int
    forced: bool
    artifacts: dict[str, Any]

    def sentence(self) -> str:
        line = self.to_json()
        inputs = self.inputs_cleared
        also = f" and {inputs} inputs" if isinstance(inputs, int) and inputs else ""
        ids = ", ".join(str(i) for i in self.tool_ids or [])
        cleared = self.cleared
        fidelity = fidelity_sentence(line, "in the stored outputs")
        return (
            f"cleared {said(cleared)} tool output{'' if cleared == 1 else 's'} ({ids}){also}, "
            f"{token_change(line)}{files_text(self.references, '; stored in ', 'more files')}"
            + (f"; {fidelity}" if fidelity else "")
        )


class ClearThinking(_MovedLines, _TokenChange):
    """The thinking of old turns cleared, moved out."""

    kind = EventKind.CLEAR_THINKING
    log_level = "INFO"
    messages: int
    blocks: int
    kept: int

    def sentence(self) -> str:
        return (
            f"cleared the thinking of {said(self.messages)} turns ({said(self.blocks)} blocks), "
            f"{token_change(self.to_json())}{_into(self)}"
        )


class Pin(Event):
    """A message pinned (by the API or the agent's pin_context tool)."""

    kind = EventKind.PIN
    log_level = "INFO"
    message_id: str
    role: str
    by: str
    pinned_tokens_before: int
    pinned_tokens_after: int
    pinned_messages: int
    window: int | None

    def sentence(self) -> str:
        window, after = self.window, self.pinned_tokens_after
        share = (
            f", {after / window:.0%} of the {window:,}-token window"
            if isinstance(window, int) and window > 0 and isinstance(after, int)
            else ""
        )
        verb = "pinned" if self.kind == EventKind.PIN else "unpinned"
        return (
            f"{verb} message {said(self.message_id)} ({said(self.role)}, by {said(self.by)}): pins "
            f"{figure(self.pinned_tokens_before)}→{figure(after)} tokens{share}"
        )


class Unpin(Pin):
    """A message unpinned: the fields of a pin."""

    kind = EventKind.UNPIN


def requester_text(by: object) -> str:
    """Who asked for a compaction from outside (`CompactRequest.by`): `user 'ann' on
    'host-a' (pid 123)`, from what the line holds, quoted (a name is never acted on)."""
    if not isinstance(by, dict):
        return "someone"
    user = by.get("user")
    who = f"user {quoted(str(user), 40)}" if user else "someone"
    return f"{who} on {quoted(str(by.get('host', '?')), 60)} (pid {said(by.get('pid'))})"


class Compact(_MovedLines, _TokenChange):
    """A compaction asked for: by the agent (compact_context, `Agent.compact`), or from
    outside (`requests` names the `compact_request` events it answers, `requested_by` who
    asked; `changed` is false when nothing was compacted, `reason` saying why)."""

    kind = EventKind.COMPACT
    log_level = "INFO"
    instructions: str | None
    changed: bool
    reason: str
    messages: int
    requests: list[str] | None
    requested_by: list[dict[str, Any]] | None

    def sentence(self) -> str:
        asked = self.instructions
        focus = f", instructions: {quoted(asked)}" if isinstance(asked, str) and asked else ""
        requests = self.requests
        if not isinstance(requests, list) or not requests:
            whose = "on the agent's request"
        else:
            by = self.requested_by if isinstance(self.requested_by, list) else []
            people = ", ".join(dict.fromkeys(requester_text(b) for b in by)) or "someone"
            named = ", ".join(said(r) for r in requests)
            whose = f"on the request{'s' if len(requests) > 1 else ''} {named} of {people}"
        if self.changed is False:
            return f"did not compact {whose}: {said(self.reason)}"
        return (
            f"compacted {whose} ({said(self.reason)}), "
            f"{token_change(self.to_json())}{_into(self)}{focus}"
        )


class CompactRequest(Event):
    """A compaction asked for from outside the agent (`ctxoffload compact`): its `request`
    id, who asked (`by`: user, host, pid) and the instructions. The session's lease holder
    answers with a `compact` event naming the request."""

    kind = EventKind.COMPACT_REQUEST
    log_level = "INFO"
    request: str
    by: dict[str, Any]
    instructions: str | None

    def sentence(self) -> str:
        asked = self.instructions
        focus = f", instructions: {quoted(asked)}" if isinstance(asked, str) and asked else ""
        return f"compaction {said(self.request)} requested by {requester_text(self.by)}{focus}"


class Background(_MovedLines):
    """A summary made in the background before the trigger: started, applied, stale,
    failed or cancelled (`status`)."""

    kind = EventKind.BACKGROUND
    log_level = "INFO"
    status: str
    messages: int
    age_ms: float
    waited_ms: float
    reason: str

    def sentence(self) -> str:
        status = self.status
        what = f"{plural(self.messages, 'message')}{_into(self)}"
        if status == "started":
            return f"started a background summary of {what}"
        if status == "applied":
            waited = self.waited_ms
            wait = f"; the step waited {waited:,.0f} ms" if isinstance(waited, (int, float)) else ""
            return f"applied the background summary of {what}{wait}"
        reason = self.reason
        return f"background summary of {what} {said(status)}" + (f": {reason}" if reason else "")


class OverWindow(Event):
    """A request still over the window once the pre_llm managers ran: sent or refused."""

    kind = EventKind.OVER_WINDOW
    log_level = "WARNING"  # the request goes over the window (or is refused): not a note
    tokens: int
    window: int
    system_tokens: int
    tools_tokens: int
    summary_tokens: int
    pinned_tokens: int
    messages: int
    messages_tokens: int
    action: str

    def sentence(self) -> str:
        others = self.messages
        parts = ", ".join(
            f"{name} {figure(value)}"
            for name, value in (
                ("system prompt", self.system_tokens),
                ("tool schemas", self.tools_tokens),
                ("summary", self.summary_tokens),
                ("pins", self.pinned_tokens),
                (plural(others, "other message"), self.messages_tokens),
            )
        )
        refused = self.action == "refused"
        return (
            f"the request to the model takes {figure(self.tokens)} tokens, over the "
            f"{figure(self.window)}-token window, after the context managers ran: "
            f"{parts}; " + ("refused (over_window='refuse')" if refused else "sent anyway")
        )


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


class Projection(Event):
    """A projector's decision: a summary stands for some of a host's messages from now on."""

    kind = EventKind.PROJECTION
    log_level = "INFO"
    start: int
    covers: int
    last_key: str
    messages: list[dict[str, Any]]

    def sentence(self) -> str:
        return (
            f"projected {plural(self.covers, 'message')} of the host's history as a summary "
            f"(through {said(self.last_key)}); every later call sends the summary instead"
        )


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


class HostCompaction(_MovedLines, _Fidelity):
    """A host about to compact its own context (Claude Code's PreCompact hook): what it held,
    appended to context.jsonl, and `context`, the text that names where it went (with the
    artifact index) for the context after the compaction."""

    kind = EventKind.HOST_COMPACTION
    log_level = "INFO"
    host: str
    trigger: str
    transcript: str
    messages: int
    appended: int
    context: str
    mark: dict[str, Any]
    segment: str
    earlier: dict[str, Any]

    def sentence(self) -> str:
        fidelity = self.fidelity()
        return (
            f"{said(self.host)} compacted its context ({said(self.trigger)}): "
            f"{plural(self.messages, 'message')} of its transcript kept{_into(self)} "
            f"({figure(self.appended)} new)" + (f"; {fidelity}" if fidelity else "")
        )


class ProviderCompaction(_MovedLines, _Fidelity):
    """A provider's own compaction in a response (Anthropic's `compaction` block, the
    Responses API's `compaction` item): the messages before it, which the provider no longer
    reads, appended to context.jsonl; `note`, the message put right after the item (where
    they went and the artifact index), which a `Projector` sends again on every call."""

    kind = EventKind.PROVIDER_COMPACTION
    log_level = "INFO"
    provider: str
    item_id: str | None
    message_id: str
    item_key: str
    messages: int
    note: dict[str, Any]

    def sentence(self) -> str:
        fidelity = self.fidelity()
        return (
            f"{said(self.provider)} compacted the conversation on its side: "
            f"{plural(self.messages, 'message')} its item replaces kept{_into(self)}, the "
            "artifact index put after the item" + (f"; {fidelity}" if fidelity else "")
        )
