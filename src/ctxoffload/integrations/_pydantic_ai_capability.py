"""`ContextOffload`: ctxoffload as a pydantic-ai capability.

pydantic-ai keeps the run's history itself and sends it whole on every model request; a
capability's `before_model_request` may change what one request is sent without touching that
history. So a big tool result is stored whole in `after_tool_execute` (the history keeps its
head and a notice), and every request's messages go through a `Projector`, which re-applies the
same truncations and summary each time: a run resumed from its `message_history` projects the
same way, from the workspace's record.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import uuid
from collections.abc import Sequence
from typing import Any

from .._doors.checks import arguments_checked, checked_config, checked_positive, checked_workspace
from .._doors.doors import DOORS
from .._doors.identity import conversation_session, fresh_session, given_session
from .._doors.runs import HostRuns, Kept
from .._overflow import is_context_overflow
from .._tokens.counters import fits_by_size
from ..compression import ContextConfig, Projector
from ..exceptions import ConfigError
from ..messages import Msg, ToolResultBlock
from ..model import ChatModel
from ..workspace import Workspace, writing_as
from ._model_name import model_name_of
from ._pydantic_ai_messages import (
    INSTALL_HINT,
    from_pydantic_ai,
    holds_files,
    projected_copy,
    to_pydantic_ai,
    tool_return_text,
)
from ._pydantic_ai_summary import summary_writer
from ._reading import read_back

__all__ = ["ContextOffload"]

try:
    _AbstractCapability: Any = importlib.import_module(
        "pydantic_ai.capabilities"
    ).AbstractCapability
    _FunctionToolset: Any = importlib.import_module("pydantic_ai.toolsets").FunctionToolset
    _RetryModelRequest: Any = importlib.import_module("pydantic_ai.exceptions").RetryModelRequest
    _ToolReturn: Any = importlib.import_module("pydantic_ai.messages").ToolReturn
except ImportError as exc:  # pragma: no cover - exercised where pydantic-ai is absent
    raise ConfigError(INSTALL_HINT) from exc


@arguments_checked
class ContextOffload(_AbstractCapability):  # type: ignore[misc]
    """A pydantic-ai capability that offloads big tool results and compacts what the model is
    sent, into a ctxoffload workspace.

    - A tool result that is text over the config's `tool_result_limit` is stored whole
      (`sessions/<session>/tool_result-<call id>.txt`) and enters the history as its head
      plus the notice naming that file.
    - Every model request is sent the projection of its messages: offloaded results as head +
      notice, and past the config's trigger the older messages as a summary (they go to the
      session's context.jsonl first). The history keeps every message. A request the
      provider refuses as over its window (`is_context_overflow`) is summarised at once and
      sent again, once.
    - Its toolset gives the agent Read, Grep and Glob (a workspace on a local folder) and
      `retrieve_offloaded_content`, to read back what was offloaded; with `memory=True`, the
      memory tool too (`memories/` of the workspace, every change an event of the run's
      session).

    The session is the run's `conversation_id` (`agent.run(..., conversation_id=...)`, or the
    one of the `message_history` passed back), mapped by the one rule every door follows
    (docs/guides/hosts.md). A run that names none gets `session_id` as its conversation id
    (pydantic-ai's default conversation id), else a new one from pydantic-ai; a hook called
    outside a run uses `session_id`, else a new session.
    A run holds the session's lease while it runs (one live run per conversation): a second
    run of the same conversation at the same time fails at its start with `SessionBusyError`
    naming the first, instead of writing the same files.

    Args:
        workspace: where offloaded content goes (a `Workspace`; a path is refused: pass
            `LocalWorkspace(path)`).
        config: when to truncate and when to summarise (its `context_window` is the window).
        summary_model: what writes summaries: a pydantic-ai `Model` or model name
            ("anthropic:claude-haiku-4-5", resolved by pydantic-ai's `infer_model` when the
            capability is built), or a ctxoffload `ChatModel`; left out, the run's own model;
            False for the extractive summary. A pydantic-ai model is asked through an output
            tool, outside the run (no message, usage or span of the run holds the call).
        session_id: the session (a plain name) of every run that names no conversation (no
            `conversation_id` passed, none on its `message_history`, or `"new"`) and of
            hooks called outside a run; None for a new conversation each such run.
        max_output_chars: longest answer of a reading tool.
        memory: give the agent the memory tool too (a `LocalWorkspace` only).

    Raises:
        ConfigError: `workspace` is no workspace (or a folder that is a file), `config` is
            no `ContextConfig`, `max_output_chars` is not a positive int, or
            `summary_model` is none of the above (a name `infer_model` cannot resolve:
            pydantic-ai's reason is given).
        InvalidSessionId: `session_id` is not a plain name.

    Example::

        offload = ContextOffload(LocalWorkspace("ws"), config=ContextConfig(context_window=128_000))
        agent = Agent(model, tools=[fetch_logs], capabilities=[offload])
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
        self.workspace = checked_workspace(workspace, _DOOR)
        self.memory = memory
        self.config = checked_config(config)
        self._summaries = summary_writer(summary_model, self.config.context_window)
        self.session_id = given_session(session_id)
        if session_id is not None and not _NAMES_DEFAULT_CONVERSATION:  # pragma: no cover
            raise ConfigError(
                f"session_id {session_id!r} needs a pydantic-ai whose capabilities name a "
                "run's default conversation (get_default_conversation_id): upgrade "
                "pydantic-ai, or pass conversation_id= to agent.run instead"
            )
        self.max_output_chars = checked_positive(max_output_chars, "max_output_chars")
        # The run's conversation id as pydantic-ai gave it (recorded in the `door` event).
        self._conversation: object = None
        # Its tools' caps are checked now, not at the first run; every notice names them.
        self._readers = read_back(
            workspace, self.max_output_chars, config=self.config, memory=memory
        ).readers
        self._projector: Projector | None = None
        # The request step's history (`Msg`s and pydantic-ai messages), and whether its
        # last attempt was refused as over the window.
        self._step: tuple[list[Msg], list[Any]] = ([], [])
        self._overflowed = False
        # The runs of this capability's copies holding their session's lease, and per
        # session its projector, kept for the runs that follow (the provider's last reported
        # usage and the counts stay with it; `Kept`: released when a run of it ends, and
        # past `SESSIONS_KEPT` forgotten once its run is over).
        self._runs = HostRuns(self.workspace, _DOOR)
        self._projectors: Kept[str, Projector] = self._runs.keep(_session_of, Projector.release)

    @property
    def last_session(self) -> str | None:
        """The session the run begun last through this object writes; None before the first
        (`HostRuns.last_session`): where a run given no conversation_id went."""
        return self._runs.last_session

    async def for_run(self, ctx: Any) -> ContextOffload:
        """A copy of this capability holding the run's projector (its session)."""
        given = getattr(ctx, "conversation_id", None)
        session = conversation_session(given) if given else self._default_session()
        run = copy.copy(self)  # its runs and projectors are this capability's
        run.session_id = session
        run._conversation = given or None
        run._step, run._overflowed = ([], []), False
        # One capability serves every conversation of a server. One forgotten projects as a
        # run resumed in a new process does, from its record, when it is back.
        run._projector, _ = self._projectors.get_or_make(
            session,
            lambda: self._new_projector(session, getattr(ctx, "model", None)),
        )
        return run

    async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
        """Hold the session's lease for the run; give it up however the run ends."""
        session = self._run_projector().session_id
        run = getattr(ctx, "run_id", None) or uuid.uuid4().hex
        ended = False
        await self._runs.abegin(
            session, run, conversation=self._conversation, live=lambda: not ended
        )
        try:
            with writing_as(_AGENT, session):  # what its tools record: this run's
                return await handler()
        finally:
            ended = True
            await self._runs.aend(session, run)

    def get_default_conversation_id(self, run_id: str) -> str | None:
        """The conversation of a run that names none (no `conversation_id` passed, none on
        its `message_history`, or `"new"`): `session_id`, else None (pydantic-ai makes a
        new one). pydantic-ai gives every run a conversation id, so this is where the
        capability's `session_id` names a run's session."""
        return self.session_id

    def _default_session(self) -> str:
        """The session of a run or a hook with no conversation id: `session_id`, else one
        new session, kept for this capability's later calls."""
        if self.session_id is None:
            self.session_id = fresh_session(
                _DOOR, "the run has no conversation_id and the capability no session_id"
            )
        return self.session_id

    def get_toolset(self) -> Any:
        """Read, Grep and Glob (a workspace on a folder) or the retrieval tool (one with
        none), as a pydantic-ai toolset: the tools every notice names."""
        reading = read_back(
            self.workspace,
            self.max_output_chars,
            memory=self.memory,
            session_id=self.session_id,
        )
        return _FunctionToolset(tools=reading.functions)

    async def after_tool_execute(
        self, ctx: Any, *, call: Any, tool_def: Any, args: Any, result: Any
    ) -> Any:
        """A big result enters the history as its head and a notice: text as it is, any
        other value as the JSON text pydantic-ai would send the model (an image or a file
        stays as it is: the projection limits those). A `ToolReturn` keeps its `content`
        (sent beside the result) and its `metadata`: its `return_value` alone is the result."""
        if isinstance(result, _ToolReturn):
            value = await self.after_tool_execute(
                ctx, call=call, tool_def=tool_def, args=args, result=result.return_value
            )
            if value is result.return_value:
                return result
            return dataclasses.replace(result, return_value=value)
        if holds_files(result):
            return result
        text = tool_return_text(call.tool_name, call.tool_call_id, result)
        projector = self._run_projector()
        if fits_by_size(projector.counter, text, self.config.tool_result_limit):
            return result
        block = ToolResultBlock(id=call.tool_call_id, name=call.tool_name, output=text)
        kept = await projector.offload_tool_result(block)
        return kept.output if isinstance(kept.output, str) else result

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        """Send the model the projection of the request's messages; the history stays."""
        messages = list(request_context.messages)
        history = from_pydantic_ai(messages)
        self._step, self._overflowed = (history, messages), False
        tools = _schemas(request_context.model_request_parameters)
        projector = self._run_projector()
        projector.use_model(model_name_of(request_context.model))  # its first request picks
        projected = await projector.project(history, tools=tools)
        return dataclasses.replace(request_context, messages=_back(projected, history, messages))

    async def after_model_request(self, ctx: Any, *, request_context: Any, response: Any) -> Any:
        """The input tokens the provider reported for the request (pydantic-ai's
        `input_tokens`, cache reads and writes included) decide the next one
        (`Projector.report_usage`); a response without usage changes nothing, and so does
        one of pydantic-ai's `FunctionModel` or `TestModel`, whose usage is a guess from
        word counts, not a provider's count."""
        if getattr(request_context.model, "system", None) in _GUESSED_USAGE:
            return response
        usage = getattr(response, "usage", None)
        reported = getattr(usage, "input_tokens", 0)
        if isinstance(reported, int) and not getattr(usage, "unmeasured_requests", 0):
            await self._run_projector().report_usage(reported)
        return response

    async def on_model_request_error(
        self, ctx: Any, *, request_context: Any, error: Exception
    ) -> Any:
        """A request refused as over the window is attempted once more, summarised."""
        if self._overflowed or not is_context_overflow(error):
            raise error
        self._overflowed = True
        raise _RetryModelRequest() from error

    async def prepare_model_request(self, ctx: Any, request_context: Any) -> Any:
        """The attempt after an overflow sends the step's history summarised at once."""
        if not self._overflowed:
            return request_context
        history, messages = self._step
        tools = _schemas(request_context.model_request_parameters)
        projected = await self._run_projector().project(history, tools=tools, force=True)
        return dataclasses.replace(request_context, messages=_back(projected, history, messages))

    def _run_projector(self) -> Projector:
        if self._projector is None:  # a hook called outside a run (no `for_run`)
            self._projector = self._new_projector(self._default_session())
        return self._projector

    def _new_projector(self, session: str, model: Any = None) -> Projector:
        """A session's projector; its summaries are written by `summary_model`, else by
        `model`, the run's own (`ctx.model`), else extracted."""
        return Projector(
            self.workspace,
            session,
            config=self.config,
            model=self._summaries.model(model),
            reader_tools=self._readers,
        )


_DOOR = DOORS["pydantic-ai"]
_AGENT = _DOOR.name
"""Who a run's lease and its tools' events are written by."""


def _session_of(projector: Projector) -> str:
    return projector.session_id


_NAMES_DEFAULT_CONVERSATION = hasattr(_AbstractCapability, "get_default_conversation_id")
"""Whether pydantic-ai asks its capabilities for the conversation of a run that names none
(2.61 and later, which the extra requires): `session_id` names it through that hook."""

_GUESSED_USAGE = frozenset({"function", "test"})
"""The `Model.system` of pydantic-ai's models whose usage is estimated, not reported."""


def _schemas(parameters: Any) -> list[dict[str, Any]]:
    """The request's tools as OpenAI schemas (they count against the window)."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": tool.parameters_json_schema,
            },
        }
        for tool in [*parameters.function_tools, *parameters.output_tools]
    ]


def _back(projected: Sequence[Msg], history: Sequence[Msg], originals: Sequence[Any]) -> list[Any]:
    """The pydantic-ai messages for a projection: the original object for every message whose
    `Msg`s the projection kept as they were, a copy where it cut one (`projected_copy`: the
    parts it kept as they were, a cut tool return with its files), new requests for a
    summary."""
    given = {msg.id: msg for msg in history}
    groups: list[tuple[int | None, list[Msg]]] = []
    for msg in projected:
        origin = int(msg.id.split(".")[0]) if msg.id in given else None
        if groups and origin is not None and groups[-1][0] == origin:
            groups[-1][1].append(msg)
        else:
            groups.append((origin, [msg]))
    out: list[Any] = []
    for origin, msgs in groups:
        if origin is None:
            out.extend(to_pydantic_ai(msgs))
            continue
        original = originals[origin]
        whole = [msg for msg in history if msg.id.split(".")[0] == str(origin)]
        if [m.content for m in msgs] == [m.content for m in whole]:
            out.append(original)
        else:
            previous = originals[origin - 1] if origin else None
            out.append(projected_copy(original, msgs, previous))
    return out
