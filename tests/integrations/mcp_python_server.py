"""A real MCP server written as most Python MCP servers are: the `mcp` SDK's `MCPServer`
(FastMCP before SDK 2), its tools plain functions whose annotated returns the SDK turns into
content and `structuredContent` (a `str` into one text block and `{"result": text}`).

`python mcp_python_server.py` serves on stdio:

- `log(total_bytes, marker_line)`: numbered log lines (`mcp_server.big_text`), as a `str`;
- `lines(count)`: that many lines as a `list[str]` (one text block each);
- `table(rows)`: a `dict` of rows (its JSON as the text);
- `total(n)`: an `int`.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_server import big_text

server = MCPServer("python-server")


@server.tool()
def log(total_bytes: int, marker_line: int = 0) -> str:
    """Numbered log lines of about total_bytes; line marker_line says MARKER-FOUND-HERE."""
    return big_text(total_bytes, marker_line)


@server.tool()
def lines(count: int) -> list[str]:
    """count lines, one text block each."""
    return [f"item {i:05d} " + "pqrstuvwxy" * 5 for i in range(count)]


@server.tool()
def table(rows: int) -> dict[str, list[dict[str, int]]]:
    """rows rows of numbers."""
    return {"rows": [{"id": i, "value": i * 7} for i in range(rows)]}


@server.tool()
def total(n: int) -> int:
    """The sum of 0..n."""
    return n * (n + 1) // 2


if __name__ == "__main__":
    server.run()
