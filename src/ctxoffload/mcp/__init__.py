"""The MCP proxy (`ctxoffload mcp-proxy`): an MCP server that wraps any MCP server, stores its
big tool results in a workspace and adds the tools that read them back.

Coding agents that load no Python (Claude Code, Cursor, Codex, ...) all start MCP servers; put
the proxy in front of one and a tool result too big for the context is stored whole in the
workspace and reaches the agent as its head and a notice naming the file, which the proxy's
own Read, Grep, Glob and `retrieve_offloaded_content` tools read back.

Example::

    import asyncio
    from ctxoffload.mcp import McpProxy

    proxy = McpProxy("./agent_workspace", ["npx", "-y", "@modelcontextprotocol/server-everything"])
    asyncio.run(proxy.serve_stdio())

Importing this package does not import the MCP SDK; serving does
(`pip install 'ctxoffload[mcp]'`).
"""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._proxy import McpProxy

__all__ = ["McpProxy"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), {"McpProxy": "._proxy"})
