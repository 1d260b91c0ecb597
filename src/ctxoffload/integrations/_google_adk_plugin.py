"""`ContextOffloadPlugin`: ctxoffload as a Google ADK plugin.

ADK rebuilds every model request from the session's events and sends it whole; a plugin's
`before_model_callback` may change what one request is sent (the `LlmRequest`'s contents)
without touching the events, and its `after_tool_callback` may replace a tool's result before
it becomes an event. So a big result is stored whole when the tool returns (the session keeps
its head and a notice), and every request's contents go through a `Projector`, which re-applies
the same truncations and summary each time: a session resumed in another process projects the
same way, from the workspace's record.
"""

from __future__ import annotations

import copy
import importlib
import json
from typing import Any

from .._doors.answers import answers_run
from .._doors.checks import arguments_checked, checked_config, checked_positive, checked_workspace
from .._doors.doors import DOORS
from .._doors.identity import conversation_session
from .._doors.runs import HostRuns, Kept
from .._doors.summaries import SummaryWriter
from .._doors.unplugged import LeftOut
from .._overflow import is_context_overflow
from .._tokens.counters import fits_by_size
from ..compression import ContextConfig, Projector
from ..exceptions import ConfigError
from ..messages import Msg, TextBlock, ToolResultBlock
from ..workspace import Workspace, writing_as
from ._google_adk_messages import INSTALL_HINT, GenaiHistory, response_key, response_text
from ._google_adk_summary import TAKES, adk_summary_model
from ._message_ids import message_id
from ._model_name import model_name_of
from ._reading import read_back

__all__ = ["ContextOffloadPlugin"]

try:
    _BasePlugin: Any = importlib.import_module("google.adk.plugins.base_plugin").BasePlugin
    _FunctionTool: Any = importlib.import_module("google.adk.tools.function_tool").FunctionTool
except ImportError as exc:  # pragma: no cover - exercised where ADK is absent
    raise ConfigError(INSTALL_HINT) from exc


