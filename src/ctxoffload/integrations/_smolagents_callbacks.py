"""`OffloadingStepCallbacks`: ctxoffload as smolagents step callbacks.

smolagents calls a step callback when a step is finished, with the agent, before the step joins
`agent.memory.steps` and before the next model call, which is rebuilt from that memory. So each
callback of an `ActionStep`:

1. records what the step's model call was sent (the system prompt and every step of the memory:
   what `write_memory_to_messages` gave the model), numbered over the session;
2. stores an observation over the config's `tool_result_limit` whole and gives the step its
   head and a notice instead, and so a step's long call arguments (and a long text of the
   model's) when the step is over the room of the newest turn: the newest step is never
   summarised, and smolagents sends it again at every later call;
3. past the trigger (or when `ctxoffload compact` asked), appends the older steps to the
   session's context.jsonl and puts one `ContextSummaryStep` in their place, whole steps only,
   the newest ones kept.

A run holds its session's lease from its first callback to its `FinalAnswerStep`: smolagents
calls nothing before a run's first model call, and nothing of ctxoffload is written before
that callback either.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._disk.compact_requests import CompactRequests
from .._doors.checks import arguments_checked, checked_config, checked_positive, checked_workspace
from .._doors.doors import DOORS
from .._doors.identity import fresh_session, given_session
from .._doors.opening import begin_run
from .._doors.summaries import SummaryWriter
from .._loop import LoopThread
from .._message_log import InlinePayloads, ModelCalls
from .._tokens.counters import fits_by_size
from ..agent import as_tool
from ..compression import (
    Compressor,
    ContextConfig,
    ContextPipeline,
    PipelineRun,
    Split,
    SplitStrategy,
    Summarization,
    ToolOutputTruncate,
    is_summary_message,
)
from ..compression import MessageCounter as _Counter
from ..exceptions import ConfigError
from ..messages import Msg, TextBlock, ToolCallBlock, ToolResultBlock
from ..tokens import get_token_counter
from ..workspace import EventLog, SessionLease, Workspace, writing_as
from ._model_name import model_name_of
from ._reading import read_back, reading_answer
from ._smolagents_steps import (
    MEMORY,
    MODELS,
    SMOLAGENTS,
    ContextSummaryStep,
    StepMessages,
    chat_messages_as_msgs,
    step_key,
)
from ._smolagents_summary import TAKES, smolagents_summary_model

__all__ = ["OffloadingStepCallbacks"]

_Tool: Any = SMOLAGENTS.Tool
_ToolCallingAgent: Any = SMOLAGENTS.ToolCallingAgent
_get_tool_json_schema: Any = MODELS.get_tool_json_schema
_ActionStep: Any = MEMORY.ActionStep
_PlanningStep: Any = MEMORY.PlanningStep
_FinalAnswerStep: Any = MEMORY.FinalAnswerStep
_TaskStep: Any = MEMORY.TaskStep


@arguments_checked
class OffloadingStepCallbacks(dict[Any, list[Callable[..., None]]]):
    """smolagents step callbacks that offload big observations and compact the agent's memory
    into a ctxoffload workspace.

    The object is itself what smolagents takes as `step_callbacks` (a dict by step class, the
    only shape it accepts besides a list): `step_callbacks=offload` and
    `step_callbacks=offload.step_callbacks` (a copy, to add callbacks of your own to) do the
    same.

    - An `ActionStep` whose observations are over the config's `tool_result_limit` is stored
      whole (`sessions/<session>/tool_result-<call id>.txt`) and keeps their head plus the
      notice naming that file.
    - A step the model wrote over the room of the newest turn (a call that writes a whole
      file, a code agent's snippet holding one) has its long call arguments, and a long text
      of the model's, stored whole and cut to head plus notice the same way; what the run
      returns (a big `final_answer` too) is never cut.
    - Past the config's trigger, the older steps are appended to the session's context.jsonl
      and replaced in `agent.memory.steps` by one `ContextSummaryStep` (the five-field summary
      naming those lines and the files of their results); whole steps only, the newest
      within `reserve_ratio` of the window kept, and the latest task too.
    - What each step's model call was sent is recorded, so `ctxoffload show SESSION --step N`
      rebuilds it (a planning step's call too).
    - `ctxoffload compact SESSION` is served at the next step's callback.
    - `tools` gives the agent Read, Grep and Glob (a workspace on a local folder) and
      `retrieve_offloaded_content`, as smolagents tools (`Tool`); with `memory=True`, the memory
      tool too.

    The session is the run: each `agent.run(...)` gets a new session of its own (logged at
    INFO), and a run with `reset=False` goes on in the session of the run before it (its
    memory names that session's files); `session_id=` names one session for every run of the
    agent. A run holds its session's lease from its first step's callback to its final
    answer: a second live run of the same session is refused there with `SessionBusyError`,
    before it writes anything.

    Args:
        workspace: where offloaded content goes (a `Workspace`; a path is refused: pass
            `LocalWorkspace(path)`).
        config: when to truncate and when to summarise (its `context_window` is the window;
            without one, 128,000 tokens).
        summary_model: the smolagents `Model` that writes summaries (asked with
            `response_format`, smolagents' structured output, where it takes one), or a
            ctxoffload `ChatModel`. Left out, the agent's own `model` writes them; False:
            the extractive summary, no model asked.
        session_id: the session (a plain name) of every run; None for a new one per run.
        max_output_chars: longest answer of a reading tool.
        memory: give the agent the memory tool too (a `LocalWorkspace` only).

    Raises:
        ConfigError: `workspace` is no workspace (or a folder that is a file), `config` is
            no `ContextConfig`, `summary_model` is none of the above, or `max_output_chars`
            is not a positive int.
        InvalidSessionId: `session_id` is not a plain name.

    Example::

        offload = OffloadingStepCallbacks(LocalWorkspace("ws"))
        agent = ToolCallingAgent(
            tools=[fetch_logs, *offload.tools], model=model, step_callbacks=offload
        )
    """

    def __init__(
        self,
        workspace: Workspace,
        *,
        config: ContextConfig | None = None,
        summary_model: Any = None,
        session_id: str | None = None,
        max_output_chars: int = 20_000,
        memory: bool = False,
    ) -> None:
        self.workspace = checked_workspace(workspace, _DOOR)
        self.config = checked_config(config)
        window = self.config.context_window
        self.summaries = SummaryWriter(
            summary_model, adapt=lambda model: smolagents_summary_model(model, window), takes=TAKES
        )
        self.session_id = given_session(session_id)
        checked_positive(max_output_chars, "max_output_chars")
        self._loop = LoopThread("ctxoffload-smolagents")
        self._lock = threading.Lock()
        # Per agent object: its conversation (the run in progress or the last one), held no
        # longer than the agent (a server makes an agent per request on one callbacks
        # object); a run that never reached its final answer, of an agent collected since,
        # waits in `_orphans` for the next run (or `close`) to give its session up.
        self._conversations: dict[int, _Conversation] = {}
        self._orphans: collections.deque[_Conversation] = collections.deque()
        # Per thread, the conversations whose runs it runs, the innermost last (a managed
        # agent's run inside its manager's): the read-back tools, which smolagents does not
        # tell their agent, work in the session of the run their thread runs
        # (`_tool_session`).
        self._threads: dict[int, list[_Conversation]] = {}
        reading = read_back(
            workspace,
            max_output_chars,
            config=self.config,
            memory=memory,
            session_id=self.session_id,
        )
        self.tools = [_as_tool(function, self) for function in reading.functions]
        self._readers = reading.readers  # what every notice names: these tools
        super().__init__(
            {
                _ActionStep: [self.on_action_step],
                _PlanningStep: [self.on_planning_step],
                _FinalAnswerStep: [self.on_final_answer],
            }
        )

    # A door object, not a value: equal to itself only, and hashable, as before it was also
    # smolagents' dict (a dict's contents would decide both).
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"OffloadingStepCallbacks({self.workspace!r}, session_id={self.session_id!r})"

    def __call__(self, step: Any, agent: Any = None) -> None:
        """Called as one callback: the object was given inside a list (`step_callbacks=
        [offload]`), whose callbacks smolagents calls at action steps only.

        Raises:
            ConfigError: always, with the fix (the door needs the planning and final-answer
                steps too: the final answer gives the run's session up).
        """
        raise ConfigError(
            "OffloadingStepCallbacks was given inside a list of step_callbacks, whose "
            "callbacks smolagents calls at action steps only (it needs the planning and "
            "final-answer steps too): pass step_callbacks=offload (not [offload]), or "
            "offload.step_callbacks with callbacks of your own added to its lists"
        )

    @property
    def step_callbacks(self) -> dict[Any, list[Callable[..., None]]]:
        """The callbacks by step class, for `step_callbacks=` of any smolagents agent: a new
        dict each time, to merge your own into its lists (`step_callbacks=offload` itself
        does the same without them)."""
        return {step: list(callbacks) for step, callbacks in self.items()}

    def session_of(self, agent: Any) -> str | None:
        """The session `agent`'s current (or last) run writes; None before its first step."""
        conversation = self._conversations.get(id(agent))
        return conversation.session if conversation is not None else None

    def on_action_step(self, step: Any, agent: Any) -> None:
        """A step is finished: record its model call, store a big observation, compact the
        memory past the trigger.

        Raises:
            SessionBusyError: the step is its run's first, and another live run holds the
                session.
        """
        conversation = self._conversation(agent)
        self._loop.run(conversation.after_action(step, agent))

    def on_planning_step(self, step: Any, agent: Any) -> None:
        """A planning step is finished: record what its model call was sent."""
        conversation = self._conversation(agent)
        self._loop.run(conversation.after_planning(step))

    def on_final_answer(self, step: Any, agent: Any) -> None:
        """The run has ended: give its session up."""
        conversation = self._conversations.get(id(agent))
        if conversation is not None and conversation.agent is agent:
            self._loop.run(conversation.end())
            self._leave_thread(conversation)

    def _enter_thread(self, conversation: _Conversation) -> None:
        """`conversation`'s run is run by this thread, innermost."""
        with self._lock:
            stack = self._threads.setdefault(threading.get_ident(), [])
            if not stack or stack[-1] is not conversation:
                if conversation in stack:
                    stack.remove(conversation)
                stack.append(conversation)
                # (The threads whose agents were all collected since: `_forget` empties them.)
                for ident in [i for i, held in self._threads.items() if not held]:
                    del self._threads[ident]

    def _leave_thread(self, conversation: _Conversation) -> None:
        """`conversation`'s run has ended: under the runs its thread still runs (a manager's
        whose managed agent this was), where a next run of its agent that goes on in its
        session (`reset=False`) finds it; a few such kept a thread."""
        with self._lock:
            for stack in self._threads.values():
                if conversation in stack:
                    stack.remove(conversation)
                    stack.insert(0, conversation)
                    del stack[:-_ENDED_KEPT]  # (the oldest first: the bottom)

    def _tool_session(self) -> str | None:
        """The session a read-back tool call works in (a memory change recorded there):
        `session_id`, else the session of the run this thread runs, innermost; for a run
        whose first step has not ended (its session is begun at that step's callback), the
        session it goes on in (`reset=False`), else none yet. A tool run on another thread
        (smolagents' parallel tool calls) goes to the one conversation these callbacks have,
        when it has one live run, else to none: never to another agent's run."""
        if self.session_id is not None:
            return self.session_id
        with self._lock:
            stack = list(self._threads.get(threading.get_ident(), ()))
            conversations = list(self._conversations.values())
        if not stack:
            live = [c for c in conversations if c.lease is not None]
            return live[0].session if len(conversations) == 1 and live else None
        for conversation in reversed(stack):
            agent = conversation.agent
            if agent is None:
                continue
            task = _latest_task(agent.memory.steps)
            if task is conversation.task:
                if conversation.lease is not None:
                    return conversation.session  # its run in progress
                continue  # its run has ended: a tool now is another agent's
            # Its agent began another run, whose first step has not ended.
            return conversation.session if _goes_on(agent.memory.steps, task) else None
        return None

    def close(self) -> None:
        """Give up the sessions of runs that never reached their final answer (a run that
        raised); a new run of the same agent does that itself."""
        for conversation in list(self._conversations.values()):
            self._loop.run(conversation.end())
        self._end_orphans()

    def _end_orphans(self) -> None:
        """Give up the sessions of the runs whose agents were collected before their final
        answer (a run that raised). A server's callbacks object is never closed: each such
        run kept its lease, its open lease file and its pipeline until then (one descriptor
        and ~660 KB per failed request). (A deque: the collector appends on any thread.)"""
        while True:
            try:
                conversation = self._orphans.popleft()
            except IndexError:
                return
            self._loop.run(conversation.end())

    def _conversation(self, agent: Any) -> _Conversation:
        """The conversation of `agent`'s run in progress: a new run (a new task step in its
        memory) takes its session's lease, in a new session unless it goes on from the last
        run's memory (`reset=False`) or `session_id` names one."""
        task = _latest_task(agent.memory.steps)
        conversation = self._conversation_of(agent, task)
        self._enter_thread(conversation)
        return conversation

    def _conversation_of(self, agent: Any, task: Any) -> _Conversation:
        with self._lock:
            self._end_orphans()
            current = self._conversations.get(id(agent))
            if current is not None and current.agent is not agent:
                current = None  # another agent under a reused id
            if current is not None and (task is None or current.task is task):
                return current  # the run in progress (its task step may have been summarised)
            if current is not None:
                self._loop.run(current.end())  # a run that never reached its final answer
            goes_on = current is not None and _goes_on(agent.memory.steps, task)
            if goes_on and current is not None:
                conversation = current
            else:
                session = self.session_id or fresh_session(
                    _DOOR, "smolagents names no conversation and the callbacks no session_id"
                )
                conversation = _Conversation(self, agent, session)
            conversation.task = task
            self._loop.run(conversation.begin(new=self.session_id is None and not goes_on))
            if self._conversations.get(id(agent)) is not conversation:
                self._conversations[id(agent)] = conversation
                if conversation.held_weakly:
                    weakref.finalize(agent, self._forget, id(agent), conversation)
            return conversation

    def _forget(self, key: int, conversation: _Conversation) -> None:
        """The agent of `conversation` was collected: its entry goes (a GC callback: no lock,
        no I/O; a dict's pop is atomic), its lease, if its run never ended, to `close`."""
        if self._conversations.get(key) is conversation:
            self._conversations.pop(key, None)
        for stack in list(self._threads.values()):
            if conversation in stack:
                stack.remove(conversation)
        if conversation.lease is not None:
            self._orphans.append(conversation)

    def _pipeline(self) -> ContextPipeline:
        config = self.config
        return ContextPipeline(
            post_tool=[ToolOutputTruncate.from_config(config)],
            pre_llm=[_WholeStepSummarization.from_config(config)],
            config=config,
        )


class _Conversation:
    """One agent's conversation: its session, the pipeline run that compacts its memory, the
    record of its model calls and the lease of the run in progress."""

    def __init__(self, owner: OffloadingStepCallbacks, agent: Any, session: str) -> None:
        self.owner = owner
        # The agent, weakly where it can be (`OffloadingStepCallbacks._forget`).
        try:
            self._agent: Callable[[], Any] = weakref.ref(agent)
            self.held_weakly = True
        except TypeError:
            self._agent, self.held_weakly = (lambda: agent), False
        self.session = session
        self.task: Any = None
        workspace = owner.workspace
        compressor = Compressor(
            owner.config,
            model=owner.summaries.model(getattr(agent, "model", None)),
            offloader=workspace,
            session_id=session,
            counter=get_token_counter(model_name_of(getattr(agent, "model", None))),
            context_window=owner.config.context_window or _DEFAULT_WINDOW,
            reader_tools=owner._readers,
        )
        self.run: PipelineRun = owner._pipeline().bind(compressor)
        self.calls = ModelCalls(compressor.event, prepare=InlinePayloads(workspace).moved_out)
        self.requests = (
            CompactRequests(workspace, session) if isinstance(workspace, EventLog) else None
        )
        self.steps = StepMessages()
        self.lease: SessionLease | None = None
        self._loaded = False

    @property
    def agent(self) -> Any:
        """The agent of this conversation; None once it was collected."""
        return self._agent()

    async def begin(self, *, new: bool) -> None:
        """Take the session's lease for a run and record the run's `door` event.

        Raises:
            SessionBusyError: another live run holds the session.
        """
        self.lease = await begin_run(
            self.owner.workspace, _DOOR, self.session, agent=_AGENT, new=new
        )
        if not self._loaded:  # the record of a session named again: its steps go on
            self._loaded = True
            if not new:
                self.calls.remember(await self.owner.workspace.read_events(self.session))

    async def end(self) -> None:
        lease, self.lease = self.lease, None
        if lease is not None:
            await lease.release()

    async def after_action(self, step: Any, agent: Any) -> None:
        with writing_as(_AGENT, self.session):
            tools = _schemas(agent)
            memory = list(agent.memory.steps)
            # What the step's call was sent: the memory as it was then (the step joins it
            # after its callbacks), each step's messages made once and kept.
            sent = list(self.steps.of_system(agent.memory.system_prompt.system_prompt))
            for earlier in memory:
                sent.extend(self.steps.of(earlier))
            if step.model_input_messages is not None:
                await self._record(sent, tools, step)
            await self._offload(step)
            await self._fit_calls(step, agent, tools)
            context = [*sent, *self.steps.of(step)]
            pending = await self.requests.look() if self.requests is not None else []
            if pending:
                result = await self.run.compact(
                    context,
                    tools=tools,
                    instructions=CompactRequests.instructions_of(pending),
                    requests=pending,
                )
            else:
                result = await self.run.pre_llm(context, tools=tools)
            if result.compressed:
                agent.memory.steps[:] = self._steps_after(result.messages, [*memory, step])
            self.steps.forget_all_but(agent.memory.steps)

    async def after_planning(self, step: Any) -> None:
        with writing_as(_AGENT, self.session):
            given = step.model_input_messages or []
            key = f"smolagents-plan-{id(step):x}-{time.monotonic_ns():x}"
            sent = chat_messages_as_msgs(given, key)
            await self.calls.record(
                sent,
                summary=None,
                tokens_counted=self.run.compressor.count(sent),
                outcome="ok",
                **_usage(step),
            )

    async def _record(self, sent: list[Msg], tools: list[dict[str, Any]], step: Any) -> None:
        compressor = self.run.compressor
        window = compressor.window()
        await self.calls.record(
            sent,
            summary=next((m.id for m in sent if is_summary_message(m)), None),
            tokens_counted=compressor.count(sent, tools),
            outcome="error" if step.error is not None and step.model_output is None else "ok",
            context_window=window,
            trigger_tokens=compressor.config.trigger_tokens(window),
            **_usage(step),
        )

    async def _offload(self, step: Any) -> None:
        """A text observation, or a tool error's message, over the limit: stored whole, the
        step keeps head + notice (smolagents sends both to the model, an error as the call's
        result: "Error:" and the message)."""
        calls = step.tool_calls or []
        # (A host's id may be None or a number: the one `StepMessages` gives the result.)
        call_id = str(calls[0].id) if calls else f"step_{step.step_number}"
        name = ",".join(dict.fromkeys(str(c.name) for c in calls)) or "observation"
        kept = await self._cut(step.observations, call_id, name, is_error=False)
        if kept is not None:
            step.observations = kept
        error = step.error
        kept = await self._cut(str(error) if error is not None else None, call_id, name)
        if kept is not None and error is not None:
            # What `to_messages` sends is `str(error)`, and `error.dict()` its `message`.
            error.args = (kept,)
            if hasattr(error, "message"):
                error.message = kept

    async def _fit_calls(self, step: Any, agent: Any, tools: list[dict[str, Any]]) -> None:
        """A step whose model output is over the room of the newest turn (a call that wrote a
        whole file, a code action holding one): the long strings among its calls' arguments,
        and a long text of the model's (a code agent's code is in both), stored whole and cut
        to head + notice, as every door cuts the newest turn (`Compressor.cut_to_fit`). The
        newest step always stays whole in the memory, and smolagents sends it again at each
        later call: uncut, every later call of the run was over the window. The step keeps the
        cut where smolagents reads it (`tool_calls`, `model_output`) and where it keeps it
        (`model_output_message`, a code agent's `code_action`); what the run answers is its
        action's output, never these."""
        calls = step.tool_calls or []
        text = step.model_output if isinstance(step.model_output, str) else ""
        if not calls and not text:
            return
        compressor = self.run.compressor
        given = [ToolCallBlock(id=str(c.id), name=str(c.name), input=_input_of(c)) for c in calls]
        said = Msg(role="assistant", content=[*([TextBlock(text=text)] if text else []), *given])
        # The calls were run (a step's callback comes after): results that say so. The step's
        # observations are `_offload`'s, and only counted here.
        ran = Msg(
            role="tool", content=[ToolResultBlock(id=b.id, name=b.name, output="") for b in given]
        )
        room = self._calls_room(agent, tools) - compressor.counter.count_text(_observed(step))
        fitted = await compressor.cut_to_fit([said, ran] if given else [said], max(room, 0))
        said_now = fitted[0]
        if said_now is said:
            return
        arguments = [
            _arguments_as(call, now.input) if now.input is not before.input else call.arguments
            for call, before, now in zip(calls, given, said_now.tool_calls, strict=True)
        ]
        _cut_step(step, arguments, said_now.text if text and said_now.text != text else None)

    def _calls_room(self, agent: Any, tools: list[dict[str, Any]]) -> int:
        """What the newest step may take before its calls are cut: the room every door leaves
        the newest turn (`ContextConfig.calls_room`), within what the window leaves beside what
        a later call is sent whatever the compaction (the system prompt, the tool schemas, the
        latest task and a summary): smolagents' own system prompt is 1,400 to 2,400 tokens."""
        compressor = self.run.compressor
        config = compressor.config
        window = compressor.window()
        stays = list(self.steps.of_system(agent.memory.system_prompt.system_prompt))
        if self.task is not None:
            stays.extend(self.steps.of(self.task))
        beside = compressor.count(stays, tools) + config.summary_budget_tokens(window)
        return min(config.calls_room(window), window - beside)

    async def _cut(
        self, text: Any, call_id: str, name: str, *, is_error: bool = True
    ) -> str | None:
        """The head + notice a text over the limit is cut to once stored whole; None when it
        is no text, fits, or was kept whole (the store failed: nothing may leave)."""
        compressor = self.run.compressor
        if not isinstance(text, str) or fits_by_size(
            compressor.counter, text, compressor.config.tool_result_limit
        ):
            return None
        block = ToolResultBlock(id=call_id, name=name, output=text, is_error=is_error)
        kept = await self.run.post_tool(block)
        return kept.output if isinstance(kept.output, str) and kept.output != text else None

    def _steps_after(self, messages: Sequence[Msg], steps: list[Any]) -> list[Any]:
        """The memory for a compacted context: each step with a message left in it, whole and
        in order, and a summary step for each run of messages no step holds (the summary);
        the step in progress left out (smolagents appends it itself)."""
        owner_of: dict[str, Any] = {}
        for candidate in steps:
            for msg in self.steps.of(candidate):
                owner_of[step_key(msg)] = candidate
        current = steps[-1]
        out: list[Any] = []
        summary: list[Msg] = []
        seen: set[int] = set()
        for msg in messages:
            if msg.role == "system" and not out and not summary:
                continue  # the system prompt: its own step, outside `steps`
            owner = owner_of.get(step_key(msg))
            if owner is None:
                summary.append(msg)
                continue
            if summary:
                out.append(ContextSummaryStep(messages=tuple(summary)))
                summary = []
            if id(owner) not in seen and owner is not current:
                seen.add(id(owner))
                out.append(owner)
        if summary:
            out.append(ContextSummaryStep(messages=tuple(summary)))
        return out


class _WholeStepSummarization(Summarization):
    """ctxoffload's summarisation of a `ContextConfig`, cutting between steps only: a step's
    messages (its output, its tool calls, its observation) leave or stay together."""

    def split_strategy(self) -> SplitStrategy:
        return _WholeSteps(super().split_strategy())


@dataclasses.dataclass(frozen=True)
class _WholeSteps:
    """A split moved to a boundary between steps: the step it would cut leaves whole, unless
    the model has not seen it yet (the newest step), which stays whole. Moved back instead, a
    step the reserve holds only its observation of stayed whole beside the newest: two steps
    of a few thousand tokens each (calls cut to the newest turn's room) went over the
    window."""

    inner: SplitStrategy

    @property
    def fits_reserve(self) -> bool:
        return self.inner.fits_reserve

    def split(
        self,
        messages: Sequence[Msg],
        counter: _Counter,
        reserve_tokens: int,
        unseen_from: int | None,
    ) -> Split:
        split = self.inner.split(messages, counter, reserve_tokens, unseen_from)
        if not split.kept or not split.older:
            return split
        cut = step_key(split.kept[0])
        moved = [m for m in split.older if step_key(m) == cut]
        if not moved:
            return split
        unseen = {m.id for m in messages[unseen_from:]} if unseen_from is not None else set()
        leaving = [m for m in split.kept if step_key(m) == cut]
        kept = [m for m in split.kept if step_key(m) != cut]
        if kept and not any(m.id in unseen for m in leaving):
            return dataclasses.replace(split, older=[*split.older, *leaving], kept=kept)
        older = [m for m in split.older if step_key(m) != cut]
        return dataclasses.replace(split, older=older, kept=[*moved, *split.kept])


_DOOR = DOORS["smolagents"]
_AGENT = _DOOR.name
"""Who a run's lease and its events are written by."""

_ENDED_KEPT = 16
"""How many conversations a thread keeps under its runs once theirs ended (one per agent
whose run it ran last)."""

_DEFAULT_WINDOW = 128_000
"""The window of a config without one: smolagents' models declare none."""


def _latest_task(steps: Sequence[Any]) -> Any:
    """The newest `TaskStep` of a memory (each run appends one before its first step)."""
    for step in reversed(steps):
        if isinstance(step, _TaskStep):
            return step
    return None


def _goes_on(steps: Sequence[Any], task: Any) -> bool:
    """Whether the memory holds steps before the run's task: a run with `reset=False`."""
    return bool(steps) and steps[0] is not task


def _usage(step: Any) -> dict[str, Any]:
    """The tokens the provider reported for the step's model call, when it reported them."""
    usage = getattr(step, "token_usage", None)
    if usage is None:
        return {}
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}


_CODE = "code"
"""The name a code agent's code (a call's arguments that are one text) has in a notice."""


def _input_of(call: Any) -> dict[str, Any]:
    """A smolagents call's arguments as a call's input: an object as it is, anything else (a
    code agent's code, a text no JSON) under one name."""
    arguments = call.arguments
    return arguments if isinstance(arguments, dict) else {_CODE: arguments}


def _arguments_as(call: Any, cut: dict[str, Any]) -> Any:
    """The input `cut` as arguments of `call`'s shape (`_input_of` undone)."""
    return cut if isinstance(call.arguments, dict) else cut[_CODE]


def _observed(step: Any) -> str:
    """What smolagents sends of a step beside its model output: its observations and its
    error."""
    error = step.error
    return (step.observations or "") + (str(error) if error is not None else "")


def _cut_step(step: Any, arguments: list[Any], text: str | None) -> None:
    """`step` with its calls' `arguments` (one per call, in order) and, given, its model's
    text: in the calls smolagents sends, in the model's message it keeps, and in a code
    agent's `code_action`. New objects where smolagents sends them (a step's messages are
    made again only when one of its fields is another object: `StepMessages`)."""
    before = [call.arguments for call in step.tool_calls]
    step.tool_calls = [
        dataclasses.replace(call, arguments=now) if now is not call.arguments else call
        for call, now in zip(step.tool_calls, arguments, strict=True)
    ]
    message = step.model_output_message
    for wire in getattr(message, "tool_calls", None) or ():
        function = getattr(wire, "function", None)
        for old, now in zip(before, arguments, strict=True):
            if function is not None and function.arguments is old and now is not old:
                function.arguments = now
    if step.code_action is not None:
        for old, now in zip(before, arguments, strict=True):
            if step.code_action == old and now is not old:
                step.code_action = now
    if text is not None:
        if message is not None and message.content == step.model_output:
            message.content = text
        step.model_output = text


def _schemas(agent: Any) -> list[dict[str, Any]]:
    """The tool schemas a tool-calling agent sends with each call (they count against the
    window); a code agent describes its tools in its system prompt instead."""
    if not isinstance(agent, _ToolCallingAgent):
        return []
    return [_get_tool_json_schema(tool) for tool in agent.tools_and_managed_agents]


def _as_tool(function: Callable[..., Awaitable[Any]], owner: OffloadingStepCallbacks) -> Any:
    """A read-back function as a smolagents `Tool` (its inputs from the function's schema),
    run on the callbacks' loop, recording (a memory change) in the session of the run that
    called it (`OffloadingStepCallbacks._tool_session`)."""
    spec = as_tool(function)
    required = set(spec.parameters.get("required", ()))
    inputs = {
        name: _input(name, schema, name in required)
        for name, schema in spec.parameters.get("properties", {}).items()
    }

    def forward(self: Any, **arguments: Any) -> str:
        session = owner._tool_session()
        return owner._loop.run(reading_answer(function, arguments, writer=_AGENT, session=session))

    cls = type(
        spec.name,
        (_Tool,),
        {
            "name": spec.name,
            "description": spec.description,
            "inputs": inputs,
            "output_type": "string",
            "skip_forward_signature_validation": True,
            "forward": forward,
        },
    )
    return cls()


_JSON_TYPES = frozenset({"string", "boolean", "integer", "number", "array", "object"})


def _input(name: str, schema: dict[str, Any], required: bool) -> dict[str, Any]:
    """One argument as a smolagents input: its JSON type(s), its description, `nullable`
    when the model may leave it out."""
    options = schema.get("anyOf", [schema])
    types = [o["type"] for o in options if o.get("type") in _JSON_TYPES]
    given: dict[str, Any] = {
        "type": types[0] if len(types) == 1 else (types or "string"),
        "description": schema.get("description") or name,
    }
    items = next((o["items"] for o in options if "items" in o), None)
    if items is not None:
        given["items"] = items
    if not required:
        given["nullable"] = True
    return given
