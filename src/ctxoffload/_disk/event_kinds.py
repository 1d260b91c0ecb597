"""The kinds of session events and the field groups several kinds share.

`EventKind` names every kind a line of events.jsonl may have; `is_event` is the test every
reader applies to a line first. `MovedLines`, `TokenChange` and `Fidelity` are the fields
(and their words) that kinds declared in `run_events.py` and `context_events.py` have in
common; `events.py` is where readers and writers take the records from.

Light on purpose, like every module of the event records: no `dataclasses`, `typing` or
`logging` at run time.
"""

from __future__ import annotations

from .layout import EVENTS_FILE
from .records import Event
from .wording import fidelity_parts, fidelity_sentence, into_text

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "DECISION_KINDS",
    "RECORD_KINDS",
    "UNSYNCED_KINDS",
    "EventKind",
    "Fidelity",
    "MovedLines",
    "TokenChange",
    "is_event",
    "moved_into",
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
    # Written by a `Projector` when what it sends for some of the host's messages is cut to
    # fit (a compaction's cut of the newest turn, of a long request, of a call's arguments):
    # each message's key and the message as sent, re-applied on every later call.
    PROJECTION_CUT = "projection_cut"
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


RECORD_KINDS = frozenset({EventKind.MESSAGE, EventKind.MODEL_CALL})
"""The kinds that record what a model call was sent (`ctxoffload show --step` rebuilds a
call from them): what they hold is still in the context when they are written."""

DECISION_KINDS = frozenset(
    {
        EventKind.COMPRESSION,
        EventKind.SUMMARY,
        EventKind.ARTIFACTS,
        EventKind.PROJECTION,
        EventKind.PROJECTION_CUT,
        EventKind.TRUNCATION,
    }
)
"""The kinds that say what a compaction or a cut decided, written only after what it moved
out is durable where they say it went (the batch of context.jsonl, the tool_result file, each
synced before the event is written): the content rests on those files, never on the event."""

UNSYNCED_KINDS = RECORD_KINDS | DECISION_KINDS
"""The kinds whose lines are appended without an fsync of their own. Such a line is in
events.jsonl at once for every reader and survives a killed process; it survives a crash of
the machine once the next synced append to events.jsonl has returned (an fsync covers all the
file was written before it), or once the run's lease on the session is released
(`DiskStore.sync_records`), or once the kernel writes it back. What a crash of the machine
can cost before then is the record, never the content: a restarted projector that misses a
decision decides again (one more summary call, a file named twice), and `show --step` lacks
the last calls. This saves the agent's thread an fsync on every model call and on every
compaction; every other kind (a door's start, a pin, a tool_result naming data/ files, which
gc keeps by it) is synced before its call returns."""


def is_event(value: object) -> bool:
    """Whether a value read from events.jsonl is an event: a JSON object whose `kind` is a
    string. The one test every reader of a record applies before it looks at a field; the
    rest (a line of valid JSON that is a list or a number, a hand edit) is skipped, never
    taken for an event. The other fields may still be missing or of another type: read
    them with `.get` and check their type."""
    return isinstance(value, dict) and isinstance(value.get("kind"), str)


def moved_into(event: Event) -> str:
    """ " into FILE lines A-B" for an event that moved lines into a file ("" without one)."""
    return into_text(event.field("reference"), event.field("lines"), event.field("spans"))


class MovedLines(Event):
    """The fields of an event that put messages in a log: the file, and its line span
    `[first, last]` (with each run in `spans` when the lines are not consecutive)."""

    reference: str | None
    lines: list[int]
    spans: list[list[int]]


class TokenChange(Event):
    """The fields of an event that changed the context's tokens (`token_change` words them):
    before and after, and whether `before` was estimated, within what bounds."""

    tokens_before: int
    tokens_after: int
    tokens_before_exact: bool
    tokens_before_range: list[int]
    tokens_before_uncounted: int


class Fidelity(Event):
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
