"""A read-only workdir (a tmpfs remounted read-only): every offload raises OffloadError."""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxoffload import (
    LocalWorkspace,
    Msg,
    OffloadError,
    ToolResultBlock,
)
from helpers import image_block


@pytest.fixture
def readonly_workdir(tmpfs: Callable[[str], Path]) -> Path:
    """A workspace with one session, on a tmpfs then remounted read-only (skip if not root)."""
    return tmpfs("1m")


def _remount_readonly(mount_point: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(mount_point)], check=True)


async def test_every_offload_on_a_read_only_workdir_raises_offload_error(
    readonly_workdir: Path,
) -> None:
    ws = LocalWorkspace(readonly_workdir / "ws")
    await ws.offload_context("s", msgs=[Msg(role="user", content="before")])
    await ws.initialize()
    _remount_readonly(readonly_workdir)
    image = image_block(b"png!")
    attempts = {
        "context": lambda: ws.offload_context("s", msgs=[Msg(role="user", content="x")]),
        "new session": lambda: ws.offload_context("t", msgs=[Msg(role="user", content="x")]),
        "tool result": lambda: ws.offload_tool_result("s", ToolResultBlock(id="c", output="o")),
        "data": lambda: ws.offload_data_block(image),
        "state": lambda: ws.write_state("s", {"messages": []}),
        "new workspace": lambda: LocalWorkspace(readonly_workdir / "ws2").initialize(),
        "purge": lambda: ws.purge_session("s"),
    }
    for what, attempt in attempts.items():
        with pytest.raises(OffloadError) as caught:
            await attempt()
        cause = caught.value.__cause__
        assert isinstance(cause, OSError) and cause.errno == errno.EROFS, what
        assert "Read-only file system" in str(caught.value), what
    # Nothing to create or clean up: initializing an existing workspace still works.
    await LocalWorkspace(readonly_workdir / "ws").initialize()
    assert [m["content"] for m in await ws.read_context("s")] == ["before"]
