"""A real MCP server over stdio, written with the `mcp` SDK, for the proxy's tests.

`python mcp_server.py [--pid-file PATH] [--collide] [--grep-later] [--http PORT_FILE]
[--api-key K] [--token T]` serves, on stdio (or with `--http`, over streamable HTTP on a free
port of 127.0.0.1 written to PORT_FILE):

- tools: `echo(text)`, `big(total_bytes, marker_line)` (numbered lines, one of them the marker),
  `image(total_bytes)` (a PNG of about that size), `images(count, total_bytes)` (that many),
  `bomb()` (a PNG whose header claims 1,739,357,314 x 2,995,735,735 pixels), `audio(total_bytes)`
  (a WAV), `blocks(count, each)` (many small text blocks), `structured(rows)`
  (structuredContent and its JSON as text), `typed(rows)` (structuredContent whose text says
  `true` for its `1`, `false` for its `0` and `1` for its `1.0`), `summary(rows)`
  (structuredContent and a line about it), `fail()` (an error result), `refuse()` (a
  JSON-RPC error), `busy()` (a JSON-RPC error of code -32000, the code the SDK also gives a
  closed connection), `damaged(kind, text_bytes)` (numbered lines and an image or audio
  whose base64 is not valid), `hang(pid_file)` (writes its pid, never answers), `blob(total_bytes)`
  (an embedded resource of bytes that are not UTF-8), `describe(query)` (declares an
  outputSchema); with `--collide`, a tool of its own called `Read`; with `--grep-later`, its
  own `Read` too, and a list of two pages whose second holds, from the second listing on, a
  tool of its own called `Grep` (a tool the server added since);
- a prompt `greet(name)`;
- resources `mem://notes` (text), `mem://raw` (bytes that are not UTF-8) and the template
  `mem://item/{id}`.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

# Started as a script from this folder: tests/ (helpers.py) is put on the path by hand.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from helpers import png_image

NOT_UTF8 = b"\xff\xfe caf\xe9 \x80\x81 end"
"""Bytes no UTF-8 decoder takes."""

REFUSAL = {"code": -32602, "message": "refuse: the wrapped server says no", "data": {"why": "test"}}

NOT_BASE64 = "!!not*base64!!" * 1_000
"""A payload's data that is no base64 in any spelling."""

BUSY = {"code": -32000, "message": "busy: rate limited, try again"}
"""A server's own error whose code is the one the SDK gives a request whose connection closed."""


def png(total_bytes: int) -> bytes:
    """A valid PNG of about `total_bytes` (a grey image, stored uncompressed)."""
    side = max(1, int((total_bytes / 3) ** 0.5))
    return png_image(side, side, colour=2, level=0)


BOMB = png_image(1_739_357_314, 2_995_735_735, rows=bytes(64))
"""A PNG whose header claims 1,739,357,314 x 2,995,735,735 pixels (a provider refuses a
request holding it)."""


def wav(total_bytes: int) -> bytes:
    """A WAV of silence of about `total_bytes`."""
    frames = max(0, total_bytes - 44)
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + frames,
        b"WAVE",
        b"fmt ",
        16,
        1,
        1,
        8000,
        8000,
        1,
        8,
        b"data",
        frames,
    )
    return header + b"\x80" * frames


def big_text(total_bytes: int, marker_line: int) -> str:
    """Numbered lines of about `total_bytes`; line `marker_line` says MARKER-FOUND-HERE."""
    lines = []
    size = 0
    number = 0
    while size < total_bytes:
        number += 1
        if number == marker_line:
            line = f"line {number:07d} MARKER-FOUND-HERE"
        else:
            line = f"line {number:07d} " + "abcdefghij" * 6
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


