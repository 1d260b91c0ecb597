"""`ContextOffloadHooks`: ctxoffload as CrewAI's interception hooks.

CrewAI keeps an agent's conversation in its executor's `messages`, a list of OpenAI-format
dicts, and sends it on every LLM call. Its hooks are global (registered for the process) and
synchronous:

- `execution_start` / `execution_end` open and close a run: a `crew.kickoff()` (the context
  names the crew) or a standalone `agent.kickoff()` (it names the agent's executor). A run
  holds its session's lease meanwhile (`HostRuns`);
- `after_tool_call` sees a tool's result (a string) before it joins the messages, and may
  replace it: a big one is stored whole and becomes its head and a notice;
- `before_llm_call` sees the executor's list, which it may change in place and which the LLM
  is then sent: it becomes the projection (`Projector`), past the trigger the older messages as
  a summary naming context.jsonl. The executor keeps what was sent, so its state is as lean as
  the request, and each later call projects it again (the summary comes back as this door's
  own message, known by its id).

A hook that raises anything but CrewAI's `HookAborted` is passed over by CrewAI (it fails
open): a busy session is refused with an error that is both a `HookAborted` and a
`SessionBusyError`, so the kickoff stops with it.
"""

from __future__ import annotations

import contextvars
import copy
import hashlib
import importlib
import json
import logging
import threading
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from .._doors.answers import answers_run
from .._doors.checks import arguments_checked, checked_config, checked_positive, checked_workspace
from .._doors.doors import DOORS
from .._doors.identity import fresh_session, given_session
from .._doors.recent import weak_entry
from .._doors.runs import HostRuns
from .._doors.summaries import SummaryWriter
from .._doors.unplugged import LeftOut
from .._loop import LoopThread
from .._tokens.counters import count_over, fits_by_size
from ..agent import as_tool
from ..compression import ContextConfig, Projector
from ..exceptions import ConfigError, SessionBusyError
from ..formats import from_openai, to_openai
from ..messages import Msg, ToolResultBlock
from ..workspace import Workspace
from ._crewai_deferral import Deferral
from ._crewai_summary import TAKES, crewai_summary_model
from ._model_name import model_name_of
from ._reading import read_back, reading_answer

__all__ = ["ContextOffloadHooks"]

INSTALL_HINT = "CrewAI is not installed: pip install 'ctxoffload[crewai]'"

try:
    _dispatch: Any = importlib.import_module("crewai.hooks.dispatch")
    _llm_hooks: Any = importlib.import_module("crewai.hooks.llm_hooks")
    _tool_hooks: Any = importlib.import_module("crewai.hooks.tool_hooks")
    _BaseTool: Any = importlib.import_module("crewai.tools").BaseTool
    _pydantic: Any = importlib.import_module("pydantic")
except ImportError as exc:  # pragma: no cover - exercised where CrewAI is absent
    raise ConfigError(INSTALL_HINT) from exc

logger = logging.getLogger("ctxoffload")

_POINT = _dispatch.InterceptionPoint
_HookAborted: Any = _dispatch.HookAborted


class SessionBusyAborted(SessionBusyError, _HookAborted):  # type: ignore[misc]
    """A kickoff refused because another live run writes its session: a `SessionBusyError`
    that CrewAI lets through its hooks (a `HookAborted`), so the kickoff stops with it."""

    def __init__(self, busy: SessionBusyError) -> None:
        SessionBusyError.__init__(self, str(busy), busy.session_id, busy.holder)
        self.reason = str(busy)
        self.source = "ctxoffload"


