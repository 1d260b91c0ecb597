"""The wrapped server: one connection, every request under a deadline, its end said plainly.

A wrapped server is a command the proxy starts (its stdin and stdout carry MCP; its stderr is
the proxy's) or a URL it reaches over streamable HTTP. Every request to it runs under the
proxy's timeout. When the connection closes (the server exited, crashed or was killed), the
request in flight and every later one fail at once with an MCP error that says so, never a
hang: the proxy's own read-back tools go on working. The client runs in a task of its own, so
a transport that fails (an HTTP server gone) ends that task and the requests in flight, never
the proxy's serving.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from .._secrets import Secrets, masked_command
from ..exceptions import ConfigError
from ._http_answers import answers_client
from ._reread import QuietRereads, reread
from ._sdk import Sdk
from ._transport import WatchedTransport

__all__ = ["Upstream"]

_T = TypeVar("_T")

_CONNECTION_CLOSED = -32000
"""The code the SDK gives a request whose connection closed (`mcp_types.CONNECTION_CLOSED`),
which a server may send for an error of its own too (`ctxoffload.mcp._transport`)."""
_REQUEST_TIMEOUT = -32001
"""The code of a request that ran past its deadline (`mcp_types.REQUEST_TIMEOUT`)."""
_STDIO_LOGGER = "mcp.client.stdio"
"""The SDK's logger that tells of each line of a server over stdio its parser refused."""
_INTERNAL_ERROR = -32603
"""JSON-RPC's code for an error of the server that answers (here: the proxy)."""


