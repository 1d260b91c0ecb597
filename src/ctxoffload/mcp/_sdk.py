"""The MCP SDK (`pip install 'ctxoffload[mcp]'`), imported when the proxy first needs it.

Importing `ctxoffload.mcp` imports no part of the SDK; `sdk()` does, once, and says how to
install it when it is missing. Its names are typed `Any` here: the package is type-checked
without the SDK installed, as every host integration is.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ..exceptions import ConfigError

__all__ = ["INSTALL_HINT", "Sdk", "sdk"]

INSTALL_HINT = "The MCP SDK is not installed: pip install 'ctxoffload[mcp]'"


@dataclass(frozen=True)
class Sdk:
    """The parts of the MCP SDK the proxy uses.

    Attributes:
        types: `mcp_types`, the protocol's models (`CallToolResult`, `TextContent`, ...).
        Client: `mcp.Client`, the client the proxy reaches the wrapped server with.
        StdioServerParameters: how a wrapped server is started.
        stdio_client: the transport to a server the proxy starts.
        streamable_http_client: the transport to a server reached by URL.
        SessionMessage: what a transport's streams carry (a message and its metadata).
        Server: the low-level `mcp.server.lowlevel.Server` the proxy serves with.
        stdio_server: the stdio transport the proxy serves on.
        MCPError: the error a JSON-RPC error response arrives as, and is sent as.
        anyio: the async library the SDK runs on (its deadlines and cancel scopes).
        httpx: `httpx2`, the HTTP library of the SDK's streamable HTTP transport.
    """

    types: Any
    Client: Any
    StdioServerParameters: Any
    stdio_client: Any
    streamable_http_client: Any
    SessionMessage: Any
    Server: Any
    stdio_server: Any
    MCPError: Any
    anyio: Any
    httpx: Any


_loaded: list[Sdk] = []


def sdk() -> Sdk:
    """The MCP SDK, imported on first use.

    Raises:
        ConfigError: the SDK is not installed (the message says how to install it).
    """
    if not _loaded:
        try:
            mcp = importlib.import_module("mcp")
            lowlevel = importlib.import_module("mcp.server.lowlevel")
            stdio = importlib.import_module("mcp.server.stdio")
            http = importlib.import_module("mcp.client.streamable_http")
            message = importlib.import_module("mcp.shared.message")
            types = importlib.import_module("mcp_types")
            anyio = importlib.import_module("anyio")
            httpx = importlib.import_module("httpx2")
        except ImportError as exc:
            raise ConfigError(INSTALL_HINT) from exc
        _loaded.append(
            Sdk(
                types=types,
                Client=mcp.Client,
                StdioServerParameters=mcp.StdioServerParameters,
                stdio_client=mcp.stdio_client,
                streamable_http_client=http.streamable_http_client,
                SessionMessage=message.SessionMessage,
                Server=lowlevel.Server,
                stdio_server=stdio.stdio_server,
                MCPError=mcp.MCPError,
                anyio=anyio,
                httpx=httpx,
            )
        )
    return _loaded[0]
