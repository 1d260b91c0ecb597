"""A tour of the workspace: offload a context, a large tool result and an image.

The guide: docs/guides/workspace.md.

Run:  python examples/workspace_tour.py [WORKDIR]
Then: grep -n ERROR WORKDIR/sessions/run-42/tool_result-*.txt
"""

from __future__ import annotations

import asyncio
import base64
import struct
import sys
import zlib
from pathlib import Path

from ctxoffload import Base64Source, DataBlock, LocalWorkspace, Msg, TextBlock, ToolResultBlock
from ctxoffload.workspace import GarbageCollector, Workspace


def tiny_png() -> bytes:
    """A real 2x2 PNG, made here so the example needs no files."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    rows = b"\x00\xff\x00\x00\x00\xff\x00" * 2
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


async def main(workdir: Path) -> None:
    ws = LocalWorkspace(workdir=workdir)
    await ws.initialize()

    # 1. Older messages leave the context: one JSON message per line in context.jsonl.
    context_ref = await ws.offload_context(
        "run-42",
        msgs=[
            Msg(role="user", content="Why did last night's import fail?"),
            Msg(role="assistant", content="Let me fetch the import log."),
        ],
    )
    print(f"context  -> {context_ref} (lines {context_ref.line_span})")

    # 2. A large tool result: the WHOLE output goes to tool_result-<id>.txt.
    log = "\n".join(
        f"2026-11-20T02:{i // 60 % 60:02d}:{i % 60:02d}Z INFO imported row {i}"
        for i in range(50_000)
    )
    log += "\n2026-11-20T03:00:00Z ERROR import aborted: duplicate key 'sku-1182'"
    result = ToolResultBlock(id="call_fetch_log_1", name="fetch_log", output=log)
    result_path = await ws.offload_tool_result("run-42", result)
    print(f"result   -> {result_path} ({len(log):,} characters)")

    # 3. An image: stored once under data/, named by the sha256 of its bytes.
    image = DataBlock(
        source=Base64Source(media_type="image/png", data=base64.b64encode(tiny_png()).decode()),
        name="dashboard.png",
    )
    stored = await ws.offload_data_block(image)
    print(f"image    -> {stored.source.url}")

    # A tool result holding text and an image keeps the image as one <data .../> line.
    mixed = ToolResultBlock(
        id="call_screenshot_2",
        name="screenshot",
        output=[TextBlock(text="Dashboard at 03:00:"), image],
    )
    print(f"mixed    -> {await ws.offload_tool_result('run-42', mixed)}")

    # 4. Reading back: every workspace (on disk, in memory, in a bucket) is a `Workspace`;
    #    what only some can do is a protocol of its own, asked with isinstance.
    assert isinstance(ws, Workspace)
    messages = await ws.read_context("run-42")
    kinds = [event["kind"] for event in await ws.read_events("run-42")]
    print(f"\nread back: {len(messages)} messages, events {kinds}")
    if isinstance(ws, GarbageCollector):
        report = await ws.gc(older_than=30 * 86_400, dry_run=True)
        print(
            f"gc (dry run, older than 30 days) would remove {report.sessions_removed or 'nothing'}"
        )

    print("\nThe workspace now holds:")
    for path in sorted(workdir.rglob("*")):
        if path.is_file():
            print(f"  {path.relative_to(workdir)}  ({path.stat().st_size:,} bytes)")
    print(f"\nTry: grep -n ERROR {workdir}/sessions/run-42/tool_result-*.txt")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else "agent_workspace")))
