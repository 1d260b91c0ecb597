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
  happens for it); when compressed messages cannot be stored, the compression is skipped
  and the context stays as it was; either way a warning is logged and the reply goes on;
- reading long lines back: AgentScope's Grep hides lines over 500 characters and its Read
  cuts them at 2,000; `tools()` gives ctxoffload's `retrieve_offloaded_content` as an
  AgentScope tool, which pages inside a long line (`char_offset`) and decodes context.jsonl.

Each data block it stores (an image past AgentScope's limit, an attachment the model cannot
take) is named by a `data` event in the replying agent's session (the middleware knows it;
without the middleware, in a session called `agentscope`), so `gc` keeps the file while the
agent holds only its URL.

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

import contextlib
import contextvars
import importlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any

from .._disk.events import DataFile
from .._doors.checks import checked_offloader, not_a_capability
from .._doors.doors import DOORS
from .._doors.identity import conversation_session
from .._doors.runs import begin_run
from ..exceptions import ConfigError, OffloadError
from ..workspace import EventLog, Offloader, ReferenceReader, writing_as

__all__ = ["AgentScopeOffloader"]

logger = logging.getLogger("ctxoffload")

# A tool_result_limit no result reaches: set while a result that could not be stored passes
# through AgentScope's split, so that it stays whole in the context.
_NO_SPLIT = 10**15

_INSTALL_HINT = "AgentScope is not installed: pip install 'ctxoffload[agentscope]'"

_DOOR = DOORS["agentscope"]

# The session of the agent whose reply is running (set by the middleware's on_reply): where
# a stored data block is recorded. Without the middleware (no reply is known), the blocks are
# named in `_DATA_SESSION`, which holds nothing but those names: a data/ file is content
# addressed and shared by every session anyway; the name keeps it from gc.
_REPLYING_SESSION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "ctxoffload_agentscope_session", default=None
)
_DATA_SESSION = "agentscope"


class _ContextNotStored(OffloadError):
    """offload_context failed; the middleware skips the compression instead of the reply."""


def _agentscope(module: str = "") -> Any:
    """`agentscope` or one of its modules, imported on first use (mypy need not know it)."""
    try:
        return importlib.import_module(f"agentscope{module}")
    except ImportError as exc:  # pragma: no cover - exercised where AgentScope is absent
        raise ConfigError(_INSTALL_HINT) from exc


