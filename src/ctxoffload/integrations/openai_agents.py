"""The OpenAI Agents SDK: `OffloadingInputFilter`, a `RunConfig.call_model_input_filter` that
stores big tool outputs whole and sends each model call the projection of its input items.

The SDK sends a model the whole run on every call; its own compaction runs only with
Responses-API models, and its `ToolOutputTrimmer` cuts what it trims. The filter works on
what every model is sent (Chat-Completions models too): each `function_call_output` over the
config's `tool_result_limit` goes whole to the workspace and reaches the model as its head and
a notice naming the file; past the trigger the older items reach it as a summary (they go to
the session's context.jsonl first). The run's own items are never changed, and the same items
project to the same bytes on every call. `tools` reads offloaded content back.
`WorkspaceSession` keeps the conversation's items in the same workspace, append-only, so a
run resumes from the folder in a new process; its `input_filter()` is the filter of the same
conversation.

Example::

    from agents import Agent, RunConfig, Runner
    from ctxoffload import ContextConfig, LocalWorkspace
    from ctxoffload.integrations.openai_agents import OffloadingInputFilter

    offload = OffloadingInputFilter(
        LocalWorkspace("ws"), config=ContextConfig(context_window=128_000)
    )
    agent = Agent(name="ops", model=model, tools=[fetch_logs, *offload.tools])
    Runner.run_sync(agent, "...", run_config=RunConfig(call_model_input_filter=offload))

Importing this module does not import the SDK; `tools` does
(`pip install 'ctxoffload[openai-agents]'`).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import hashlib
import importlib
import json
import logging
import threading
import uuid
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._doors.checks import checked_config, checked_positive, checked_workspace, not_a_capability
from .._doors.doors import DOORS
from .._doors.identity import conversation_session, fresh_session
from .._doors.runs import HostRuns, record_door
from .._overflow import is_context_overflow
from ..compression import Compressor, ContextConfig, Projector
from ..exceptions import ConfigError
from ..formats.responses import from_responses, to_responses
from ..messages import Msg, ToolResultBlock
from ..model import ChatModel
from ..tokens import get_token_counter
from ..workspace import HistoryLog, Workspace
from ._model_name import model_name_of
from ._reading import reading_functions

__all__ = ["OffloadingInputFilter", "WorkspaceSession"]

logger = logging.getLogger("ctxoffload")

INSTALL_HINT = "The OpenAI Agents SDK is not installed: pip install 'ctxoffload[openai-agents]'"


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
        summary_model: the ctxoffload `ChatModel` that writes summaries; None for an
            extractive summary.
        session_id: the conversation every run of this filter writes (a plain name is its
            session; any other id is mapped by the one rule, `session_id_for`); None for a
            new session per run.
        max_output_chars: longest answer of a reading tool.
        memory: give the agent the memory tool too (a `LocalWorkspace` only).

    Raises:
        ConfigError: `workspace` is no workspace (or a folder that is a file), `config` is
            no `ContextConfig`, or `max_output_chars` is not a positive int.
    """

    def __init__(
        self,
        workspace: Workspace,
        *,
        config: ContextConfig | None = None,
        summary_model: ChatModel | None = None,
        session_id: str | None = None,
        max_output_chars: int = 20_000,
        memory: bool = False,
    ) -> None:
        self.workspace = checked_workspace(workspace, _DOOR)
        self.config = checked_config(config)
        self.max_output_chars = checked_positive(max_output_chars, "max_output_chars")
        self.memory = memory
        self.summary_model = summary_model
        self.session_id: str | None = None
        self._conversation: object = None  # the host's id of the named conversation
        self._projector: Projector | None = None  # the named session's, kept across runs
        if session_id is not None:
            self._name(conversation_session(session_id), session_id)
        self._tools: list[Any] | None = None
        self._runs = HostRuns(self.workspace, _DOOR)
        # Per SDK run, by id (the SDK's run object is unhashable; held weakly: an entry goes
        # with its run): its session, projector and last call. Calls made outside any run
        # share `_outside`.
        self._by_run: dict[int, tuple[weakref.ref[Any], _Run]] = {}
        self._outside: _Run | None = None
        self._guard = threading.Lock()
        self._model_name: str | None = None  # the model `wrap` was given

    def _name(self, session: str, conversation: object) -> None:
        """Make every run of this filter write `session` (the host's `conversation`)."""
        self.session_id = session
        self._conversation = conversation
        self._projector = self._new_projector(session)

    def _new_projector(self, session: str) -> Projector:
        return Projector(self.workspace, session, config=self.config, model=self.summary_model)

    async def __call__(self, data: Any) -> Any:
        """The `ModelInputData` to send for `data` (a `CallModelData`): its input items
        projected; its instructions as they are.

        Raises:
            SessionBusyError: another live run writes this run's session.
        """
        run = await self._run_state()
        given = data.model_data
        items = list(given.input)
        history, originals = _history(given.instructions, items)
        tools = _schemas(data.agent)
        # The counter of the model: the one `wrap` was given, else the agent's.
        run.projector.use_model(self._model_name or model_name_of(data.agent.model))
        projected = await run.projector.project(history, tools=tools)
        sent = _back(projected, history, originals)
        run.last = (history, originals, tools, sent)
        return dataclasses.replace(given, input=sent)

    async def _run_state(self) -> _Run:
        """The run calling now, begun at its first call: its session named, its lease taken
        and its `door` event recorded (a call outside any SDK run: this filter's session,
        recorded once, no lease).

        Raises:
            SessionBusyError: another live run writes the session.
        """
        owner = _sdk_run()
        if owner is None:
            return await self._outside_run()
        run = self._run_of(owner)
        if run is not None:
            return run
        session = self.session_id or fresh_session(
            _DOOR, "the filter has no session_id and no WorkspaceSession made it"
        )
        run = _Run(session, uuid.uuid4().hex, self._projector or self._new_projector(session))
        gone = weakref.ref(owner)
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
                    _DOOR, "the filter was called outside a Runner.run and has no session_id"
                )
                run = self._outside = _Run(
                    session, "", self._projector or self._new_projector(session)
                )
        if not run.announced:
            run.announced = True
            await record_door(self.workspace, _DOOR, run.session, self._conversation)
        return run

    async def _ended(self) -> None:
        """The SDK run calling now has ended: its session is given up (`wrap`'s model is
        told so by the SDK; without it the run ends when the SDK drops it)."""
        owner = _sdk_run()
        run = self._run_of(owner) if owner is not None else None
        if run is not None:
            await self._runs.aend(run.session, run.run)

    def _current(self) -> _Run | None:
        """The state of the run calling now, if it has begun."""
        owner = _sdk_run()
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
        again = _back(projected, history, originals)
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
            functions = reading_functions(
                self.workspace,
                self.max_output_chars,
                memory=self.memory,
                session_id=self.session_id,
            )
            self._tools = [function_tool(function) for function in functions]
        return self._tools


