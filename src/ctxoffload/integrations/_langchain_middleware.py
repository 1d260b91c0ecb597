"""`ContextOffloadMiddleware`: ctxoffload under a LangChain v1 `create_agent`.

LangChain keeps the history in LangGraph state and sends it whole on every model call. This
middleware works at the two places LangChain hands over: the tool hook replaces a big
`ToolMessage` by its head and a notice before it enters state (the whole text goes to the
workspace, never into a checkpoint), and the model hook sends `request.messages` through a
`Projector` (one per thread), which re-applies the same truncations and summary on every call.
Once a call's projection differs from state (a summary now stands for older messages, which
the projector stored first), the model hook's answer carries a state update that keeps what
was sent (`full_state=False`, the default): every checkpoint is then as lean as the request.
A resumed thread projects the same way, from its state and the workspace's record.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import importlib
import inspect
import threading
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Annotated, Any

from typing_extensions import NotRequired

from .._doors.answers import answers_run
from .._doors.checks import arguments_checked, checked_config, checked_positive, checked_workspace
from .._doors.doors import DOORS
from .._doors.identity import conversation_session, fresh_session, given_session
from .._doors.recent import weak_entry
from .._doors.runs import HostRuns, Kept
from .._loop import run_private
from .._overflow import is_context_overflow
from .._tokens.counters import fits_by_size
from ..compression import ContextConfig, Projector
from ..exceptions import ConfigError
from ..messages import Msg, ToolResultBlock
from ..model import ChatModel
from ..workspace import Workspace, writing_as
from ._langchain_messages import (
    INSTALL_HINT,
    from_langchain,
    message_key,
    to_langchain,
    with_content_of,
)
from ._langchain_summary import declared_window, summary_writer
from ._model_name import model_name_of
from ._reading import read_back

__all__ = ["ContextOffloadMiddleware"]

try:
    _types: Any = importlib.import_module("langchain.agents.middleware.types")
    _AgentMiddleware: Any = _types.AgentMiddleware
    _internal = importlib.import_module("langchain.agents.middleware.internal_call_transformer")
    _ToolMessage: Any = importlib.import_module("langchain_core.messages").ToolMessage
    _StructuredTool: Any = importlib.import_module("langchain_core.tools").StructuredTool
    _to_openai_tool: Any = importlib.import_module(
        "langchain_core.utils.function_calling"
    ).convert_to_openai_tool
    _RemoveMessage: Any = importlib.import_module("langchain_core.messages").RemoveMessage
    _REMOVE_ALL: str = importlib.import_module("langgraph.graph.message").REMOVE_ALL_MESSAGES
    _Command: Any = importlib.import_module("langgraph.types").Command
except ImportError as exc:  # pragma: no cover - exercised where LangChain is absent
    raise ConfigError(INSTALL_HINT) from exc


class _OffloadState(_types.AgentState):  # type: ignore[misc]
    """The agent's state with the run ctxoffload knows it by: its session and a run id,
    set by `before_agent` (private: never in the graph's input or output)."""

    # A TypedDict to LangGraph; mypy sees `AgentState` as Any, so not as one.
    ctxoffload_run: NotRequired[Annotated[dict[str, str], _types.PrivateStateAttr]]  # type: ignore[valid-type]


@arguments_checked
class ContextOffloadMiddleware(_AgentMiddleware):  # type: ignore[misc]
    """A LangChain `AgentMiddleware` that offloads big tool results and compacts what the
    model is sent, into a ctxoffload workspace.

    - A `ToolMessage` whose text is over the config's `tool_result_limit` is stored whole
      (`sessions/<thread>/tool_result-<call id>.txt`) and enters state as its head plus the
      notice naming that file; its id, status and artifact are kept. A `Command`, or a small
      result, passes untouched.
    - Every model call is sent the projection of `request.messages`: offloaded results as
      head + notice, and past the config's trigger the older messages as a summary (they go
      to the session's context.jsonl first). The same history projects to the same bytes on
      every call. A call the provider refuses as over its window (`is_context_overflow`) is
      summarised at once and sent again, once.
    - State keeps what the model was sent: once a summary stands for older messages (stored
      first), the call's answer replaces them in LangGraph's `messages` with the summary, so
      every checkpoint is as lean as the request. `full_state=True` keeps every message in
      state instead (only big tool results are cut, at the tool hook).
    - `tools` gives the agent Read, Grep and Glob (a workspace on a local folder) and
      `retrieve_offloaded_content`, to read back what was offloaded; with `memory=True`, the
      memory tool too (`memories/` of the workspace, every change an event of the thread's
      session).

    The session is the run's `thread_id` (`config={"configurable": {"thread_id": ...}}`),
    mapped by the one rule every door follows (docs/guides/hosts.md); a run without one
    writes `session_id`, else a new session of its own (LangGraph keeps no state between
    such runs). A run holds its session's lease from `before_agent` to `after_agent`: a
    second run of the same thread meanwhile (another `invoke`, another process) fails at its
    start with `SessionBusyError`, and the first goes on.

    Args:
        workspace: where offloaded content goes (`LocalWorkspace`, `ObjectStoreWorkspace`,
            `InMemoryWorkspace`, ...).
        config: when to truncate and when to summarise. Its `context_window` is the
            window; without one, the window the agent's model declares in its profile
            (`model.profile["max_input_tokens"]`).
        summary_model: what writes summaries: a LangChain chat model, or an
            `init_chat_model` string ("openai:gpt-4o-mini", resolved when the middleware is
            built), or a ctxoffload `ChatModel`; left out, the model of each request (the
            agent's own); False for the extractive summary. A LangChain model is asked
            through its structured output where it has one, tagged `nostream` with
            `lc_source: summarization`, so a summary is never streamed to the user.
        session_id: the session (a plain name) of runs that have no thread_id; None for a
            new session per such run.
        max_output_chars: longest answer of a reading tool.
        memory: give the agent the memory tool too (a `LocalWorkspace` only).
        full_state: keep every message in LangGraph state, as it arrived (big tool results
            still enter it cut); by default state keeps what the model is sent.

    Raises:
        ConfigError: `workspace` is no workspace (a path: pass `LocalWorkspace(path)`; a
            workdir that is a file), `config` is no `ContextConfig`, `max_output_chars`
            is not a positive int, or `summary_model` is none of the above (a name
            `init_chat_model` cannot resolve: LangChain's reason is given).
        InvalidSessionId: `session_id` is not a plain name.

    Example::

        offload = ContextOffloadMiddleware(
            LocalWorkspace("ws"), config=ContextConfig(context_window=128_000)
        )
        agent = create_agent(model, tools=[fetch_logs, *offload.tools], middleware=[offload])
    """

    transformers = (_internal.InternalCallTransformer,)
    state_schema = _OffloadState

    def __init__(
        self,
        workspace: Workspace,
        *,
        config: ContextConfig | None = None,
        summary_model: ChatModel | Any | None = None,
        session_id: str | None = None,
        max_output_chars: int = 20_000,
        memory: bool = False,
        full_state: bool = False,
    ) -> None:
        super().__init__()
        self.workspace = checked_workspace(workspace, _DOOR)
        self.config = checked_config(config)
        self.session_id = given_session(session_id)
        checked_positive(max_output_chars, "max_output_chars")
        self.full_state = full_state
        reading = read_back(
            workspace,
            max_output_chars,
            config=self.config,
            memory=memory,
            session_id=self.session_id,
        )
        self.tools = [_as_tool(function) for function in reading.functions]
        self._readers = reading.readers  # what every notice names: these tools
        # A LangGraph run may stop without `after_agent` (it raised, or stopped at an
        # interrupt) and go on from its checkpoint later, in another process: its lease is
        # given up once it is idle and taken again at its next call (`HostRuns.calling`).
        self._runs = HostRuns(workspace, _DOOR, release_idle=_IDLE_RELEASE)
        self._summaries = summary_writer(summary_model, self.config.context_window)
        # Per session: its projector, released when a run of it ends and forgotten past
        # `SESSIONS_KEPT` (`Kept`: a thread forgotten, then back, projects from its record
        # and its checkpoint), and per message key the LangChain message last seen and its
        # `Msg` (an unchanged message is converted once and the projector sees the same
        # object).
        self._projectors: Kept[str, Projector] = self._runs.keep(_session_of, Projector.release)
        self._converted: dict[str, dict[str, tuple[Any, Msg]]] = {}
        # Per session: the window its projector was made with (the config's, else the one
        # its agent's model declares).
        self._windows: dict[str, int | None] = {}
        # Per tool object (held, so its id stays its own): its OpenAI schema.
        self._tool_schemas: dict[int, tuple[weakref.ref[Any], dict[str, Any]]] = {}
        self._guard = threading.Lock()

    # -- the run --------------------------------------------------------------------------

    @property
    def last_session(self) -> str | None:
        """The session the run begun last through this object writes; None before the first
        (`HostRuns.last_session`): where a run given no thread_id went."""
        return self._runs.last_session

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """A run begins: name its session and take the session's lease. A run begun by a
        tool call of a live run of the same thread (a deepagents sub-agent given this
        middleware, run by its `task` tool) is that run's sub-agent: it writes a child
        session of its own (`HostRuns.begin_child`).

        Raises:
            SessionBusyError: another live run writes the thread's session.
        """
        thread = _thread_id(runtime)
        session, run = self._session_of(thread), uuid.uuid4().hex
        calling = _IN_TOOL.get()
        if calling is not None and (calling[0] == session or calling[0].startswith(f"{session}--")):
            parent, _, name = calling
            link = {"session": parent, "agent": name}
            child = self._runs.begin_child(parent, name, run, link=link)
            return {_RUN: {"session": child, "run": run}}
        self._runs.begin(session, run, conversation=thread)
        return {_RUN: {"session": session, "run": run}}

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """`before_agent` for an async run."""
        return await asyncio.to_thread(self.before_agent, state, runtime)

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """The run has ended: give its session up."""
        run = _run_of(state)
        if run is not None:
            self._runs.end(run["session"], run["run"])
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """`after_agent` for an async run."""
        run = _run_of(state)
        if run is not None:
            await self._runs.aend(run["session"], run["run"])
        return None

    def _session_of(self, thread: str | None) -> str:
        """The session of a run: its thread's, else `session_id`, else a new one."""
        if thread:
            return conversation_session(thread)
        return self.session_id or fresh_session(
            _DOOR, "the run has no thread_id and the middleware no session_id"
        )

    def _run_session(self, request: Any) -> tuple[str, str, str | None]:
        """The session and run id of a hook's request, and its thread.

        The session is the thread's (else `session_id`): the run the state names (from
        `before_agent`, in the checkpoint) is this run when it writes that session or a
        child of it (a sub-agent's); a state copied from another thread (LangGraph's
        `threads.copy`, resumed there) names the other thread's session, which this run must
        not write, so its run id goes on in this thread's session. A hook called outside
        any run (as a test or another graph may) has no run id and takes no lease."""
        thread = _thread_id(request.runtime)
        run = _run_of(getattr(request, "state", None))
        if run is not None and not thread:  # a run without a thread: the session it began
            return run["session"], run["run"], thread
        if not thread and self.session_id is None:
            self.session_id = fresh_session(_DOOR, "a hook was called with no run and no thread_id")
        session = self._session_of(thread)
        if run is None:
            return session, "", thread
        if run["session"] == session or run["session"].startswith(f"{session}--"):
            return run["session"], run["run"], thread
        return session, run["run"], thread

    # -- the tool hook ----------------------------------------------------------------------

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Run the tool (what it records, a memory change, in the thread's session); a big
        text result enters state as its head and a notice."""
        session, run, thread = self._run_session(request)
        projector = self._projector(session)
        name = _sub_agent_name(request.tool_call)
        with (
            self._runs.calling(session, run, conversation=thread),
            writing_as(_AGENT, projector.session_id),
            _calling_tool(session, run, name),
        ):
            result = handler(request)
        block = self._oversized(result, request, projector)
        if block is None:
            return result
        return _with_output(result, block, projector.offload_tool_result_sync(block))

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """`wrap_tool_call` for an async run."""
        session, run, thread = self._run_session(request)
        projector = self._projector(session)
        name = _sub_agent_name(request.tool_call)
        with (
            self._runs.calling(session, run, conversation=thread),
            writing_as(_AGENT, projector.session_id),
            _calling_tool(session, run, name),
        ):
            result = await handler(request)
        block = self._oversized(result, request, projector)
        if block is None:
            return result
        return _with_output(result, block, await projector.offload_tool_result(block))

    def _oversized(self, result: Any, request: Any, projector: Projector) -> ToolResultBlock | None:
        """The result as a ctxoffload block when it is text that may be over the limit (and
        not the run's answer: a `return_direct` tool's output stays whole, `answers_run`)."""
        if not isinstance(result, _ToolMessage):
            return None  # a Command updates state itself
        if answers_run(getattr(request, "tool", None)):
            return None
        text = _text_of(result.content)
        if text is None or fits_by_size(projector.counter, text, self.config.tool_result_limit):
            return None
        return ToolResultBlock(
            id=result.tool_call_id,
            name=result.name or request.tool_call.get("name", ""),
            output=text,
            is_error=result.status == "error",
        )

    # -- the model hook ---------------------------------------------------------------------

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Send the model the projection of the history; state keeps what was sent."""
        session, run, thread = self._run_session(request)
        with self._runs.calling(session, run, conversation=thread):
            history, originals = self._history(session, request)
            projector, tools = self._projector(session, request.model), self._schemas(request)
            projected = projector.project_sync(history, tools=tools)
            sent = _back(projected, history, originals, request.system_message)
            try:
                response = handler(request.override(messages=sent))
            except Exception as exc:
                if not is_context_overflow(exc):
                    raise
                # The provider counts more than the counter did: summarise now, send once more.
                projected = projector.project_sync(history, tools=tools, force=True)
                sent = _back(projected, history, originals, request.system_message)
                response = handler(request.override(messages=sent))
            projector.report_usage_sync(_reported_input(response))
            return self._keeping(request, sent, response, projector)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """`wrap_model_call` for an async run."""
        session, run, thread = self._run_session(request)
        with self._runs.calling(session, run, conversation=thread):
            history, originals = self._history(session, request)
            projector, tools = self._projector(session, request.model), self._schemas(request)
            projected = await projector.project(history, tools=tools)
            sent = _back(projected, history, originals, request.system_message)
            try:
                response = await handler(request.override(messages=sent))
            except Exception as exc:
                if not is_context_overflow(exc):
                    raise
                projected = await projector.project(history, tools=tools, force=True)
                sent = _back(projected, history, originals, request.system_message)
                response = await handler(request.override(messages=sent))
            await projector.report_usage(_reported_input(response))
            return self._keeping(request, sent, response, projector)

    def _keeping(self, request: Any, sent: list[Any], response: Any, projector: Projector) -> Any:
        """`response`, with a state update that keeps `sent` in place of state's messages
        where they differ, unless `full_state` is on. Only messages the projection left out,
        each stored in the session first, leave state; a message it cut (a long new answer,
        a `Command`'s result) is kept as it was sent, its whole text in a tool_result file.
        A request whose messages are not state's own (another middleware edited them on
        the way: cleared results, copies) leaves state as it is: what that middleware left
        out is stored nowhere."""
        state = request.messages
        held = request.state.get("messages") if isinstance(request.state, dict) else None
        if self.full_state or _unchanged(state, sent) or not _unchanged(held or (), state):
            return response
        kept = {message.id for message in sent}
        leaving = {message.id for message in state} - kept
        if not leaving <= projector.left_out:  # never drop what the projection did not store
            return response
        if not isinstance(response, _types.ModelResponse):  # an AIMessage
            response = _types.ModelResponse(result=[response])
        update = _edits(state, sent, leaving)
        if update is None:
            # LangChain applies this after the model node's own update (the answer appended),
            # so the answer is given again, after what was sent.
            update = [_RemoveMessage(id=_REMOVE_ALL), *sent, *response.result]
        return _types.ExtendedModelResponse(
            model_response=response, command=_Command(update={"messages": update})
        )

    def _schemas(self, request: Any) -> list[dict[str, Any]]:
        """The tools of a model request as OpenAI schemas (they count against the window),
        each converted once: LangChain gives the same tool objects to every call."""
        out = []
        for tool in request.tools:
            known = self._tool_schemas.get(id(tool))
            if known is None or known[0]() is not tool:
                schema = _to_openai_tool(tool)
                # Held weakly: a server making its tools per request dropped none (each
                # with what its closure holds). A tool that cannot be is converted each call.
                held = weak_entry(tool, self._tool_schemas, id(tool))
                if held is None:
                    out.append(schema)
                    continue
                known = (held, schema)
                with self._guard:
                    self._tool_schemas[id(tool)] = known
            out.append(known[1])
        return out

    def _history(self, session: str, request: Any) -> tuple[list[Msg], dict[str, Any]]:
        """The request's system message and messages as `Msg`s, and the LangChain message
        behind each `Msg` id."""
        given = [request.system_message] if request.system_message is not None else []
        given.extend(request.messages)
        with self._guard:
            cache = self._converted.setdefault(session, {})
        history: list[Msg] = []
        originals: dict[str, Any] = {}
        for message in given:
            key = message_key(message)
            known = cache.get(key)
            if known is None or not (known[0] is message or known[0] == message):
                known = (message, from_langchain([message])[0])
                cache[key] = known
            history.append(known[1])
            originals[key] = message
        if len(cache) > 2 * len(given) + 64:
            # Messages the state no longer holds (moved out and summarised) never come back:
            # their readings go, so a long thread's cache stays the size of its state.
            with self._guard:
                self._converted[session] = {key: cache[key] for key in originals}
        return history, originals

    def _projector(self, session: str, model: Any = None) -> Projector:
        """The session's projector; the window is the config's, else the one the model of
        the call declares in its profile (`max_input_tokens`: one middleware may serve
        agents of several models, and a thread whose model changes gets a projector for the
        new window, which goes on from the session's record); it counts with the counter for
        the agent's model (`model_name`, `model` or `model_id`) from its first call."""
        with self._guard:
            window = self.config.context_window or (
                declared_window(model) if model is not None else None
            )

            def make() -> Projector:
                self._windows[session] = window
                return Projector(
                    self.workspace,
                    session,
                    config=self.config,
                    model=self._summaries.model(model),
                    context_window=window,
                    reader_tools=self._readers,
                )

            projector, forgotten = self._projectors.get_or_make(
                session,
                make,
                usable=lambda _: window is None or window == self._windows.get(session),
            )
            for old in forgotten:
                self._converted.pop(old.session_id, None)
                self._windows.pop(old.session_id, None)
        projector.use_model(model_name_of(model))
        return projector


def _session_of(projector: Projector) -> str:
    return projector.session_id


def _run_of(state: Any) -> dict[str, str] | None:
    """The run `before_agent` put in the state, if any."""
    run = state.get(_RUN) if isinstance(state, dict) else None
    if isinstance(run, dict) and isinstance(run.get("session"), str):
        return {"session": run["session"], "run": str(run.get("run", ""))}
    return None


_IDLE_RELEASE = 0.25
"""Seconds a run with no call of this middleware in flight keeps its thread's lease: within a
LangGraph run the next call follows in milliseconds, and a run stopped (it raised, or at an
interrupt, its next part perhaps run by another process) must not keep the thread."""

_IN_TOOL: contextvars.ContextVar[tuple[str, str, str] | None] = contextvars.ContextVar(
    "ctxoffload_langchain_tool_call", default=None
)
"""The tool call running now (its run's session and id, and the name a sub-agent it starts
gets): a run begun inside it (a deepagents sub-agent) is that run's sub-agent."""


@contextlib.contextmanager
def _calling_tool(session: str, run: str, name: str) -> Iterator[None]:
    token = _IN_TOOL.set((session, run, name) if run else None)
    try:
        yield
    finally:
        _IN_TOOL.reset(token)


def _sub_agent_name(call: Any) -> str:
    """What a sub-agent started by tool call `call` is named after: the sub-agent type
    deepagents' `task` tool is given, else the tool's name."""
    if not isinstance(call, dict):
        return "subagent"
    args = call.get("args")
    kind = args.get("subagent_type") if isinstance(args, dict) else None
    return str(kind or call.get("name") or "subagent")


def _thread_id(runtime: Any) -> str | None:
    """The run's thread_id: a model hook's runtime has it in `execution_info`, a tool hook's
    also in its `config`; None when the caller gave none."""
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    if thread is None:
        config = getattr(runtime, "config", None) or {}
        thread = config.get("configurable", {}).get("thread_id")
    return None if thread is None else str(thread)


def _reported_input(response: Any) -> int:
    """The input tokens the provider reported for a model call: the `usage_metadata` of the
    reply's AI message (LangChain sums every input token type there, Anthropic's cache reads
    and writes included); 0 when the reply carries none (`report_usage` then keeps the
    earlier report). A handler returns a
    `ModelResponse` (its `result`), an `AIMessage`, or an `ExtendedModelResponse` around one."""
    inner = getattr(response, "model_response", None)
    if inner is not None:
        response = inner
    messages = getattr(response, "result", None)
    candidates = list(messages) if isinstance(messages, list) else [response]
    for message in reversed(candidates):
        usage = getattr(message, "usage_metadata", None)
        if isinstance(usage, dict) and isinstance(usage.get("input_tokens"), int):
            return int(usage["input_tokens"])
    return 0


def _unchanged(state: Sequence[Any], sent: Sequence[Any]) -> bool:
    """Whether `sent` is `state` itself, message for message."""
    return len(state) == len(sent) and all(a is b for a, b in zip(state, sent, strict=True))


def _edits(state: Sequence[Any], sent: Sequence[Any], leaving: set[str]) -> list[Any] | None:
    """The writes that make `state` into `sent` in place, where `sent` is `state` with
    messages left out (the ids `leaving`) and others cut (each in its place, under its id): a
    `RemoveMessage` for each message that leaves and the cut copy of each one cut, which the
    messages reducer puts in place of the message of its id. A checkpoint then stores those,
    not the whole request again (on `DeltaAgentState`, a cut of one result stored every
    message sent). None where `sent` holds a message `state` does not (a summary, a note: new ids go
    to the end of the list, and these go first), or puts two in another order: only the
    whole list written again places them."""
    at = {message.id: i for i, message in enumerate(state)}
    if len(at) != len(state):  # (ids the reducer gave are unique: never seen, but cheap)
        return None
    last = -1
    cut: list[Any] = []
    for message in sent:
        i = at.get(message.id)
        if i is None or i <= last:
            return None
        last = i
        if message is not state[i]:
            cut.append(message)
    return [*(_RemoveMessage(id=m.id) for m in state if m.id in leaving), *cut]


def _back(
    projected: Sequence[Msg],
    history: Sequence[Msg],
    originals: dict[str, Any],
    system: Any = None,
) -> list[Any]:
    """The LangChain messages for a projection: the original object wherever the projection
    kept a message as it was (ids intact), a copy with new content where it cut one, new
    messages for a summary; the request's own system message (`system`), which the request
    holds apart, left out."""
    given = {msg.id: msg for msg in history}
    out: list[Any] = []
    for msg in projected:
        original = originals.get(msg.id)
        if original is None:
            out.extend(_marked(to_langchain([msg])))
        elif original is system:
            continue
        elif msg is given[msg.id] or msg.content == given[msg.id].content:
            out.append(original)
        else:
            out.extend(with_content_of(original, msg))
    return out


def _marked(messages: list[Any]) -> list[Any]:
    """ctxoffload's own messages (a summary, a note) marked as LangChain marks the summaries
    its `SummarizationMiddleware` writes into state (`lc_source: summarization`), so a UI that
    streams state's messages leaves them out the same way; providers are not sent the mark."""
    return [m.model_copy(update={"additional_kwargs": _SUMMARY_MARK}) for m in messages]


_SUMMARY_MARK = {"lc_source": "summarization"}


def _text_of(content: Any) -> str | None:
    """A ToolMessage's content as text, or None when it holds more than text (images)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and part.get("type") == "text":
            parts.append(str(part.get("text", "")))
        else:
            return None
    return "".join(parts)


def _with_output(result: Any, given: ToolResultBlock, kept: ToolResultBlock) -> Any:
    """`result` holding what the workspace kept of it in place of its content."""
    if kept.output == given.output or not isinstance(kept.output, str):
        return result
    return result.model_copy(update={"content": kept.output})


_DOOR = DOORS["langchain"]
_AGENT = _DOOR.name
"""Who the events of a LangChain agent's tools are written by."""
_RUN = "ctxoffload_run"
"""The state key of the run (`_OffloadState`)."""


def _as_tool(function: Callable[..., Awaitable[Any]]) -> Any:
    """An async ctxoffload tool as a LangChain tool that also runs under `invoke`."""

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        async def answer() -> Any:
            return await function(*args, **kwargs)

        # LangGraph runs a sync tool on a worker thread, where no event loop runs.
        return run_private(answer())

    name, description, args_schema = _tool_parts(function)
    return _LeanTool(
        name=name, description=description, args_schema=args_schema, func=run, coroutine=function
    )


# Each reading function's name, description and argument model, by what they are made of:
# LangChain builds the model with pydantic from the signature and docstring (1-2 ms a tool),
# and a middleware made per request (an agent built for each) would pay it every time.
_PARTS: dict[tuple[str, str, str | None, str], tuple[str, str, Any]] = {}


def _tool_parts(function: Callable[..., Awaitable[Any]]) -> tuple[str, str, Any]:
    """The name, description and argument model LangChain makes of `function`: its
    docstring's Args go into the parameters' schemas, and only its summary into the
    description (the schema is sent with every model call). Made once per signature and
    docstring (the same function of another workspace makes the same)."""
    key = (
        function.__module__,
        function.__qualname__,
        function.__doc__,
        str(inspect.signature(function)),
    )
    parts = _PARTS.get(key)
    if parts is None:
        made = _StructuredTool.from_function(coroutine=function, parse_docstring=True)
        parts = _PARTS[key] = (made.name, made.description, made.args_schema)
    return parts


class _LeanTool(_StructuredTool):  # type: ignore[misc]
    """A reading tool whose schema, sent with every model call, leaves out what tells the
    model nothing: an optional parameter's `null` alternative and its `default: null` (a
    parameter left out is None all the same). Its arguments are still checked against the
    whole schema (`args_schema`) when it runs."""

    @functools.cached_property
    def tool_call_schema(self) -> Any:  # made once: its args_schema never changes
        return _lean_schema(self.args_schema.model_json_schema())


def _lean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (a tool's parameters) with each `anyOf: [T, null]` as T and no null default."""
    properties: dict[str, Any] = {}
    for name, given in schema.get("properties", {}).items():
        field = dict(given)
        choices = field.get("anyOf")
        if isinstance(choices, list):
            kept = [c for c in choices if c != {"type": "null"}]
            if len(kept) == 1 and isinstance(kept[0], dict):
                del field["anyOf"]
                field.update(kept[0])
        if "default" in field and field["default"] is None:
            del field["default"]
        field.pop("title", None)
        properties[name] = field
    return {**schema, "properties": properties}
