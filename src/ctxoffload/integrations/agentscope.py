"""AgentScope 2.x: a ctxoffload workspace as the agent's offloader, and what completes it.

`LocalWorkspace` already satisfies AgentScope's `Offloader` protocol, and works as
`Agent(offloader=LocalWorkspace(...))`: references are absolute paths (AgentScope's Read
refuses relative ones), data blocks come back as AgentScope `DataBlock` objects with a `file://`
URL (its `URLSource.url` is a URL type; its formatters read `file://` from disk), and
context.jsonl lines load back with `Msg.model_validate_json`. Three things need more than
the protocol, and `AgentScopeOffloader` adds them:

- the whole tool result in the file: AgentScope hands `offload_tool_result` only the part
  it cut off, so the file would start mid-line and its line numbers would be shifted. The
  offloader's `middleware` sees the whole tool response before AgentScope splits it and
  stores that, so line N of the file is line N of what the tool returned;
- a failing workspace never aborts the reply: AgentScope catches no offloader error. When
  the whole result cannot be stored, the middleware keeps it whole in the context (no split
  happens for that call: the limit is read per call, see `_keep_whole`); when compressed
  messages cannot be stored, the compression is skipped and the context stays as it was
  (AgentScope's CompressContext tool is told it failed); either way a warning is logged and
  the reply goes on. Without the middleware, a cut part that cannot be stored fails the
  reply, as with the bare workspace: AgentScope drops it from the context once it is given;
- a reader's answer (`Compressor.reads_back`: the retrieval tool, Read, Grep) is never cut
  and stored again: it is bounded by its own `max_output_chars`;
- reading long lines back: AgentScope's Grep hides lines over 500 characters and its Read
  cuts them at 2,000; `tools()` gives ctxoffload's `retrieve_offloaded_content` as an
  AgentScope tool, which pages inside a long line (`char_offset`) and decodes context.jsonl.

Each data block it stores (an image past AgentScope's limit, an attachment the model cannot
take) is named by a `data` event in the replying agent's session, so `gc` keeps the file
while the agent holds only its URL. One stored outside any reply (`agent.observe`: AgentScope
does not say whose) is named in the door's own session (`door_session`, a name no
conversation can have), and in the session of each agent whose context names it when its
next reply begins, so under `isolate_sessions` its owner reaches it and no one else does.

A reply holds its session through `HostRuns` (one live writer; a stream read no further is
taken over by the same agent's next reply), and so does `agent.compress_context()` called
outside a reply. A reply begun inside a tool call of a running reply is a sub-agent's: a
child session of the parent's when it would write the parent's, else its own, linked to the
parent either way (`HostRuns.begin_child`, `record_nested`).

Example::

    from agentscope.agent import Agent
    from agentscope.tool import Toolkit
    from ctxoffload import LocalWorkspace
    from ctxoffload.integrations.agentscope import AgentScopeOffloader

    offloader = AgentScopeOffloader(LocalWorkspace("./agent_workspace"))
    agent = Agent(name="analyst", system_prompt="...", model=model,
                  toolkit=Toolkit(tools=[*my_tools, *offloader.tools()]),
                  offloader=offloader, middlewares=[offloader.middleware])

Importing this module does not import AgentScope; `middleware` and `tools()` do.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import importlib
import json
import logging
import uuid
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from typing import Any

from .._disk.events import DataFile
from .._disk.ids import door_session
from .._disk.layout import DATA_REFERENCE
from .._doors.checks import arguments_checked, checked_offloader, checked_positive, not_a_capability
from .._doors.doors import DOORS
from .._doors.identity import conversation_session
from .._doors.runs import ANNOUNCED_KEPT, HostRuns
from .._lease_lost import logged_unless_lease_lost, raised_unless_lease_lost
from ..exceptions import ConfigError, OffloadError, SessionBusyError
from ..workspace import EventLog, Offloader, ReferenceReader, writing_as

__all__ = ["AgentScopeOffloader"]

logger = logging.getLogger("ctxoffload")

# A tool_result_limit no result reaches: what the limit reads, for the one tool call whose
# result must stay whole (see `_keep_whole`), while AgentScope decides whether to split it.
_NO_SPLIT = 10**15

_INSTALL_HINT = "AgentScope is not installed: pip install 'ctxoffload[agentscope]'"

_DOOR = DOORS["agentscope"]

# The reply running in this task (set by the middleware's on_reply, and by on_compress_context
# outside a reply): AgentScope's id of its conversation and the session it writes (the
# conversation's, or a child session for a sub-agent run as a tool). A stored data block is
# recorded there, and what AgentScope offloads for that conversation goes there.
_REPLYING: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "ctxoffload_agentscope_replying", default=None
)


class _Call:
    """The tool call whose result AgentScope is deciding on now, in this task: the file the
    whole result went to, or that it must stay whole (not stored: a failing workspace, or a
    reader's answer)."""

    __slots__ = ("keep_whole", "stored", "tool_id")

    def __init__(self, tool_id: str, *, stored: str | None = None, keep_whole: bool = False):
        self.tool_id = tool_id
        self.stored = stored
        self.keep_whole = keep_whole


# Set by on_acting while AgentScope splits (or not) the result it yielded: one per task, so
# concurrent tool calls (each its own task) never see each other's decision.
_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "ctxoffload_agentscope_call", default=None
)