class AgentScopeOffloader:
    """AgentScope's `Offloader` on a ctxoffload workspace, with the middleware and tools that
    complete it (see the module docstring).

    Pass it as `offloader=` and its `middleware` in `middlewares=`; without the middleware
    it behaves as the bare workspace (the file holds the part AgentScope cut off).

    An agent's session is its `state.session_id`, mapped by the one rule every door follows
    (docs/guides/hosts.md); a reply holds the session's lease while it runs.

    Args:
        workspace: a `LocalWorkspace` (or any ctxoffload workspace, or any `Offloader`;
            `tools()` needs one that reads references back, a `ReferenceReader`).

    Raises:
        ConfigError: `workspace` is not an `Offloader` (a path: pass `LocalWorkspace(path)`;
            a workdir that is a file).
    """

    def __init__(self, workspace: Offloader) -> None:
        self.workspace = checked_offloader(workspace, _DOOR)
        # (session id, tool call id) -> the file the whole result went to.
        self._whole: dict[tuple[str, str], str] = {}
        # Agents whose tool_result_limit is lifted, with how many results hold it up.
        self._lifted: dict[int, tuple[Any, int]] = {}
        self._middleware: Any = None
        self._announced: set[str] = set()  # sessions whose `door` event this object wrote

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
            session_id = _REPLYING_SESSION.get() or _DATA_SESSION
            try:
                named = DataFile(reference=url, media_type=_media_type_of(stored))
                await self.workspace.record_event(session_id, named.kind, **named.fields())
            except Exception as exc:
                # Stored all the same: the file is kept for gc's grace (an hour) without it.
                logger.warning(
                    "could not record data file %s in session %s: %s", url, session_id, exc
                )
        return stored

    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> str:
        """Append compressed messages to the session's context.jsonl; its absolute path.

        Raises:
            OffloadError: the messages could not be stored; the middleware turns this into a
                skipped compression, so the context keeps them.
        """
        session_id = conversation_session(session_id)
        try:
            return str(await self.workspace.offload_context(session_id, msgs=list(msgs)))
        except Exception as exc:
            raise _ContextNotStored(
                f"could not store {len(msgs)} compressed messages: {exc}"
            ) from exc

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        """The file holding the whole result (stored by the middleware), else the part given.

        A failure to store the part is logged and named in the returned text rather than
        raised, so the reply goes on.
        """
        session_id = conversation_session(session_id)
        tool_id = str(getattr(tool_result, "id", ""))
        stored = self._whole.pop((session_id, tool_id), None)
        if stored is not None:
            return stored
        try:
            return str(await self.workspace.offload_tool_result(session_id, tool_result))
        except Exception as exc:
            logger.warning("could not store the cut part of tool result %s: %s", tool_id, exc)
            return f"(nowhere: the workspace could not store it: {exc})"

    # -- the middleware ----------------------------------------------------------------------

    @property
    def middleware(self) -> Any:
        """The AgentScope middleware that stores whole tool results and keeps a failing
        workspace from aborting the reply; pass it in `Agent(middlewares=[...])`."""
        if self._middleware is None:
            self._middleware = _middleware_class()(self)
        return self._middleware

    async def _store_whole(self, agent: Any, tool_call: Any, response: Any) -> bool:
        """Store the whole response if AgentScope is about to split it; False if that failed."""
        message = _agentscope(".message")
        content = response.content
        output = [message.TextBlock(text=content)] if isinstance(content, str) else content
        limit = agent.context_config.tool_result_limit
        tokens = await agent.model.count_tokens(
            [message.AssistantMsg(agent.name, content=output)], None
        )
        if tokens <= limit:
            return True
        block = message.ToolResultBlock(id=tool_call.id, name=tool_call.name, output=output)
        session_id = conversation_session(agent.state.session_id)
        try:
            ref = await self.workspace.offload_tool_result(session_id, block)
        except Exception as exc:
            logger.warning(
                "could not store the result of %s (call %s), keeping it whole in the context: %s",
                tool_call.name,
                tool_call.id,
                exc,
            )
            return False
        self._whole[(session_id, str(tool_call.id))] = str(ref)
        return True

    def _lift(self, agent: Any) -> None:
        config, holders = self._lifted.get(id(agent), (agent.context_config, 0))
        if holders == 0:
            agent.context_config = config.model_copy(update={"tool_result_limit": _NO_SPLIT})
        self._lifted[id(agent)] = (config, holders + 1)

    def _drop(self, agent: Any) -> None:
        config, holders = self._lifted[id(agent)]
        if holders == 1:
            agent.context_config = config
            del self._lifted[id(agent)]
        else:
            self._lifted[id(agent)] = (config, holders - 1)

    def tools(self, *, max_output_chars: int = 20_000) -> list[Any]:
        """ctxoffload's `retrieve_offloaded_content` as an AgentScope `FunctionTool`.

        Read-only and allowed without asking. It reads any reference this workspace gave
        (paths and `file://` URLs), decodes context.jsonl lines to the messages they hold,
        searches with `pattern`, and pages inside a long line with `char_offset`.

        Raises:
            ConfigError: the workspace is an `Offloader` that cannot read references back
                (not a `ReferenceReader`).
        """
        from ..readback import retrieval_tool

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
            # SessionBusyError until this one ends.
            conversation = agent.state.session_id
            session_id = conversation_session(conversation)
            token = _REPLYING_SESSION.set(session_id)
            workspace = self.offloader.workspace
            announced = self.offloader._announced
            lease = None
            try:
                lease = await begin_run(
                    workspace,
                    _DOOR,
                    session_id,
                    conversation=conversation,
                    agent=str(agent.name),
                    announce=session_id not in announced,
                )
                announced.add(session_id)
                with writing_as(str(agent.name), session_id):
                    async for item in next_handler(**input_kwargs):
                        yield item
            finally:
                if lease is not None:
                    await lease.release()
                # Resumed in another context (a consumer that moved between tasks): that
                # context never saw the value.
                with contextlib.suppress(ValueError):
                    _REPLYING_SESSION.reset(token)

        async def on_acting(
            self,
            agent: Any,
            input_kwargs: dict[str, Any],
            next_handler: Callable[..., AsyncGenerator[Any, None]],
        ) -> AsyncGenerator[Any, None]:
            tool_call = input_kwargs["tool_call"]
            async for item in next_handler(**input_kwargs):
                if not isinstance(item, tool_response):
                    yield item
                    continue
                if await self.offloader._store_whole(agent, tool_call, item):
                    yield item
                    continue
                # AgentScope splits the result while this generator waits at `yield`: with
                # the limit lifted meanwhile, it keeps the result whole.
                self.offloader._lift(agent)
                try:
                    yield item
                finally:
                    self.offloader._drop(agent)

        async def on_compress_context(
            self,
            agent: Any,
            input_kwargs: dict[str, Any],
            next_handler: Callable[..., Awaitable[None]],
        ) -> None:
            try:
                await next_handler(**input_kwargs)
            except _ContextNotStored as exc:
                # AgentScope stores before it replaces the context, so nothing was dropped.
                logger.warning("%s; the context was not compressed and keeps them", exc)

    return CtxOffloadMiddleware
