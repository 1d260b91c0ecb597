"""Agent: a small ReAct loop that keeps its context inside the window without losing anything."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import inspect
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._depth import MAX_DEPTH, STORE_DEPTH, text_form, too_deep
from .._disk.payloads import storable_message
from .._disk.read import EventKind
from ..compression import (
    CompressionResult,
    Compressor,
    ContextConfig,
    ContextPipeline,
    EventCallback,
    ReaderTools,
    is_pinned,
)
from ..exceptions import (
    ConfigError,
    ContextOverflowError,
    InvalidContent,
    InvalidReference,
    PinError,
    SessionBusyError,
)
from ..messages import Base64Source, DataBlock, Msg, ToolCallBlock, ToolResultBlock, URLSource
from ..model import ChatModel, ModelResponse, ScriptedModel
from ..readback import RETRIEVAL_TOOL_NAME, retrieval_tool
from ..tokens import TokenCounter, get_token_counter
from ..workspace import (
    LeaseHolder,
    Offloader,
    ReferenceReader,
    SessionLease,
    StateStore,
    fork_session,
    new_session,
    not_a_capability,
    take_lease,
    validate_session_id,
    writing_as,
)
from ._context_tools import (
    CONTEXT_TOOL_NAMES,
    PIN_TOOL_NAME,
    compact_context_tool,
    pin_context_tool,
)
from ._record import SessionRecorder, window_parts
from ._subagent import CALLER, MAX_SUBAGENT_DEPTH, Caller, subagent_tool
from ._tools import Tool, as_tool, as_tools

__all__ = ["IF_BUSY", "Agent", "StepRecord"]

IF_BUSY = ("raise", "fork")
"""What `Agent(if_busy=...)` may be."""

logger = logging.getLogger("ctxoffload")


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

    A `ScriptedModel` plays one step per call, summary requests included. So with a
    `ScriptedModel` as `model` and no `summary_model`, summaries are extractive (logged at
    INFO) rather than taken from the agent's script; passing the same `ScriptedModel` as
    both is a `ConfigError`.

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
        summary_model: a (cheaper) model for summaries; defaults to `model` (except for a
            `ScriptedModel`, see above).
        max_steps: model calls per `reply` before giving up.
        counter: the token counter; by default the exact one for `model`.
        on_event: called with each event of the session record (see "The session record"
            in the documentation) as it is written, the compressor's included; a plain
            function or `async def`. One that raises is logged and ignored.
        include_retrieval_tool: register `retrieve_offloaded_content` (see
            `ctxoffload.readback.retrieval_tool`) when the offloader can read its references
            back and no tool of that name was given, so the agent can always recover what
            left its context, whatever the offloader. Its answers are capped at three
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
        summary_model: ChatModel | None = None,
        max_steps: int = 30,
        counter: TokenCounter | None = None,
        on_event: EventCallback | None = None,
        include_retrieval_tool: bool = True,
        include_pin_tool: bool = False,
        include_compact_tool: bool = False,
        if_busy: str = "raise",
    ) -> None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ConfigError(
                f"max_steps {max_steps!r} is below 1: the agent must call the model at least "
                "once; pass max_steps=30 (the default) or another positive int"
            )
        if if_busy not in IF_BUSY:
            raise ConfigError(
                f"if_busy {if_busy!r} is not one of {', '.join(map(repr, IF_BUSY))}: pass "
                "'raise' to get SessionBusyError when another writer holds the session, or "
                "'fork' to continue in a fork of its saved state"
            )
        pipeline = _pipeline(context_config)
        config = pipeline.config
        _check_model(model, "model")
        window = _model_window(model, config)
        if window is not None and config.context_window is None:
            config.check_window(window)  # the config's own window was checked when it was built
        if summary_model is not None:
            _check_model(summary_model, "summary_model")
        if summary_model is model and isinstance(model, ScriptedModel):
            raise ConfigError(
                "model and summary_model are the same ScriptedModel, so summary requests would "
                "play the agent's script: pass a separate ScriptedModel as summary_model, or "
                "leave summary_model out for extractive summaries"
            )
        if summary_model is None and isinstance(model, ScriptedModel):
            # INFO, not WARNING: a ScriptedModel is for tests and demos, where this is the
            # expected set-up, and the rule is documented.
            logger.info(
                "model is a ScriptedModel and no summary_model was given: summaries will be "
                "extractive, so that summary requests do not play the agent's script; pass "
                "summary_model=ScriptedModel(...) for model-written summaries"
            )
        _check_offloader(offloader)
        self.name = name
        self.model = model
        self.system_prompt = system_prompt
        self.tools = _checked_tools(tools)
        if (
            include_retrieval_tool
            and isinstance(offloader, ReferenceReader)
            and RETRIEVAL_TOOL_NAME not in self.tools
        ):
            retrieve = retrieval_tool(offloader, max_output_chars=reader_output_chars(config))
            self.tools[RETRIEVAL_TOOL_NAME] = as_tool(retrieve)
        if include_pin_tool:
            self._add_context_tool(pin_context_tool(self._pin_from_tool))
        if include_compact_tool:
            self._add_context_tool(compact_context_tool(self._compact_from_tool))
        _check_reader_names(config.reader_tools, self.tools)
        self.offloader = offloader
        self.max_steps = max_steps
        self.session_id = validate_session_id(session_id or f"{uuid.uuid4().hex[:12]}")
        summarizer: ChatModel | None = summary_model
        if summarizer is None and not isinstance(model, ScriptedModel):
            summarizer = model
        self.compressor = Compressor(
            config,
            model=summarizer,
            offloader=offloader,
            session_id=self.session_id,
            counter=counter
            if counter is not None
            else get_token_counter(getattr(model, "model_name", None)),
            # Never None, so the compressor never asks a model without one for its window.
            context_window=window if window is not None else config.context_window,
            on_event=on_event,
            reader_tools=_reader_tools(self.tools),
            # A tool of the user's called `Read` reads their files, not offloaded content:
            # its results are cut and stored like any other's.
            reader_names=[name for name, tool in self.tools.items() if tool.is_reader],
        )
        self.context_pipeline = pipeline
        self._pipeline = pipeline.bind(self.compressor)
        self._record = SessionRecorder(
            offloader, self.session_id, on_event=on_event, prepare=self._without_payloads
        )
        # The part of the window each message of the last call was counted in (window_parts).
        self._parts_known: dict[str, tuple[Msg, str]] = {}
        self.messages: list[Msg] = self._initial_messages()
        self.steps: list[StepRecord] = []
        self._restored = session_id is None
        self._lock = asyncio.Lock()
        # Inline payloads already stored for state.json, by the identity of their base64
        # string (messages are never mutated), so each image is decoded and hashed once per
        # session rather than at every step. The string is kept to pin its identity.
        self._stored_payloads: dict[int, tuple[str, DataBlock]] = {}
        self.if_busy = if_busy
        self._lease: SessionLease | None = None
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

    def _add_context_tool(self, tool: Tool) -> None:
        if tool.name in self.tools:
            raise ConfigError(
                f"a tool named {tool.name!r} was given and include_{tool.name.split('_')[0]}"
                "_tool=True asks for ctxoffload's: rename yours, or leave the option off"
            )
        self.tools[tool.name] = tool

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
            user = (
                user_input if isinstance(user_input, Msg) else Msg(role="user", content=user_input)
            )
            if too_deep(user, STORE_DEPTH):
                # Refused before it enters the context, where it could be neither stored,
                # counted nor sent.
                raise InvalidContent(
                    f"user_input is nested deeper than {STORE_DEPTH} levels (or contains "
                    "itself): flatten it, or pass deeply nested data as JSON text"
                )
            if any(m.id == user.id for m in self.messages):
                # The same Msg passed again (a fixed "continue" prompt): a message is known by
                # its id, and one the model has seen is never fresh, so this request would
                # not be either. It enters the context as a new message.
                user = user.model_copy(update={"id": uuid.uuid4().hex})
            self.messages.append(user)
            await self._record.messages([user], is_context=False)
            for step in range(1, self.max_steps + 1):
                record = StepRecord(step=len(self.steps) + 1, context_tokens=0)
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
                    await self._save_state()
                    return reply
                try:
                    results = await self._run_tools(calls)
                    processed = await asyncio.gather(
                        *(
                            _unchanged(r)
                            if self._keeps_whole(r.name)
                            else self._pipeline.post_tool(
                                r, messages=self.messages, tools=self.tool_schemas
                            )
                            for r in results
                        )
                    )
                except BaseException as stopped:
                    await self._answer_unfinished(calls, stopped)
                    raise
                record.truncated = sum(a is not b for a, b in zip(results, processed, strict=True))
                results_msg = Msg(role="tool", content=list(processed), name=self.name)
                self.messages.append(results_msg)
                if any(c.name == PIN_TOOL_NAME for c in calls):
                    results_msg = await self._pin_with_results(reply)
                await self._record.messages([results_msg], is_context=False)
                await self._save_state()
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
        results = Msg(
            role="tool",
            name=self.name,
            content=[
                ToolResultBlock(
                    id=call.id,
                    name=call.name,
                    output=(
                        f"Error: the reply stopped ({type(stopped).__name__}) before this "
                        "call's result was kept; call the tool again if you still need it"
                    ),
                    is_error=True,
                )
                for call in calls
            ],
        )
        self.messages.append(results)
        if isinstance(stopped, (Exception, asyncio.CancelledError)):
            with contextlib.suppress(Exception):
                await self._record.messages([results], is_context=False)
                await self._save_state()

    async def _call_model(self, record: StepRecord) -> ModelResponse:
        try:
            response = await self._generate(record)
        except ContextOverflowError as overflow:
            # Our count said it fits but the provider disagrees (a different tokenizer, say):
            # compress once more and retry once.
            # The provider's window is evidently smaller than this context, so compress as if
            # the window were 90% of what we are sending now.
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
        response.message = _bounded(response.message)
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

    async def _run_tools(self, calls: Sequence[ToolCallBlock]) -> list[ToolResultBlock]:
        """Run a step's calls at once, except the context tools (`pin_context`,
        `compact_context`): those run one after another, every pin before any compaction.

        They are the only writers of the context while a step runs. Run at once, a compaction
        would work on the context as it was before a pin beside it and then put its result
        over the pin's (the model told "Pinned", the message gone); pins first, so a message
        pinned in the step stays whatever the compaction moves, in either order of the calls.
        """
        results: list[ToolResultBlock | None] = [None] * len(calls)
        context_calls = sorted(
            (i for i, c in enumerate(calls) if c.name in CONTEXT_TOOL_NAMES),
            key=lambda i: calls[i].name != PIN_TOOL_NAME,
        )

        async def run(index: int) -> None:
            results[index] = await self._run_tool(calls[index])

        async def edit_context() -> None:
            for index in context_calls:
                await run(index)

        others = (run(i) for i in range(len(calls)) if i not in context_calls)
        await asyncio.gather(edit_context(), *others)
        return [r for r in results if r is not None]

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
            # Tools that start sub-agents learn who called them; each call runs in a task
            # of its own (`asyncio.gather`), so the mark is this call's alone.
            token = CALLER.set(Caller(self, len(self.steps), call.id))
            try:
                result = await tool.run(call, store_data=store, on_error=raised.append)
            finally:
                CALLER.reset(token)
        await self._record.tool_call(
            len(self.steps), call, result, started, raised[0] if raised else None
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
        with writing_as(self.name, new):
            try:
                await fork_session(store, source, new, take_lease=False)
            except ConfigError:
                # Nothing saved yet: the fork starts empty, its record naming the origin.
                await self._record.emit(
                    EventKind.FORK, origin={"session": source, "step": None}, messages=0
                )
        logger.warning(
            "session %s is busy (%s): this agent continues in %s, a fork of its saved state",
            source,
            busy,
            new,
        )

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

    async def _compact_from_tool(self, instructions: str | None) -> str:
        """What `compact_context` answers."""
        result = await self._compact(instructions)
        if not result.compressed:
            return f"Nothing was compacted: {result.reason}."
        where = f" into {result.reference}" if result.reference else ""
        span = f" (lines {result.spans_text()})" if result.spans else ""
        return (
            f"Compacted: {result.reason}; {result.compressed_messages} messages moved{where}"
            f"{span}; the context went from {result.tokens_before:,} to "
            f"{result.tokens_after:,} tokens."
        )

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
        """What `pin_context` answers; a `PinError` becomes the tool's error result."""
        if (message_id is None) == (text is None):
            raise PinError(
                "pin_context takes message_id or text: give the id of one of your tool calls, "
                "or the text to keep"
            )
        if message_id is not None:
            answer = f"Pinned {message_id}: it stays in your context whatever is compacted."
            named = self._pipeline.message_named(message_id, self.messages)
            if named.tool_calls and named.id == self.messages[-1].id:
                # A call of this step: its results, which the pin keeps too, are not in the
                # context yet, so its share is measured once they are (`_pin_with_results`).
                return answer
            await self._pin(message_id, by="agent")
            return answer
        assert text is not None
        # The text is pinned as this call's result once the results message exists; its
        # share is checked now, so a refusal reaches the model as this call's error.
        window = self._pipeline.window
        ratio = self.context_config.pin_ratio
        after = self._pipeline.pinned_tokens(self.messages) + self.compressor.counter.count_text(
            text
        )
        if window is not None and after > ratio * window:
            raise PinError(
                f"pinning this text would bring the pins to {after:,} tokens, "
                f"{after / window:.0%} of the {window:,}-token window, over pin_ratio {ratio}: "
                "pin a shorter text (the few lines that matter)"
            )
        return f"Pinned; this text stays in your context whatever is compacted:\n{text}"

    async def _pin_with_results(self, reply: Msg) -> Msg:
        """Make the pins of a step that wait for its results, now the last message: each
        `pin_context(text=...)` (the text is its result) and `pin_context(message_id=...)` of
        a call of `reply`, this step's.

        Each is measured with the results in the context, so a big result of the step counts
        against `pin_ratio`; one over the share is refused, and its answer becomes the
        refusal (a `PinError`), so the model is never told "Pinned" about a pin that was not
        made. Returns the results message as it now is.
        """
        for index, call in enumerate(reply.tool_calls):
            results = self.messages[-1]
            answer = results.tool_results[index]
            if call.name != PIN_TOOL_NAME or answer.is_error:
                continue
            message_id = call.input.get("message_id")
            try:
                if message_id is None:
                    target = results.id
                else:
                    target = str(message_id)
                    named = self._pipeline.message_named(target, self.messages)
                    if named.id != reply.id or is_pinned(named):
                        continue  # pinned when the tool ran
                self.messages = await self._pipeline.pin(target, self.messages, by="agent")
            except PinError as refused:
                refusal = answer.model_copy(
                    update={"output": f"Error: PinError: {refused}", "is_error": True}
                )
                answers = list(results.tool_results)
                answers[index] = refusal
                self.messages[-1] = results.model_copy(update={"content": answers})
        return self.messages[-1]

    # -- resumable sessions -----------------------------------------------------------------

    async def _save_state(self) -> None:
        """Save the live context as state.json, when the offloader is a `StateStore`."""
        store = self.offloader
        if not isinstance(store, StateStore):
            return
        try:
            messages: list[Any] = []
            for i, msg in enumerate(self.messages):
                # One message that cannot be stored must not cost the state of all the others:
                # it is saved as a stand-in that holds its text form (see storable_message).
                value, problem = storable_message(
                    await self._without_payloads(msg), None, where=f"messages[{i}]"
                )
                if problem is not None:
                    logger.warning("state.json holds a stand-in for a message: %s", problem)
                messages.append(value)
            await store.write_state(
                self.session_id,
                {
                    "session_id": self.session_id,
                    "agent": self.name,
                    "model": getattr(self.model, "model_name", type(self.model).__name__),
                    "steps": len(self.steps),
                    "context_tokens": self.context_tokens(),
                    "messages": messages,
                },
            )
        except Exception as exc:
            logger.warning("could not save the state of session %s: %s", self.session_id, exc)

    async def _without_payloads(self, msg: Msg) -> Msg:
        """The message with inline base64 replaced by data/ references (for state.json)."""
        if isinstance(msg.content, str) or self.offloader is None:
            return msg
        changed = False
        content: list[Any] = []
        for block in msg.content:
            if isinstance(block, DataBlock) and isinstance(block.source, Base64Source):
                block = await self._stored(block)
                changed = True
            elif isinstance(block, ToolResultBlock) and isinstance(block.output, list):
                parts = []
                for part in block.output:
                    if isinstance(part, DataBlock) and isinstance(part.source, Base64Source):
                        part = await self._stored(part)
                        changed = True
                    parts.append(part)
                block = block.model_copy(update={"output": parts})
            content.append(block)
        return msg.model_copy(update={"content": content}) if changed else msg

    async def _stored(self, block: DataBlock) -> DataBlock:
        assert isinstance(block.source, Base64Source) and self.offloader is not None
        data = block.source.data
        known = self._stored_payloads.get(id(data))
        if known is not None and known[0] is data:
            return known[1].model_copy(update={"name": block.name})
        try:
            stored: DataBlock = await self.offloader.offload_data_block(block)
        except InvalidContent as exc:
            # Not base64 in any spelling: state.json keeps the block inline, as it was given.
            logger.warning("kept an inline payload in state.json: %s", exc)
            stored = block
        self._stored_payloads[id(data)] = (data, stored)
        return stored

    async def _restore(self) -> None:
        if self._restored:
            return
        self._restored = True
        store = self.offloader
        if not isinstance(store, StateStore):
            return
        state = await store.read_state(self.session_id)
        if not state:
            return
        messages = [Msg.model_validate(m) for m in state.get("messages", [])]
        messages = [m for m in messages if m.role != "system"]
        self.messages = self._initial_messages() + [await self._with_payloads(m) for m in messages]
        # Counted as the record's session_start counts them: the system prompt is this
        # agent's own, not restored.
        logger.info(
            "resumed session %s from its saved state: %d messages restored; pass another "
            "session_id to start afresh",
            self.session_id,
            len(messages),
        )

    async def _with_payloads(self, msg: Msg) -> Msg:
        """Inline again the data/ payloads that `_without_payloads` replaced."""
        reader = self.offloader
        if not isinstance(reader, ReferenceReader) or isinstance(msg.content, str):
            return msg

        async def inline(block: DataBlock) -> DataBlock:
            if not isinstance(block.source, URLSource) or block.source.media_type is None:
                return block
            try:
                raw = await reader.read_reference(block.source.url)
            except InvalidReference:
                return block
            source = Base64Source(
                media_type=block.source.media_type, data=base64.b64encode(raw).decode()
            )
            return block.model_copy(update={"source": source})

        content: list[Any] = []
        for block in msg.content:
            if isinstance(block, DataBlock):
                block = await inline(block)
            elif isinstance(block, ToolResultBlock) and isinstance(block.output, list):
                parts = [await inline(p) if isinstance(p, DataBlock) else p for p in block.output]
                block = block.model_copy(update={"output": parts})
            content.append(block)
        return msg.model_copy(update={"content": content})


