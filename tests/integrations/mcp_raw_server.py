"""An MCP server over stdio written by hand, line by line, for what the `mcp` SDK's own server
never writes: a lone surrogate escape (`"\\ud800"`, valid JSON, which `JSON.stringify` writes
for a string cut inside an emoji).

`python mcp_raw_server.py` serves:

- `cut_emoji(total_bytes)`: numbered lines (`mcp_server.big_text`) between `start `, a lone
  high surrogate, and ` end `, a lone low surrogate, each written as its escape;
- `cut_emoji_no_object()`: a result that is a string holding a lone surrogate (no
  `CallToolResult`: the answer cannot be read even once the surrogate is replaced);
- `echo(text)`: the text.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp_server import big_text

_HIGH, _LOW = "@@HIGH@@", "@@LOW@@"
"""Placeholders written as a lone surrogate's escape."""


def _send(message: dict[str, Any]) -> None:
    line = json.dumps(message).replace(_HIGH, "\\ud800").replace(_LOW, "\\udc80")
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _tool(name: str) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}}


def _answer(name: str, arguments: dict[str, Any]) -> Any:
    if name == "cut_emoji":
        text = f"start {_HIGH}{big_text(int(arguments['total_bytes']), 0)} end {_LOW}"
        return {"content": [{"type": "text", "text": text}]}
    if name == "cut_emoji_no_object":
        return f"no object {_HIGH}"
    return {"content": [{"type": "text", "text": str(arguments.get("text"))}]}


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification
        params = message.get("params") or {}
        if method == "initialize":
            result: Any = {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw-server", "version": "1.0"},
            }
        elif method == "tools/list":
            result = {"tools": [_tool(n) for n in ("cut_emoji", "cut_emoji_no_object", "echo")]}
        elif method == "tools/call":
            result = _answer(params["name"], params.get("arguments") or {})
        else:
            result = {}
        _send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