@arguments_checked
class ContextOffloadPlugin(_BasePlugin):  # type: ignore[misc]
    """A Google ADK plugin that offloads big tool results and compacts what the model is sent,
    into a ctxoffload workspace.

    - A tool result whose text (a string, or the JSON of any other value) is over the
      config's `tool_result_limit` is stored whole (`sessions/<session>/tool_result-<call
      id>.txt`) and becomes the function response `{"result": <head + notice>}`, so the
      session's event holds no more than the model reads.
    - Every model request is sent the projection of its contents: past the config's trigger
      the older ones as a summary (they go to the session's context.jsonl first). The
      session's events keep everything. A request the provider refuses as over its window
      (`is_context_overflow`) makes the next request of the session summarised at once (an
      ADK plugin cannot send a request again).
    - `tools` gives the agent Read, Grep and Glob (a workspace on a local folder) and
      `retrieve_offloaded_content` as ADK `FunctionTool` objects, to read back what was offloaded;
      with `memory=True`, the memory tool too (`memories/` of the workspace, every change an
      event of the session). In a run whose runner has not the plugin (`plugins=[offload]`
      forgotten), nothing is stored: the first such run to add them to a request says so,
      once, as a warning of the `ctxoffload` logger.

    The session is the ADK session's conversation, `app/user/session id` (ADK keeps a
    session id unique only within its app and user), mapped by the one rule every door
    follows (docs/guides/hosts.md): `ctxoffload show ops/ana/s1` finds it. A run
    (`runner.run_async`) holds the session's lease from `before_run_callback` to
    `after_run_callback`: a second run of the same session
    meanwhile (another `run_async`, another process) fails at its start with
    `SessionBusyError` (ADK wraps an error raised in a plugin in a `RuntimeError` naming the
    plugin: the `SessionBusyError` is its `__cause__`), and the first goes on.

    Args:
        workspace: where offloaded content goes (a `Workspace`; a path is refused: pass
            `LocalWorkspace(path)`).
        config: when to truncate and when to summarise (its `context_window` is the window).
        summary_model: the model that writes summaries: an ADK `BaseLlm` (`Gemini(...)`,
            `LiteLlm(...)`) or a model string ADK's registry resolves (`"gemini-2.5-flash"`),
            asked with ADK's structured output, or a ctxoffload `ChatModel`. Left out, the
            model of the agent whose request is compacted writes them (its
            `canonical_model`); False: the extractive summary, no model asked.
        max_output_chars: longest answer of a reading tool.
        memory: give the agent the memory tool too (a `LocalWorkspace` only).
        name: the plugin's name in ADK (unique among the runner's plugins).

    Raises:
        ConfigError: `workspace` is no workspace (or a folder that is a file), `config` is
            no `ContextConfig`, `summary_model` is none of the above (a string ADK cannot
            resolve among them), or `max_output_chars` is not a positive int.

    Example::

        offload = ContextOffloadPlugin(
            LocalWorkspace("ws"), config=ContextConfig(context_window=128_000)
        )
        agent = LlmAgent(name="ops", model=model, tools=[fetch_logs, *offload.tools])
        runner = InMemoryRunner(agent=agent, app_name="ops", plugins=[offload])
    """

    def __init__(
        self,
        workspace: Workspace,
        *,
        config: ContextConfig | None = None,
        summary_model: Any = None,
        max_output_chars: int = 20_000,
        memory: bool = False,
        name: str = "ctxoffload",
    ) -> None:
        super().__init__(name=name)
        self.workspace = checked_workspace(workspace, _DOOR)
        self.config = checked_config(config)
        window = self.config.context_window
        self.summaries = SummaryWriter(
            summary_model, adapt=lambda model: adk_summary_model(model, window), takes=TAKES
        )
        checked_positive(max_output_chars, "max_output_chars")
        reading = read_back(workspace, max_output_chars, config=self.config, memory=memory)
        self.tools = [_ReadingTool(function, self) for function in reading.functions]
        self._readers = reading.readers  # what every notice names: these tools
        self._runs = HostRuns(workspace, _DOOR)
        self._left_out = LeftOut(_DOOR)  # (its tools in a run whose runner has not the plugin)
        # Per ADK session: its projector and history (`Kept`: the projector released when a
        # run of it ends; past `SESSIONS_KEPT`, those whose run is over are forgotten).
        self._sessions: Kept[str, _Session] = self._runs.keep(_session_id, _Session.release)
        self._writing: dict[str, Any] = {}  # function call id -> its tool's `writing_as`
        self._overflowed: set[str] = set()
        # Per run and agent: the agent's model, which writes its summaries by default.
        self._agent_models: dict[tuple[str, str], Any] = {}

    # -- the run ------------------------------------------------------------------------------

    @property
    def last_session(self) -> str | None:
        """The session the run begun last through this object writes; None before the first
        (`HostRuns.last_session`): the one an ADK session's run went to, mapped from its
        app, user and id by the one rule."""
        return self._runs.last_session

    async def before_run_callback(self, *, invocation_context: Any) -> Any:
        """A run begins: take its session's lease.

        Raises:
            SessionBusyError: another live run writes the session.
        """
        given = conversation_of(invocation_context.session)
        await self._runs.abegin(
            conversation_session(given),
            invocation_context.invocation_id,
            conversation=given,
            owner=invocation_context,  # a run ADK cancelled ends with its context
        )
        return None

    async def after_run_callback(self, *, invocation_context: Any) -> None:
        """The run has ended: give its session up."""
        session = conversation_session(conversation_of(invocation_context.session))
        run = invocation_context.invocation_id
        for key in [key for key in self._agent_models if key[0] == run]:
            del self._agent_models[key]
        await self._runs.aend(session, run)

    async def before_agent_callback(self, *, agent: Any, callback_context: Any) -> Any:
        """An agent of the run begins: its model (`canonical_model`, the `BaseLlm` its
        model string resolves to) writes its summaries unless `summary_model` says."""
        try:
            model = agent.canonical_model
        except Exception:  # an agent with no model of its own (a workflow agent)
            model = None
        if model is not None:
            self._agent_models[(callback_context.invocation_id, str(agent.name))] = model
        return None

    async def on_run_error_callback(self, *, invocation_context: Any, error: Exception) -> None:
        """The run failed: give its session up (a run that was refused holds nothing)."""
        await self.after_run_callback(invocation_context=invocation_context)

    # -- the model ----------------------------------------------------------------------------

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> Any:
        """Send the model the projection of the request's contents; the events stay."""
        session = self._session(callback_context)
        self._runs.enter(session.id, callback_context.invocation_id, _model_call(callback_context))
        read = session.history.read(llm_request.contents)
        system = session.system(llm_request.config.system_instruction)
        history = [system, *read.msgs] if system is not None else read.msgs
        session.projector.use_model(model_name_of(llm_request.model))
        force = session.id in self._overflowed
        self._overflowed.discard(session.id)
        agent_model = self._agent_models.get(
            (callback_context.invocation_id, str(callback_context.agent_name)),
            llm_request.model,
        )
        projected = await session.projector.project(
            history,
            tools=_schemas(llm_request.config.tools),
            force=force,
            summary_model=self.summaries.model(agent_model),
        )
        llm_request.contents = read.back(projected)
        return None

    async def after_model_callback(self, *, callback_context: Any, llm_response: Any) -> Any:
        """The input tokens the provider reported (`prompt_token_count`, cached ones included)
        decide the next request (`Projector.report_usage`); a streamed chunk changes nothing."""
        if llm_response.partial:
            return None
        session = self._session(callback_context)
        self._runs.leave(session.id, callback_context.invocation_id, _model_call(callback_context))
        usage = llm_response.usage_metadata
        reported = getattr(usage, "prompt_token_count", None)
        if isinstance(reported, int):
            await session.projector.report_usage(reported)
        return None

    async def on_model_error_callback(
        self, *, callback_context: Any, llm_request: Any, error: Exception
    ) -> Any:
        """A request refused as over the window makes the session's next one summarised."""
        session = self._session(callback_context)
        self._runs.leave(session.id, callback_context.invocation_id, _model_call(callback_context))
        if is_context_overflow(error):
            self._overflowed.add(session.id)
        return None

    # -- the tools ----------------------------------------------------------------------------

    async def before_tool_callback(self, *, tool: Any, tool_args: Any, tool_context: Any) -> Any:
        """The tool's events (a memory change) are the session's, and its run is live."""
        session = self._session(tool_context)
        call = tool_context.function_call_id
        self._runs.enter(session.id, tool_context.invocation_id, ("tool", call))
        writing = writing_as(_AGENT, session.id)
        writing.__enter__()
        self._writing[call] = writing
        return None

    async def after_tool_callback(
        self, *, tool: Any, tool_args: Any, tool_context: Any, result: Any
    ) -> Any:
        """A big result becomes `{"result": <its head and a notice>}` (a failed call's
        `{"error": ...}` keeps its key); the whole text goes to the workspace first."""
        session = self._session(tool_context)
        call = tool_context.function_call_id
        self._done(session, tool_context)
        found = _result_text(result)
        if found is None or answers_run(tool, tool_context):
            return None  # (a call that skips summarisation: its result is the answer)
        key, text = found
        if fits_by_size(session.projector.counter, text, self.config.tool_result_limit):
            return None
        block = ToolResultBlock(id=call or "", name=tool.name, output=text, is_error=key == "error")
        kept = await session.projector.offload_tool_result(block)
        if kept.output == text or not isinstance(kept.output, str):
            return None
        return {key: kept.output}

    async def on_tool_error_callback(
        self, *, tool: Any, tool_args: Any, tool_context: Any, error: Exception
    ) -> Any:
        """A tool that failed (or was cancelled) has ended too."""
        self._done(self._session(tool_context), tool_context)
        return None

    def _done(self, session: _Session, tool_context: Any) -> None:
        call = tool_context.function_call_id
        self._runs.leave(session.id, tool_context.invocation_id, ("tool", call))
        writing = self._writing.pop(call, None)
        if writing is not None:
            writing.__exit__(None, None, None)

    # -- sessions -----------------------------------------------------------------------------

    def plugged_into(self, context: Any) -> bool:
        """Whether the run of a callback's (or a tool's) context is one this plugin began:
        its runner has the plugin."""
        return self._runs.holds(conversation_session(conversation_of(context.session)))

    def _session(self, context: Any) -> _Session:
        """The state of the ADK session a callback's context belongs to."""
        given = conversation_of(context.session)

        def make() -> _Session:
            name = conversation_session(given)
            summaries = self.summaries
            projector = Projector(
                self.workspace,
                name,
                config=self.config,
                # Each request names who writes its summary; a ChatModel given as it is
                # may name the window too, as it did (an adapted ADK model's is a guess).
                model=summaries.fixed if summaries.fixed is summaries.given else None,
                reader_tools=self._readers,
            )
            return _Session(name, projector)

        # A server keeps one plugin for every user's sessions. One forgotten projects as a
        # session resumed in a new process does, from its record, when it is back.
        session, forgotten = self._sessions.get_or_make(given, make)
        for old in forgotten:
            self._overflowed.discard(old.id)
        return session


