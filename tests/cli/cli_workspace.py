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


# Root reads a chmod-000 file; a child without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH does not.
_DROP = ("setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search")
_prefix: tuple[str, ...] | None = None
_why_none = ""


def unprivileged_prefix() -> tuple[str, ...]:
    """The command prefix under which a chmod-000 file cannot be read (checked once on one);
    skips the calling test when this machine has none."""
    global _prefix, _why_none
    if _prefix is None and not _why_none:
        import os
        import shutil
        import subprocess
        import sys
        import tempfile

        prefix: tuple[str, ...] = () if os.geteuid() != 0 else _DROP
        if prefix and shutil.which("setpriv") is None:
            _why_none = "running as root without setpriv: a chmod-000 file stays readable"
        else:
            with tempfile.NamedTemporaryFile() as locked:
                os.chmod(locked.name, 0)
                probe = subprocess.run(
                    [*prefix, sys.executable, "-c", f"open({locked.name!r}, 'rb')"],
                    capture_output=True,
                )
            if b"PermissionError" in probe.stderr:
                _prefix = prefix
            else:
                _why_none = f"cannot drop the power to read a chmod-000 file here: {probe.stderr!r}"
    if _prefix is None:
        import pytest

        pytest.skip(_why_none)
    return _prefix
