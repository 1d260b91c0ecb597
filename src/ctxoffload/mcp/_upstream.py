"""The wrapped server: one connection, every request under a deadline, its end said plainly.

A wrapped server is a command the proxy starts (its stdin and stdout carry MCP; its stderr is
the proxy's) or a URL it reaches over streamable HTTP. Every request to it runs under the
proxy's timeout. When the connection closes (the server exited, crashed or was killed), the
request in flight and every later one fail at once with an MCP error that says so, never a
hang: the proxy's own read-back tools go on working.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from typing import Any, TypeVar

from ..exceptions import ConfigError
from ._sdk import Sdk

__all__ = ["Upstream"]

_T = TypeVar("_T")

_CONNECTION_CLOSED = -32000
"""The code the SDK gives a request whose connection closed (`mcp_types.CONNECTION_CLOSED`)."""
_REQUEST_TIMEOUT = -32001
"""The code of a request that ran past its deadline (`mcp_types.REQUEST_TIMEOUT`)."""
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
        if isinstance(server, str):
            self.description = server
            self._target: Any = server
        else:
            command = list(server)
            self.description = shlex.join(command)
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
        self._stack: AsyncExitStack | None = None
        self.closed_because: str | None = None

    @staticmethod
    def check(server: Sequence[str] | str, timeout: float) -> None:
        """Refuse a server that names nothing to start or reach, and an impossible timeout.

        Raises:
            ConfigError: saying which, and what to give instead.
        """
        if isinstance(server, str):
            if not server.startswith(("http://", "https://")):
                raise ConfigError(
                    f"the wrapped server {server!r} is no http(s) URL: give a URL, or the "
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
        stack = AsyncExitStack()
        # The SDK's own read timeout bounds the handshake (a deadline around entering the
        # client would cross its task group's cancel scopes); `request` puts the proxy's own
        # deadline, a second shorter, around every later request.
        client = self._sdk.Client(self._target, cache=None, read_timeout_seconds=self.timeout + 1)
        try:
            await stack.enter_async_context(client)
        except Exception as exc:
            await stack.aclose()
            raise ConfigError(
                f"could not start or reach the wrapped MCP server {self.description}: "
                f"{_reason(exc, self.timeout)}"
            ) from None
        self._client, self._stack = client, stack
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._stack is not None:
            # Closing stops the server's process (stdin closed, then terminate, then kill),
            # each step bounded and shielded by the SDK itself (a scope of ours around it
            # would cross its task group's).
            await self._stack.aclose()
            self._stack = None

    @property
    def client(self) -> Any:
        """The SDK's `Client`, connected."""
        if self._client is None:
            raise RuntimeError("Upstream is used outside `async with`")
        return self._client

    async def request(self, what: str, send: Callable[[], Awaitable[_T]]) -> _T:
        """`send()`, a request to the wrapped server, under the timeout.

        Raises:
            MCPError: the wrapped server's own error, as it sent it; or, when the connection
                is closed (now or before) or the deadline passed, one that says which.
        """
        error = self._sdk.MCPError
        if self.closed_because is not None:
            raise error(_CONNECTION_CLOSED, self.closed_because)
        try:
            with self._sdk.anyio.fail_after(self.timeout):
                return await send()
        except TimeoutError:
            raise error(
                _REQUEST_TIMEOUT,
                f"the wrapped MCP server {self.description} did not answer {what} within "
                f"{self.timeout:g} s (ctxoffload mcp-proxy --timeout)",
            ) from None
        except error as exc:
            if exc.code != _CONNECTION_CLOSED:
                raise
            self.closed_because = (
                f"the wrapped MCP server {self.description} closed the connection (it exited "
                f"or was killed) during {what}: its tools are gone until the proxy is "
                "restarted; the proxy's read-back tools still work"
            )
            raise error(_CONNECTION_CLOSED, self.closed_because) from None
        except Exception as exc:
            # An answer the SDK refused (structured content against its own schema, a
            # result of the wrong shape): an error for this request, said with its cause.
            raise error(
                _INTERNAL_ERROR,
                f"the answer of the wrapped MCP server {self.description} to {what} could not "
                f"be read: {_reason(exc, self.timeout)}",
            ) from None


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