def _bounded(reply: Msg) -> Msg:
    """`reply` with the arguments of each call nested deeper than `MAX_DEPTH` kept as text.

    Such arguments could be neither stored nor sent back, and every later save and
    compression would fail on them. As JSON text under `_raw_arguments` (the form that
    arguments a model spelled wrongly take) they are kept whole, go back to the model as it
    sent them, and the tool answers with an error instead of running.
    """
    if isinstance(reply.content, str) or not any(
        too_deep(c.input, MAX_DEPTH) for c in reply.tool_calls
    ):
        return reply
    content = [
        ToolCallBlock(id=b.id, name=b.name, input={"_raw_arguments": text_form(b.input)})
        if isinstance(b, ToolCallBlock) and too_deep(b.input, MAX_DEPTH)
        else b
        for b in reply.content
    ]
    return reply.model_copy(update={"content": content})


# -- construction checks ---------------------------------------------------------------------


def _pipeline(given: ContextConfig | ContextPipeline | None) -> ContextPipeline:
    """The pipeline the agent runs: the one given, or the one a `ContextConfig` stands for."""
    if given is None or isinstance(given, ContextConfig):
        return ContextPipeline.from_config(given)
    if isinstance(given, ContextPipeline):
        return given
    raise ConfigError(
        f"context_config is a {type(given).__name__}: give a ContextConfig or a ContextPipeline "
        "(ContextPipeline.from_json_file(path) loads a template)"
    )


