"""A real workspace to inspect, built with the library itself (used by tests/cli)."""

from __future__ import annotations

import base64
import zlib
from pathlib import Path

from ctxoffload import DataBlock, LocalWorkspace, Msg, TextBlock, ToolCallBlock, ToolResultBlock
from ctxoffload.messages import Base64Source

FAILING_LINE = 1500
PNG = b"\x89PNG\r\n\x1a\n" + zlib.compress(b"a tiny picture" * 20)


def log_text(lines: int = 2000) -> str:
    out = []
    for i in range(1, lines + 1):
        if i == FAILING_LINE:
            out.append(f"{i:05d} ERROR export-worker-7 order_id=ORD-58213 disk quota exceeded")
        else:
            out.append(f"{i:05d} INFO export-worker-{i % 8} exported ORD-{10000 + i}")
    return "\n".join(out)


async def fill_workspace(workdir: Path) -> None:
    ws = LocalWorkspace(workdir, fsync=False)
    await ws.initialize()
    image = DataBlock(
        source=Base64Source(media_type="image/png", data=base64.b64encode(PNG).decode()),
        name="panel.png",
    )
    for session in ("run-1", "run-2"):
        await ws.offload_tool_result(
            session, ToolResultBlock(id="call_1", name="fetch_logs", output=log_text())
        )
        await ws.offload_tool_result(
            session,
            ToolResultBlock(id="call_2", name="capture", output=[TextBlock(text="shot"), image]),
        )
    ref = await ws.offload_context(
        "run-1",
        msgs=[
            Msg(role="user", content="Find the failing order"),
            Msg(
                role="assistant",
                content=[
                    TextBlock(text="Fetch the log."),
                    ToolCallBlock(id="call_9", name="fetch_logs", input={"job": "nightly"}),
                ],
            ),
            Msg(
                role="tool",
                content=[
                    ToolResultBlock(
                        id="call_9",
                        name="fetch_logs",
                        output='line one\nthe "quoted" needle \u2713 on line two',
                    )
                ],
            ),
            Msg(role="user", content=[TextBlock(text="look at this"), image]),
        ],
    )
    await ws.record_event(
        "run-1",
        "compression",
        reference=str(ref),
        lines=[ref.first_line, ref.last_line],
        tokens_before=9000,
        tokens_after=1000,
        summary_source="extractive",
    )
    await ws.record_event(
        "run-1",
        "truncation",
        tool_id="call_1",
        reference=str(ws.session_dir("run-1") / "tool_result-call_1.txt"),
        tokens_before=30000,
        tokens_after=500,
    )
    await ws.write_state(
        "run-1",
        {"session_id": "run-1", "steps": 4, "messages": [{"role": "user", "content": str(ref)}]},
    )