TOOLS = [
    types.Tool(
        name="echo",
        description="Return the text as given.",
        input_schema=_schema({"text": {"type": "string"}}, ["text"]),
    ),
    types.Tool(
        name="big",
        description="Numbered lines of about total_bytes; one line is the marker.",
        input_schema=_schema(
            {"total_bytes": {"type": "integer"}, "marker_line": {"type": "integer"}},
            ["total_bytes"],
        ),
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="image",
        description="A PNG image of about total_bytes.",
        input_schema=_schema({"total_bytes": {"type": "integer"}}, ["total_bytes"]),
    ),
    types.Tool(
        name="images",
        description="count PNG images of about total_bytes each.",
        input_schema=_schema(
            {"count": {"type": "integer"}, "total_bytes": {"type": "integer"}},
            ["count", "total_bytes"],
        ),
    ),
    types.Tool(
        name="bomb",
        description="A PNG whose header claims billions of pixels.",
        input_schema=_schema({}),
    ),
    types.Tool(
        name="audio",
        description="A WAV of about total_bytes.",
        input_schema=_schema({"total_bytes": {"type": "integer"}}, ["total_bytes"]),
    ),
    types.Tool(
        name="summary",
        description="Rows as structured content, and one line about them as text.",
        input_schema=_schema({"rows": {"type": "integer"}}, ["rows"]),
    ),
    types.Tool(
        name="blocks",
        description="count text blocks of each characters.",
        input_schema=_schema({"count": {"type": "integer"}, "each": {"type": "integer"}}),
    ),
    types.Tool(
        name="structured",
        description="Rows as structured content and as JSON text.",
        input_schema=_schema({"rows": {"type": "integer"}}, ["rows"]),
    ),
    types.Tool(
        name="typed",
        description="Rows as structured content, and as JSON text with other types.",
        input_schema=_schema({"rows": {"type": "integer"}}, ["rows"]),
    ),
    types.Tool(
        name="describe",
        description="A small answer that declares an output schema.",
        input_schema=_schema({"query": {"type": "string"}}, ["query"]),
        output_schema=_schema({"answer": {"type": "string"}}, ["answer"]),
    ),
    types.Tool(
        name="damaged",
        description="Numbered lines and an image or audio whose base64 is not valid.",
        input_schema=_schema(
            {"kind": {"type": "string"}, "text_bytes": {"type": "integer"}}, ["kind"]
        ),
    ),
    types.Tool(name="fail", description="An error result.", input_schema=_schema({})),
    types.Tool(name="refuse", description="A JSON-RPC error.", input_schema=_schema({})),
    types.Tool(
        name="busy", description="A JSON-RPC error of code -32000.", input_schema=_schema({})
    ),
    types.Tool(
        name="hang",
        description="Write the pid to pid_file, then never answer.",
        input_schema=_schema({"pid_file": {"type": "string"}}, ["pid_file"]),
    ),
    types.Tool(
        name="blob",
        description="An embedded resource of bytes that are not UTF-8 (of about total_bytes).",
        input_schema=_schema({"total_bytes": {"type": "integer"}}),
    ),
]

COLLIDING = types.Tool(
    name="Read",
    description="The wrapped server's own Read (not the proxy's).",
    input_schema=_schema({"path": {"type": "string"}}, ["path"]),
)


LATE_GREP = types.Tool(
    name="Grep",
    description="The wrapped server's own Grep, added after its first listing.",
    input_schema=_schema({"pattern": {"type": "string"}}),
)


def text_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    name = params.name
    if name == "echo":
        return text_result(str(args["text"]))
    if name == "big":
        return text_result(big_text(int(args["total_bytes"]), int(args.get("marker_line", 0))))
    if name == "image":
        data = base64.b64encode(png(int(args["total_bytes"]))).decode("ascii")
        return types.CallToolResult(content=[types.ImageContent(data=data, mime_type="image/png")])
    if name == "images":
        data = base64.b64encode(png(int(args["total_bytes"]))).decode("ascii")
        image = types.ImageContent(data=data, mime_type="image/png")
        return types.CallToolResult(content=[image] * int(args["count"]))
    if name == "bomb":
        data = base64.b64encode(BOMB).decode("ascii")
        return types.CallToolResult(
            content=[
                types.TextContent(text="the chart"),
                types.ImageContent(data=data, mime_type="image/png"),
            ]
        )
    if name == "audio":
        data = base64.b64encode(wav(int(args["total_bytes"]))).decode("ascii")
        return types.CallToolResult(content=[types.AudioContent(data=data, mime_type="audio/wav")])
    if name == "summary":
        rows = [{"id": i, "name": f"row-{i}"} for i in range(int(args["rows"]))]
        return types.CallToolResult(
            content=[types.TextContent(text=f"{len(rows)} rows, in structuredContent")],
            structured_content={"rows": rows},
        )
    if name == "blocks":
        count, each = int(args.get("count", 10)), int(args.get("each", 10))
        return types.CallToolResult(
            content=[types.TextContent(text=f"{i:05d}" + "x" * each) for i in range(count)]
        )
    if name == "structured":
        rows = [{"id": i, "name": f"row-{i}", "value": i * 7} for i in range(int(args["rows"]))]
        value = {"rows": rows}
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(value))], structured_content=value
        )
    if name == "typed":
        # Equal in Python (True == 1 == 1.0), not the same JSON.
        count = int(args["rows"])
        value = {"rows": [{"id": i, "flag": 1, "off": 0, "ratio": 1.0} for i in range(count)]}
        said = {"rows": [{"id": i, "flag": True, "off": False, "ratio": 1} for i in range(count)]}
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(said))], structured_content=value
        )
    if name == "describe":
        value = {"answer": f"about {args['query']}"}
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(value))], structured_content=value
        )
    if name == "damaged":
        payload = (
            types.ImageContent(data=NOT_BASE64, mime_type="image/png")
            if args["kind"] == "image"
            else types.AudioContent(data=NOT_BASE64, mime_type="audio/wav")
        )
        lines = big_text(int(args.get("text_bytes", 0)), 0)
        return types.CallToolResult(content=[types.TextContent(text=lines), payload])
    if name == "fail":
        return types.CallToolResult(
            content=[types.TextContent(text="fail: the tool broke")], is_error=True
        )
    if name == "refuse":
        raise MCPError(REFUSAL["code"], REFUSAL["message"], REFUSAL["data"])
    if name == "busy":
        raise MCPError(BUSY["code"], BUSY["message"])
    if name == "hang":
        with open(args["pid_file"], "w", encoding="utf-8") as file:
            file.write(str(os.getpid()))
        await anyio.sleep(3600)
    if name == "blob":
        repeat = max(1, int(args.get("total_bytes", 0)) // len(NOT_UTF8))
        resource = types.BlobResourceContents(
            uri="mem://raw",
            mime_type="application/octet-stream",
            blob=base64.b64encode(NOT_UTF8 * repeat).decode("ascii"),
        )
        return types.CallToolResult(content=[types.EmbeddedResource(resource=resource)])
    if name == "Read":
        return text_result(f"the wrapped server's Read of {args.get('path')}")
    if name == "Grep":
        return text_result(f"the wrapped server's Grep of {args.get('pattern')}")
    raise MCPError(-32602, f"unknown tool {name}")


async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(
        prompts=[
            types.Prompt(
                name="greet",
                description="Greet someone.",
                arguments=[types.PromptArgument(name="name", required=True)],
            )
        ]
    )


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    name = (params.arguments or {}).get("name", "nobody")
    return types.GetPromptResult(
        description="A greeting",
        messages=[
            types.PromptMessage(role="user", content=types.TextContent(text=f"Hello, {name}!"))
        ],
    )


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[
            types.Resource(uri="mem://notes", name="notes", mime_type="text/plain"),
            types.Resource(uri="mem://raw", name="raw", mime_type="application/octet-stream"),
        ]
    )


