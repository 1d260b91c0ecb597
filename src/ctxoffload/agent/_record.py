"""The session record: what an `Agent` appends to events.jsonl, and how a step is rebuilt.

Event kinds written here (each line also has `time` and `kind`):

- `session_start`: agent, version, model, summary_model, context_window, config, tools,
  restored_messages, first_step; for a sub-agent, `parent` (session, agent, step, tool_id).
- `message`: `message`, one message in full as it entered the context (a tool message
  holds the results as the model saw them: truncated heads, not the whole output). A
  message that changes while keeping its id (a long user request cut by compression) is
  written again; the latest line before a model call is the one that call was sent.
- `model_call`: step, attempt, messages (the ids sent, in order), summary (the id of the
  summary message sent, or null), tokens_counted, input_tokens / output_tokens (what the
  provider reported, or null), duration_ms, outcome (`ok`, `overflow` or `error`), error,
  reply (the reply's id), tool_calls; `window`, what the tokens counted were spent on
  (`WINDOW_PARTS`: each message counted whole in the first part it belongs to, so the parts
  add up to the count before any provider anchor), `context_window` and `trigger_tokens`.
- `tool_call`: step, tool_id, name, arguments (or arguments_ref and arguments_bytes when
  they are over 4 KB: they are in the assistant message named), duration_ms, outcome
  (`ok` or `error`), output_chars, error (type, message, traceback when it raised).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._disk import events
from .._disk.events import EventKind
from .._disk.layout import now_iso
from .._disk.records import Event
from .._disk.writer import WRITER_FIELD, current_writer
from .._emit import emit_event, emit_events
from .._message_log import MessageLog
from ..compression import EventCallback, is_pinned, is_summary_message
from ..exceptions import ContextOverflowError
from ..messages import DataBlock, Msg, ToolCallBlock, ToolResultBlock
from ..model import ModelResponse, model_label
from ..workspace import EventLog, Offloader

__all__ = ["WINDOW_PARTS", "SessionRecorder", "StepRecord", "window_parts"]

logger = logging.getLogger("ctxoffload")


HELD_FOR = 0.05
"""The longest a step's `tool_call` event waits to be written with the others (seconds)."""


@dataclass
class StepRecord:
    """What happened in one step of the loop, for reports and debugging.

    Attributes:
        step: the step's number, from 1.
        context_tokens: the tokens of the messages sent to the model at this step.
        tool_calls: the names of the tools the model called, in order.
        truncated: how many tool results were truncated into files.
        compressed: whether older history was compressed before the model call.
        input_tokens: the input tokens the provider reported; None when it reported none.
    """

    step: int
    context_tokens: int
    tool_calls: list[str] = field(default_factory=list)
    truncated: int = 0
    compressed: bool = False
    input_tokens: int | None = None


WINDOW_PARTS = (
    "system",
    "tools",
    "summary",
    "pinned",
    "messages",
    "tool_results",
    "images",
)
"""What a model call's tokens are spent on, in the order `ctxoffload ui` stacks them: the
system prompt, the tool schemas, the summary of compressed history, pinned messages, the
rest of the conversation, tool results and images."""


def window_parts(
    sent: Sequence[Msg],
    count_message: Callable[[Msg], int],
    tools_tokens: int,
    *,
    known: dict[str, tuple[Msg, str]] | None = None,
) -> dict[str, int]:
    """The tokens of one model call by what they are spent on: a dict of `system`, `tools`,
    `summary`, `pinned`, `messages`, `tool_results` and `images`, in that order (the order
    `ctxoffload ui` stacks them).

    Each message is counted whole in the first part it belongs to: a system message in
    `system`, the summary in `summary`, a pinned message in `pinned`, one holding an image
    (in a tool result too) in `images`, one holding a tool result in `tool_results`, any
    other in `messages` (which also holds the reply priming). The parts add up to what
    `ContextTokenTracker.count` returns before a provider anchor.

    Args:
        sent: the messages of the call, in order.
        count_message: the tokens of one message (the tracker's cached count).
        tools_tokens: what the tool schemas cost.
        known: the part of each message seen before, by id, kept by the caller from one call
            to the next (messages are not changed in place: the same object has the same
            part); updated to hold exactly the messages of `sent`.
    """
    from ..tokens import REPLY_PRIMING_TOKENS

    parts = dict.fromkeys(WINDOW_PARTS, 0)
    parts["tools"] = tools_tokens
    seen: dict[str, tuple[Msg, str]] = {}
    for msg in sent:
        entry = known.get(msg.id) if known is not None else None
        part = entry[1] if entry is not None and entry[0] is msg else _part_of(msg)
        seen[msg.id] = (msg, part)
        parts[part] += count_message(msg)
    if known is not None:
        known.clear()
        known.update(seen)
    if sent:
        parts["messages"] += REPLY_PRIMING_TOKENS
    return parts


