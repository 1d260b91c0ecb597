"""Agent: a small ReAct loop that keeps its context inside the window without losing anything."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Literal

from .._disk import events
from .._disk.compact_requests import CompactRequests
from .._disk.ids import validate_session_id
from .._doors.checks import arguments_checked
from ..compression import (
    CompressionResult,
    ContextConfig,
    ContextPipeline,
    EventCallback,
    is_pinned,
)
from ..exceptions import ContextOverflowError, SessionBusyError
from ..messages import Msg, ToolCallBlock, ToolResultBlock
from ..model import ChatModel, ModelResponse
from ..tokens import TokenCounter
from ..workspace import (
    EventLog,
    LeaseHolder,
    Offloader,
    SessionLease,
    new_session,
    take_lease,
    writing_as,
)
from ._arguments import (
    agent_compressor,
    agent_tools,
    check_offloader,
    check_settings,
    checked_request,
    context_pipeline,
    summary_writer,
)
from ._busy import continue_in_fork, lost_lease
from ._context_tools import (
    CONTEXT_TOOL_NAMES,
    PIN_TOOL_NAME,
    compact_answer,
    compact_context_tool,
    pin_answer,
    pin_context_tool,
    pin_with_results,
)
from ._record import SessionRecorder, StepRecord, window_parts
from ._state import SavedState
from ._subagent import CALLER, MAX_SUBAGENT_DEPTH, Caller, subagent_tool
from ._tool_calls import bounded, run_each, run_in_order, unchanged, unfinished_results
from ._tools import Tool

__all__ = ["Agent"]

logger = logging.getLogger("ctxoffload")


@arguments_checked
class Agent:
    """A ReAct agent whose context is kept within the model's window by offloading.

    Each step: compress older history if the context is over the trigger (pre-model), call
    the model, run the tool calls it made concurrently (the context tools, `pin_context`
    and `compact_context`, one after another, pins first), and truncate each big result into
    the workspace (post-tool), until the model answers without calling a tool or
    `max_steps` is reached. After each step the live context is saved as
    `sessions/<id>/state.json` when the offloader can store state, so a new `Agent` with
    the same `session_id` continues where this one stopped.

    Construction checks everything it is given and raises `ConfigError` naming what to pass:
    `model` (and `summary_model`) must have an `async def generate`; a context window must
    be known from `model.context_window` (a positive int) or `ContextConfig(context_window=)`;
    `offloader` must have async `offload_context`, `offload_tool_result` and
    `offload_data_block`; `tools` must be a list of callables; `max_steps` at least 1.

    A `ScriptedModel` plays one step per call, summary requests included: as `model` with
    no `summary_model`, its summaries are extractive (logged at INFO), not its script's
    turns; the same `ScriptedModel` as both is a `ConfigError`.

    Args:
        name: the agent's name, used in messages and state.
        system_prompt: the system prompt; never compressed.
        model: the chat model that answers.
        tools: plain functions (sync or async) with type hints and Google-style docstrings,
            or `Tool` objects; the schema is derived from them.
        offloader: where offloaded content goes, usually a `LocalWorkspace`.
        context_config: how the context is managed: a `ContextConfig` (thresholds for
            truncation and compression; it stands for the default pipeline) or a
            `ContextPipeline` (managers run at post_tool and pre_llm under activation
            rules). `ContextConfig()` when None.
        session_id: the workspace session; a new one is generated when not given.
        summary_model: a (cheaper) model for summaries; left out, `model` writes them (not
            a `ScriptedModel`, see above); False: extractive summaries, no model asked.
        max_steps: model calls per `reply` before giving up.
        counter: the token counter; by default the exact one for `model`.
        on_event: called with each event of the session record (see "The session record"
            in the documentation) as it is written, the compressor's included; a plain
            function or `async def`. One that raises is logged and ignored.
        include_retrieval_tool: register `retrieve_offloaded_content` (see
            `ctxoffload.readback.retrieval_tool`) when the offloader can read its references
            back and no reader tool was given (`workspace_tools`' Read and Grep, or a tool
            of that name), so the agent can always recover what left its context, whatever
            the offloader, with one set of readers, never two. Its answers are capped at three
            characters per token of `tool_result_limit`, between 1,000 and 20,000.
        include_pin_tool: register `pin_context(message_id=None, text=None)`, with which
            the model pins the turn of one of its tool calls, or a text such as its plan,
            so that no compaction removes it (see `pin`). Off by default.
        include_compact_tool: register `compact_context(instructions=None)`, with which
            the model compacts its context now (see `compact`). Off by default.
        if_busy: what to do when another live writer holds the session's lease (taken on
            first use when the offloader is a `LeaseHolder`, as every ctxoffload workspace
            is; released by `aclose`): "raise" `SessionBusyError` naming the holder (the
            default), or "fork": continue in a new session,
            `{session_id}-fork-{6 hex}`, that starts from the holder's saved state (a
            `fork` event in the new record names the origin; `session_id` then names the
            new session).

    Reader tools (the workspace file tools and the retrieval tool, marked
    `ctxoffload_reader`) are named in every truncation notice, and their results are never
    offloaded again after the tool runs, so reading an offloaded file cannot loop.

    Raises:
        ConfigError: one of the checks above failed (also a `ValueError`).
        InvalidSessionId: `session_id` is not a plain name.
    """

    def __init__(
        self,
        *,
        model: ChatModel,
        name: str = "agent",
        system_prompt: str = "",
        tools: Sequence[Callable[..., Any] | Tool] = (),
        offloader: Offloader | None = None,
        context_config: ContextConfig | ContextPipeline | None = None,
        session_id: str | None = None,
        summary_model: ChatModel | Literal[False] | None = None,
        max_steps: int = 30,
        counter: TokenCounter | None = None,
        on_event: EventCallback | None = None,
        include_retrieval_tool: bool = True,
        include_pin_tool: bool = False,
        include_compact_tool: bool = False,
        if_busy: str = "raise",
    ) -> None:
        pipeline = context_pipeline(context_config)
        config = pipeline.config
        window = check_settings(model, max_steps, if_busy, config)
        summaries = summary_writer(model, summary_model)
        check_offloader(offloader)
        self.name = name
        self.model = model
        self.system_prompt = system_prompt
        context_tools = [pin_context_tool(self._pin_from_tool)] if include_pin_tool else []
        if include_compact_tool:
            context_tools.append(compact_context_tool(self._compact_from_tool))
        self.tools = agent_tools(
            tools,
            offloader,
            config,
            include_retrieval_tool=include_retrieval_tool,
            context_tools=context_tools,
        )
        self.offloader = offloader
        self.max_steps = max_steps
        self.session_id = validate_session_id(session_id or f"{uuid.uuid4().hex[:12]}")
        self.compressor = agent_compressor(
            config,
            model,
            summaries,
            offloader,
            self.session_id,
            counter=counter,
            window=window,
            on_event=on_event,
            tools=self.tools,
        )
        self.context_pipeline = pipeline
        self._pipeline = pipeline.bind(self.compressor)
        self._state = SavedState(offloader)
        self._record = SessionRecorder(
            offloader, self.session_id, on_event=on_event, prepare=self._state.moved_out
        )
        # The part of the window each message of the last call was counted in (window_parts).
        self._parts_known: dict[str, tuple[Msg, str]] = {}
        self.messages: list[Msg] = self._initial_messages()
        self.steps: list[StepRecord] = []
        self._restored = session_id is None
        self._lock = asyncio.Lock()
        self.if_busy = if_busy
        self._lease: SessionLease | None = None
        # Compactions asked for from outside (`request_compaction`), followed in the record.
        self._compact_requests: CompactRequests | None = None
        # For a sub-agent: the parent's session, agent, step and tool call (`as_tool`).
        self.parent: dict[str, Any] | None = None
        # What `spawn` builds a fresh agent from (the tools as given: the retrieval tool is
        # made again for the new agent's offloader).
        self._settings: dict[str, Any] = {
            "model": model,
            "name": name,
            "system_prompt": system_prompt,
            "tools": list(tools),
            "context_config": pipeline,
            "summary_model": summary_model,
            "max_steps": max_steps,
            "counter": counter,
            "on_event": on_event,
            "include_retrieval_tool": include_retrieval_tool,
            "include_pin_tool": include_pin_tool,
            "include_compact_tool": include_compact_tool,
            "if_busy": if_busy,
        }

    def _keeps_whole(self, tool_name: str) -> bool:
        """Whether a tool's results skip the post_tool managers: the reader tools' (reading
        back must not loop) and the context tools' (a pinned text stays whole)."""
        tool = self.tools.get(tool_name)
        return tool is not None and (tool.is_reader or tool_name in CONTEXT_TOOL_NAMES)

    def _initial_messages(self) -> list[Msg]:
        return [Msg(role="system", content=self.system_prompt)] if self.system_prompt else []

    @property
    def context_config(self) -> ContextConfig:
        """The shared settings in effect (window, thresholds, summary prompt and template):
        the `ContextConfig` given, or the `config` of the `ContextPipeline` given. The
        pipeline itself is `context_pipeline`."""
        return self.compressor.config

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools in the OpenAI function-tool format."""
        return [tool.schema for tool in self.tools.values()]

    def context_tokens(self) -> int:
        """Tokens the next model call would send (counted incrementally)."""
        return self.compressor.count(self.messages, self.tool_schemas)

    async def reply(self, user_input: str | Msg) -> Msg:
        """Answer one user request, calling tools as the model asks.

        Args:
            user_input: the request: text, or a user `Msg` (to send images or other blocks).

        Returns:
            The model's final assistant message (or a note that the step limit was hit).

        Raises:
            InvalidContent: `user_input` nests deeper than 108 levels (or contains itself);
                nothing was added to the context.
            ModelError: the model failed (after one compress-and-retry on overflow).
        """
        async with self._working():
            await self._record.start(self)
            user = checked_request(user_input, self.messages)
            self.messages.append(user)
            await self._record.messages([user], is_context=False)
            for step in range(1, self.max_steps + 1):
                record = StepRecord(step=len(self.steps) + 1, context_tokens=0)
                await self._still_holding("a step")
                await self._serve_requests()
                compression = await self._pre_llm()
                self.steps.append(record)  # after: a request refused over the window is no step
                self.messages = compression.messages
                record.compressed = compression.compressed
                record.context_tokens = compression.tokens_after
                response = await self._call_model(record)
                reply = response.message
                self.messages.append(reply)
                calls = reply.tool_calls
                record.tool_calls = [c.name for c in calls]
                if not calls:
                    await self._beside_provider_compaction()
                    await self._save_state()
                    return reply
                await self._run_calls(reply, record)
                await self._beside_provider_compaction()
                logger.debug("step %d: %d tool calls", step, len(calls))
            stop = Msg(
                role="assistant",
                name=self.name,
                content=(
                    f"I stopped after {self.max_steps} steps without a final answer. The work so "
                    f"far is in session {self.session_id}; ask me to continue."
                ),
            )
            self.messages.append(stop)
            await self._record.messages(self.messages)
            await self._save_state()
            return stop

    async def _run_calls(self, reply: Msg, record: StepRecord) -> None:
        """Run the calls of `reply` and put their results in the context, each through the
        post_tool managers unless it stays whole (`_keeps_whole`); record and save them."""
        calls = reply.tool_calls
        try:
            results = await run_in_order(calls, self._run_tool)
            await self._record.flush()  # (their tool_call events: before what post_tool writes)
            tools = self.tool_schemas
            processed = await run_each(
                lambda r: (
                    unchanged(r)
                    if self._keeps_whole(r.name)
                    else self._pipeline.post_tool(r, messages=self.messages, tools=tools)
                ),
                results,
            )
        except BaseException as stopped:
            if not isinstance(stopped, SessionBusyError):  # (lost: it writes nothing more)
                await self._answer_unfinished(calls, stopped)
            raise
        names = ", ".join(dict.fromkeys(c.name for c in calls))
        await self._still_holding(f"the results of its tool calls ({names})")
        record.truncated = sum(a is not b for a, b in zip(results, processed, strict=True))
        results_msg = Msg(role="tool", content=list(processed), name=self.name)
        self.messages.append(results_msg)
        if any(c.name == PIN_TOOL_NAME for c in calls):
            results_msg = await pin_with_results(self._pipeline, self, reply)
        await self._record.messages([results_msg], is_context=False)
        await self._save_state()

    async def _beside_provider_compaction(self) -> None:
        """When the model's provider compacted the conversation on its side (its reply holds
        a compaction item), keep what the item replaces and go on from it
        (`Compressor.keep_provider_compaction`); run once the reply's turn is complete, so
        the note after it never stands between a call and its result."""
        context = await self.compressor.keep_provider_compaction(self.messages)
        if len(context) != len(self.messages) or any(
            a is not b for a, b in zip(context, self.messages, strict=True)
        ):
            self.messages = context
            await self._record.messages(self.messages)
            await self._save_state()

    async def _pre_llm(self, **options: Any) -> CompressionResult:
        """The pipeline's `pre_llm` on the context. A request it refuses as over the window
        (`over_window="refuse"`) leaves the context as the managers left it, a compaction
        made kept, before the error goes to the caller."""
        try:
            return await self._pipeline.pre_llm(self.messages, tools=self.tool_schemas, **options)
        except ContextOverflowError as refused:
            if refused.messages is not None:
                self.messages = [m for m in refused.messages if isinstance(m, Msg)]
                await self._record.messages(self.messages)
                await self._save_state()
            raise

    async def _answer_unfinished(self, calls: list[ToolCallBlock], stopped: BaseException) -> None:
        """Answer each of `calls` with an error result when the reply stopped before their
        results entered the context (it was cancelled, a Ctrl-C, a tool's output that could
        not be processed): a call left without a result makes every later request to the
        model invalid, so the next `reply` could never be answered. The results are recorded
        and saved unless the interpreter is stopping."""
        results = unfinished_results(calls, stopped, self.name)
        self.messages.append(results)
        if isinstance(stopped, (Exception, asyncio.CancelledError)):
            with contextlib.suppress(Exception):
                await self._record.messages([results], is_context=False)
                await self._save_state()

    async def _call_model(self, record: StepRecord) -> ModelResponse:
        try:
            response = await self._generate(record)
        except ContextOverflowError as overflow:
            # Our count fit but the provider disagrees (another tokenizer): its window is smaller
            # than this context, so compress once more as if it were 90% of what we send.
            logger.warning(
                "the model reported a context overflow; running the pre_llm managers with "
                "their activation rules ignored, then retrying once"
            )
            tokens = self.context_tokens()
            shrunk = max(1, int(tokens * 0.9))
            forced = await self._pre_llm(reactive=True, window=shrunk)
            if not forced.compressed:
                raise ContextOverflowError(
                    f"the model reported a context overflow ({overflow}) with {tokens} tokens, "
                    f"and the context managers could not shrink it ({forced.reason}); lower "
                    "ContextConfig(context_window=...) to the provider's real window, or add "
                    "a manager that removes more"
                ) from overflow
            self.messages = forced.messages
            record.compressed = True
            record.context_tokens = forced.tokens_after
            try:
                response = await self._generate(record)
            except ContextOverflowError as again:
                raise ContextOverflowError(
                    f"the model reported a context overflow again ({again}) after the context "
                    f"managers shrank the context from {tokens} to {forced.tokens_after} tokens "
                    f"({forced.reason}); lower ContextConfig(context_window=...) to the "
                    "provider's real window"
                ) from again
        if response.usage is not None and response.usage.input_tokens > 0:
            record.input_tokens = response.usage.input_tokens
            self.compressor.tracker.anchor(response.usage.input_tokens, self.messages)
        if response.message.name is None:
            response.message.name = self.name
        response.message = bounded(response.message)
        await self._record.messages([response.message], is_context=False)
        return response

    async def _generate(self, record: StepRecord) -> ModelResponse:
        """Call the model once with the context, and record what it was sent and how it went."""
        await self._record.messages(self.messages)
        sent = list(self.messages)
        tokens = self.context_tokens()
        logger.debug(
            "step %d: calling the model with %d messages, %d tokens", record.step, len(sent), tokens
        )
        started = time.monotonic()
        self.compressor.note_request(sent, self.tool_schemas, self.model)
        tracker = self.compressor.tracker
        window = self.compressor.window()
        shape: dict[str, Any] = {
            "window": window_parts(
                sent, tracker.count_message, tracker.tools_tokens, known=self._parts_known
            ),
            "context_window": window,
            "trigger_tokens": int(self.context_config.trigger_ratio * window),
        }
        try:
            response = await self.model.generate(sent, tools=self.tool_schemas or None)
        except Exception as exc:
            await self._record.model_call(record.step, sent, tokens, started, error=exc, **shape)
            raise
        await self._record.model_call(
            record.step, sent, tokens, started, response=response, **shape
        )
        return response

    async def _run_tool(self, call: Any) -> ToolResultBlock:
        started = time.monotonic()
        raised: list[BaseException] = []
        tool = self.tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            result = ToolResultBlock(
                id=call.id,
                name=call.name,
                output=f"Error: there is no tool named {call.name!r}; the tools are: {known}",
                is_error=True,
            )
        else:
            store = self.offloader.offload_data_block if self.offloader is not None else None
            # Tools that start sub-agents learn who called them; a task runs one call at a
            # time (`run_each`), and the mark is reset after it, so it is this call's alone.
            token = CALLER.set(Caller(self, len(self.steps), call.id))
            try:
                result = await tool.run(call, store_data=store, on_error=raised.append)
            finally:
                CALLER.reset(token)
        # Before the call's record: a tool that blocked the event loop past the lease's time
        # to live may have lost the session (the workspace would refuse the write anyway,
        # without naming the call).
        await self._still_holding(f"the result of its tool call {call.name} ({call.id})")
        await self._record.tool_call(
            len(self.steps), call, result, started, raised[0] if raised else None, held=True
        )
        return result

    async def aclose(self) -> None:
        """Stop the agent's background work and give its session up: a summary under way in
        the background (`ContextConfig(background_compaction=True)`) is cancelled, with
        nothing half-written, and the session's lease is released, so another agent may
        write the session. The agent can still be used afterwards (it takes the lease
        again). `async with Agent(...)` calls this on the way out."""
        try:
            await self.compressor.aclose()
        finally:
            lease, self._lease = self._lease, None
            if lease is not None:
                await lease.release()

    @property
    def lease(self) -> SessionLease | None:
        """The session's lease while this agent holds it (from its first use until
        `aclose`), else None."""
        return self._lease if self._lease is not None and self._lease.held else None

    @contextlib.asynccontextmanager
    async def _working(self) -> AsyncIterator[None]:
        """One public operation: one at a time, holding the session, its events stamped
        with this agent, on the saved context."""
        async with self._lock:
            await self._hold_session()
            with writing_as(self.name, self.session_id):
                await self._restore()
                yield

    async def _still_holding(self, writing: str) -> None:
        """Stop before writing `writing` when the session's lease was lost: it expired
        unrenewed (this process paused, or its event loop blocked by a sync call in an async
        tool) and another writer took the session over; writing on would interleave with its
        record and overwrite its state.json.

        Raises:
            SessionBusyError: the lease is lost; nothing more was written.
        """
        lease = self._lease
        if lease is None or await lease.still_held():
            return
        self._lease = None
        self._record.forget_held()  # (the calls' events: the session is another writer's)
        raise lost_lease(self.session_id, writing)

    async def _hold_session(self) -> None:
        """Take the session's lease on first use (again after `aclose`, or once lost)."""
        store = self.offloader
        if self.lease is not None or not isinstance(store, LeaseHolder):
            return
        try:
            self._lease = await take_lease(store, self.session_id, self.name)
        except SessionBusyError as busy:
            if self.if_busy != "fork":
                raise
            await self._fork_busy(store, busy)

    async def _fork_busy(self, store: LeaseHolder, busy: SessionBusyError) -> None:
        """Continue in a fork of a busy session's saved state (`if_busy="fork"`)."""
        source = self.session_id
        # A new session, checked under its lease: a fork id drawn again must not continue
        # in an earlier fork (whose record fork_session would then refuse as "nothing saved").
        new, self._lease = await new_session(
            store, source[: 128 - len("-fork-123456")] + "-fork", self.name
        )
        self.session_id = self.compressor.session_id = self._record.session_id = new
        self._restored = False
        await continue_in_fork(store, source, new, self.name, self._record, busy)

    # -- sub-agents -------------------------------------------------------------------------

    def spawn(
        self,
        *,
        session_id: str | None = None,
        offloader: Offloader | None = None,
        parent: dict[str, Any] | None = None,
        lease: SessionLease | None = None,
    ) -> Agent:
        """A fresh agent with this one's settings (model, prompt, tools, context config),
        in session `session_id` of `offloader` (this agent's when None).

        Args:
            session_id: the new agent's session; a new one when None.
            offloader: where it offloads; this agent's when None.
            parent: for a sub-agent, what its `session_start` names as its parent.
            lease: the session's lease, held already (`new_session`): the new agent
                writes under it and releases it in `aclose`.
        """
        settings = dict(self._settings)
        settings["offloader"] = offloader if offloader is not None else self.offloader
        agent = Agent(session_id=session_id, **settings)
        agent.parent = parent
        agent._lease = lease
        return agent

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        max_depth: int = MAX_SUBAGENT_DEPTH,
    ) -> Tool:
        """This agent as a tool another agent can call to hand it a task: a sub-agent.

        Each call starts a fresh agent with this one's settings in a new session of the
        CALLING agent's workspace, `{parent session}--{name}-{6 hex}`, with its own context
        and window, and runs the task there. The caller's context receives the sub-agent's
        final answer and the paths of what it stored (its tool_result files, its context
        log), never its transcript. Calls made in one step run at once. The caller's
        record gets `subagent` events naming each child session; the child's
        `session_start` names its parent (`ctxoffload show` on the parent lists them as a
        tree, `ctxoffload ls` groups them).

        Args:
            name: the tool's name (default: this agent's `name`).
            description: what the calling model is told the tool does (default: built from
                the name and the first line of the system prompt).
            max_depth: how deep sub-agents may nest when this tool is called: a call made
                by an agent already this many sub-agents below the first one starts none
                and gets an error result (1 to 100; `MAX_SUBAGENT_DEPTH`, 8, by default).

        Returns:
            A `Tool` taking one argument, `task`, to pass in `Agent(tools=[...])`.

        Raises:
            ConfigError: `max_depth` is not an int from 1 to 100.

        Example::

            researcher = Agent(name="researcher", model=model, tools=[search],
                               system_prompt="You research one question and cite files.")
            lead = Agent(name="lead", model=model, offloader=ws,
                         tools=[researcher.as_tool(description="Research one question")])
        """
        return subagent_tool(self, name, description, max_depth)

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def compress_context(
        self, context_config: ContextConfig | None = None
    ) -> CompressionResult:
        """Check the context now and compress it if it is over the trigger.

        Args:
            context_config: a one-off configuration for this check.
        """
        async with self._working():
            if context_config is not None:
                result = await self.compressor.maybe_compress(
                    self.messages, tools=self.tool_schemas, config=context_config
                )
            else:
                result = await self._pre_llm(model_call=False)
            self.messages = result.messages
            if result.compressed:
                await self._record.messages(self.messages)
                await self._save_state()
            return result

    # -- compaction asked for -------------------------------------------------------------

    async def compact(self, instructions: str | None = None) -> CompressionResult:
        """Compact the context now: run the pre_llm managers whatever their activation rules,
        with `instructions` added to the summary request.

        At most one compaction per model call; when nothing would leave the context, nothing
        is done and `reason` begins with "nothing to compact". One that changed the context
        is a `compact` event.

        Args:
            instructions: what the summary should focus on and keep.

        Returns:
            What was done: `compressed` is whether the context changed.
        """
        async with self._working():
            return await self._compact(instructions)

    async def _compact(self, instructions: str | None) -> CompressionResult:
        result = await self._pipeline.compact(
            self.messages, tools=self.tool_schemas, instructions=instructions
        )
        self.messages = result.messages
        if result.compressed:
            await self._record.messages(self.messages)
            await self._save_state()
        return result

    async def serve_compact_requests(self) -> CompressionResult | None:
        """Serve the compactions asked for from outside the agent that are pending in the
        session's record (`ctxoffload compact`, `request_compaction`); `reply` does this at
        the start of each step.

        One compaction serves every request pending, their instructions joined, and one
        `compact` event answers them all, naming each, whether anything was compacted or
        not. A request is left pending when a compaction already ran since the last model
        call (at most one per call): the next step serves it. Each look reads only what the
        record gained since the previous one.

        Returns:
            What was done, or None when no request was pending (or the offloader keeps no
            record).
        """
        async with self._working():
            return await self._serve_requests()

    async def _serve_requests(self) -> CompressionResult | None:
        store = self.offloader
        if not isinstance(store, EventLog):
            return None
        follower = self._compact_requests
        if follower is None or follower.session_id != self.session_id:  # a fork continues
            follower = self._compact_requests = CompactRequests(store, self.session_id)
        pending = await follower.look()
        if not pending or self._pipeline.compacted_since_model_call:
            return None
        logger.info(
            "session %s: serving %d compaction request(s) from outside: %s",
            self.session_id,
            len(pending),
            ", ".join(r.request for r in pending),
        )
        result = await self._pipeline.compact(
            self.messages,
            tools=self.tool_schemas,
            instructions=CompactRequests.instructions_of(pending),
            requests=pending,
        )
        self.messages = result.messages
        if result.compressed:
            await self._record.messages(self.messages)
            await self._save_state()
        return result

    async def _compact_from_tool(self, instructions: str | None) -> str:
        """What `compact_context` answers."""
        return compact_answer(await self._compact(instructions))

    # -- pins -------------------------------------------------------------------------------

    async def pin(self, message_id: str) -> Msg:
        """Pin a message of the context: no manager summarises, moves, clears or cuts it.

        Pins stay in the context right after the summary (or the window note), oldest
        first, and count against the window; together they may take at most `pin_ratio` of
        it (`ContextConfig`, 0.3 by default). A pin is kept in the message's metadata, so it
        is in state.json and a resumed session keeps it. Each pin is a `pin` event.

        Args:
            message_id: the message's id (`Msg.id`), or the id of a tool call in the context
                (the call and its results are pinned together). A call id that several
                messages hold (a server that numbers each turn's calls from `call_0`) names
                none: the refusal lists their message ids (`PipelineRun.message_named`).

        Returns:
            The pinned message as it now is in the context.

        Raises:
            PinError: the message is not in the context, the call id is held by several
                messages, or the pins would take more than `pin_ratio` of the window;
                nothing was pinned.
        """
        async with self._working():
            return await self._pin(message_id, by="api")

    async def unpin(self, message_id: str) -> Msg:
        """Unpin a message: managers may move it out of the context again (an `unpin` event).

        Raises:
            PinError: no pinned message of that id is in the context.
        """
        async with self._working():
            self.messages = await self._pipeline.unpin(message_id, self.messages)
            await self._after_pin_change()
            return next(m for m in self.messages if m.id == message_id)

    @property
    def pinned(self) -> list[Msg]:
        """The pinned messages of the context, in order."""
        return [m for m in self.messages if is_pinned(m)]

    async def _pin(self, message_id: str, *, by: str) -> Msg:
        self.messages = await self._pipeline.pin(message_id, self.messages, by=by)
        await self._after_pin_change()
        return self._pipeline.message_named(message_id, self.messages)

    async def _after_pin_change(self) -> None:
        await self._record.messages(self.messages)
        await self._save_state()

    async def _pin_from_tool(self, message_id: str | None, text: str | None) -> str:
        """What `pin_context` answers (`pin_answer`)."""
        return await pin_answer(
            self._pipeline, self, message_id, text, pin=lambda target: self._pin(target, by="agent")
        )

    # -- resumable sessions -----------------------------------------------------------------

    async def _save_state(self) -> None:
        """Save the live context as state.json, when the offloader is a `StateStore`."""
        await self._state.save(
            self.session_id,
            self.messages,
            lambda: {
                "agent": self.name,
                "model": getattr(self.model, "model_name", type(self.model).__name__),
                "steps": len(self.steps),
                "context_tokens": self.context_tokens(),
            },
        )

    async def _restore(self) -> None:
        if self._restored:
            return
        self._restored = True
        messages = await self._state.restore(self.session_id)
        if messages is None:
            return
        self.messages = self._initial_messages() + messages
        # The files stored since the saved summary, which the next one lists as an unbroken
        # run's would (the summary's own are in its mark, taken over at the next compaction).
        if isinstance(self.offloader, EventLog):
            record = await self.offloader.read_events(self.session_id)
            self.compressor.resume(e for e in record if events.is_event(e))