class _ReadingTool(_FunctionTool):  # type: ignore[misc]
    """A read-back tool of the plugin, as an ADK `FunctionTool`: a request it is added to, or a
    call of it, in a run the plugin did not begin (its runner has not the plugin) is said
    once (`LeftOut`), before that run's first model call."""

    def __init__(self, function: Any, plugin: ContextOffloadPlugin) -> None:
        super().__init__(function)
        # Held, not weakly: a plugin made only for its tools (never given to a runner) is
        # what this tool must tell of.
        self._plugin = plugin

    def __deepcopy__(self, memo: dict[int, Any]) -> _ReadingTool:
        """A copy whose plugin is this tool's (ADK copies an agent's tools deeply, and a
        plugin, its locks among it, is one object)."""
        copied = type(self).__new__(type(self))
        memo[id(self)] = copied
        for name, value in vars(self).items():
            setattr(copied, name, value if name == "_plugin" else copy.deepcopy(value, memo))
        return copied

    async def process_llm_request(self, *, tool_context: Any, llm_request: Any) -> None:
        self._check(tool_context)
        await super().process_llm_request(tool_context=tool_context, llm_request=llm_request)

    async def run_async(self, *, args: dict[str, Any], tool_context: Any) -> Any:
        self._check(tool_context)
        return await super().run_async(args=args, tool_context=tool_context)

    def _check(self, tool_context: Any) -> None:
        plugin = self._plugin
        plugin._left_out.check(plugin.plugged_into(tool_context))


