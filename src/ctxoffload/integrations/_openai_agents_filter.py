"""`OffloadingInputFilter`, the OpenAI Agents SDK's `call_model_input_filter` (the door's
face is `ctxoffload.integrations.openai_agents`): which SDK run calls it, that run's session
and lease, and the model `wrap` returns, which sends a request refused as over the window
once more, summarised.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import importlib
import logging
import threading
import uuid
import weakref
from typing import Any

from .._doors.checks import arguments_checked, checked_config, checked_positive, checked_workspace
from .._doors.doors import DOORS
from .._doors.identity import conversation_session, fresh_session
from .._doors.opening import record_door
from .._doors.runs import HostRuns, Kept
from .._doors.unplugged import LeftOut
from .._overflow import is_context_overflow
from ..compression import ContextConfig, Projector
from ..exceptions import ConfigError
from ..messages import Msg
from ..model import ChatModel
from ..workspace import Workspace
from ._model_name import model_name_of
from ._openai_agents_items import INSTALL_HINT, as_history, projected_items, tool_schemas
from ._openai_agents_summary import summary_writer
from ._reading import read_back, readers_for

__all__ = ["DOOR", "INSTALL_HINT", "OffloadingInputFilter", "sdk_run"]


logger = logging.getLogger("ctxoffload")


@arguments_checked
class OffloadingInputFilter:
    """A `call_model_input_filter` for the OpenAI Agents SDK's `RunConfig` that offloads big
    tool outputs and compacts what the model is sent, into a ctxoffload workspace.

    - A `function_call_output` whose text is over the config's `tool_result_limit` is stored
      whole (`sessions/<session>/tool_result-<call id>.txt`) and sent as its head plus the
      notice naming that file.
    - Past the config's trigger the older items are sent as a summary (they go to the
      session's context.jsonl first); later calls re-apply the same summary.
    - Reasoning items and other items ctxoffload has no model for pass as they are.
    - `tools` gives the agent Read, Grep and Glob (a workspace on a local folder) and
      `retrieve_offloaded_content`, as the SDK's function tools; with `memory=True`, the
      memory tool too (`memories/` of the workspace, every change an event of the session).

    Which session a run writes (docs/guides/hosts.md): the conversation of the
    `WorkspaceSession` that made the filter (`session.input_filter()`), else `session_id`,
    else a new session for each `Runner.run` (named at INFO by the `ctxoffload` logger). A
    run holds its session's lease from its first model call until it ends: a second run of
    the same session meanwhile (through this filter or another, in this process or another)
    fails at its first model call with `SessionBusyError`, and the first goes on.

    Args:
        workspace: where offloaded content goes (a `Workspace`; a path is refused: pass
            `LocalWorkspace(path)`).
        config: when to truncate and when to summarise; its `context_window` is the window.
        summary_model: what writes summaries: an SDK `Model` or a model name (routed by
            the SDK's default provider, checked now and resolved at the first summary), or
            a ctxoffload `ChatModel`; left out, the agent's own model (its `model`, or the
            one given to `wrap`; an agent with none of its own, whose model the run's
            `RunConfig` picks, gets the extract); False for the extractive summary. An SDK
            model is asked through an output schema, its tracing disabled, outside the run.
        session_id: the conversation every run of this filter writes (a plain name is its
            session; any other id is mapped by the one rule, `session_id_for`); None for a
            new session per run.
        max_output_chars: longest answer of a reading tool.
        memory: give the agent the memory tool too (a `LocalWorkspace` only).

    Raises:
        ConfigError: `workspace` is no workspace (or a folder that is a file), `config` is
            no `ContextConfig`, `max_output_chars` is not a positive int, or
            `summary_model` is none of the above (a name the SDK cannot route: its reason).
    """

    def __init__(
        self,
        workspace: Workspace,
        *,
        config: ContextConfig | None = None,
        summary_model: ChatModel | Any | None = None,
        session_id: str | None = None,
        max_output_chars: int = 20_000,
        memory: bool = False,
    ) -> None:
        self.workspace = checked_workspace(workspace, DOOR)
        self.config = checked_config(config)
        self.max_output_chars = checked_positive(max_output_chars, "max_output_chars")
        self.memory = memory
        self._summaries = summary_writer(summary_model, self.config.context_window)
        # The agent's own model, as the filter last saw it (`wrap`'s, else the agent's).
        self._agent_model: Any = None
        self._readers = readers_for(self.workspace, self.config)  # what every notice names: `tools`
        self.session_id: str | None = None
        self._conversation: object = None  # the host's id of the named conversation
        self._runs = HostRuns(self.workspace, DOOR)
        # The named session's projector, kept across runs (`Kept`: released when a run of
        # it ends, so the filter keeps no output of a run that is over).
        self._named: Kept[str, Projector] = self._runs.keep(_session_of, Projector.release)
        self._projector: Projector | None = None
        if session_id is not None:
            self._name(conversation_session(session_id), session_id)
        self._tools: list[Any] | None = None
        # Per SDK run, by id (the SDK's run object is unhashable; held weakly: an entry goes
        # with its run): its session, projector and last call. Calls made outside any run
        # share `_outside`.
        self._by_run: dict[int, tuple[weakref.ref[Any], _Run]] = {}
        self._outside: _Run | None = None
        self._guard = threading.Lock()
        self._model_name: str | None = None  # the model `wrap` was given
        # Whether the SDK ever called the filter: a model call comes before any tool call,
        # so one of `tools` called while it never was is in a run without the filter.
        self._called = False
        self._left_out = LeftOut(DOOR)

    @property
    def last_session(self) -> str | None:
        """The session the run begun last through this object writes; None before the first
        (`HostRuns.last_session`): where a run given no session went."""
        return self._runs.last_session

    def _name(self, session: str, conversation: object) -> None:
        """Make every run of this filter write `session` (the host's `conversation`)."""
        self.session_id = session
        self._conversation = conversation
        self._projector, _ = self._named.get_or_make(session, lambda: self._new_projector(session))

    @property
    def summary_model(self) -> ChatModel | None:
        """The model that writes the summaries now (`summary_model`, else the agent's own as
        the filter last saw it, else None for the extract)."""
        return self._summaries.model(self._agent_model)

    def _new_projector(self, session: str) -> Projector:
        return Projector(
            self.workspace,
            session,
            config=self.config,
            model=self.summary_model,
            reader_tools=self._readers,
        )

    async def __call__(self, data: Any) -> Any:
        """The `ModelInputData` to send for `data` (a `CallModelData`): its input items
        projected; its instructions as they are.

        Raises:
            SessionBusyError: another live run writes this run's session.
        """
        self._called = True
        agent = str(getattr(data.agent, "name", "") or "agent")
        run = await self._run_state(agent)
        _note_enclosing(run, agent)
        given = data.model_data
        items = list(given.input)
        history, originals = as_history(given.instructions, items)
        tools = tool_schemas(data.agent)
        # The counter of the model: the one `wrap` was given, else the agent's.
        run.projector.use_model(self._model_name or model_name_of(data.agent.model))
        self._see_agent_model(data.agent.model)
        run.projector.use_summary_model(self.summary_model)
        projected = await run.projector.project(history, tools=tools)
        sent = projected_items(projected, history, originals)
        run.last = (history, originals, tools, sent)
        return dataclasses.replace(given, input=sent)

    def _see_agent_model(self, model: Any) -> None:
        """Keep the agent's model (an SDK `Model` or a name) to write its summaries: the one
        `wrap`'s model wraps, else the agent's; an agent with none keeps the last seen."""
        base = importlib.import_module("agents.models.interface").Model
        if isinstance(model, _retrying_model_class(base)):
            model = model.model
        if model:
            self._agent_model = model

    async def _run_state(self, agent: str = "agent") -> _Run:
        """The run calling now, begun at its first call: its session named, its lease taken
        and its `door` event recorded (a call outside any SDK run: this filter's session,
        recorded once, no lease).

        A run begun inside a live run of the same session (`Agent.as_tool()` runs the
        sub-agent with the parent's `RunConfig`, so through this filter) is the parent's
        sub-agent: it writes a child session of its own (`HostRuns.begin_child`), named
        after `agent` (the run's agent; a `WorkspaceSession` begins a run before any call
        names one).

        Raises:
            SessionBusyError: another live run, not one this run is nested in, writes the
                session.
        """
        owner = sdk_run()
        if owner is None:
            return await self._outside_run()
        run = self._run_of(owner)
        if run is not None:
            return run
        session = self.session_id or fresh_session(
            DOOR, "the filter has no session_id and no WorkspaceSession made it"
        )
        gone = weakref.ref(owner)
        enclosing = _enclosing_run()
        if enclosing is not None and enclosing.run.session == session:
            run_id = uuid.uuid4().hex
            child = await asyncio.to_thread(
                self._runs.begin_child,
                session,
                agent,
                run_id,
                link={"session": session, "agent": enclosing.agent},
                live=lambda: _running(gone()),
                owner=owner,
            )
            run = _Run(child, run_id, self._new_projector(child))
        else:
            run = _Run(session, uuid.uuid4().hex, self._projector or self._new_projector(session))
            await self._runs.abegin(
                session,
                run.run,
                conversation=self._conversation,
                live=lambda: _running(gone()),
                owner=owner,
            )
        key = id(owner)

        def forget(_: object, runs: dict[int, Any] = self._by_run) -> None:
            runs.pop(key, None)

        with self._guard:
            self._by_run[key] = (weakref.ref(owner, forget), run)
        return run

    def _run_of(self, owner: Any) -> _Run | None:
        """The state of SDK run `owner`, if it has begun."""
        with self._guard:
            entry = self._by_run.get(id(owner))
        return entry[1] if entry is not None and entry[0]() is owner else None

    async def _outside_run(self) -> _Run:
        """The state of calls made outside any SDK run (a test, a loop of one's own)."""
        with self._guard:
            run = self._outside
            if run is None:
                session = self.session_id or fresh_session(
                    DOOR, "the filter was called outside a Runner.run and has no session_id"
                )
                run = self._outside = _Run(
                    session, "", self._projector or self._new_projector(session)
                )
        if not run.announced:
            run.announced = True
            await record_door(self.workspace, DOOR, run.session, self._conversation)
        return run

    async def _ended(self) -> None:
        """The SDK run calling now has ended: its session is given up (`wrap`'s model is
        told so by the SDK; without it the run ends when the SDK drops it)."""
        owner = sdk_run()
        run = self._run_of(owner) if owner is not None else None
        if run is not None:
            await self._runs.aend(run.session, run.run)

    def _current(self) -> _Run | None:
        """The state of the run calling now, if it has begun."""
        owner = sdk_run()
        if owner is None:
            with self._guard:
                return self._outside
        return self._run_of(owner)

    def wrap(self, model: Any) -> Any:
        """`model` (an SDK `Model`, such as `OpenAIChatCompletionsModel`) as a `Model` that
        sends a request the provider refuses as over its window (`is_context_overflow`) once
        more, summarised at once; later requests re-apply the summary. Use it as the agent's
        model, with this filter in the run's `RunConfig`.

        The wrapped model also hands each response's `usage.input_tokens` back to the
        projection (`Projector.report_usage`: the next call is decided on the provider's
        count), its name picks the counter (`get_token_counter`), and the SDK's word that a
        run ended gives the run's session up at once."""
        try:
            base: Any = importlib.import_module("agents.models.interface").Model
        except ImportError as exc:
            raise ConfigError(INSTALL_HINT) from exc
        self._model_name = self._model_name or model_name_of(model)
        self._agent_model = self._agent_model or model
        return _retrying_model_class(base)(model, self)

    async def reported(self, sent: Any, usage: Any) -> bool:
        """Fold the input tokens a response reported back in, when the request was `sent`,
        the items this filter made for the run's latest call (a request of its own); whether
        the report was taken (see `Projector.report_usage`)."""
        run = self._current()
        last = run.last if run is not None else None
        tokens = getattr(usage, "input_tokens", None)
        if run is None or last is None or (sent is not last[3] and sent != last[3]):
            return False
        return isinstance(tokens, int) and await run.projector.report_usage(tokens)

    async def summarised(self, sent: Any) -> list[Any] | None:
        """The items to send again for `sent`, the items of the run's last call the provider
        refused as over its window, summarised at once; None when `sent` is not what this
        filter last made for the run (the request is not one of its own)."""
        run = self._current()
        last = run.last if run is not None else None
        if run is None or last is None or (sent is not last[3] and sent != last[3]):
            return None
        history, originals, tools, _ = last
        projected = await run.projector.project(history, tools=tools, force=True)
        again = projected_items(projected, history, originals)
        run.last = (history, originals, tools, again)
        return again

    @property
    def tools(self) -> list[Any]:
        """The read-back tools, as the SDK's `FunctionTool` objects (imports the SDK)."""
        if self._tools is None:
            try:
                function_tool: Any = importlib.import_module("agents").function_tool
            except ImportError as exc:
                raise ConfigError(INSTALL_HINT) from exc
            reading = read_back(
                self.workspace,
                self.max_output_chars,
                memory=self.memory,
                session_id=self.session_id,
            )
            self._tools = [self._told(function_tool(function)) for function in reading.functions]
        return self._tools

    def _told(self, tool: Any) -> Any:
        """`tool` (an SDK `FunctionTool`) saying, at its first call in a run the filter is not
        in, that the filter was left out (`LeftOut`)."""
        invoke = tool.on_invoke_tool

        async def checked(context: Any, arguments: str) -> Any:
            self._left_out.check(self._called)
            return await invoke(context, arguments)

        return dataclasses.replace(tool, on_invoke_tool=checked)


DOOR = DOORS["openai-agents"]


class _Run:
    """One SDK run as the filter knows it: its session, its id, the projector of the session,
    the last call's history, tool schemas and items (a request the provider refuses as over
    its window is sent again summarised: `wrap`), and whether its `door` event is written."""

    __slots__ = ("announced", "last", "projector", "run", "session")

    def __init__(self, session: str, run: str, projector: Projector) -> None:
        self.session = session
        self.run = run
        self.projector = projector
        self.last: tuple[list[Msg], dict[str, Any], list[dict[str, Any]], list[Any]] | None = None
        self.announced = False


class _Enclosing:
    """A run as the runs nested in it see it: its state, its agent's name, the SDK's object
    for it (held weakly) and the run it is itself nested in."""

    __slots__ = ("agent", "outer", "owner", "run")

    def __init__(self, run: _Run, agent: str, owner: Any, outer: _Enclosing | None) -> None:
        self.run = run
        self.agent = agent
        self.owner = weakref.ref(owner)
        self.outer = outer


_ENCLOSING: contextvars.ContextVar[_Enclosing | None] = contextvars.ContextVar(
    "ctxoffload_openai_agents_run", default=None
)
"""The innermost SDK run this task's calls were made in: set by the filter at each model
call of a run, so a run started later in the same task or in a task it starts (a tool call
running `Agent.as_tool()`'s sub-agent) knows the run it is nested in."""


def _enclosing_run() -> _Enclosing | None:
    """The innermost live run the run calling now was started in (None: none; a run that
    ended, however it ended, encloses nothing)."""
    current = sdk_run()
    here = _ENCLOSING.get()
    while here is not None:
        owner = here.owner()
        if owner is not None and owner is not current and _running(owner):
            return here
        here = here.outer
    return None


def _note_enclosing(run: _Run, agent: str) -> None:
    """Say, for the runs started from here on in this task and its tasks, that they are
    nested in `run` (once per run and task)."""
    owner = sdk_run()
    here = _ENCLOSING.get()
    if owner is None or (here is not None and here.owner() is owner):
        return
    _ENCLOSING.set(_Enclosing(run, agent, owner, _enclosing_run()))


@functools.cache
def _run_variable() -> contextvars.ContextVar[Any] | None:
    """Where the SDK keeps its object for the run calling now, or None (an SDK without it).

    The SDK hands an input filter no object of the run (`CallModelData.context` is the
    user's context, which runs may share), and its trace is shared by every run inside one
    `trace()` block and by an agent-as-tool's inner run, cannot be held weakly and never
    says the run ended. The record `Runner.run` and `run_streamed` keep for the run's
    tool configuration is one per run, for the run's whole life, in every task of it, and
    is marked closed when the run ends, however it ends: that is the run here. A private
    name of openai-agents 0.24 (the extra pins it below 0.25; the tests drive the real SDK).
    """
    try:
        module = importlib.import_module("agents.run_internal.agent_tool_configuration")
    except ImportError:
        return None
    variable = getattr(module, "_current_run", None)  # the SDK's, not a capability of ours
    return variable if isinstance(variable, contextvars.ContextVar) else None


def sdk_run() -> Any:
    """The SDK's object for the run calling now; None outside a run (or, said once, with an
    SDK whose runs cannot be told apart: every call is then this filter's own session's)."""
    variable = _run_variable()
    if variable is None:
        _warn_no_runs()
        return None
    return variable.get()


@functools.cache
def _warn_no_runs() -> None:
    logger.warning(
        "this version of the OpenAI Agents SDK does not show ctxoffload which run calls its "
        "input filter: each OffloadingInputFilter writes one session (its session_id, or one "
        "new session) and takes no lease; install 'ctxoffload[openai-agents]' for the version "
        "it is tested with"
    )


def _running(owner: Any) -> bool:
    """Whether the SDK run `owner` is going on (collected, or marked closed: it ended)."""
    return owner is not None and not getattr(owner, "closed", False)


@functools.cache
def _retrying_model_class(base: Any) -> Any:
    """The SDK `Model` subclass `OffloadingInputFilter.wrap` returns (made on first use: the
    SDK is imported only then)."""

    class OverflowRetryingModel(base):  # type: ignore[misc]
        """An SDK `Model` that sends a request refused as over the window once more,
        summarised by its `OffloadingInputFilter`; everything else is the wrapped model's."""

        def __init__(self, model: Any, offload: OffloadingInputFilter) -> None:
            self.model = model
            self.offload = offload

        def __getattr__(self, name: str) -> Any:
            return getattr(self.model, name)

        async def _cleanup_on_run_end(self, owner: object) -> None:
            # The SDK's word that the run ended (in its `finally`, however it ended): the
            # run's session is given up now, not when the SDK drops the run.
            try:
                await self.model._cleanup_on_run_end(owner)
            finally:
                await self.offload._ended()

        async def close(self) -> None:
            await self.model.close()

        def get_retry_advice(self, request: Any) -> Any:
            return self.model.get_retry_advice(request)

        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> Any:
            try:
                response = await self.model.get_response(
                    system_instructions, input, *args, **kwargs
                )
            except Exception as exc:
                input = await self._again(exc, input)
                response = await self.model.get_response(
                    system_instructions, input, *args, **kwargs
                )
            await self.offload.reported(input, getattr(response, "usage", None))
            return response

        async def stream_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> Any:
            started = False
            try:
                async for event in self.model.stream_response(
                    system_instructions, input, *args, **kwargs
                ):
                    started = True
                    await self._completed(input, event)
                    yield event
                return
            except Exception as exc:
                if started:  # part of an answer came: the request was not refused
                    raise
                again = await self._again(exc, input)
            async for event in self.model.stream_response(
                system_instructions, again, *args, **kwargs
            ):
                await self._completed(again, event)
                yield event

        async def _completed(self, sent: Any, event: Any) -> None:
            """A stream's `response.completed` event carries the response's usage."""
            if getattr(event, "type", None) == "response.completed":
                usage = getattr(getattr(event, "response", None), "usage", None)
                await self.offload.reported(sent, usage)

        async def _again(self, error: Exception, sent: Any) -> list[Any]:
            """The items to send again, or `error` raised: it is no overflow, or the
            request is not one the filter made."""
            if not is_context_overflow(error):
                raise error
            again = await self.offload.summarised(sent)
            if again is None:
                raise error
            return again

    return OverflowRetryingModel


def _session_of(projector: Projector) -> str:
    return projector.session_id
