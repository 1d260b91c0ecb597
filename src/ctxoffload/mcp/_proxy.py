"""`McpProxy`: an MCP server that wraps another, stores its big tool results in a workspace and
adds the tools that read them back."""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from .._disk.events import SessionStart
from .._disk.ids import validate_session_id
from .._doors.checks import checked_workspace
from .._doors.doors import DOORS
from .._doors.opening import begin_run, record_door
from .._media import MAX_IMAGE_BYTES
from .._version import __version__
from ..agent import SessionRecorder
from ..compression import ContextConfig, Projector
from ..exceptions import ConfigError
from ..messages import ToolCallBlock, ToolResultBlock
from ..workspace import (
    LocalWorkspace,
    SessionLease,
    Workspace,
    new_session,
    writing_as,
)
from ._content import cut_result, output_content, passed_result, result_block
from ._payloads import store_payloads
from ._reading_tools import ReadingTools
from ._sdk import Sdk, sdk
from ._upstream import Upstream

__all__ = ["AGENT", "WRAPPED_SERVER_GONE", "McpProxy"]

_DOOR = DOORS["mcp-proxy"]
AGENT = _DOOR.name
"""Who writes a proxy's sessions (their events' `writer`, their lease)."""

WRAPPED_SERVER_GONE = "ctxoffload/wrapped-server-gone"
"""The `_meta` key of a tool list sent after the wrapped server went away: why, in a line."""

_PAGES = 100
"""Most pages of the wrapped server's tool list read at start (a list that never ends)."""

_NAME_RUN = re.compile(r"[^A-Za-z0-9_-]+")