class _Calling:
    """A tool call of a running reply: a reply begun meanwhile in it is a sub-agent's."""

    __slots__ = ("agent", "session", "tool_id")

    def __init__(self, session: str, agent: str, tool_id: str) -> None:
        self.session = session
        self.agent = agent
        self.tool_id = tool_id


_IN_TOOL: contextvars.ContextVar[_Calling | None] = contextvars.ContextVar(
    "ctxoffload_agentscope_in_tool", default=None
)


class _Reply:
    """A reply of one agent object: whether it waits at a `yield` for its consumer (a
    stream read no further waits there for good), and whether a newer reply of the same
    agent took its session over meanwhile."""

    __slots__ = ("agent", "overtaken", "suspended")

    def __init__(self, agent: Any) -> None:
        self.agent = weakref.ref(agent)
        self.suspended = False
        self.overtaken = False


class _ContextNotStored(OffloadError):
    """offload_context failed; the middleware skips the compression instead of the reply."""


def _agentscope(module: str = "") -> Any:
    """`agentscope` or one of its modules, imported on first use (mypy need not know it)."""
    try:
        return importlib.import_module(f"agentscope{module}")
    except ImportError as exc:  # pragma: no cover - exercised where AgentScope is absent
        raise ConfigError(_INSTALL_HINT) from exc


