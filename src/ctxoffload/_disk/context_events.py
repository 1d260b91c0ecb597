"""The records of what happens to a context (declared in `events.py`'s words: one class a
kind, its fields and its sentence): truncations, offloads, summaries and compressions, the
artifact index, windows, clearings, pins, compactions asked for, background summaries, a
request over the window, a projector's decisions, and compactions by a host or a provider.
Import them from `events.py`.
"""

from __future__ import annotations

from .event_kinds import EventKind, Fidelity, MovedLines, TokenChange, moved_into
from .records import Event
from .wording import (
    fidelity_sentence,
    figure,
    files_text,
    lines_text,
    plural,
    quoted,
    said,
    summary_origin_text,
    token_change,
)

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "Artifacts",
    "Background",
    "ClearThinking",
    "ClearToolUses",
    "Compact",
    "CompactRequest",
    "Compression",
    "HostCompaction",
    "ImageLimit",
    "Offload",
    "OverWindow",
    "Pin",
    "Projection",
    "ProjectionCut",
    "ProviderCompaction",
    "Summary",
    "Truncation",
    "Unpin",
    "Window",
    "requester_text",
]


# Written by the compressor and the pipeline's managers.


class Truncation(TokenChange):
    """A tool result cut to fit, its whole output stored; or, with `argument`, one long
    string among a tool call's arguments (its place in them, as `content` or `edits.0.text`)."""

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
    argument: str

    def sentence(self) -> str:
        if isinstance(self.argument, str):
            call = self.tool_name or "a tool call"
            return (
                f"truncated argument {self.argument!r} of {call} "
                f"{token_change(self.to_json())}{self._shown()}"
            )
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


class Offload(TokenChange):
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


class Summary(MovedLines):
    """A summary, whole, written just before its compression (`show` prints its fields)."""

    kind = EventKind.SUMMARY
    compression: int
    source: str
    request: str | None
    summary: dict[str, Any]

    def sentence(self) -> str:
        return f"summary {figure(self.compression)} ({said(self.source)}){moved_into(self)}"


class Compression(MovedLines, TokenChange, Fidelity):
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
    summary_origin: dict[str, Any]
    """Who wrote the summary and how (a newer field: older records lack it): `source`,
    `model`, `door`, `attempts`, `chunks`; for a model's summary `reply` ("json", "prose",
    "headings", "tags"), `filled` and `cut` (field names); for an extract `fallback` (why),
    `error`, `timeout`."""

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
        origin = summary_origin_text(self.summary_origin)
        return [f"moved to {where}", *self.fidelity_parts(), *([origin] if origin else [])]


class Artifacts(Event):
    """The full artifact index of a compression (its line sums it up)."""

    kind = EventKind.ARTIFACTS
    compression: int
    reference: str | None
    artifacts: list[Any]

    def sentence(self) -> str:
        listed = self.artifacts if isinstance(self.artifacts, list) else []
        return f"listed {plural(len(listed), 'artifact')} moved out{moved_into(self)}"


class Window(MovedLines, Fidelity):
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
            f"sliding window moved {plural(self.messages, 'message')}{moved_into(self)}, "
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


class ClearToolUses(TokenChange):
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


class ClearThinking(MovedLines, TokenChange):
    """The thinking of old turns cleared, moved out."""

    kind = EventKind.CLEAR_THINKING
    log_level = "INFO"
    messages: int
    blocks: int
    kept: int

    def sentence(self) -> str:
        return (
            f"cleared the thinking of {said(self.messages)} turns ({said(self.blocks)} blocks), "
            f"{token_change(self.to_json())}{moved_into(self)}"
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


class Compact(MovedLines, TokenChange):
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
            f"{token_change(self.to_json())}{moved_into(self)}{focus}"
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


class Background(MovedLines):
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
        what = f"{plural(self.messages, 'message')}{moved_into(self)}"
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


class ProjectionCut(Event):
    """A projector's decision: some of a host's messages are sent cut from now on. Each of
    `cuts` is `{"key", "given", "message"}`: the message's key across calls, the digest of
    the message as the host gave it (a message changed under its key is not the one cut),
    and the message as sent, head and notice naming the file that holds what was cut."""

    kind = EventKind.PROJECTION_CUT
    log_level = "INFO"
    cuts: list[dict[str, Any]]

    def sentence(self) -> str:
        cuts = self.cuts if isinstance(self.cuts, list) else []
        keys = [said(c.get("key")) if isinstance(c, dict) else "?" for c in cuts]
        named = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        return (
            f"projected {plural(len(cuts) if self.cuts is not None else None, 'message')} of "
            f"the host's history cut to fit ({named or '?'}); every later call sends "
            f"{'it' if len(cuts) == 1 else 'them'} cut"
        )


class HostCompaction(MovedLines, Fidelity):
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
            f"{plural(self.messages, 'message')} of its transcript kept{moved_into(self)} "
            f"({figure(self.appended)} new)" + (f"; {fidelity}" if fidelity else "")
        )


class ProviderCompaction(MovedLines, Fidelity):
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
            f"{plural(self.messages, 'message')} its item replaces kept{moved_into(self)}, the "
            "artifact index put after the item" + (f"; {fidelity}" if fidelity else "")
        )