class McpProxy:
    """An MCP server that forwards another MCP server's tools, prompts and resources, and keeps
    its big tool results out of the client's context.

    - Tools, prompts, resources, resource templates and completions are listed and served as
      the wrapped server gives them; a tool's `outputSchema` is left out of the list, since a
      result the proxy cut cannot conform to it (its `structuredContent` is in the file).
    - A `CallToolResult` whose content is over `tool_result_limit` tokens (text, images,
      audio, embedded resources, and `structuredContent`) is stored whole in the session
      (`sessions/<session>/tool_result-<call>.txt`, the bytes of images in data/) and reaches
      the client as its head and a notice naming the file; a smaller one as it came.
    - Tokens do not bound images, audio and embedded bytes, so bytes do: a result carries at
      most `max_result_bytes` of them to the client; each payload past that, and each image
      a model could not take (`ctxoffload._media`: its kind, its pixels, a truncated or
      damaged file), is stored whole in data/ under its hash and named by a line instead.
    - The read-back tools (Read, Grep, Glob, `retrieve_offloaded_content`) are tools of the
      proxy, confined to the workspace; where the wrapped server has a tool of the same name,
      the proxy's is called `ctxoffload_<name>`.
    - The wrapped server's errors reach the client as they came (an error result, or a
      JSON-RPC error with its code and message). Every request to it has a deadline
      (`timeout`); when it exits or is killed, calls of its tools fail at once with an error
      saying so, and the read-back tools go on working: the tool list then holds them alone,
      its `_meta` saying the wrapped server is gone.
    - Each connection is one session of the workspace (a new one, `mcp-<server>-<6 hex>`,
      unless `session_id` names one), recorded like any other: `session_start`, a `tool_call`
      event per call, a `truncation` event per result stored. `ctxoffload show`, `grep` and
      `ui` read it.

    Args:
        workspace: where results go: a `LocalWorkspace`, or its folder.
        server: the command that starts the wrapped server (a list of arguments), or its URL
            (`http://...`, streamable HTTP).
        session_id: the session to record into (taken under its lease); None for a new one
            per connection.
        config: when a result is stored and how much of it stays (`tool_result_limit`,
            `preview_tokens`, `preview`); the default `ContextConfig` when None.
        timeout: seconds any request to the wrapped server may take (starting it too).
        max_output_chars: longest answer of one read-back tool.
        cwd: the working directory of the wrapped server's command.
        memory: serve the memory tool too (`memories/` of the workspace, shared by every
            connection; each change an event of the connection's session).
        max_result_bytes: the most bytes of images, audio and embedded blobs one result
            carries to the client; None for 3,932,160, the largest image a model takes.

    Raises:
        InvalidSessionId: `session_id` is not a plain name (before anything is touched).
        ConfigError: no command or URL, an impossible timeout or `max_result_bytes`.

    Example::

        server = ["npx", "-y", "@modelcontextprotocol/server-everything"]
        asyncio.run(McpProxy("./agent_workspace", server).serve_stdio())
    """

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str],
        server: Sequence[str] | str,
        *,
        session_id: str | None = None,
        config: ContextConfig | None = None,
        timeout: float = 600.0,
        max_output_chars: int = 20_000,
        cwd: str | os.PathLike[str] | None = None,
        memory: bool = False,
        max_result_bytes: int | None = None,
    ) -> None:
        if session_id is not None:
            validate_session_id(session_id)
        # A folder is taken as a `LocalWorkspace` (the command's --workspace); either is
        # checked now, so a folder that is a file is said before anything starts.
        self.workspace = checked_workspace(
            workspace if isinstance(workspace, Workspace) else LocalWorkspace(workspace), _DOOR
        )
        self.server = server if isinstance(server, str) else list(server)
        self.session_id = session_id
        self.config = config or ContextConfig()
        self.timeout = timeout
        self.max_output_chars = max_output_chars
        self.cwd = cwd
        self.memory = memory
        if max_result_bytes is None:
            max_result_bytes = MAX_IMAGE_BYTES
        if isinstance(max_result_bytes, bool) or not isinstance(max_result_bytes, int):
            raise ConfigError(f"max_result_bytes {max_result_bytes!r} must be a whole number")
        if max_result_bytes < 0:
            raise ConfigError(
                f"max_result_bytes {max_result_bytes} must be 0 (every payload stored and "
                "named) or more"
            )
        self.max_result_bytes = max_result_bytes
        # Checked now, so a bad command or timeout is said before anything starts.
        Upstream.check(server, timeout)

    async def serve_stdio(self) -> None:
        """Serve one client on this process's stdin and stdout until it goes away.

        Raises:
            ConfigError: the MCP SDK is missing, or the wrapped server could not be started
                or reached.
            SessionBusyError: `session_id` is held by another live writer.
        """
        # A session named is taken first, before the SDK is imported and the wrapped server
        # started: a refusal comes at once, with nothing started for nothing. Any session is
        # taken before stdio is: a refusal is raised as itself, not inside the transport's
        # task group.
        async with self._named_session():
            mcp = sdk()
            upstream = Upstream(mcp, self.server, timeout=self.timeout, cwd=self.cwd)
            async with (
                upstream,
                self._session(mcp, upstream) as session_id,
                mcp.stdio_server() as (read_stream, write_stream),
            ):
                await self._serve(mcp, upstream, session_id, read_stream, write_stream)

    async def serve(self, read_stream: Any, write_stream: Any) -> None:
        """Serve one client on a pair of the SDK's streams (any transport) until it goes away.

        Raises:
            ConfigError: the MCP SDK is missing, or the wrapped server could not be started
                or reached.
            SessionBusyError: `session_id` is held by another live writer.
        """
        async with self._named_session():
            mcp = sdk()
            upstream = Upstream(mcp, self.server, timeout=self.timeout, cwd=self.cwd)
            async with upstream, self._session(mcp, upstream) as session_id:
                await self._serve(mcp, upstream, session_id, read_stream, write_stream)

    async def _serve(
        self, mcp: Sdk, upstream: Upstream, session_id: str, read_stream: Any, write_stream: Any
    ) -> None:
        with writing_as(AGENT, session_id):
            connection = _Connection(self, mcp, upstream, session_id)
            await connection.start()
            server = connection.server()
            await server.run(read_stream, write_stream, server.create_initialization_options())

    @contextlib.asynccontextmanager
    async def _named_session(self) -> AsyncIterator[None]:
        """The lease of the session given (`session_id`), held meanwhile; nothing when none
        was given (`_session` makes one once the wrapped server says its name)."""
        if self.session_id is None:
            yield
            return
        await self.workspace.initialize()
        lease = await begin_run(self.workspace, _DOOR, self.session_id)
        try:
            yield
        finally:
            if lease is not None:
                await _released(lease)

    @contextlib.asynccontextmanager
    async def _session(self, mcp: Sdk, upstream: Upstream) -> AsyncIterator[str]:
        """The connection's session, under its lease while the connection lasts: the one
        given (its lease held by `_named_session`), or a new one."""
        if self.session_id is not None:
            yield self.session_id
            return
        await self.workspace.initialize()
        info = upstream.client.server_info
        name = _NAME_RUN.sub("_", getattr(info, "name", "") or "").strip("_-.")[:40]
        session_id, lease = await new_session(self.workspace, f"mcp-{name or 'proxy'}", AGENT)
        await record_door(self.workspace, _DOOR, session_id)
        try:
            yield session_id
        finally:
            if lease is not None:
                await _released(lease)