def _check_model(model: Any, what: str) -> None:
    if model is None:
        raise ConfigError(
            f"{what} is None: pass a chat model, for example OpenAIChatModel('gpt-4o-mini') "
            "or ScriptedModel([...])"
        )
    generate = getattr(model, "generate", None)
    if not callable(generate):
        raise ConfigError(
            f"{what} {type(model).__name__} has no generate method: pass a ChatModel, an "
            "object with 'async def generate(self, messages, *, tools=None, "
            "response_schema=None)'"
        )
    if not inspect.iscoroutinefunction(generate):
        raise ConfigError(
            f"{what}: {type(model).__name__}.generate is not async: define it with 'async def "
            "generate(...)' (the agent awaits it)"
        )


def _model_window(model: Any, config: ContextConfig) -> int | None:
    """The model's window when it reports a usable one; a ConfigError when none is known."""
    window = getattr(model, "context_window", None)
    if window is not None and (
        isinstance(window, bool) or not isinstance(window, int) or window < 1
    ):
        if config.context_window is not None:
            return None  # the config's window is used; the model's is never read
        raise ConfigError(
            f"model {type(model).__name__} reports context_window {window!r}, not a positive "
            "number of tokens: give the model its real window, or pass "
            "ContextConfig(context_window=...)"
        )
    if window is None and config.context_window is None:
        raise ConfigError(
            f"model {type(model).__name__} has no context_window and the config sets none: "
            "pass ContextConfig(context_window=...) with the model's window in tokens"
        )
    return window