async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[types.ResourceTemplate(uri_template="mem://item/{id}", name="item")]
    )


async def read_resource(
    ctx: Any, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == "mem://notes":
        contents: list[Any] = [
            types.TextResourceContents(uri=uri, mime_type="text/plain", text="the notes\nline 2")
        ]
    elif uri == "mem://raw":
        contents = [
            types.BlobResourceContents(
                uri=uri,
                mime_type="application/octet-stream",
                blob=base64.b64encode(NOT_UTF8).decode("ascii"),
            )
        ]
    elif uri.startswith("mem://item/"):
        contents = [types.TextResourceContents(uri=uri, text=f"item {uri.rsplit('/', 1)[1]}")]
    else:
        raise MCPError(-32002, f"no resource {uri}")
    return types.ReadResourceResult(contents=contents)


def build(collide: bool, grep_later: bool = False) -> Server[Any]:
    tools = [*TOOLS, COLLIDING] if collide or grep_later else TOOLS
    listings = 0

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        nonlocal listings
        if not grep_later:
            return types.ListToolsResult(tools=tools)
        if getattr(params, "cursor", None) is None:
            listings += 1
            return types.ListToolsResult(tools=tools, next_cursor="2")
        return types.ListToolsResult(tools=[LATE_GREP] if listings > 1 else [])

    return Server(
        "test-server",
        version="1.0",
        instructions="A server for the proxy's tests.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


async def serve_http(server: Server[Any], port_file: str) -> None:
    """Serve streamable HTTP at http://127.0.0.1:PORT/mcp, PORT written to `port_file`."""
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning")
    port = sock.getsockname()[1]
    with open(port_file + ".tmp", "w", encoding="utf-8") as file:
        file.write(str(port))
    os.replace(port_file + ".tmp", port_file)
    await uvicorn.Server(config).serve(sockets=[sock])


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid-file")
    parser.add_argument("--collide", action="store_true")
    parser.add_argument("--grep-later", action="store_true")
    parser.add_argument("--http")
    # Secrets a real server takes on its command line (the proxy must never show them).
    parser.add_argument("--api-key")
    parser.add_argument("--token")
    parser.add_argument("--pat")
    parser.add_argument("--config")  # JSON, as some servers take their settings
    parser.add_argument("--env", action="append")  # NAME=VALUE, docker's spelling
    args = parser.parse_args()
    if args.pid_file:
        with open(args.pid_file, "w", encoding="utf-8") as file:
            file.write(str(os.getpid()))
    server = build(args.collide, args.grep_later)
    if args.http:
        await serve_http(server, args.http)
        return
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    sys.exit(anyio.run(main))