class _Connection:
    """One client's connection: its session, the tool names, the engine that stores results."""

    def __init__(self, proxy: McpProxy, mcp: Sdk, upstream: Upstream, session_id: str) -> None:
        self.proxy = proxy
        self.mcp = mcp
        self.upstream = upstream
        self.session_id = session_id
        self.reading = ReadingTools(
            proxy.workspace, proxy.max_output_chars, memory=proxy.memory, session_id=session_id
        )
        self.recorder = SessionRecorder(proxy.workspace, session_id)
        self.projector = self._projector()
        # Call ids: this connection's tag and a count, so two proxies writing one session
        # never name two results alike.
        self.tag = uuid.uuid4().hex[:6]
        self.calls = 0
        # Every name the wrapped server has listed, on any page of any listing: the read-back
        # tools are named around all of them, so a name once listed keeps its meaning (a
        # page that lacks the server's `Read` must not give `Read` back to the proxy).
        self.wrapped: set[str] = set()
        # The later pages of the latest listing, read with its first page (so the read-back
        # tools on that page are named around them), by the cursor that asks for each.
        self.later_pages: dict[str, Any] = {}
        capabilities = upstream.client.server_capabilities
        self.has = {
            "tools": capabilities.tools is not None,
            "prompts": capabilities.prompts is not None,
            "resources": capabilities.resources is not None,
            "completions": capabilities.completions is not None,
        }

    def _projector(self) -> Projector:
        return Projector(
            self.proxy.workspace,
            self.session_id,
            config=self.proxy.config,
            reader_tools=self.reading.readers,
        )

    async def start(self) -> None:
        """Read the wrapped server's tool names (to name the read-back tools around them) and
        record the session's start."""
        names: list[str] = []
        if self.has["tools"]:
            names = [tool.name for tool in (await self._whole_listing()).tools]
            names += [tool.name for page in self.later_pages.values() for tool in page.tools]
        await self.recorder.emit(
            SessionStart(
                agent=f"{AGENT} of {self.upstream.description}"[:300],
                version=__version__,
                model="none seen (the MCP client's)",
                summary_model=None,
                config=self.proxy.config.model_dump(mode="json"),
                tools=[*names, *self.reading.names],
                restored_messages=0,
                first_step=1,
            )
        )

    def _rename(self, wrapped: Iterable[str]) -> None:
        """Name the read-back tools around `wrapped` and every wrapped name seen before."""
        self.wrapped.update(wrapped)
        if self.reading.rename_around(self.wrapped):
            self.projector = self._projector()

    def server(self) -> Any:
        """The low-level MCP server for this connection, with a handler for each request the
        wrapped server serves (tools always: the read-back tools are the proxy's own)."""
        client = self.upstream.client
        handlers: dict[str, Any] = {
            "on_list_tools": self.list_tools,
            "on_call_tool": self.call_tool,
        }
        if self.has["prompts"]:
            handlers["on_list_prompts"] = self._forward(
                "prompts/list", lambda p: client.list_prompts(cursor=_cursor(p))
            )
            handlers["on_get_prompt"] = self._forward(
                "prompts/get", lambda p: client.get_prompt(p.name, p.arguments)
            )
        if self.has["resources"]:
            handlers["on_list_resources"] = self._forward(
                "resources/list", lambda p: client.list_resources(cursor=_cursor(p))
            )
            handlers["on_list_resource_templates"] = self._forward(
                "resources/templates/list",
                lambda p: client.list_resource_templates(cursor=_cursor(p)),
            )
            handlers["on_read_resource"] = self._forward(
                "resources/read", lambda p: client.read_resource(str(p.uri))
            )
        if self.has["completions"]:
            handlers["on_completion"] = self._forward(
                "completion/complete",
                lambda p: client.complete(
                    p.ref,
                    p.argument.model_dump(),
                    p.context.arguments if p.context is not None else None,
                ),
            )
        info = client.server_info
        return self.mcp.Server(
            getattr(info, "name", None) or AGENT,
            version=getattr(info, "version", None) or __version__,
            instructions=self._instructions(client.instructions),
            **handlers,
        )

    def _instructions(self, wrapped: str | None) -> str:
        readers = self.reading.readers
        workdir = getattr(self.proxy.workspace, "workdir", None)
        where = f" in {workdir}" if workdir is not None else ""
        note = (
            f"Tool results over {self.proxy.config.tool_result_limit:,} tokens are stored "
            f"whole{where} and arrive as their first lines and a notice naming the file: read "
            f"on with {readers.read or readers.retrieve}, search it with "
            f"{readers.grep or readers.retrieve}."
        )
        return f"{wrapped}\n\n{note}" if wrapped else note

    def _forward(self, what: str, send: Any) -> Any:
        async def handler(ctx: Any, params: Any) -> Any:
            return await self.upstream.request(what, lambda: send(params))

        return handler

    async def list_tools(self, ctx: Any, params: Any) -> Any:
        """The wrapped server's tools (without `outputSchema`), then the read-back tools.

        Once the wrapped server is gone, the read-back tools alone, and the list's `_meta`
        says why (`WRAPPED_SERVER_GONE`): what was stored stays readable by a client that
        lists the tools again before calling one.
        """
        types = self.mcp.types
        cursor = _cursor(params)
        tools: list[Any] = []
        next_cursor = None
        gone: str | None = None
        if self.has["tools"]:
            try:
                if cursor is None:
                    page = await self._whole_listing()
                else:
                    page = self.later_pages.pop(cursor, None)
                    if page is None:
                        page = await self._tools_page(cursor)
            except self.mcp.MCPError:
                gone = self.upstream.closed_because
                if gone is None:
                    raise
            else:
                tools = [tool.model_copy(update={"output_schema": None}) for tool in page.tools]
                next_cursor = page.next_cursor
                if any(tool.name not in self.wrapped for tool in tools):
                    # A page asked for by a cursor not read ahead (an older listing's) with a
                    # tool added since: it keeps its name, ours move (from the next listing).
                    self._rename(tool.name for tool in tools)
        if cursor is None:
            tools.extend(self.reading.listing(types))
        if gone is None:
            return types.ListToolsResult(tools=tools, next_cursor=next_cursor)
        return types.ListToolsResult(tools=tools, _meta={WRAPPED_SERVER_GONE: gone})

    async def _whole_listing(self) -> Any:
        """Read every page of the wrapped server's tool list (at most `_PAGES`), name the
        read-back tools around all of them, and keep the later pages for the client's
        requests (`later_pages`): the first page, where the read-back tools are listed, never
        holds a name that a later page of the same listing holds too.

        Returns:
            The first page.

        Raises:
            MCPError: the first page could not be read (a later one that cannot is left to
                the client's request for it, which fails as it would have).
        """
        first = page = await self._tools_page(None)
        later: dict[str, Any] = {}
        names = [tool.name for tool in page.tools]
        cursor = page.next_cursor
        while cursor is not None and cursor not in later and len(later) < _PAGES - 1:
            try:
                page = await self._tools_page(cursor)
            except self.mcp.MCPError:
                break
            later[cursor] = page
            names.extend(tool.name for tool in page.tools)
            cursor = page.next_cursor
        self.later_pages = later
        self._rename(names)
        return first

    async def _tools_page(self, cursor: str | None) -> Any:
        """One page of the wrapped server's tool list."""
        return await self.upstream.request(
            "tools/list", lambda: self.upstream.client.list_tools(cursor=cursor)
        )

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        """A read-back tool's answer, or the wrapped tool's result (stored and cut when it is
        over the limit); every call recorded as a `tool_call` event."""
        types = self.mcp.types
        name = str(params.name)
        arguments = dict(params.arguments or {})
        self.calls += 1
        call = ToolCallBlock(id=f"mcp_{self.tag}_{self.calls}", name=name, input=arguments)
        started = time.monotonic()
        if self.reading.owns(name):
            answer = await self.reading.call(name, call.id, arguments)
            await self.recorder.tool_call(self.calls, call, answer, started)
            return types.CallToolResult(
                content=output_content(types, answer.output), is_error=answer.is_error
            )
        step = self.calls
        try:
            result = await self.upstream.request(
                f"tools/call {name!r}",
                lambda: self.upstream.client.call_tool(name, arguments or None),
            )
        except self.mcp.MCPError as exc:
            failed = ToolResultBlock(id=call.id, name=name, output=f"Error: {exc}", is_error=True)
            await self.recorder.tool_call(step, call, failed, started, exc)
            raise
        except self.mcp.anyio.get_cancelled_exc_class():
            # The client went away (or cancelled the call): the record says so.
            gone = ToolResultBlock(
                id=call.id, name=name, output="Error: cancelled by the client", is_error=True
            )
            with self.mcp.anyio.CancelScope(shield=True):
                await self.recorder.tool_call(step, call, gone, started)
            raise
        block = result_block(result, call.id, name)
        block, replaced = await store_payloads(
            self.proxy.workspace, block, self.proxy.max_result_bytes
        )
        kept = await self.projector.offload_tool_result(block)
        await self.recorder.tool_call(step, call, kept, started)
        if kept is block or kept.output == block.output:
            return passed_result(types, result, replaced) if replaced else result
        return cut_result(types, result, kept)


async def _released(lease: SessionLease) -> None:
    """Release `lease`, shielded from the cancellation that may be ending the connection
    (anyio's, which the SDK runs on; where the SDK never loaded, none is under way)."""
    import importlib

    try:
        anyio: Any = importlib.import_module("anyio")
    except ImportError:
        await lease.release()
        return
    with anyio.CancelScope(shield=True):
        await lease.release()


def _cursor(params: Any) -> str | None:
    """The cursor of a list request (None: the first page)."""
    cursor = getattr(params, "cursor", None)
    return str(cursor) if cursor is not None else None