_OFFLOADER_METHODS = ("offload_context", "offload_tool_result", "offload_data_block")


def _check_offloader(offloader: object) -> None:
    """Refuse an offloader that is not an `Offloader` whose three methods are `async def`."""
    if offloader is None:
        return
    if not isinstance(offloader, Offloader):
        raise not_a_capability(
            offloader,
            Offloader,
            role="offloader",
            fix="pass a LocalWorkspace, an InMemoryWorkspace, or an object with async "
            + ", ".join(_OFFLOADER_METHODS),
        )
    methods = (
        offloader.offload_context,
        offloader.offload_tool_result,
        offloader.offload_data_block,
    )
    for name, method in zip(_OFFLOADER_METHODS, methods, strict=True):
        if not inspect.iscoroutinefunction(method):
            raise ConfigError(
                f"offloader {type(offloader).__name__}.{name} is not async: define it with "
                f"'async def {name}(...)' (the agent awaits it; a sync one would leave big "
                "results in the context)"
            )


def reader_output_chars(config: ContextConfig) -> int:
    """The answer cap of the retrieval tool an `Agent` registers: about `tool_result_limit`.

    Three characters a token (dense text and code run three to four), between 1,000 and
    20,000 characters, so a read-back stays within what a tool result may hold.
    """
    return max(1_000, min(20_000, config.tool_result_limit * 3))