def _part_of(msg: Msg) -> str:
    if is_summary_message(msg):
        return "summary"
    if msg.role == "system":
        return "system"
    if is_pinned(msg):
        return "pinned"
    if isinstance(msg.content, str):
        return "messages"
    results = False
    for block in msg.content:
        if isinstance(block, DataBlock) and _is_image(block):
            return "images"
        if isinstance(block, ToolResultBlock):
            results = True
            if not isinstance(block.output, str) and any(
                isinstance(part, DataBlock) and _is_image(part) for part in block.output
            ):
                return "images"
    return "tool_results" if results else "messages"


def _is_image(block: DataBlock) -> bool:
    return (block.media_type or "").startswith("image/")


# Tool arguments above this many bytes of JSON are not copied into the tool_call event: the
# assistant message that made the call already holds them, recorded once.
ARGUMENTS_INLINE_LIMIT = 4096

# What `json.dumps(..., ensure_ascii=False, default=str)` makes an encoder for at each call:
# made once, as a step of 100,000 calls measures the arguments of each.
_ARGUMENTS_JSON = json.JSONEncoder(ensure_ascii=False, default=str)


class SessionRecorder:
    """Appends an agent's session record through the offloader's `record_event`.

    Recording never fails the run: an offloader that is not an `EventLog` gets no record,
    and a failed write is logged.

    Args:
        offloader: where events go (its `record_event`, when it is an `EventLog`), or None.
        session_id: the session.
        on_event: called with each event dict as it is written (sync or async).
        prepare: turns a message into the form stored (inline payloads moved to data/).
    """

    def __init__(
        self,
        offloader: Offloader | None,
        session_id: str,
        *,
        on_event: EventCallback | None = None,
        prepare: Callable[[Msg], Awaitable[Msg]] | None = None,
    ) -> None:
        self.offloader = offloader
        self.session_id = session_id
        self.on_event = on_event
        self._log = MessageLog(self.emit, prepare=prepare)
        self._started = False
        self._attempts: dict[int, int] = {}
        self._reply_id: str | None = None
        # Steps are numbered over the whole session: an agent that resumes a session goes on
        # from the last step recorded, so that `--step N` names one step.
        self._step_offset = 0
        # The step's `tool_call` events not yet written (`tool_call`, `flush`), each with the
        # time and the writer it had when its call ended.
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._flush_timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Task[None]] = set()
        # One writer of events at a time, so that held events and the next one keep their
        # order in events.jsonl whoever writes first (a timed flush, or `emit`): a lock for
        # the event loop it serves (an agent may be run by several `asyncio.run`s).
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def step_of(self, step: int) -> int:
        """The session's number of this agent's `step` (an agent resumed goes on counting)."""
        return step + self._step_offset

    async def emit(self, record: Event) -> None:
        """Write one event and tell `on_event`, after the `tool_call` events still held
        (`flush`), so that the record keeps the order in which things happened."""
        async with self._writing():
            await self._write_held()
            await emit_event(
                self.offloader, self.session_id, self.on_event, record.kind, record.fields()
            )

    async def flush(self) -> None:
        """Write the `tool_call` events held since the last write, in one append.

        A step's calls are recorded together, not once each: a step of 100,000 calls paid an
        append and an fsync for each (about 1 ms a call). A held event waits at most
        `HELD_FOR` seconds (a step of slow tools shows each call in events.jsonl, to
        `ctxoffload watch` and `on_event`, as it ends), and no longer than the next thing the
        recorder writes (the step's tool message among them), or a context tool's run
        (`Agent._run_tool`); each keeps the time and the writer of its call's end, so
        events.jsonl holds the lines it held when each was written at once, in order.
        """
        async with self._writing():
            await self._write_held()

    def _writing(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        return self._lock[1]

    async def _write_held(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        held, self._pending = self._pending, []
        if held:
            await emit_events(self.offloader, self.session_id, self.on_event, held)

    def _hold(self, kind: str, fields: dict[str, Any]) -> None:
        """Keep an event for the next write, which comes within `HELD_FOR` seconds."""
        self._pending.append((kind, fields))
        if self._flush_timer is None:
            self._flush_timer = asyncio.get_running_loop().call_later(HELD_FOR, self._timed_flush)

    def _timed_flush(self) -> None:
        self._flush_timer = None
        task = asyncio.ensure_future(self.flush())
        self._flushes.add(task)  # (kept until done: the loop holds tasks weakly)
        task.add_done_callback(self._flushes.discard)

    async def start(self, agent: Any) -> None:
        """Write `session_start` once per agent object."""
        if self._started:
            return
        self._started = True
        from .._version import __version__

        if isinstance(self.offloader, EventLog):
            try:
                earlier = await self.offloader.read_events(self.session_id)
                self._step_offset = max(
                    (
                        e["step"]
                        for e in earlier
                        if e.get("kind") == EventKind.MODEL_CALL and isinstance(e.get("step"), int)
                    ),
                    default=0,
                )
                self._log.remember(earlier)
            except Exception as exc:
                logger.warning("could not read the record of session %s: %s", self.session_id, exc)

        summarizer = agent.compressor.model
        await self.emit(
            events.SessionStart(
                agent=agent.name,
                version=__version__,
                model=model_label(agent.model),
                summary_model=model_label(summarizer) if summarizer is not None else None,
                context_window=agent.compressor.window(),
                config=agent.context_config.model_dump(mode="json"),
                tools=list(agent.tools),
                restored_messages=sum(1 for m in agent.messages if m.role != "system"),
                first_step=self._step_offset + 1,
                **({"parent": agent.parent} if agent.parent is not None else {}),
            )
        )

    async def messages(self, msgs: Iterable[Msg], *, is_context: bool = True) -> None:
        """Write a `message` event for each message not yet written in this form.

        Args:
            msgs: messages that are (or are about to be) in the context.
            is_context: `msgs` is the whole context, so messages outside it are forgotten.
        """
        await self._log.write(msgs, is_context=is_context)

    def forget_held(self) -> None:
        """Drop the `tool_call` events not yet written: the session's lease was lost, and
        they are not to be written into a session another writer holds (or a fork)."""
        self._pending.clear()
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None

    async def model_call(
        self,
        step: int,
        sent: Sequence[Msg],
        tokens_counted: int,
        started: float,
        *,
        response: ModelResponse | None = None,
        error: BaseException | None = None,
        window: dict[str, int] | None = None,
        context_window: int | None = None,
        trigger_tokens: int | None = None,
    ) -> None:
        """Write a `model_call` event for one call of the model (`step` counts this agent's).

        `window` is `window_parts` of the call; `context_window` and `trigger_tokens` the
        window and the count past which compression starts, for `ctxoffload ui`."""
        step += self._step_offset
        self._attempts[step] = attempt = self._attempts.get(step, 0) + 1
        usage = response.usage if response is not None else None
        reply = response.message if response is not None else None
        if error is None:
            outcome = "ok"
        elif isinstance(error, ContextOverflowError):
            outcome = "overflow"
        else:
            outcome = "error"
        summary = next((m.id for m in sent if is_summary_message(m)), None)
        if reply is not None:
            self._reply_id = reply.id
        await self.emit(
            events.ModelCall(
                step=step,
                attempt=attempt,
                messages=[m.id for m in sent],
                summary=summary,
                tokens_counted=tokens_counted,
                input_tokens=usage.input_tokens if usage is not None else None,
                output_tokens=usage.output_tokens if usage is not None else None,
                cached_input_tokens=usage.cached_input_tokens if usage is not None else None,
                duration_ms=_elapsed_ms(started),
                outcome=outcome,
                error=_error_fields(error, with_traceback=False) if error is not None else None,
                reply=reply.id if reply is not None else None,
                tool_calls=[{"id": c.id, "name": c.name} for c in reply.tool_calls]
                if reply
                else [],
                **({"window": window} if window is not None else {}),
                **({"context_window": context_window} if context_window is not None else {}),
                **({"trigger_tokens": trigger_tokens} if trigger_tokens is not None else {}),
            )
        )

    async def tool_call(
        self,
        step: int,
        call: ToolCallBlock,
        result: ToolResultBlock,
        started: float,
        exception: BaseException | None = None,
        *,
        held: bool = False,
    ) -> None:
        """Write a `tool_call` event, or with `held` keep it for the step's one write
        (`flush`: what an `Agent` does for the calls of a step); log a tool's exception with
        its traceback."""
        fields: dict[str, Any] = {
            "step": step + self._step_offset,
            "tool_id": call.id,
            "name": call.name,
        }
        try:
            size = len(_ARGUMENTS_JSON.encode(call.input).encode())
        except (TypeError, ValueError, RecursionError):
            size = ARGUMENTS_INLINE_LIMIT + 1  # not JSON as it is: the message keeps it
        if size <= ARGUMENTS_INLINE_LIMIT:
            fields["arguments"] = call.input
        else:
            fields["arguments_ref"] = {"message_id": self._reply_id, "tool_call_id": call.id}
            fields["arguments_bytes"] = size
        fields["duration_ms"] = _elapsed_ms(started)
        fields["outcome"] = "error" if result.is_error else "ok"
        output = result.output
        fields["output_chars"] = len(output) if isinstance(output, str) else None
        if exception is not None:
            fields["error"] = _error_fields(exception, with_traceback=True)
            logger.warning(
                "tool %s (call %s) raised %s: %s",
                call.name,
                call.id,
                type(exception).__name__,
                exception,
                exc_info=(type(exception), exception, exception.__traceback__),
            )
        elif result.is_error:
            text = output if isinstance(output, str) else ""
            fields["error"] = {"type": None, "message": text[:1000]}
        if not held:
            await self.emit(events.ToolCall(**fields))
            return
        events.ToolCall(**fields)  # (its fields as declared: what `fields()` would give back)
        stamped = fields
        stamped["time"] = now_iso()
        stamped[WRITER_FIELD] = current_writer(self.session_id)
        self._hold(EventKind.TOOL_CALL, stamped)


def _elapsed_ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)


def _error_fields(error: BaseException, *, with_traceback: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    if with_traceback:
        fields["traceback"] = "".join(
            traceback.format_exception(type(error), error, error.__traceback__)
        )
    return fields
