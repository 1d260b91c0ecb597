"""`OffloadingConversationManager`: a Strands `ConversationManager` on ctxoffload's pipeline.

Strands calls its conversation manager synchronously (`apply_management` after each
invocation, `reduce_context` on an overflow or past the proactive threshold, and per-turn
hooks before model calls) from inside its event loop. The manager converts `agent.messages`
(Bedrock Converse) to ctxoffload messages, runs a `ContextPipeline` (a `SlidingWindow` or a
`Summarization`, or any pipeline given) on a private event loop thread, and writes the
result back in place. Whatever leaves the history is appended to the session's
context.jsonl first, and the history keeps a note (or the summary) naming that file.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
import uuid
import weakref
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from .._disk.compact_requests import CompactRequests
from .._doors.checks import arguments_checked, checked_offloader
from .._doors.doors import DOORS
from .._doors.identity import conversation_session, fresh_session, given_session
from .._doors.runs import HostRuns
from .._loop import LoopThread
from ..compression import (
    Compressor,
    ContextConfig,
    ContextPipeline,
    PipelineRun,
    SlidingWindow,
    Summarization,
    is_context_note,
)
from ..exceptions import ConfigError
from ..formats import from_converse, to_converse
from ..messages import Msg, TextBlock
from ..tokens import TokenCounter, get_token_counter
from ..workspace import EventLog, Offloader, writing_as
from ._model_name import model_name_of
from ._strands_summary import summary_writer

__all__ = ["OffloadingConversationManager"]

# Strands is imported with this module: `ctxoffload.integrations.strands` imports it only on
# first use of `OffloadingConversationManager`, which subclasses Strands' ConversationManager.
try:
    _ConversationManager: Any = importlib.import_module(
        "strands.agent.conversation_manager"
    ).ConversationManager
    _hooks: Any = importlib.import_module("strands.hooks")
    _BeforeModelCallEvent: Any = _hooks.BeforeModelCallEvent
    _BeforeInvocationEvent: Any = _hooks.BeforeInvocationEvent
    _AfterInvocationEvent: Any = _hooks.AfterInvocationEvent
    _strands_tool: Any = importlib.import_module("strands").tool
except ImportError as exc:  # pragma: no cover - exercised where Strands is absent
    raise ConfigError("Strands is not installed: pip install 'ctxoffload[strands]'") from exc


_T = TypeVar("_T")


_NOTES_KEPT = 64
"""How many notes (the summary, the window note) a bridge knows by their text, the latest
kept: the messages it reads back hold the ones it wrote last."""


class _Bridge:
    """The state shared by every call of one manager: ids, notes, the pipeline run."""

    def __init__(
        self, workspace: Offloader, session_id: str | None, pipeline: ContextPipeline
    ) -> None:
        compressor = Compressor(
            pipeline.config,
            offloader=workspace,
            session_id=session_id,
            counter=get_token_counter(None),
            context_window=pipeline.config.context_window or 200_000,
        )
        self.run: PipelineRun = pipeline.bind(compressor)
        self._counted = False  # whether the counter of the agent's model was picked
        self._counting = threading.Lock()  # the tools of one step run on threads at once
        self.loop = LoopThread("ctxoffload-strands")
        # None until the first use names it (`bind`): the agent's session, or a new one.
        self.session_id = session_id
        # The session's one live writer, as every door with runs keeps it (`HostRuns`): each
        # invocation of an agent is a run, from Strands' BeforeInvocationEvent to its
        # AfterInvocationEvent; a second agent's run meanwhile is refused.
        self.runs = HostRuns(workspace, _DOOR)
        self._running: dict[int, tuple[weakref.ref[Any], str]] = {}  # id(agent) -> its run
        self._running_lock = threading.Lock()
        self._conversation: object = None  # the Strands session of the agent it serves
        # Converse dicts this manager wrote -> the ids of the messages they came from, so a
        # message keeps its id (the freshness rule and idempotent offloading rely on it).
        self._ids: dict[int, tuple[Mapping[str, Any], str]] = {}
        # A note or summary travels as the first text of a user message; by its text it is
        # recognised on the way back in, with the metadata Converse cannot carry.
        self._notes: dict[str, Msg] = {}
        # The agent's first messages, which its Strands session's store does not hold as
        # they are (see `OffloadingConversationManager._write_back`).
        self.head: list[dict[str, Any]] = []

    def _run_of(self, agent: Any) -> str | None:
        """The id of `agent`'s run in progress, or None."""
        with self._running_lock:
            entry = self._running.get(id(agent))
        return entry[1] if entry is not None and entry[0]() is agent else None

    def begin(self, agent: Any) -> None:
        """Take the session's lease for an invocation of `agent` (Strands'
        BeforeInvocationEvent): while another agent's run writes the session (this
        manager's, or another's here or elsewhere), `SessionBusyError` naming it.

        Raises:
            SessionBusyError: another live run writes the session.
        """
        session, conversation = self.bind(agent)
        run = self._run_of(agent) or uuid.uuid4().hex
        self.runs.begin(
            session,
            run,
            conversation=conversation,
            live=lambda: self._run_of(agent) == run,
            owner=agent,
            agent=_name(agent),
        )
        with self._running_lock:
            self._running[id(agent)] = (weakref.ref(agent), run)

    def end(self, agent: Any) -> None:
        """Give the session up (Strands' AfterInvocationEvent, which follows the manager's
        `apply_management` and fires when the invocation failed too, or was refused)."""
        run = self._run_of(agent)
        if run is None or self.session_id is None:
            return
        with self._running_lock:
            self._running.pop(id(agent), None)
        self.runs.end(self.session_id, run)

    async def as_writer(self, agent: Any, work: Coroutine[Any, Any, _T]) -> _T:
        """Run `work` as the session's one live writer, its events naming the agent: within
        an invocation under its run's lease; outside one (a direct call) as a run of its own."""
        try:
            alone = self._run_of(agent) is None
            if alone:
                await asyncio.to_thread(self.begin, agent)
            try:
                with writing_as(_name(agent), self.bind(agent)[0]):
                    return await work
            finally:
                if alone:
                    await asyncio.to_thread(self.end, agent)
        finally:
            work.close()  # never awaited when the lease was refused

    def bind(self, agent: Any) -> tuple[str, object]:
        """The manager's session, named on first use: the one given, else the agent's own
        session (its session manager's `session_id`, mapped by the one rule), else a new
        one; and the host's id of the conversation (None when it has none)."""
        conversation = _agent_session(agent)
        if self._conversation is not None and conversation != self._conversation:
            raise ConfigError(
                f"this OffloadingConversationManager writes session {self.session_id!r}, the "
                f"Strands session {self._conversation!r}; an agent of session "
                f"{conversation!r} needs a manager of its own (one manager per agent)"
            )
        self._conversation = conversation
        if self.session_id is None:
            if conversation is not None:
                self.session_id = conversation_session(conversation)
            else:
                self.session_id = fresh_session(
                    _DOOR, "the agent has no session manager and the manager no session_id"
                )
            self.run.compressor.session_id = self.session_id
        return self.session_id, conversation

    def counter_for(self, agent: Any) -> TokenCounter:
        """The counter, picked on first use for the agent's model (its config's `model_id`,
        `get_token_counter`) and kept after (a new one would count everything again)."""
        compressor = self.run.compressor
        with self._counting:
            if not self._counted:
                self._counted = True
                name = model_name_of(getattr(agent, "model", None))
                if name:
                    compressor.count_with(get_token_counter(name))
            return compressor.counter

    def to_msgs(
        self, messages: list[Mapping[str, Any]], origins: dict[int, int] | None = None
    ) -> list[Msg]:
        """`messages` (the agent's) as ctxoffload messages, a note split off the user message
        it was folded into; `origins`, when given, gets for each `Msg` that is one of
        `messages` as it is (by its `id()`) the index of that message."""
        out: list[Msg] = []
        for index, (message, msg) in enumerate(zip(messages, from_converse(messages), strict=True)):
            known = self._ids.get(id(message))
            if known is not None and known[0] is message:
                msg = msg.model_copy(update={"id": known[1]})
            split = self._split_note(msg)
            if origins is not None and len(split) == 1 and split[0] is msg:
                origins[id(msg)] = index
            out.extend(split)
        return out

    def kept_tail(
        self,
        before: list[Mapping[str, Any]],
        origins: Mapping[int, int],
        merged: list[Msg] | None,
    ) -> int:
        """How many of the last messages written back (`merged`, one per Converse message,
        None when they are not) are the last of `before` unchanged (`origins`, from
        `to_msgs`), and in the host's store (after `head`): what a Strands session manager
        reloads from its store on resume."""
        stored_from = len(self.head)
        if merged is None or any(a is not b for a, b in zip(before, self.head, strict=False)):
            return 0
        expected, kept = len(before) - 1, 0
        for msg in reversed(merged):
            if expected < stored_from or origins.get(id(msg)) != expected:
                break
            kept, expected = kept + 1, expected - 1
        return kept

    def restore(self, state: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Take back what `saved` gave a Strands session: the notes, known by their text
        again, and the messages before the store's tail (returned, for Strands to prepend)."""
        for note in state.get("notes", []):
            msg = Msg.model_validate(note)
            self._notes[msg.text] = msg
        self.head = [dict(message) for message in state.get("head", [])]
        return self.head

    def saved(self) -> dict[str, Any]:
        """What a Strands session keeps of this manager: the messages before the store's
        tail (the note or summary, a request kept before the turns moved out, a result cut)
        and the notes among them, with the state Converse cannot carry."""
        # A note is the first text of the message it was folded into (`to_converse`).
        firsts = {_first_text(message) for message in self.head}
        notes = [
            note.model_dump(mode="json") for text, note in self._notes.items() if text in firsts
        ]
        return {"head": list(self.head), "notes": notes}

    def _split_note(self, msg: Msg) -> list[Msg]:
        blocks = msg.blocks
        first = blocks[0] if blocks else None
        if msg.role != "user" or not isinstance(first, TextBlock) or first.text not in self._notes:
            return [msg]
        note = self._notes[first.text]
        rest = blocks[1:]
        return [note, msg.model_copy(update={"content": rest})] if rest else [note]

    def to_converse(self, msgs: list[Msg]) -> tuple[list[dict[str, Any]], list[Msg] | None]:
        """`msgs` as Converse messages, and the `Msg` each one is (None when tool messages
        were joined into one)."""
        # Bedrock wants user and assistant turns to alternate: a note is folded into the
        # user message after it, as its first text block.
        merged: list[Msg] = []
        pending: Msg | None = None
        for msg in msgs:
            if msg.role == "system":
                continue
            if is_context_note(msg):
                self._notes.pop(msg.text, None)
                self._notes[msg.text] = msg
                while len(self._notes) > _NOTES_KEPT:  # (the oldest first)
                    del self._notes[next(iter(self._notes))]
                pending = msg
                continue
            if pending is not None:
                if msg.role == "user":
                    content = [TextBlock(text=pending.text), *msg.blocks]
                    msg = msg.model_copy(update={"content": content})
                else:
                    merged.append(pending)
                pending = None
            merged.append(msg)
        if pending is not None:
            merged.append(pending)
        _, converse = to_converse(merged)
        # One Converse message per Msg, unless tool Msgs were joined into one user message.
        pairs = zip(converse, merged, strict=True) if len(converse) == len(merged) else ()
        self._ids = {id(d): (d, m.id) for d, m in pairs}
        return converse, (merged if len(converse) == len(merged) else None)


@arguments_checked
class OffloadingConversationManager(_ConversationManager):  # type: ignore[misc]
    """A Strands conversation manager that persists what it removes and says where.

    `strategy="sliding_window"` keeps the last `window_size` messages (Strands'
    `SlidingWindowConversationManager`); `"summarization"` replaces the oldest
    `summary_ratio` of the messages with ctxoffload's five-field summary, keeping
    `preserve_recent_messages` (Strands' `SummarizingConversationManager`). Either way
    the removed messages are appended to `sessions/<session_id>/context.jsonl` before
    they leave `agent.messages`, and the history keeps a note (or the summary) naming
    that file and its lines; if storing fails, nothing is removed. A tool call never
    loses its result, and the newest turn stays.

    Args:
        workspace: where removed messages go: a ctxoffload workspace (`LocalWorkspace`,
            `ObjectStoreWorkspace`, `InMemoryWorkspace`) or any `Offloader`.
        session_id: the session (a plain name, checked now); None: the agent's own session
            (its session manager's `session_id`, mapped by the one rule every door follows,
            docs/guides/hosts.md), else a new session for this manager.
        strategy: "sliding_window" or "summarization"; ignored when `pipeline` is given.
        window_size: messages kept by the sliding window.
        summary_ratio: share of the messages summarised (0.1-0.8).
        preserve_recent_messages: messages the summarisation always keeps.
        summary_model: what writes the summaries of `"summarization"`: a Strands `Model`
            (asked through its structured output where it has one) or a ctxoffload
            `ChatModel`; left out, the agent's own model (`agent.model`); False: the
            extractive summary.
        per_turn: as Strands': False applies management after each invocation only;
            True before every model call too; N before every N-th.
        proactive_compression: as Strands': reduce past a share of the window.
        pipeline: a `ContextPipeline` of pre_llm managers to run instead.
        context_window: the model's window in tokens, for ratio rules and summaries.

    Raises:
        ConfigError: an impossible setting, `workspace` is not an `Offloader`, or
            `summary_model` is none of the above.
        InvalidSessionId: `session_id` is not a plain name.
    """

    removed_message_count: int  # Strands' (set by its constructor)

    def __init__(
        self,
        workspace: Offloader,
        *,
        session_id: str | None = None,
        strategy: str = "sliding_window",
        window_size: int = 40,
        summary_ratio: float = 0.3,
        preserve_recent_messages: int = 10,
        summary_model: Any = None,
        per_turn: bool | int = False,
        proactive_compression: Any = None,
        pipeline: ContextPipeline | None = None,
        context_window: int | None = None,
    ) -> None:
        super().__init__(proactive_compression=proactive_compression)
        workspace = checked_offloader(workspace, _DOOR)
        if not isinstance(per_turn, bool) and (not isinstance(per_turn, int) or per_turn < 1):
            raise ConfigError(f"per_turn {per_turn!r} is not True, False or a positive int")
        self._summaries = summary_writer(summary_model, context_window)
        # The manager whose summaries the agent's model writes, when none is given.
        self._summarization: Summarization | None = None
        if pipeline is None:
            config = ContextConfig(context_window=context_window)
            if strategy == "sliding_window":
                manager: Any = SlidingWindow(max_messages=window_size)
            elif strategy == "summarization":
                manager = self._summarization = Summarization(
                    summary_ratio=summary_ratio,
                    preserve_recent_messages=preserve_recent_messages,
                    summary_model=self._summaries.model(),
                )
            else:
                raise ConfigError(
                    f"strategy {strategy!r} is not 'sliding_window' or 'summarization'"
                )
            pipeline = ContextPipeline(pre_llm=[manager], config=config)
        self._bridge = _Bridge(workspace, given_session(session_id), pipeline)
        self.per_turn = per_turn
        self._model_calls = 0
        self._requests: CompactRequests | None = None
        self._step_message: str | None = None
        self._step_lock = threading.Lock()

    @property
    def session_id(self) -> str | None:
        """The manager's session, the one given or else named at its first use (None until
        then)."""
        return self._bridge.session_id

    def register_hooks(self, registry: Any, **kwargs: Any) -> None:
        super().register_hooks(registry, **kwargs)
        registry.add_callback(_BeforeInvocationEvent, self._begin_run)
        registry.add_callback(_AfterInvocationEvent, self._end_run)
        registry.add_callback(_BeforeModelCallEvent, self._before_model_call)

    def _begin_run(self, event: Any) -> None:
        self._bridge.begin(event.agent)

    def _end_run(self, event: Any) -> None:
        self._bridge.end(event.agent)

    def _before_model_call(self, event: Any) -> None:
        self._serve_requests(event.agent)
        if self.per_turn is False:
            return
        self._model_calls += 1
        if self.per_turn is True or self._model_calls % int(self.per_turn) == 0:
            self.apply_management(event.agent)

    def _manage(self, agent: Any, *, reactive: bool) -> bool:
        bridge = self._bridge
        bridge.counter_for(agent)
        if self._summarization is not None:
            self._summarization.summary_model = self._summaries.model(getattr(agent, "model", None))
        before = list(agent.messages)
        origins: dict[int, int] = {}
        msgs = bridge.to_msgs(before, origins)
        # Reducing assumes a window a tenth smaller than what the history costs now (what
        # was sent did not fit), as the Agent does after an overflow: the managers move out
        # or cut (each stored whole first) until the rest fits it, whatever their own
        # limits, so that each retry Strands makes is smaller than the one refused.
        window = max(1, int(bridge.run.compressor.count(msgs) * 0.9)) if reactive else None
        result = bridge.loop.run(
            bridge.as_writer(
                agent,
                bridge.run.pre_llm(msgs, reactive=reactive, window=window, model_call=False),
            )
        )
        if not result.compressed:
            return False
        self._write_back(agent, before, origins, result.messages)
        return True

    def _write_back(
        self,
        agent: Any,
        before: list[Mapping[str, Any]],
        origins: Mapping[int, int],
        messages: list[Msg],
    ) -> None:
        """Make `messages` the agent's, keeping a Strands session able to resume them.

        A Strands session manager stores every message the agent gains and, on resume,
        reloads them from `removed_message_count` on, after the messages that
        `restore_from_session` gives back. The unchanged last messages are the store's tail;
        the ones before it (the note or summary, the request kept before the turns moved
        out, a result cut) are this manager's state (`get_state`)."""
        bridge = self._bridge
        stored = self.removed_message_count + len(before) - len(bridge.head)
        converse, merged = bridge.to_converse(messages)
        kept = bridge.kept_tail(before, origins, merged)
        agent.messages[:] = converse
        bridge.head = converse[: len(converse) - kept]
        self.removed_message_count = stored - kept

    def _serve_requests(self, agent: Any) -> None:
        """Serve the compactions asked for from outside (`ctxoffload compact`) pending in the
        session's record, before the model call: one compaction, one `compact` event
        answering them all. Each look reads what the record gained since the last."""
        bridge = self._bridge
        workspace = bridge.run.compressor.offloader
        if not isinstance(workspace, EventLog):
            return
        session, _ = bridge.bind(agent)
        if self._requests is None or self._requests.session_id != session:
            self._requests = CompactRequests(workspace, session)
        pending = bridge.loop.run(bridge.as_writer(agent, self._requests.look()))
        if not pending:
            return
        bridge.counter_for(agent)
        before = list(agent.messages)
        origins: dict[int, int] = {}
        msgs = bridge.to_msgs(before, origins)
        result = bridge.loop.run(
            bridge.as_writer(
                agent,
                bridge.run.compact(
                    msgs, instructions=CompactRequests.instructions_of(pending), requests=pending
                ),
            )
        )
        if result.compressed:
            self._write_back(agent, before, origins, result.messages)

    def compact_tool(self) -> Any:
        """A Strands tool, `compact_context(instructions=None)`, with which the model compacts
        its history now: this manager's pipeline runs whatever its rules (see
        `PipelineRun.compact`), with the instructions added to the summary request; at most
        once per model call, and "nothing to compact" when nothing would leave.

        Returns:
            The tool, for `Agent(tools=[..., manager.compact_tool()])`.
        """
        manager = self

        @_strands_tool(context=True)  # type: ignore[untyped-decorator]
        def compact_context(tool_context: Any, instructions: str | None = None) -> str:
            """Compact your context now: older messages are stored in the workspace and
            replaced by a summary or a note naming the file. Use it when a phase of the work
            is done. At most once per step.

            Args:
                instructions: what the summary should focus on and keep.
            """
            return manager._compact(tool_context.agent, instructions)

        return compact_context

    def _compact(self, agent: Any, instructions: str | None) -> str:
        bridge = self._bridge
        bridge.counter_for(agent)
        before = list(agent.messages)
        origins: dict[int, int] = {}
        msgs = bridge.to_msgs(before, origins)
        # One compaction per model call: the run counts a model call whenever the newest
        # assistant message (the one whose tool calls run now) is a new one, known by its
        # tool-use ids (a message read from Converse gets a new Msg id each time).
        run = bridge.run
        last = next((m for m in reversed(msgs) if m.role == "assistant"), None)
        newest = ",".join(c.id for c in last.tool_calls) if last is not None else None
        with self._step_lock:  # Strands runs the tools of a step on threads at once
            if newest != self._step_message:
                self._step_message = newest
                run.model_calls += 1
        result = bridge.loop.run(
            bridge.as_writer(agent, run.compact(msgs, instructions=instructions))
        )
        if not result.compressed:
            return f"Nothing was compacted: {result.reason}."
        self._write_back(agent, before, origins, result.messages)
        where = f" into {result.reference}" if result.reference else ""
        return (
            f"Compacted: {result.reason}; {result.compressed_messages} messages moved{where}; "
            f"the context went from {result.tokens_before:,} to {result.tokens_after:,} tokens."
        )

    def get_state(self) -> dict[str, Any]:
        """Strands' state of the manager, for its session managers: with the messages the
        agent has before the tail of its session's store, and the notes among them."""
        return {**super().get_state(), _STATE: self._bridge.saved()}

    def restore_from_session(self, state: dict[str, Any]) -> list[Any] | None:
        """Take the state back from a Strands session; returns the messages that Strands
        puts before those it reloads from the store (the note or summary naming
        context.jsonl, a request kept before the turns moved out)."""
        super().restore_from_session(state)
        head = self._bridge.restore(state.get(_STATE) or {})
        return head or None

    def apply_management(self, agent: Any, **kwargs: Any) -> None:
        """Run the managers under their rules (after an invocation, or per turn)."""
        self._manage(agent, reactive=False)

    def reduce_context(self, agent: Any, e: Exception | None = None, **kwargs: Any) -> None:
        """Run the managers with their rules ignored; re-raise `e` if nothing came out."""
        if not self._manage(agent, reactive=True) and e is not None:
            raise e


_DOOR = DOORS["strands"]

_STATE = "ctxoffload"
"""The key of this manager's own part of its Strands state (`get_state`)."""


def _name(agent: Any) -> str:
    """Who writes the session's events: the agent's name."""
    return str(getattr(agent, "name", None) or "strands")


def _first_text(message: Mapping[str, Any]) -> str | None:
    """The text of a Converse message's first block, if it is a text."""
    content = message.get("content")
    first = content[0] if isinstance(content, list) and content else None
    text = first.get("text") if isinstance(first, Mapping) else None
    return text if isinstance(text, str) else None


def _agent_session(agent: Any) -> object:
    """The Strands agent's own session id (its session manager's), or None."""
    manager = getattr(agent, "_session_manager", None)
    session = getattr(manager, "session_id", None)
    return session if isinstance(session, str) and session else None