async def _unchanged(result: ToolResultBlock) -> ToolResultBlock:
    return result


def _reader_tools(tools: dict[str, Tool]) -> ReaderTools | None:
    """The names notices should give: the reader tools registered, by what they do."""
    readers = {name for name, tool in tools.items() if tool.is_reader}
    found = ReaderTools(
        read="Read" if "Read" in readers else None,
        grep="Grep" if "Grep" in readers else None,
        retrieve=RETRIEVAL_TOOL_NAME if RETRIEVAL_TOOL_NAME in readers else None,
    )
    return found if found.known else None


def _check_reader_names(readers: ReaderTools | None, tools: dict[str, Tool]) -> None:
    """Refuse `ContextConfig.reader_tools` naming a tool the agent does not have: every
    notice would tell the model to call it."""
    if readers is None:
        return
    for role in ("read", "grep", "retrieve"):
        name = getattr(readers, role)
        if name is not None and name not in tools:
            have = ", ".join(tools) or "none"
            raise ConfigError(
                f"ContextConfig.reader_tools {role}={name!r} is not one of the agent's tools "
                f"({have}): notices would tell the model to call a tool it does not have; "
                "register that tool, or leave reader_tools unset (the agent names the reader "
                "tools it has)"
            )


def _checked_tools(tools: Any) -> dict[str, Tool]:
    if callable(tools) or isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        kind = "function" if inspect.isroutine(tools) else type(tools).__name__
        raise ConfigError(
            f"tools is a {kind}, not a list: pass tools=[fetch_logs, ...] (plain functions or "
            "Tool objects)"
        )
    for i, tool in enumerate(tools):
        if not isinstance(tool, Tool) and not callable(tool):
            raise ConfigError(
                f"tools[{i}] is a {type(tool).__name__} ({tool!r}), not a function: pass plain "
                "functions (sync or async) or Tool objects"
            )
    try:
        return as_tools(tools)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