@arguments_checked
class ContextOffloadHooks:
    """CrewAI hooks that offload big tool results and compact what each LLM call is sent,
    into a ctxoffload workspace.

    - A tool result over the config's `tool_result_limit` is stored whole
      (`sessions/<session>/tool_result-<id>.txt`) and the agent's messages get its head and
      the notice naming that file instead (`after_tool_call`). What is left passes
      CrewAI's own compaction (`Agent.use_better_compaction`, which moves a result over a
      quarter of the LLM's window to a temporary file of CrewAI's) as it is: counted as the
      LLM counts it, it is cut under that threshold too, and a result CrewAI would move out
      is stored whole first.
    - Before each LLM call the executor's messages become their projection: past the config's
      trigger the older ones are appended to the session's context.jsonl and replaced by a
      summary naming those lines (`before_llm_call`). What each call was sent is recorded, so
      `ctxoffload show SESSION --step N` rebuilds it; `ctxoffload compact SESSION` is served
      at the next call.
    - `tools` gives the agent Read, Grep and Glob (a workspace on a local folder) and
      `retrieve_offloaded_content` as CrewAI tools (`BaseTool`); with `memory=True`, the
      memory tool too.

    `with hooks:` registers them for the kickoffs of that block (CrewAI's execution-scoped
    hooks: this thread or task, and what CrewAI runs from it); `register()` registers them
    for every kickoff of the process until `unregister()`; a kickoff that takes `tools` while
    the hooks are out of it (the `with` forgotten) is said once, as a warning of the
    `ctxoffload` logger, before its first LLM call. The session is the run:
    each `crew.kickoff()` or standalone `agent.kickoff()` gets a new session of its own
    (logged at INFO), or the one `session_id=` names for every run. A run holds its
    session's lease from its start to its end: a second live run of the same session is
    refused at its start with `SessionBusyError` (a `SessionBusyAborted`, which CrewAI lets
    through its hooks).

    Args:
        workspace: where offloaded content goes (a `Workspace`; a path is refused: pass
            `LocalWorkspace(path)`).
        config: when to truncate and when to summarise (its `context_window` is the window;
            without one, 128,000 tokens).
        summary_model: the model that writes summaries: a CrewAI `LLM` (any `BaseLLM`)
            or a model string (`crewai.LLM(model=...)`), asked with `response_model`, or
            a ctxoffload `ChatModel`. Left out, the calling agent's own `llm` writes them;
            False: the extractive summary, no model asked.
        session_id: the session (a plain name) of every run; None for a new one per run.
        max_output_chars: longest answer of a reading tool.
        memory: give the agent the memory tool too (a `LocalWorkspace` only).

    Raises:
        ConfigError: `workspace` is no workspace (or a folder that is a file), `config` is
            no `ContextConfig`, `summary_model` is none of the above (a string CrewAI makes
            no LLM of among them), or `max_output_chars` is not a positive int.
        InvalidSessionId: `session_id` is not a plain name.

    Example::

        offload = ContextOffloadHooks(LocalWorkspace("ws"))
        agent = Agent(role="ops", goal="...", backstory="...",
                      tools=[fetch_logs, *offload.tools], llm=llm)
        with offload:
            crew.kickoff()
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
            summary_model, adapt=lambda llm: crewai_summary_model(llm, window), takes=TAKES
        )
        self.session_id = given_session(session_id)
        checked_positive(max_output_chars, "max_output_chars")
        self._runs = HostRuns(workspace, _DOOR)
        self._left_out = LeftOut(_DOOR)  # (its tools in a kickoff the hooks are out of)
        self._loop = LoopThread("ctxoffload-crewai-tools")
        self._lock = threading.RLock()
        self._active: dict[int, _Run] = {}  # id(crew) or id(agent) -> its run in progress
        # id -> the object (held weakly: a server's crews are made per request and dropped)
        # and its latest session.
        self._last: dict[int, tuple[Callable[[], Any], str]] = {}
        self._latest: str | None = None  # the session of the run begun last (the memory tool)
        self._registered = False
        self._said_deferred = False
        reading = read_back(
            workspace,
            max_output_chars,
            config=self.config,
            memory=memory,
            session_id=self.session_id,
        )
        self.tools = [_as_tool(function, self) for function in reading.functions]
        self._readers = reading.readers  # what every notice names: these tools

    # -- registration -------------------------------------------------------------------------

    @property
    def last_session(self) -> str | None:
        """The session the run begun last through this object writes; None before the first
        (`HostRuns.last_session`): where a run given no session_id went."""
        return self._runs.last_session

    def register(self) -> ContextOffloadHooks:
        """Register the hooks with CrewAI (for every kickoff of this process from now on; an
        executor made before keeps the LLM hooks it was made with). Registering twice
        changes nothing."""
        with self._lock:
            if not self._registered:
                self._registered = True
                _dispatch.register(_POINT.EXECUTION_START, self.on_execution_start)
                _dispatch.register(_POINT.EXECUTION_END, self.on_execution_end)
                _llm_hooks.register_before_llm_call_hook(self.before_llm_call)
                _tool_hooks.register_before_tool_call_hook(self.before_tool_call)
                _tool_hooks.register_after_tool_call_hook(self.after_tool_call)
        return self

    def unregister(self) -> None:
        """Take the hooks out of CrewAI (runs in progress are ended as they end)."""
        with self._lock:
            if self._registered:
                self._registered = False
                _dispatch.unregister(_POINT.EXECUTION_START, self.on_execution_start)
                _dispatch.unregister(_POINT.EXECUTION_END, self.on_execution_end)
                _llm_hooks.unregister_before_llm_call_hook(self.before_llm_call)
                _tool_hooks.unregister_before_tool_call_hook(self.before_tool_call)
                _tool_hooks.unregister_after_tool_call_hook(self.after_tool_call)

    def __enter__(self) -> ContextOffloadHooks:
        """Register the hooks for the kickoffs of this context only (this thread or task,
        and what CrewAI runs from it), until the block ends: two hooks objects in two
        threads each see their own kickoffs."""
        hooks = {
            _POINT.EXECUTION_START: self.on_execution_start,
            _POINT.EXECUTION_END: self.on_execution_end,
            _POINT.PRE_MODEL_CALL: self.before_llm_call,
            _POINT.PRE_TOOL_CALL: self.before_tool_call,
            _POINT.POST_TOOL_CALL: self.after_tool_call,
        }
        # The scope this block enters keeps the enclosing one's hooks (a scope replaces it).
        scope = {point: _dispatch.get_scoped_hooks(point) for point in _POINT}
        for point, hook in hooks.items():
            scope[point].append(hook)
        entered = _dispatch.scoped_hooks(scope)
        entered.__enter__()
        _SCOPES.set((*_SCOPES.get(), (self, entered)))
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _SCOPES.get()
        for at in range(len(stack) - 1, -1, -1):
            if stack[at][0] is self:
                _SCOPES.set(stack[:at] + stack[at + 1 :])
                stack[at][1].__exit__(None, None, None)
                return

    def _acting(self) -> bool:
        """Whether the hooks are in CrewAI for this call: registered, or in a `with` block of
        this context. An executor keeps the LLM hooks it was made with, and a crew reuses its
        executor: after `unregister()` (or the block's end) a kickoff of that crew still calls
        them, and they must do nothing then (the hooks that say a kickoff's start and end are
        out: a run begun there would never end)."""
        return self._registered or any(hooks is self for hooks, _ in _SCOPES.get())

    def session_of(self, crew_or_agent: Any) -> str | None:
        """The session the current (or last) run of a crew or a standalone agent writes;
        None before its first run."""
        with self._lock:
            known = self._last.get(id(crew_or_agent))
            return known[1] if known is not None and known[0]() is crew_or_agent else None

    # -- the run ------------------------------------------------------------------------------

    def on_execution_start(self, ctx: Any) -> None:
        """A crew's or a standalone agent's kickoff begins: its run takes its session.

        Raises:
            SessionBusyError: another live run writes the session (raised as CrewAI's
                `HookAborted` too, which CrewAI lets through its hooks).
        """
        owner = _owner(ctx)
        if owner is not None:
            self._begin(owner, ctx.crew if ctx.crew is not None else ctx.flow)
        elif ctx.flow is not None:
            # A flow of the user's: an `agent.kickoff()` inside it says neither its start
            # nor its end (CrewAI says the flow's alone); the runs begun for such kickoffs
            # (at their first hook, `_run_of`) end with the flow.
            _FLOWS.set((*_FLOWS.get(), (self, id(ctx.flow), [])))

    def on_execution_end(self, ctx: Any) -> None:
        """The kickoff has ended (done or failed): its run gives its session up (a flow of
        the user's: the runs begun inside it)."""
        owner = _owner(ctx)
        if owner is None:
            if ctx.flow is not None:
                self._end_flow(id(ctx.flow))
            return
        with self._lock:
            run = self._active.get(id(owner))
            if run is None or run.owner is not owner:
                return
            del self._active[id(owner)]
        self._end(run)

    def _end(self, run: _Run) -> None:
        run.ended = True
        self._runs.end(run.session, run.id)

    def _end_flow(self, flow: int) -> None:
        """End the runs begun inside the user's flow `flow` (and forget the flow)."""
        stack = _FLOWS.get()
        for at in range(len(stack) - 1, -1, -1):
            hooks, key, runs = stack[at]
            if hooks is self and key == flow:
                _FLOWS.set(stack[:at] + stack[at + 1 :])
                for run in runs:
                    with self._lock:
                        if self._active.get(id(run.owner)) is run:
                            del self._active[id(run.owner)]
                    if not run.ended:
                        self._end(run)
                return

    def _begin(self, owner: Any, holder: Any) -> _Run:
        with self._lock:
            current = self._active.get(id(owner))
            if current is not None and current.owner is owner and not current.ended:
                current.ended = True  # a kickoff that never said it ended
                self._runs.end(current.session, current.id)
            session = self.session_id or fresh_session(
                _DOOR, "CrewAI names no conversation and the hooks no session_id"
            )
            run = _Run(self, owner, session)
            try:
                self._runs.begin(session, run.id, owner=_weakly(holder), live=lambda: not run.ended)
            except SessionBusyError as busy:
                raise SessionBusyAborted(busy) from None
            self._active[id(owner)] = run
            held = weak_entry(owner, self._last, id(owner))
            self._last[id(owner)] = (held if held is not None else lambda: owner, session)
            self._latest = session
            return run

    def _run_of(self, ctx: Any) -> _Run | None:
        """The run a hook's context belongs to: its crew's, else its agent's; a call outside
        any kickoff this object saw begin (an executor driven by hand) begins one."""
        with self._lock:
            for owner in (getattr(ctx, "crew", None), getattr(ctx, "agent", None)):
                if owner is None:
                    continue
                run = self._active.get(id(owner))
                if run is not None and run.owner is owner and not run.ended:
                    return run
            agent = getattr(ctx, "agent", None)
            if agent is None:
                return None
            run = self._begin(agent, agent)
        for hooks, _, runs in reversed(_FLOWS.get()):
            if hooks is self:
                runs.append(run)  # (a user's flow runs it: it ends with the flow)
                break
        return run

    # -- the LLM ------------------------------------------------------------------------------

    def before_llm_call(self, ctx: Any) -> None:
        """Send the LLM the projection of the executor's messages (changed in place: the
        executor keeps what was sent)."""
        if not self._acting():
            return None
        if ctx.executor is None or not isinstance(ctx.messages, list):
            return  # a direct LLM call: no conversation to project
        run = self._run_of(ctx)
        if run is None:
            return
        conversation = run.conversation(ctx.agent)
        history = conversation.read(ctx.messages)
        conversation.projector.use_model(model_name_of(ctx.llm))
        tools = getattr(ctx.executor, "_openai_tools", None) or ()
        projected = conversation.projector.project_sync(
            history, tools=list(tools), summary_model=self.summaries.model(ctx.llm)
        )
        sent = conversation.back(projected)
        if len(sent) != len(ctx.messages) or any(
            a is not b for a, b in zip(sent, ctx.messages, strict=True)
        ):
            ctx.messages[:] = sent  # in place: CrewAI sends this list, and keeps it

    # -- the tools ----------------------------------------------------------------------------

    def before_tool_call(self, ctx: Any) -> None:
        """A tool is about to run: in this thread or task, the read-back tools work in its
        run's session (with two kickoffs at once, the session of the run begun last is the
        other's: `isolate_sessions` would confine a run's Read to another run's folder)."""
        if not self._acting():
            return None
        run = self._run_of(ctx)
        _CALLING.set((self, run.session) if run is not None else None)

    def _tool_session(self) -> str | None:
        """The session a read-back tool call works in: the hooks' `session_id`, else the
        session of the run whose tool call this is (`before_tool_call`), else, for a tool run
        outside CrewAI's tool hooks, that of the run begun last."""
        if self.session_id is not None:
            return self.session_id
        calling = _CALLING.get()
        if calling is not None and calling[0] is self:
            return calling[1]
        return self._latest

    def after_tool_call(self, ctx: Any) -> str | None:
        """A big result becomes its head and a notice; the whole text goes to the workspace
        first."""
        if not self._acting():
            return None
        text = ctx.tool_result
        if not isinstance(text, str) or answers_run(ctx.tool):
            return None  # (a `result_as_answer` tool's output is the task's answer)
        run = self._run_of(ctx)
        if run is None:
            return None
        conversation = run.conversation(ctx.agent)
        counter = conversation.projector.counter
        limit = self.config.tool_result_limit
        # What is left must also pass CrewAI's own compaction as it is (`Deferral`).
        deferral = Deferral.of(ctx.agent)
        if deferral is None and fits_by_size(counter, text, limit):
            return None
        block = ToolResultBlock(id=_result_id(), name=str(ctx.tool_name), output=text)
        if deferral is None:
            kept = self._cut(conversation, block, limit)
            return None if kept == text else kept
        within = fits_by_size(counter, text, limit) or count_over(counter, text, limit)[0] <= limit
        first = deferral.first_limit(limit)
        if within:  # whole, unless CrewAI would move it out
            passes, count = deferral.passes(text)
            if passes:
                return None
            first = min(first, deferral.next_limit(text, count, counter))
        kept = self._cut(conversation, block, first)
        passes, count = deferral.passes(kept)
        if not passes:  # CrewAI's count runs far above this door's: cut again, to its ratio
            kept = self._cut(
                conversation, block, min(first, deferral.next_limit(kept, count, counter))
            )
            if not deferral.passes(kept)[0]:
                self._say_deferred(block.name, deferral)
        return None if kept == text else kept

    def _cut(self, conversation: _Conversation, block: ToolResultBlock, limit: int) -> str:
        """`block`'s text as the conversation keeps it under `limit` tokens: whole when it
        fits (or cannot be stored), else its head and the notice naming the file that holds
        it whole (the same file for a block cut again)."""
        config = None  # (the hooks' own)
        if limit < self.config.tool_result_limit:
            config = self.config.model_copy(update={"tool_result_limit": limit})
        kept = conversation.projector.offload_tool_result_sync(block, config=config)
        return kept.output if isinstance(kept.output, str) else str(block.output)

    def _say_deferred(self, tool: str | None, deferral: Deferral) -> None:
        """Said once: what the door left of a result is still over CrewAI's threshold."""
        if not self._said_deferred:
            self._said_deferred = True
            logger.warning(
                "ContextOffloadHooks: what is left of the result of tool %r (its head and the "
                "notice naming the file that holds it whole) is still over CrewAI's threshold "
                "for a tool result (%d tokens, a quarter of the LLM's window): CrewAI moves "
                "it to a temporary file of its own. Give the LLM a larger window, or the "
                "agent use_better_compaction=False",
                tool,
                int(deferral.threshold),
            )


class _Run:
    """One kickoff: its session, its lease's run id, and a conversation per agent."""

    def __init__(self, hooks: ContextOffloadHooks, owner: Any, session: str) -> None:
        self.hooks = hooks
        self.owner = owner
        self.session = session
        self.id = uuid.uuid4().hex
        self.ended = False
        self._conversations: dict[int, tuple[Any, _Conversation]] = {}
        self._lock = threading.Lock()

    def conversation(self, agent: Any) -> _Conversation:
        """The conversation of `agent` in this run (its projector; the session's)."""
        with self._lock:
            known = self._conversations.get(id(agent))
            if known is None or known[0] is not agent:
                hooks = self.hooks
                projector = Projector(
                    hooks.workspace,
                    self.session,
                    config=hooks.config,
                    model=hooks.summaries.model(),
                    context_window=hooks.config.context_window or _DEFAULT_WINDOW,
                    reader_tools=hooks._readers,
                )
                known = self._conversations[id(agent)] = (agent, _Conversation(projector))
            return known[1]


class _Conversation:
    """An agent's messages as the projector reads them: each dict as a `Msg` with an id of
    its own (made once per dict object, while it says the same), and the dicts this door
    wrote back known as the `Msg`s they were made from."""

    def __init__(self, projector: Projector) -> None:
        self.projector = projector
        # id(dict) -> (the dict, a copy of what it said, its Msg)
        self._read: dict[int, tuple[dict[str, Any], dict[str, Any], Msg]] = {}
        self._made: dict[int, dict[str, Any]] = {}  # id(Msg) -> the dict it was read from
        self._counts: dict[str, int] = {}

    def read(self, messages: Sequence[Any]) -> list[Msg | Mapping[str, Any]]:
        """The messages as `Msg`s (a message that is no dict is passed on as it is: the
        projector says what it cannot read)."""
        out: list[Msg | Mapping[str, Any]] = []
        for message in messages:
            if not isinstance(message, dict):
                out.append(message)
                continue
            known = self._read.get(id(message))
            if known is not None and known[0] is message and message == known[1]:
                out.append(known[2])
                continue
            msg = self._as_msg(message)
            if msg is None:
                out.append(message)  # the projector reads it, or says why not
                continue
            self._keep(message, msg)
            out.append(msg)
        return out

    def back(self, projected: Sequence[Msg]) -> list[dict[str, Any]]:
        """The dicts to send for the projection: the host's own where it was kept as it is,
        else the OpenAI form of what replaces it (known as that `Msg` from now on)."""
        out: list[dict[str, Any]] = []
        for msg in projected:
            given = self._made.get(id(msg))
            if given is not None:
                out.append(given)
                continue
            for made in to_openai([msg]):
                self._keep(made, msg)
                out.append(made)
        self._forget(out)
        return out

    def _as_msg(self, message: dict[str, Any]) -> Msg | None:
        """A dict as a `Msg`, its id made from what it says and how many dicts before it in
        this conversation said the same (two equal questions are two messages)."""
        try:
            (msg,) = from_openai([message])
        except (ValueError, TypeError):
            return None  # more or fewer than one `Msg`, or a dict `from_openai` refuses
        text = json.dumps(message, sort_keys=True, default=str, ensure_ascii=False)
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        count = self._counts.get(digest, 0)
        self._counts[digest] = count + 1
        return msg.model_copy(update={"id": f"crewai.{digest}.{count}"})

    def _keep(self, message: dict[str, Any], msg: Msg) -> None:
        self._read[id(message)] = (message, copy.deepcopy(message), msg)
        self._made[id(msg)] = message

    def _forget(self, current: list[dict[str, Any]]) -> None:
        """Forget the dicts no longer in the conversation (bounded memory)."""
        if len(self._read) > 2 * len(current) + 64:
            keep = {id(m) for m in current}
            self._read = {k: v for k, v in self._read.items() if k in keep}
            self._made = {id(v[2]): v[0] for v in self._read.values()}


_FLOWS: contextvars.ContextVar[tuple[tuple[ContextOffloadHooks, int, list[_Run]], ...]] = (
    contextvars.ContextVar("ctxoffload_crewai_flows", default=())
)
"""The user's flows running in this context (a flow inside a flow too): the hooks that saw
each begin, the flow (by id), and the runs begun inside it, which end with it."""

_CALLING: contextvars.ContextVar[tuple[ContextOffloadHooks, str] | None] = contextvars.ContextVar(
    "ctxoffload_crewai_calling", default=None
)
"""The hooks object and session of the run whose tool call runs in this thread or task."""

_SCOPES: contextvars.ContextVar[tuple[tuple[ContextOffloadHooks, Any], ...]] = (
    contextvars.ContextVar("ctxoffload_crewai_scopes", default=())
)
"""The `with hooks:` blocks this context is in, innermost last, with CrewAI's scope each
entered."""

_DOOR = DOORS["crewai"]
_AGENT = _DOOR.name
"""Who the events of a run's tools are written by."""

_DEFAULT_WINDOW = 128_000
"""The window of a config without one."""


def _owner(ctx: Any) -> Any:
    """What a run is known by: the crew of a crew's kickoff, the agent of a standalone agent's
    (its executor is the flow the context names); None for another flow."""
    if ctx.crew is not None:
        return ctx.crew
    return getattr(ctx.flow, "agent", None) if ctx.flow is not None else None


def _weakly(holder: Any) -> Any:
    """`holder` where it can be held weakly (its run's lease is let go of when it is
    collected), else None."""
    try:
        weakref.ref(holder)
    except TypeError:
        return None
    return holder


def _result_id() -> str:
    """The id of a stored tool result (CrewAI's hook names no call id)."""
    return "crewai-" + uuid.uuid4().hex[:16]


# -- the read-back tools -----------------------------------------------------------------------


def _as_tool(function: Callable[..., Awaitable[Any]], hooks: ContextOffloadHooks) -> Any:
    """A read-back function as a CrewAI `BaseTool` (its arguments a pydantic model made from
    the function's schema), run on the hooks' loop, recording (a memory change) in the
    session of the run whose tool call it is (`_tool_session`)."""
    spec = as_tool(function)
    schema = spec.parameters
    required = set(schema.get("required", ()))
    fields: dict[str, Any] = {
        name: _field(name, prop, name in required)
        for name, prop in schema.get("properties", {}).items()
    }
    arguments = _pydantic.create_model(f"{spec.name}Arguments", **fields)

    def _run(self: Any, **given: Any) -> str:
        hooks._left_out.check(hooks._acting())
        session = hooks._tool_session()
        return hooks._loop.run(reading_answer(function, given, writer=_AGENT, session=session))

    def to_structured_tool(self: Any) -> Any:
        # CrewAI takes an agent's tools so for each kickoff (task) it runs, and no sooner:
        # the hooks, absent now, would never see that kickoff.
        hooks._left_out.check(hooks._acting())
        return _BaseTool.to_structured_tool(self)

    members = {"__module__": __name__, "_run": _run, "to_structured_tool": to_structured_tool}
    cls = type(f"{spec.name}Tool", (_BaseTool,), members)
    return cls(name=spec.name, description=spec.description, args_schema=arguments)


_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict,
}


def _field(name: str, prop: Mapping[str, Any], required: bool) -> tuple[Any, Any]:
    """One argument as a pydantic field: its type from the JSON schema, its description,
    its default (None where the model may leave it out)."""
    options = prop.get("anyOf", [prop])
    kinds: list[Any] = []
    for option in options:
        kind = option.get("type")
        if kind == "array":
            item = _JSON_TYPES.get(option.get("items", {}).get("type", ""), Any)
            kinds.append(list[item])  # type: ignore[valid-type]
        elif kind in _JSON_TYPES:
            kinds.append(_JSON_TYPES[kind])
    annotation: Any = kinds[0] if len(kinds) == 1 else Any
    description = prop.get("description") or name
    if required:
        return (annotation, _pydantic.Field(description=description))
    default = prop.get("default")
    return (annotation | None, _pydantic.Field(default=default, description=description))