@arguments_checked
class AgentScopeOffloader:
    """AgentScope's `Offloader` on a ctxoffload workspace, with the middleware and tools that
    complete it (see the module docstring).

    Pass it as `offloader=` and its `middleware` in `middlewares=`; without the middleware
    it behaves as the bare workspace (the file holds the part AgentScope cut off, and a
    reply whose cut part cannot be stored fails, as the bare workspace's does).

    An agent's session is its `state.session_id`, mapped by the one rule every door follows
    (docs/guides/hosts.md); a reply holds the session's lease while it runs, and so does
    `agent.compress_context()` called outside a reply.

    Args:
        workspace: a `LocalWorkspace` (or any ctxoffload workspace, or any `Offloader`;
            `tools()` needs one that reads references back, a `ReferenceReader`).

    Raises:
        ConfigError: `workspace` is not an `Offloader` (a path: pass `LocalWorkspace(path)`;
            a workdir that is a file).
    """

    def __init__(self, workspace: Offloader) -> None:
        self.workspace = checked_offloader(workspace, _DOOR)
        self._runs = HostRuns(self.workspace, _DOOR)
        self._middleware: Any = None
        self._replies: dict[int, _Reply] = {}  # id(agent) -> its reply running or stopped
        # The data blocks stored outside any reply (`agent.observe`), by data/ name, the
        # most recent last: recorded in `_data_session` at once, and in the session of each
        # agent whose context names one at its next reply (`_claim`). `_claimed` is what was.
        self._data_session = door_session(_DOOR.name, "data")
        self._unclaimed: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._claimed: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()
        self._readers: Any = None  # a Compressor (`_rules`)

    def __repr__(self) -> str:
        return f"AgentScopeOffloader({self.workspace!r})"

    # -- AgentScope's Offloader protocol ---------------------------------------------------

    async def offload_data_block(self, block: Any) -> Any:
        """Store a base64 data block in data/; an AgentScope `DataBlock` with a `file://` URL.

        The file is named by a `data` event in the replying agent's session (see the module
        docstring), which `gc` reads: the agent holds only the URL. If storing fails, the
        block comes back unchanged and a warning is logged (AgentScope then treats it as not
        offloaded) instead of aborting the reply.
        """
        try:
            stored = await self.workspace.offload_data_block(block)
        except Exception as exc:
            logger.warning("could not store a data block, leaving it inline: %s", exc)
            return block
        url = _url_of(stored)
        if stored is not block and url is not None and isinstance(self.workspace, EventLog):
            replying = _REPLYING.get()
            if replying is None:
                # Outside a reply (agent.observe): which agent's, AgentScope does not say.
                # Its next reply names it in its own session (`_claim`).
                session_id = self._data_session
                name = DATA_REFERENCE.search(url)
                if name is not None:
                    _keep_recent(self._unclaimed, name.group(1), url)
            else:
                session_id = replying[1]
            await self._record_data(session_id, url, _media_type_of(stored))
        return stored

    async def _record_data(self, session_id: str, url: str, media_type: str | None) -> None:
        named = DataFile(reference=url, media_type=media_type)
        # Stored all the same: the file is kept for gc's grace (an hour) without it.
        with logged_unless_lease_lost(
            "could not record data file %s in session %s", url, session_id
        ):
            await self.workspace.record_event(  # type: ignore[attr-defined]
                session_id, named.kind, **named.fields()
            )

    async def _claim(self, agent: Any, session_id: str) -> None:
        """Name in `session_id` the data blocks stored outside any reply that the agent's
        context holds (its `observe`d attachments), so that its reads reach them under
        `isolate_sessions` and no other session's do."""
        if not self._unclaimed or not isinstance(self.workspace, EventLog):
            return
        for name in _data_names(agent.state.context):
            url = self._unclaimed.get(name)
            if url is None or (session_id, name) in self._claimed:
                continue
            _keep_recent(self._claimed, (session_id, name), None)
            await self._record_data(session_id, url, None)

    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> str:
        """Append compressed messages to the session's context.jsonl; its absolute path.

        Raises:
            OffloadError: the messages could not be stored; the middleware turns this into a
                skipped compression, so the context keeps them.
        """
        session_id = _session_of(session_id)
        with raised_unless_lease_lost(
            lambda exc: _ContextNotStored(f"could not store {len(msgs)} compressed messages: {exc}")
        ):
            return str(await self.workspace.offload_context(session_id, msgs=list(msgs)))

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        """The file holding the whole result (stored by the middleware), else the part given.

        Raises:
            OffloadError: the part AgentScope cut off could not be stored. AgentScope drops
                it from the context once this returns, so the reply fails instead, as with
                the bare workspace; the middleware keeps such a result whole instead.
        """
        tool_id = str(getattr(tool_result, "id", ""))
        call = _CALL.get()
        if call is not None and call.tool_id == tool_id and call.stored is not None:
            return call.stored
        session_id = _session_of(session_id)
        with raised_unless_lease_lost(
            lambda exc: OffloadError(
                f"could not store the part AgentScope cut from tool result {tool_id!r}, so the "
                f"reply stops rather than lose it: {exc}; pass the offloader's middleware "
                "(Agent(middlewares=[offloader.middleware])) to keep such a result whole in "
                "the context instead"
            )
        ):
            return str(await self.workspace.offload_tool_result(session_id, tool_result))

    # -- the middleware ----------------------------------------------------------------------

    @property
    def middleware(self) -> Any:
        """The AgentScope middleware that stores whole tool results and keeps a failing
        workspace from aborting the reply; pass it in `Agent(middlewares=[...])`, with this
        object as the agent's `offloader=`."""
        if self._middleware is None:
            self._middleware = _middleware_class()(self)
        return self._middleware

    def _check_agent(self, agent: Any) -> None:
        """The middleware serves agents whose offloader is this object: with another one
        (or none), the whole results it stores would never be named to the model.

        Raises:
            ConfigError: the agent's offloader is not this object.
        """
        if agent.offloader is not self:
            given = "no offloader" if agent.offloader is None else f"{agent.offloader!r}"
            raise ConfigError(
                f"AgentScope agent {str(agent.name)!r} was given the middleware of {self!r} "
                f"but {given} as its offloader: pass the same object to both, "
                "Agent(offloader=offloader, middlewares=[offloader.middleware])"
            )

    def _rules(self) -> Any:
        """A compressor of the default settings, made once: ctxoffload's rule of which
        tools read back, and the counter a call is first measured with."""
        if self._readers is None:
            from ..compression import Compressor

            self._readers = Compressor()
        return self._readers

    def _reads_back(self, tool_name: str) -> bool:
        """Whether the tool reads offloaded content back (ctxoffload's rule)."""
        return bool(self._rules().reads_back(tool_name))

    async def _cut_call(self, agent: Any, session_id: str, tool_id: str) -> None:
        """Cut the call `tool_id` the model wrote, as every door cuts the newest turn
        (`Compressor.cut_to_fit`), once the tool has run: when its arguments are over the
        room the newest turn keeps (`ContextConfig.calls_room` of the model's `context_size`,
        with the agent's own trigger and reserve ratios), their long strings are stored
        whole, each in a file of the session, and the call in the agent's context keeps a
        head and a notice naming that file (its id, name and other arguments as they were).
        AgentScope sends that call with every later request and compresses only older
        messages: a call that wrote a whole file made each later request over the window,
        and its own compression then failed. An argument that cannot be stored stays whole.
        """
        from .._tokens.counters import fits_by_size
        from ..compression import Compressor, ContextConfig
        from ..messages import Msg, ToolCallBlock, ToolResultBlock

        found = _call_block(agent.state.context, tool_id)
        window = getattr(agent.model, "context_size", None)
        if found is None or not isinstance(found.input, str) or not isinstance(window, int):
            return
        given = agent.context_config
        try:
            config = ContextConfig(
                context_window=window,
                trigger_ratio=given.trigger_ratio,
                reserve_ratio=given.reserve_ratio,
            )
        except (ConfigError, AttributeError, ValueError, TypeError):
            config = ContextConfig(context_window=window)
        room = config.calls_room(window)
        # Most calls are short: their size alone says so, before a compressor is built or
        # a token counted (`fits_by_size`).
        counter = self._rules().counter
        if fits_by_size(counter, found.input, room) or counter.count_text(found.input) <= room:
            return
        compressor = Compressor(
            config,
            offloader=self.workspace,
            session_id=session_id,
            counter=counter,
            context_window=window,
        )
        try:
            arguments = json.loads(found.input)
        except ValueError:
            return
        if not isinstance(arguments, dict):
            return
        call = ToolCallBlock(id=tool_id, name=str(found.name), input=arguments)
        said = Msg(role="assistant", content=[call])
        ran = Msg(role="tool", content=[ToolResultBlock(id=tool_id, name=call.name)])
        cut = (await compressor.cut_to_fit([said, ran], room))[0]
        if cut is said:
            return
        found.input = json.dumps(cut.tool_calls[0].input, ensure_ascii=False)

    async def _store_whole(self, agent: Any, tool_call: Any, response: Any) -> _Call | None:
        """What to do with a tool's response: None when AgentScope will not split it, else the
        call with the file the whole of it went to, or to be kept whole (storing failed)."""
        message = _agentscope(".message")
        content = response.content
        output = [message.TextBlock(text=content)] if isinstance(content, str) else content
        limit = agent.context_config.tool_result_limit  # this call's: not lifted yet
        tokens = await agent.model.count_tokens(
            [message.AssistantMsg(agent.name, content=output)], None
        )
        if tokens <= limit:
            return None
        if self._reads_back(str(tool_call.name)):
            # A reader's answer is bounded by its own max_output_chars: cut and stored again,
            # the model would read the same file in ever smaller pieces.
            return _Call(str(tool_call.id), keep_whole=True)
        block = message.ToolResultBlock(id=tool_call.id, name=tool_call.name, output=output)
        with logged_unless_lease_lost(
            "could not store the result of %s (call %s), keeping it whole in the context",
            tool_call.name,
            tool_call.id,
        ) as failed:
            ref = await self.workspace.offload_tool_result(
                _session_of(agent.state.session_id), block
            )
        if failed:
            return _Call(str(tool_call.id), keep_whole=True)
        return _Call(str(tool_call.id), stored=str(ref))

    def tools(self, *, max_output_chars: int = 20_000) -> list[Any]:
        """ctxoffload's `retrieve_offloaded_content` as an AgentScope `FunctionTool`.

        Read-only and allowed without asking. It reads any reference this workspace gave
        (paths and `file://` URLs), decodes context.jsonl lines to the messages they hold,
        searches with `pattern`, and pages inside a long line with `char_offset`. Its
        answers are never cut or stored again by the middleware.

        Raises:
            ConfigError: the workspace is an `Offloader` that cannot read references back
                (not a `ReferenceReader`), or `max_output_chars` is not a positive int (at
                least 1,000).
        """
        from ..readback import retrieval_tool

        checked_positive(max_output_chars, "max_output_chars")
        source = self.workspace
        if not isinstance(source, ReferenceReader):
            raise not_a_capability(
                source,
                ReferenceReader,
                role="workspace",
                fix="the retrieval tool reads offloaded content back through read_reference; "
                "pass a LocalWorkspace",
            )
        permission = _agentscope(".permission")
        function = retrieval_tool(source, max_output_chars=max_output_chars, images=False)
        tool = _agentscope(".tool").FunctionTool(
            function,
            is_read_only=True,
            permission=permission.PermissionDecision(
                behavior=permission.PermissionBehavior.ALLOW,
                message="reading back offloaded content is always allowed",
            ),
        )
        return [tool]


