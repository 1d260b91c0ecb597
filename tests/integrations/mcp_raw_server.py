"""An MCP server over stdio written by hand, line by line, for what the `mcp` SDK's own server
never writes: a lone surrogate escape (`"\\ud800"`, valid JSON, which `JSON.stringify` writes
for a string cut inside an emoji).

`python mcp_raw_server.py [--http PORT_FILE [--sse] [--gzip]]` serves, on stdio (or with
`--http`, over streamable HTTP at http://127.0.0.1:PORT/mcp, PORT written to PORT_FILE, each
answer a JSON body, or with `--sse` an event stream of one event; with `--gzip`, compressed):

- `cut_emoji(total_bytes)`: numbered lines (`mcp_server.big_text`) between `start `, a lone
  high surrogate, and ` end `, a lone low surrogate, each written as its escape;
- `cut_emoji_no_object()`: a result that is a string holding a lone surrogate (no
  `CallToolResult`: the answer cannot be read even once the surrogate is replaced);
- `echo(text)`: the text; over stdio, `noise(text)` the same after a line that is no JSON.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from typing import Any

from mcp_server import big_text

_HIGH, _LOW = "@@HIGH@@", "@@LOW@@"
"""Placeholders written as a lone surrogate's escape."""


def _written(message: dict[str, Any]) -> str:
    """`message` as one line of JSON, each placeholder written as a lone surrogate's escape."""
    return json.dumps(message).replace(_HIGH, "\\ud800").replace(_LOW, "\\udc80")


def _tool(name: str) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}}


def _answer(name: str, arguments: dict[str, Any]) -> Any:
    if name == "cut_emoji":
        text = f"start {_HIGH}{big_text(int(arguments['total_bytes']), 0)} end {_LOW}"
        return {"content": [{"type": "text", "text": text}]}
    if name == "cut_emoji_no_object":
        return f"no object {_HIGH}"
    return {"content": [{"type": "text", "text": str(arguments.get("text"))}]}


def _answer_to(message: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to one message (None for a notification)."""
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        return None
    params = message.get("params") or {}
    if method == "initialize":
        result: Any = {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-server", "version": "1.0"},
        }
    elif method == "tools/list":
        names = ("cut_emoji", "cut_emoji_no_object", "echo", "noise")
        result = {"tools": [_tool(name) for name in names]}
    elif method == "tools/call":
        result = _answer(params["name"], params.get("arguments") or {})
    else:
        result = {}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def serve_http(port_file: str, sse: bool, gzipped: bool) -> None:
    """Answer each POST to /mcp with a JSON body (or an event stream of one event); a GET is
    refused (no stream of the server's own messages)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            answer = _answer_to(json.loads(body))
            if answer is None:
                self.send_response(202)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            text = _written(answer)
            data = (f"event: message\ndata: {text}\n\n" if sse else text).encode()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream" if sse else "application/json")
            if gzipped:
                data = gzip.compress(data)
                self.send_header("content-encoding", "gzip")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.send_response(405)
            self.send_header("content-length", "0")
            self.end_headers()

        do_DELETE = do_GET

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w", encoding="utf-8") as file:
        file.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


def main() -> None:
    if "--http" in sys.argv:
        port_file = sys.argv[sys.argv.index("--http") + 1]
        serve_http(port_file, "--sse" in sys.argv, "--gzip" in sys.argv)
        return
    for line in sys.stdin:
        message = json.loads(line)
        answer = _answer_to(message)
        if answer is not None:
            if (message.get("params") or {}).get("name") == "noise":
                sys.stdout.write("this line is no JSON\n")
            sys.stdout.write(_written(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