_DOOR = DOORS["openai-agents"]


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


def _sdk_run() -> Any:
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


class WorkspaceSession:
    """The SDK's `Session` (its protocol: `get_items`, `add_items`, `pop_item`,
    `clear_session`, and `run_compaction`) on a ctxoffload workspace: the conversation's items
    are an append-only log, the session's history.jsonl (`HistoryLog`), beside what the input
    filter offloads for the same session.

    So one folder (or bucket, or database) holds a conversation whole: its items, the tool
    outputs stored whole and the summaries' context.jsonl; a run resumed in a new process
    (`Runner.run(agent, ..., session=WorkspaceSession(ws, "nightly"))`) starts from them.

    - `add_items` appends one line holding the items given, whole or absent whatever kills
      the process, and rewrites nothing: it costs what it adds, at turn 200 as at turn 10.
    - A `function_call_output` over the config's `tool_result_limit` is stored whole once, as
      the session's `tool_result-<call id>.txt` (the file the input filter of the session
      writes for it: the same bytes are one file), and the item keeps the head and the notice
      naming that file, what the model is sent; only then is the item written. With
      `keep_whole_outputs=True` items are kept exactly as the SDK gave them.
    - `pop_item`, `clear_session` and `run_compaction` append a record too (the item removed;
      a new start holding what stays): history already written is never rewritten.
    - `get_items` reads what the log gained since this object last read it (a new object
      reads it once), so `get_items(limit)` costs the items it returns.

    `run_compaction` keeps the items themselves small: past the config's trigger (or at
    once, with `{"force": True}`) the older items go to the session's context.jsonl and one
    summary item stands for them (the five-field summary with the artifact index, naming the
    lines that hold them). The SDK calls it after each turn where a Responses-API model
    answered; with any other model call it yourself (`await session.run_compaction()`).

    `input_filter()` gives the `OffloadingInputFilter` of the same conversation: one
    ctxoffload session, without naming it twice.

    Args:
        workspace: where the items are kept: a `Workspace` that is a `HistoryLog` (every
            workspace of ctxoffload is).
        session_id: the conversation (one that is no plain name gets a safe session of its
            own, `session_id_for`).
        config: when `run_compaction` summarises (its trigger and window), and the
            `tool_result_limit` over which an output is kept as head and notice. Without a
            `context_window` in it, `run_compaction` summarises only when forced (as if the
            items filled the window): no trigger can be passed.
        summary_model: the ctxoffload `ChatModel` that writes summaries; None for an
            extractive summary.
        keep_whole_outputs: keep each item as the SDK gave it, a big output whole in the
            items too (and again in its file, where the input filter stored it).

    Raises:
        ConfigError: `workspace` is not a `HistoryLog`.
    """

    session_settings: Any = None

    def __init__(
        self,
        workspace: Workspace,
        session_id: str,
        *,
        config: ContextConfig | None = None,
        summary_model: ChatModel | None = None,
        keep_whole_outputs: bool = False,
    ) -> None:
        workspace = checked_workspace(workspace, _DOOR)
        if not isinstance(workspace, HistoryLog):
            raise not_a_capability(
                workspace,
                HistoryLog,
                role="workspace",
                fix="pass a ctxoffload workspace (LocalWorkspace, InMemoryWorkspace, "
                "ObjectStoreWorkspace, SqlWorkspace), or add those methods to yours",
            )
        self.workspace = workspace
        self.session_id = conversation_session(session_id)
        self.config = checked_config(config)
        self.keep_whole_outputs = keep_whole_outputs
        self._conversation = session_id
        self._summary_model = summary_model
        self._log = workspace  # the same object, as the capability the items are kept with
        self._compressor = Compressor(
            self.config,
            model=summary_model,
            offloader=workspace,
            session_id=self.session_id,
            counter=get_token_counter(None),
        )
        # How a big output is cut: as this session's compressor cuts it, or as the input
        # filter bound to it (`input_filter`) cuts what it sends, so both keep the same text
        # (and the filter sends that cut without making it again).
        self._cut_output: Callable[[ToolResultBlock, Msg], Awaitable[ToolResultBlock]] = (
            self._own_cut
        )
        self._filter: OffloadingInputFilter | None = None  # the latest `input_filter()`
        self._announced = False  # whether this object recorded its `door` event
        self._items = _LiveItems()
        self._lock = asyncio.Lock()

    def input_filter(
        self,
        *,
        config: ContextConfig | None = None,
        summary_model: ChatModel | None = None,
        **options: Any,
    ) -> OffloadingInputFilter:
        """The `OffloadingInputFilter` of this conversation, for the run's `RunConfig`: on this
        session's workspace and ctxoffload session, so the items, the outputs stored whole
        and the summaries are one session's, and a big output is one file. The session then
        keeps each big output as this filter sends it (the same head, notice and file).

        Args:
            config: the filter's config; default the session's.
            summary_model: the model that writes the filter's summaries; default the
                session's.
            **options: the filter's other arguments (`max_output_chars`, `memory`).

        Raises:
            ConfigError: `session_id` among `options`: the filter's session is this one.
        """
        if "session_id" in options:
            raise ConfigError(
                f"input_filter(session_id={options['session_id']!r}): the filter of a "
                f"WorkspaceSession works on its session, {self.session_id!r}; leave it out"
            )
        offload = OffloadingInputFilter(
            self.workspace,
            config=config or self.config,
            summary_model=summary_model if summary_model is not None else self._summary_model,
            **options,
        )
        offload._name(self.session_id, self._conversation)

        async def cut(block: ToolResultBlock, message: Msg) -> ToolResultBlock:
            run = await offload._run_state()
            return await run.projector.offload_tool_result(block, message=message)

        self._cut_output = cut
        self._filter = offload
        return offload

    async def _begin(self) -> None:
        """In an SDK run, with a filter of this session: the run begins writing the session
        here if it has not yet (the SDK reads the items before its first model call), so a
        second live run is refused before it writes anything.

        Raises:
            SessionBusyError: another live run writes the session.
        """
        if self._filter is not None and _sdk_run() is not None:
            await self._filter._run_state()

    async def _announce(self) -> None:
        """Before this object's first event: the `door` event that opens the record (with a
        filter of this session, that filter's run records it)."""
        if self._filter is not None:
            await self._filter._run_state()
        elif not self._announced:
            self._announced = True
            await record_door(self.workspace, _DOOR, self.session_id, self._conversation)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The conversation's items, oldest first; with `limit` (or the `limit` of
        `session_settings`, when `limit` is None), only the latest `limit` (none for 0; all
        for a negative one, as the SDK's `SQLiteSession` gives)."""
        if limit is None:
            limit = getattr(self.session_settings, "limit", None)
        await self._begin()
        async with self._lock:
            await self._read_new()
            live = self._items.live
            if limit is not None and limit >= 0:  # a negative limit is none, as in SQLite
                live = live[max(len(live) - limit, 0) :] if limit else []
            return [json.loads(text) for _, text in live]

    async def add_items(self, items: list[Any]) -> None:
        """Append `items` (dicts or the SDK's pydantic items) to the conversation: one line
        of history.jsonl, each big output first stored whole and kept as head and notice
        (unless `keep_whole_outputs`)."""
        if not items:
            return
        await self._begin()
        async with self._lock:
            given = [_as_item(item) for item in items]
            kept = given if self.keep_whole_outputs else await self._lean(given)
            await self._append({_ADD: kept})

    async def pop_item(self) -> Any | None:
        """Remove and return the latest item (a record naming it is appended); None when
        there is none."""
        await self._begin()
        async with self._lock:
            await self._read_new()
            if not self._items.live:
                return None
            address, text = self._items.live[-1]
            await self._append({_POP: list(address)})
            return json.loads(text)

    async def clear_session(self) -> None:
        """Forget the conversation's items: a new, empty start is appended (what was
        offloaded for it stays, and so do the earlier lines of its history.jsonl)."""
        await self._begin()
        async with self._lock:
            await self._read_new()
            if self._items.live:
                await self._append({_BASE: [], _REPLACES: self._items.addresses()})

    async def run_compaction(self, args: Any = None) -> None:
        """Summarise the older items once they pass the config's trigger, or at once with
        `{"force": True}` (the SDK's `OpenAIResponsesCompactionArgs`; its other fields do not
        apply: the summary is made here, with any model). The items summarised are appended
        to the session's context.jsonl before a new start is appended to history.jsonl,
        holding the summary and the items kept; the newest turn is kept as it is."""
        force = bool(args.get("force")) if isinstance(args, dict) else False
        await self._begin()
        async with self._lock:
            await self._read_new()
            items = [json.loads(text) for _, text in self._items.live]
            if not items:
                return
            history, originals = _history(None, items)
            config: ContextConfig | None = None
            try:
                self._compressor.window()
            except ConfigError:
                # No window known (no `config=` with a context_window): no trigger to pass.
                # The SDK calls this after every turn of a Responses model: the run goes on.
                if not force:
                    return
                # Forced: as if the items filled the window, as `Agent.compact` does.
                tokens = max(1, self._compressor.count(history))
                config = self.config.model_copy(update={"context_window": tokens})
            await self._announce()
            result = await self._compressor.maybe_compress(history, force=force, config=config)
            if not result.compressed:
                return
            kept = [_as_item(item) for item in _back(result.messages, history, originals)]
            await self._append({_BASE: kept, _REPLACES: self._items.addresses()})

    async def _own_cut(self, block: ToolResultBlock, message: Msg) -> ToolResultBlock:
        """A big output cut by this session's own compressor (no filter bound)."""
        await self._announce()
        return await self._compressor.process_tool_result(block)

    async def _read_new(self) -> None:
        """Fold in the records history.jsonl gained since this object last read it."""
        items = self._items
        for line, record in await self._log.read_history(
            self.session_id, after=items.next_line - 1
        ):
            items.fold(line, record)

    async def _append(self, record: dict[str, Any]) -> None:
        """Append `record`; fold it in at once when it follows what this object has read
        (another writer's lines before it are read, with it, at the next read)."""
        line = await self._log.append_history(self.session_id, record)
        if line == self._items.next_line:
            self._items.fold(line, record)

    async def _lean(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`items` with each output over the limit stored whole and cut to what the model
        is sent (an output that could not be stored stays whole)."""
        names = {**self._items.names, **_call_names(items)}
        if any(_output_call(item) not in (None, *names) for item in items):
            await self._read_new()  # its call may be in another writer's latest line
            names = {**self._items.names, **_call_names(items)}
        out: list[dict[str, Any]] = []
        for item in items:
            if _output_call(item) is None:
                out.append(item)
                continue
            (msg,) = from_responses([item])
            (block,) = msg.tool_results
            block = block.model_copy(update={"name": names.get(item["call_id"], block.name)})
            # The output's message as the filter makes it (`_history`), named by the same key.
            msg = msg.model_copy(update={"content": [block], "id": _item_key(item)})
            cut = await self._cut_output(block, msg)
            out.extend(
                [item]
                if cut.output == block.output
                else _cut(item, Msg(role="tool", content=[cut]))
            )
        return out


_ADD, _POP, _BASE, _REPLACES = "add", "pop", "base", "replaces"
"""The records of a `WorkspaceSession`'s history.jsonl, one a line: `{"add": [item, ...]}`
(items appended), `{"pop": [line, index]}` (the item that add record held at that index is
removed), `{"base": [item, ...], "replaces": [[line, index], ...]}` (a new start: those items
first, in place of the ones named; `clear_session` with none, `run_compaction` with the
summary and the items kept). An item is known by where it was written, so every reader folds
the same records to the same items."""


class _LiveItems:
    """The items a session's history.jsonl holds now, folded from its records in order:
    each item's address `(line, index)` and JSON; the next line to read; the tool name of
    each call id seen (an output's notice names its tool)."""

    def __init__(self) -> None:
        self.live: list[tuple[tuple[int, int], str]] = []
        self.next_line = 1
        self.names: dict[str, str] = {}

    def addresses(self) -> list[list[int]]:
        """The addresses of the live items, as a record names them."""
        return [list(address) for address, _ in self.live]

    def fold(self, line: int, record: Any) -> None:
        """Apply the record on `line` (one that is not a record of this log is skipped)."""
        self.next_line = max(self.next_line, line + 1)
        if not isinstance(record, dict):
            return
        added, popped, replaced = record.get(_ADD), record.get(_POP), record.get(_REPLACES)
        if isinstance(added, list):
            self.live.extend(self._entries(line, added))
        elif _BASE in record and isinstance(record[_BASE], list) and isinstance(replaced, list):
            gone = {_address(a) for a in replaced}
            rest = [entry for entry in self.live if entry[0] not in gone]
            self.live = [*self._entries(line, record[_BASE]), *rest]
        elif _address(popped) is not None:
            at = _address(popped)
            for k in range(len(self.live) - 1, -1, -1):
                if self.live[k][0] == at:
                    del self.live[k]
                    break

    def _entries(self, line: int, items: list[Any]) -> list[tuple[tuple[int, int], str]]:
        self.names.update(_call_names(items))
        return [
            ((line, index), json.dumps(item, ensure_ascii=False))
            for index, item in enumerate(items)
            if isinstance(item, dict)  # else not an item: a hand edit
        ]


def _address(value: Any) -> tuple[int, int] | None:
    """`[line, index]` as a record writes an item's address, or None."""
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in value)
    ):
        return (value[0], value[1])
    return None


def _call_names(items: Sequence[Any]) -> dict[str, str]:
    """The tool name of each `function_call` among `items`, by call id."""
    return {
        item["call_id"]: str(item.get("name", ""))
        for item in items
        if isinstance(item, dict)
        and item.get("type") == "function_call"
        and isinstance(item.get("call_id"), str)
    }


def _output_call(item: dict[str, Any]) -> str | None:
    """The call id of a `function_call_output` item; None for any other item."""
    call_id = item.get("call_id")
    return (
        call_id if item.get("type") == "function_call_output" and isinstance(call_id, str) else None
    )


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


def _as_item(item: Any) -> dict[str, Any]:
    """An input item as the JSON dict the SDK itself stores."""
    if isinstance(item, dict):
        return item
    return dict(item.model_dump(exclude_unset=True, mode="json"))


def _history(instructions: Any, items: Sequence[Any]) -> tuple[list[Msg], dict[str, Any]]:
    """The instructions and the items as `Msg`s, each item's `Msg` named by a key stable
    across calls, and the item behind each key."""
    history: list[Msg] = []
    if isinstance(instructions, str) and instructions:
        history.append(Msg(role="system", content=instructions, id="instructions"))
    originals: dict[str, Any] = {}
    for item, msg in zip(items, from_responses(items), strict=True):
        key = base = _item_key(item)
        count = 1
        while key in originals:  # the same item twice (two "ok"s): each its own name
            count += 1
            key = f"{base}-{count}"
        originals[key] = item
        history.append(msg.model_copy(update={"id": key}))
    return history, originals


def _item_key(item: Any) -> str:
    """An item's name across calls: a call's or an output's call id, else a hash of it."""
    fields = _as_item(item)
    kind, call_id = fields.get("type"), fields.get("call_id")
    if kind in ("function_call", "function_call_output") and isinstance(call_id, str):
        return f"{kind}-{call_id}"
    text = json.dumps(fields, sort_keys=True, default=str, ensure_ascii=False)
    return "sha256-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _schemas(agent: Any) -> list[dict[str, Any]]:
    """The agent's function tools as OpenAI schemas (they count against the window)."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": getattr(tool, "description", ""),
                "parameters": tool.params_json_schema,
            },
        }
        for tool in getattr(agent, "tools", ())
        if hasattr(tool, "params_json_schema")
    ]


def _back(projected: Sequence[Msg], history: Sequence[Msg], originals: dict[str, Any]) -> list[Any]:
    """The input items for a projection: the original item wherever the projection kept it,
    an output with the projection's text where it cut one, new items for a summary; the
    instructions, which the SDK holds apart, left out."""
    given = {msg.id: msg for msg in history}
    out: list[Any] = []
    for msg in projected:
        original = originals.get(msg.id)
        if msg.id == "instructions" and msg.role == "system":
            continue
        if original is None:
            out.extend(to_responses([msg]))
        elif msg is given[msg.id] or msg.content == given[msg.id].content:
            out.append(original)
        else:
            out.extend(_cut(original, msg))
    return out


def _cut(original: Any, msg: Msg) -> list[Any]:
    """`original` with the output `msg` holds for it where both are one tool output (the
    rest of the item kept), else the items for `msg`."""
    fields = _as_item(original)
    blocks = msg.content if isinstance(msg.content, list) else []
    if fields.get("type") == "function_call_output" and len(blocks) == 1:
        (block,) = blocks
        if isinstance(block, ToolResultBlock):
            return [{**fields, "output": to_responses([msg])[0]["output"]}]
    return to_responses([msg])