def _session_of(conversation: object) -> str:
    """The session AgentScope's `session_id` writes: the running reply's when it is that
    conversation's (a sub-agent's child session), else the conversation's own."""
    replying = _REPLYING.get()
    if replying is not None and replying[0] == str(conversation):
        return replying[1]
    return conversation_session(conversation)


def _call_block(context: Iterable[Any], tool_id: str) -> Any:
    """The tool call block `tool_id` in an AgentScope context (the newest first), or None."""
    for msg in reversed(list(context)):
        content = getattr(msg, "content", None)
        if getattr(msg, "role", None) != "assistant" or not isinstance(content, list):
            continue
        for block in content:
            if getattr(block, "type", None) == "tool_call" and getattr(block, "id", "") == tool_id:
                return block
    return None


def _keep_recent(kept: collections.OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """Put `key` last in `kept`, the oldest forgotten past `ANNOUNCED_KEPT`."""
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > ANNOUNCED_KEPT:
        kept.popitem(last=False)


def _data_names(context: Iterable[Any]) -> set[str]:
    """The data/ names the text of AgentScope messages mentions (the notices AgentScope
    writes for the attachments it stored)."""
    names: set[str] = set()
    for msg in context:
        content = getattr(msg, "content", None)
        for block in content if isinstance(content, list) else ():
            for text in (getattr(block, "text", None), getattr(block, "hint", None)):
                if isinstance(text, str):
                    names.update(m.group(1) for m in DATA_REFERENCE.finditer(text))
    return names


def _url_of(block: Any) -> str | None:
    """The URL of a block's URL source (attribute or dict form), or None."""
    source = block.get("source") if isinstance(block, dict) else getattr(block, "source", None)
    url = source.get("url") if isinstance(source, dict) else getattr(source, "url", None)
    return None if url is None else str(url)


def _media_type_of(block: Any) -> str | None:
    source = block.get("source") if isinstance(block, dict) else getattr(block, "source", None)
    media = (
        source.get("media_type")
        if isinstance(source, dict)
        else getattr(source, "media_type", None)
    )
    return None if media is None else str(media)


_PER_CALL: dict[type, type] = {}
"""AgentScope's `ContextConfig` class -> its per-call subclass (`_per_call_config_class`)."""


def _per_call_config_class(base: type) -> type:
    """AgentScope's `ContextConfig` class `base`, with a `tool_result_limit` that no result
    reaches for the tool call whose result must stay whole (`_CALL`), and is the one set for
    every other: concurrent tool calls, each in a task of its own, never see another's."""
    made = _PER_CALL.get(base)
    if made is not None:
        return made

    class PerCallContextConfig(base):  # type: ignore[misc]
        def __getattribute__(self, name: str) -> Any:
            if name == "tool_result_limit":
                call = _CALL.get()
                if call is not None and call.keep_whole:
                    return _NO_SPLIT
            return super().__getattribute__(name)

    PerCallContextConfig.__name__ = PerCallContextConfig.__qualname__ = base.__name__
    _PER_CALL[base] = PerCallContextConfig
    return PerCallContextConfig


def _keep_whole(agent: Any) -> None:
    """Let the agent's `tool_result_limit` be lifted per tool call (`_CALL`): its config is
    replaced, the first time, by an equal one that reads the limit per call (an agent-wide
    limit lifted for one call would keep another call's result whole meanwhile, or make it
    be cut without the whole of it stored)."""
    config = agent.context_config
    if type(config) not in _PER_CALL.values():
        agent.context_config = _per_call_config_class(type(config))(**dict(config))


def _middleware_class() -> type:
    """The middleware class, built on first use so that importing this module is free."""
    base: type = _agentscope(".middleware").MiddlewareBase
    tool_response: type = _agentscope(".tool").ToolResponse

    class CtxOffloadMiddleware(base):  # type: ignore[misc]
        """Stores whole tool results before AgentScope splits them, and turns a failing
        workspace into a warning instead of an aborted reply."""

        def __init__(self, offloader: AgentScopeOffloader) -> None:
            self.offloader = offloader

        async def on_reply(
            self,
            agent: Any,
            input_kwargs: dict[str, Any],
            next_handler: Callable[..., AsyncGenerator[Any, None]],
        ) -> AsyncGenerator[Any, None]:
            # The data blocks stored during this reply are recorded in the agent's session,
            # every event written meanwhile names the agent, and the session has one live
            # writer: a second reply on it (another agent object, another process) gets
            # SessionBusyError until this one ends. A reply of the same agent whose stream
            # was read no further (a consumer's `break`) is taken over by the next one.
            door = self.offloader
            door._check_agent(agent)
            conversation = str(agent.state.session_id)
            name = str(agent.name)
            reply, run = _Reply(agent), uuid.uuid4().hex
            previous = door._replies.get(id(agent))
            if previous is not None and previous.agent() is agent and previous.suspended:
                previous.overtaken = True
            session = await _begin(door, agent, conversation, run, lambda: not reply.overtaken)
            door._replies[id(agent)] = reply
            token = _REPLYING.set((conversation, session))
            try:
                await door._claim(agent, session)
                with writing_as(name, session):
                    async for item in next_handler(**input_kwargs):
                        reply.suspended = True
                        yield item
                        reply.suspended = False
                        if reply.overtaken:
                            raise SessionBusyError(
                                f"AgentScope: this reply of agent {name!r} was read no further "
                                "and a newer reply of the same agent took its session "
                                f"{session!r} over; it writes no more",
                                session,
                                {"agent": name},
                            )
            finally:
                if door._replies.get(id(agent)) is reply:
                    del door._replies[id(agent)]
                await door._runs.aend(session, run)
                # Resumed in another context (a consumer that moved between tasks): that
                # context never saw the value.
                with contextlib.suppress(ValueError):
                    _REPLYING.reset(token)

        async def on_acting(
            self,
            agent: Any,
            input_kwargs: dict[str, Any],
            next_handler: Callable[..., AsyncGenerator[Any, None]],
        ) -> AsyncGenerator[Any, None]:
            door = self.offloader
            door._check_agent(agent)
            tool_call = input_kwargs["tool_call"]
            replying = _REPLYING.get()
            session = replying[1] if replying else _session_of(agent.state.session_id)
            calling = _IN_TOOL.set(_Calling(session, str(agent.name), str(tool_call.id)))
            try:
                async for item in next_handler(**input_kwargs):
                    if not isinstance(item, tool_response):
                        yield item
                        continue
                    # The tool has run: a long argument of the call the model wrote is what
                    # the model is sent of it from now on, cut once stored whole.
                    await door._cut_call(agent, session, str(tool_call.id))
                    call = await door._store_whole(agent, tool_call, item)
                    if call is None:
                        yield item
                        continue
                    if call.keep_whole:
                        _keep_whole(agent)
                    # AgentScope splits the result, and names the file, while this generator
                    # waits at `yield`, in this task: what `_CALL` says holds for this call.
                    decided = _CALL.set(call)
                    try:
                        yield item
                    finally:
                        with contextlib.suppress(ValueError):
                            _CALL.reset(decided)
            finally:
                with contextlib.suppress(ValueError):
                    _IN_TOOL.reset(calling)

        async def on_compress_context(
            self,
            agent: Any,
            input_kwargs: dict[str, Any],
            next_handler: Callable[..., Awaitable[None]],
        ) -> None:
            door = self.offloader
            door._check_agent(agent)
            if _REPLYING.get() is not None:
                await self._compress(input_kwargs, next_handler)
                return
            # Called outside a reply (agent.compress_context()): it writes the session, so it
            # holds the session's lease as a reply does.
            conversation = str(agent.state.session_id)
            run = uuid.uuid4().hex
            session = await _begin(door, agent, conversation, run, None, nested=False)
            token = _REPLYING.set((conversation, session))
            try:
                await door._claim(agent, session)
                with writing_as(str(agent.name), session):
                    await self._compress(input_kwargs, next_handler)
            finally:
                await door._runs.aend(session, run)
                with contextlib.suppress(ValueError):
                    _REPLYING.reset(token)

        async def _compress(
            self, input_kwargs: dict[str, Any], next_handler: Callable[..., Awaitable[None]]
        ) -> None:
            try:
                await next_handler(**input_kwargs)
            except _ContextNotStored as exc:
                if _IN_TOOL.get() is not None:
                    # The model asked for it (AgentScope's CompressContext tool): the tool
                    # must say it failed, not that the context was too short to compress.
                    raise
                # AgentScope stores before it replaces the context, so nothing was dropped.
                logger.warning("%s; the context was not compressed and keeps them", exc)

    return CtxOffloadMiddleware


async def _begin(
    door: AgentScopeOffloader,
    agent: Any,
    conversation: str,
    run: str,
    live: Callable[[], bool] | None,
    *,
    nested: bool = True,
) -> str:
    """Take the session of the agent's reply `run` (`HostRuns`): its conversation's, or, for
    a reply begun in a tool call of a running reply (a sub-agent run as a tool), a child of
    the parent's session when it would write that one, else its own, linked to the parent.

    Returns:
        The session the reply writes.

    Raises:
        SessionBusyError: another live run writes the session.
    """
    session = conversation_session(conversation)
    name = str(agent.name)
    calling = _IN_TOOL.get() if nested else None
    if calling is None:
        await door._runs.abegin(session, run, conversation=conversation, live=live, agent=name)
        return session
    link = {"session": calling.session, "agent": calling.agent, "tool_id": calling.tool_id}
    if session == calling.session or session.startswith(f"{calling.session}--"):
        return await asyncio.to_thread(
            door._runs.begin_child, calling.session, name, run, link=link, live=live
        )
    await door._runs.abegin(
        session,
        run,
        conversation=conversation,
        live=live,
        agent=name,
        parent={"name": name, **link},
    )
    return session