def _session_id(session: _Session) -> str:
    return session.id


def conversation_of(session: Any) -> str:
    """The host's own id of an ADK session's conversation: `app/user/session id`, since ADK
    keeps a session id unique only within its app and user (two users' "default" sessions
    are two conversations). A `/` or `%` inside a part is written `%2F` or `%25`, so no two
    sessions give one id."""
    return "/".join(
        str(part).replace("%", "%25").replace("/", "%2F")
        for part in (session.app_name, session.user_id, session.id)
    )


class _Session:
    """One ADK session's projector, the contents read of it, and its instruction as a `Msg`."""

    def __init__(self, session: str, projector: Projector) -> None:
        self.id = session
        self.projector = projector
        self.history = GenaiHistory()
        self._system: tuple[str, Msg] | None = None

    def release(self) -> None:
        """A run of the session gave it up: its projector lets go of what only that run
        needed (`Projector.release`)."""
        self.projector.release()

    def system(self, instruction: Any) -> Msg | None:
        """The request's system instruction as a leading system `Msg` (it counts against
        the window and is never summarised), the same object while it says the same."""
        text = _instruction_text(instruction)
        if not text:
            return None
        if self._system is None or self._system[0] != text:
            blocks = [TextBlock(text=text)]
            msg = Msg(role="system", content=text, id="system." + message_id(0, 0, blocks))
            self._system = (text, msg)
        return self._system[1]


_DOOR = DOORS["google-adk"]
_AGENT = _DOOR.name
"""Who the events of a run's tools are written by."""


def _model_call(context: Any) -> tuple[str, str]:
    """The name of a model call in flight: an agent makes one at a time."""
    return ("model", str(context.agent_name))


def _instruction_text(instruction: Any) -> str:
    """The text of a `GenerateContentConfig.system_instruction` (a string, a part, a content
    or a list of them)."""
    if instruction is None:
        return ""
    if isinstance(instruction, str):
        return instruction
    if isinstance(instruction, list):
        return "\n".join(_instruction_text(item) for item in instruction)
    parts = getattr(instruction, "parts", None)
    if parts is not None:
        return "\n".join(part.text or "" for part in parts)
    text = getattr(instruction, "text", None)
    return text if isinstance(text, str) else str(instruction)


def _schemas(tools: Any) -> list[dict[str, Any]]:
    """The request's function declarations as OpenAI schemas (they count against the
    window)."""
    out: list[dict[str, Any]] = []
    for tool in tools or ():
        for declaration in getattr(tool, "function_declarations", None) or ():
            parameters = declaration.parameters_json_schema
            if parameters is None and declaration.parameters is not None:
                parameters = declaration.parameters.model_dump(mode="json", exclude_none=True)
            out.append(
                {
                    "type": "function",
                    "function": {
                        "name": declaration.name or "",
                        "description": declaration.description or "",
                        "parameters": parameters or {},
                    },
                }
            )
    return out


def _result_text(result: Any) -> tuple[str, str] | None:
    """The key a tool's result goes back under and its text as the model reads it: a string
    as it is (alone, or as `{"result": ...}`, or a failed call's `{"error": ...}`), any other
    value as its JSON (a value JSON has no form for, a datetime, a set, a model, as its
    `str`, as `response_text` writes it); None for a value holding bytes (media, which ADK
    sends as parts of their own)."""
    if isinstance(result, str):
        return "result", result
    try:
        json.dumps(result, ensure_ascii=False, default=_no_media)
    except (TypeError, ValueError):
        return None
    return response_key(result), response_text(result)


def _no_media(value: Any) -> str:
    """`default` of `json.dumps` for a tool's result: bytes are media (no text of them is
    the result); any other value is written as its `str`."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError("media")
    return str(value)