class Upstream:
    """The connection to the wrapped server.

    Args:
        sdk: the MCP SDK.
        server: the command that starts it (`["npx", "-y", "some-server"]`), or its URL
            (`http://...`, streamable HTTP).
        timeout: seconds a request (the connection itself included) may take.
        cwd: the command's working directory (default: the proxy's).
    """

    def __init__(
        self,
        sdk: Sdk,
        server: Sequence[str] | str,
        *,
        timeout: float,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.check(server, timeout)
        # What the wrapped server is called in every message, event and error: its command
        # or URL with the secrets it holds masked (`ctxoffload._secrets`); `secrets` masks
        # them in what the SDK says too (an HTTP error quotes the URL it fetched).
        self.secrets = _secrets_of(server)
        if isinstance(server, str):
            self.description = self.secrets.mask(server)
            self._target: Any = server
        else:
            command = list(server)
            self.description = masked_command(command)
            # The server gets the proxy's whole environment (its API keys among it): the
            # client configured it for the server, not for the proxy.
            self._target = sdk.StdioServerParameters(
                command=command[0],
                args=command[1:],
                env=dict(os.environ),
                cwd=os.fspath(cwd) if cwd is not None else None,
                # A server that writes bytes that are not UTF-8 gets them replaced, rather
                # than ending the connection.
                encoding_error_handler="replace",
            )
        self.timeout = timeout
        self._sdk = sdk
        self._client: Any = None
        self._group: Any = None
        self._done: Any = None  # set when the proxy closes the connection
        # The cancel scope of each request in flight (`_lost` ends them).
        self._in_flight: set[Any] = set()
        # Whether the connection itself ended (`WatchedTransport` says): only then is an
        # error of code -32000 the SDK's "connection closed" rather than the server's own.
        self._ended = False
        self.closed_because: str | None = None
        self._reread = functools.partial(reread, sdk.types, sdk.SessionMessage)

    @staticmethod
    def check(server: Sequence[str] | str, timeout: float) -> None:
        """Refuse a server that names nothing to start or reach, and an impossible timeout.

        Raises:
            ConfigError: saying which, and what to give instead.
        """
        if isinstance(server, str):
            if not server.startswith(("http://", "https://")):
                raise ConfigError(
                    f"the wrapped server {_secrets_of(server).mask(server)!r} is no http(s) "
                    "URL: give a URL, or the "
                    "command that starts the server as a list of arguments"
                )
        elif not server or not server[0]:
            raise ConfigError(
                "no command to start the wrapped server: give one after `--` "
                "(ctxoffload mcp-proxy -- npx -y some-server), or --url URL"
            )
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ConfigError(f"timeout {timeout!r} must be a positive number of seconds")

    async def __aenter__(self) -> Upstream:
        # The client lives in a task of its own: when its transport fails (an HTTP server
        # gone refuses the next POST, and the SDK's task group fails with it), the failure
        # ends that task, never the task serving the proxy's own client.
        self._done = self._sdk.anyio.Event()
        group = self._sdk.anyio.create_task_group()
        await group.__aenter__()
        try:
            await group.start(self._hold)
        except Exception as exc:
            await group.__aexit__(None, None, None)
            raise ConfigError(
                f"could not start or reach the wrapped MCP server {self.description}: "
                f"{self._reason(exc)}"
            ) from None
        self._group = group
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._group is not None:
            self._done.set()
            group, self._group = self._group, None
            await group.__aexit__(None, None, None)

    async def _hold(self, *, task_status: Any) -> None:
        """Connect, then hold the connection open until the proxy closes it; when it fails
        on its own, say so to every request in flight and every later one."""
        # The SDK's own read timeout bounds the handshake (a deadline around entering the
        # client would cross its task group's cancel scopes); `request` puts the proxy's own
        # deadline, a second shorter, around every later request.
        async with contextlib.AsyncExitStack() as stack:
            if isinstance(self._target, str):
                # Its answers are read again before the SDK parses them (`_http_answers`).
                http = answers_client(self._sdk.httpx, self.timeout)
                await stack.enter_async_context(http)
                # The SDK bounds one event of an event stream to 1 MiB, and a server that
                # answers with event streams sends a result as one event: a result over it,
                # the kind the proxy is for, would fail. A JSON body and a stdio line have no
                # bound in the SDK; neither has an event here.
                opened = self._sdk.streamable_http_client(
                    self._target, http_client=http, max_sse_event_size=None
                )
            else:
                opened = self._sdk.stdio_client(self._target)
                # The SDK logs a traceback for each line its parser refused, one the proxy
                # reads again among them: those are left out.
                quiet = QuietRereads(self._reread)
                logger = logging.getLogger(_STDIO_LOGGER)
                logger.addFilter(quiet)
                stack.callback(logger.removeFilter, quiet)
            await self._connected(opened, task_status)

    async def _connected(self, opened: Any, task_status: Any) -> None:
        """Hold the connection over `opened`, the SDK's transport (`_hold`)."""
        transport = WatchedTransport(opened, self._sdk.anyio, self._end, self._reread)
        client = self._sdk.Client(transport, cache=None, read_timeout_seconds=self.timeout + 1)
        connected = False
        try:
            # Closing stops the server's process (stdin closed, then terminate, then kill),
            # each step bounded and shielded by the SDK itself.
            async with client:
                self._client, connected = client, True
                task_status.started()
                await self._done.wait()
        except Exception as exc:
            if not connected:
                raise
            self._lost(f"its connection failed ({self._reason(exc)})")

    def _end(self) -> None:
        """The connection ended (a stream to or from the server ended or broke)."""
        self._ended = True

    def _lost(self, how: str) -> None:
        """The connection is gone: every request in flight and every later one fails."""
        if self.closed_because is None:
            self.closed_because = (
                f"the wrapped MCP server {self.description} is gone: {how}; its tools are "
                "gone until the proxy is restarted; the proxy's read-back tools still work"
            )
        for scope in self._in_flight:
            scope.cancel()

    @property
    def client(self) -> Any:
        """The SDK's `Client`, connected."""
        if self._client is None:
            raise RuntimeError("Upstream is used outside `async with`")
        return self._client

    async def request(self, what: str, send: Callable[[], Awaitable[_T]]) -> _T:
        """`send()`, a request to the wrapped server, under the timeout.

        Raises:
            MCPError: the wrapped server's own error, as it sent it (code -32000 too, while
                the connection lasts); or, when the connection is closed (now or before) or
                the deadline passed, one that says which.
        """
        error = self._sdk.MCPError
        anyio = self._sdk.anyio
        if self.closed_because is not None:
            raise error(_CONNECTION_CLOSED, self.closed_because)
        try:
            with anyio.fail_after(self.timeout), anyio.CancelScope() as scope:
                self._in_flight.add(scope)
                try:
                    return await send()
                finally:
                    self._in_flight.discard(scope)
            # Only `_lost` cancels the scope: the connection failed under this request.
            raise error(_CONNECTION_CLOSED, self.closed_because or "the connection failed")
        except TimeoutError:
            raise error(
                _REQUEST_TIMEOUT,
                f"the wrapped MCP server {self.description} did not answer {what} within "
                f"{self.timeout:g} s (ctxoffload mcp-proxy --timeout)",
            ) from None
        except error as exc:
            if (exc.code == _CONNECTION_CLOSED and self._ended) or self.closed_because is not None:
                self._lost(f"it closed the connection (it exited or was killed) during {what}")
                raise error(_CONNECTION_CLOSED, self.closed_because) from None
            if self.secrets.mask(exc.message) != exc.message:
                raise error(exc.code, self.secrets.mask(exc.message), exc.data) from None
            raise
        except Exception as exc:
            # An answer the SDK refused (structured content against its own schema, a
            # result of the wrong shape): an error for this request, said with its cause.
            raise error(
                _INTERNAL_ERROR,
                f"the answer of the wrapped MCP server {self.description} to {what} could not "
                f"be read: {self._reason(exc)}",
            ) from None

    def _reason(self, exc: BaseException) -> str:
        """What went wrong, in one line, the wrapped server's secrets masked."""
        return self.secrets.mask(_reason(exc, self.timeout))


def _secrets_of(server: Sequence[str] | str) -> Secrets:
    """The secrets a wrapped server's URL or command holds."""
    return Secrets.of_url(server) if isinstance(server, str) else Secrets.of_command(server)


def _reason(exc: BaseException, timeout: float) -> str:
    """What went wrong, in one line, from an error the SDK may have wrapped in groups."""
    # An exception group (anyio's task groups) of one cause: that cause.
    inner = getattr(exc, "exceptions", None)
    while isinstance(inner, tuple) and inner and isinstance(inner[0], BaseException):
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g} s"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"
