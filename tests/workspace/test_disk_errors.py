"""A disk that refuses writes: OffloadError naming the path, and nothing half-written left.

A full disk is made real in a child process with RLIMIT_FSIZE (writes past the limit fail
with EFBIG; SIGXFSZ is ignored so the process lives to report it) and, where mounting is
permitted, with a small tmpfs (ENOSPC). "No permission" cannot be staged with chmod when
running as root, so `sessions` is made a regular file and mkdir fails with ENOTDIR.
"""

from __future__ import annotations

import errno
import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    CtxOffloadError,
    LocalWorkspace,
    Msg,
    OffloadError,
    ToolResultBlock,
)
from helpers import image_block

SpawnPython = Callable[..., "subprocess.Popen[str]"]

LIMIT = 64 * 1024
BIG = 1024 * 1024

# Runs one offload under RLIMIT_FSIZE and prints what it raised as JSON.
LIMITED_WRITER = """
import asyncio, base64, json, resource, signal, sys
from ctxoffload import Base64Source, DataBlock, LocalWorkspace, Msg, ToolResultBlock

workdir, action, limit, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
image = DataBlock(source=Base64Source(media_type="image/png",
                                      data=base64.b64encode(b"\\x89PNG" * (size // 4)).decode()))
actions = {
    "context": lambda ws: ws.offload_context("s", msgs=[Msg(role="user", content="c" * size)]),
    "context-image": lambda ws: ws.offload_context("s", msgs=[Msg(role="user", content=[image])]),
    "tool_result": lambda ws: ws.offload_tool_result(
        "s", ToolResultBlock(id="call_big", output="t" * size)),
    "data": lambda ws: ws.offload_data_block(image),
}

async def main():
    ws = LocalWorkspace(workdir)
    # Imports are done: from here on no file may grow past `limit` bytes.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        result = await actions[action](ws)
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc),
                          "path": getattr(exc, "path", None),
                          "errno": getattr(exc.__cause__, "errno", None)}))
    else:
        print(json.dumps({"error": None, "result": str(result)}))

asyncio.run(main())
"""


def _run_limited(spawn_python: SpawnPython, workdir: Path, action: str) -> dict[str, Any]:
    child = spawn_python(LIMITED_WRITER, str(workdir), action, str(LIMIT), str(BIG))
    out, err = child.communicate()
    assert child.returncode == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.fixture
async def session_with_history(workdir: Path) -> Path:
    """A session with three messages and one tool result already on disk."""
    ws = LocalWorkspace(workdir)
    ref = await ws.offload_context(
        "s", msgs=[Msg(role="user", content=f"earlier {i}") for i in range(3)]
    )
    await ws.offload_tool_result("s", ToolResultBlock(id="call_small", output="small"))
    return Path(ref)


def _leftovers(workdir: Path) -> list[str]:
    return sorted(p.name for p in workdir.rglob("*") if p.name.startswith(".tmp-"))


def test_full_disk_context_append_raises_and_keeps_earlier_lines(
    workdir: Path, spawn_python: SpawnPython, session_with_history: Path
) -> None:
    log = session_with_history
    before = log.read_bytes()
    events_before = (log.parent / "events.jsonl").read_bytes()
    outcome = _run_limited(spawn_python, workdir, "context")
    assert outcome["error"] == "OffloadError"
    assert outcome["errno"] == errno.EFBIG
    assert str(log) in outcome["message"]
    assert outcome["path"] == str(log)
    assert log.read_bytes() == before
    assert (log.parent / "events.jsonl").read_bytes() == events_before


async def test_full_disk_log_takes_the_next_append_at_the_right_line(
    workdir: Path, spawn_python: SpawnPython, session_with_history: Path
) -> None:
    _run_limited(spawn_python, workdir, "context")
    ws = LocalWorkspace(workdir)
    ref = await ws.offload_context("s", msgs=[Msg(role="user", content="after")])
    assert (ref.first_line, ref.last_line) == (4, 4)
    assert [m["content"] for m in await ws.read_context("s")][-1] == "after"


@pytest.mark.slow
def test_full_disk_tool_result_raises_and_leaves_no_file(
    workdir: Path, spawn_python: SpawnPython, session_with_history: Path
) -> None:
    session = workdir / "sessions" / "s"
    files_before = sorted(p.name for p in session.iterdir())
    outcome = _run_limited(spawn_python, workdir, "tool_result")
    assert outcome["error"] == "OffloadError"
    assert outcome["errno"] == errno.EFBIG
    assert str(session / "tool_result-call_big.txt") in outcome["message"]
    assert sorted(p.name for p in session.iterdir()) == files_before
    assert _leftovers(workdir) == []


def test_full_disk_data_block_raises_and_leaves_no_partial_file(
    workdir: Path, spawn_python: SpawnPython, session_with_history: Path
) -> None:
    outcome = _run_limited(spawn_python, workdir, "data")
    assert outcome["error"] == "OffloadError"
    assert outcome["errno"] == errno.EFBIG
    assert str(workdir / "data") in outcome["message"]
    assert not (workdir / "data").exists() or list((workdir / "data").iterdir()) == []
    assert _leftovers(workdir) == []


def test_full_disk_message_with_an_image_leaves_log_and_data_as_they_were(
    workdir: Path, spawn_python: SpawnPython, session_with_history: Path
) -> None:
    before = session_with_history.read_bytes()
    outcome = _run_limited(spawn_python, workdir, "context-image")
    assert outcome["error"] == "OffloadError"
    assert session_with_history.read_bytes() == before
    assert not (workdir / "data").exists() or list((workdir / "data").iterdir()) == []
    assert _leftovers(workdir) == []


def test_writes_below_the_limit_still_succeed(
    workdir: Path, spawn_python: SpawnPython, session_with_history: Path
) -> None:
    # The control case: the limit itself does not break small offloads.
    child = spawn_python(LIMITED_WRITER, str(workdir), "tool_result", str(LIMIT), "1000")
    out, err = child.communicate()
    assert child.returncode == 0, err
    outcome = json.loads(out)
    assert outcome["error"] is None
    assert Path(outcome["result"]).read_bytes() == b"t" * 1000


# -- a directory that cannot be created -------------------------------------------------------


@pytest.fixture
def blocked_workdir(workdir: Path) -> Path:
    """A workdir whose `sessions` is a regular file, so no session directory can be made."""
    workdir.mkdir()
    (workdir / "sessions").write_text("not a directory")
    return workdir


async def test_offload_context_into_an_unwritable_place_raises_offload_error(
    blocked_workdir: Path,
) -> None:
    ws = LocalWorkspace(blocked_workdir)
    with pytest.raises(OffloadError) as caught:
        await ws.offload_context("s", msgs=[Msg(role="user", content="x")])
    # The entry at fault is named: `sessions` is not a directory.
    assert str(blocked_workdir / "sessions") in str(caught.value)
    assert caught.value.path == str(blocked_workdir / "sessions")
    assert (blocked_workdir / "sessions").read_text() == "not a directory"


async def test_offload_tool_result_into_an_unwritable_place_raises_offload_error(
    blocked_workdir: Path,
) -> None:
    ws = LocalWorkspace(blocked_workdir)
    with pytest.raises(OffloadError, match=r"sessions is .* not a directory"):
        await ws.offload_tool_result("s", ToolResultBlock(id="c", output="x"))


async def test_initialize_into_an_unwritable_place_raises_offload_error(
    blocked_workdir: Path,
) -> None:
    with pytest.raises(OffloadError, match="sessions"):
        await LocalWorkspace(blocked_workdir).initialize()


async def test_data_store_into_an_unwritable_place_raises_offload_error(workdir: Path) -> None:
    workdir.mkdir()
    (workdir / "data").write_text("not a directory")
    block = image_block(b"img")
    with pytest.raises(OffloadError, match="data"):
        await LocalWorkspace(workdir).offload_data_block(block)


async def test_offload_error_is_an_os_error_and_a_ctxoffload_error(
    blocked_workdir: Path,
) -> None:
    with pytest.raises(OSError) as caught:
        await LocalWorkspace(blocked_workdir).offload_context(
            "s", msgs=[Msg(role="user", content="x")]
        )
    assert isinstance(caught.value, CtxOffloadError)


# -- a real full file system (tmpfs) ----------------------------------------------------------


@pytest.fixture
def small_tmpfs(tmpfs: Callable[[str], Path]) -> Path:
    """A 256 KiB tmpfs, or a skip where mounting is not permitted."""
    return tmpfs("256k")


async def test_full_tmpfs_refuses_and_leaves_everything_as_it_was(
    small_tmpfs: Path, tree: Callable[[Path], Any]
) -> None:
    ws = LocalWorkspace(small_tmpfs / "ws")
    ref = await ws.offload_context("s", msgs=[Msg(role="user", content="before")])
    before = tree(small_tmpfs)
    big = "z" * (512 * 1024)
    image = image_block(big.encode())
    attempts: list[Callable[[], Awaitable[Any]]] = [
        lambda: ws.offload_context("s", msgs=[Msg(role="user", content=big)]),
        lambda: ws.offload_tool_result("s", ToolResultBlock(id="call_big", output=big)),
        lambda: ws.offload_data_block(image),
    ]
    for attempt in attempts:
        with pytest.raises(OffloadError) as caught:
            await attempt()
        assert "No space left on device" in str(caught.value)
        assert isinstance(caught.value.__cause__, OSError)
        assert caught.value.__cause__.errno == errno.ENOSPC
        after_attempt = tree(small_tmpfs)
        # An empty data/ may be left: it is part of the layout, not a partial write.
        if after_attempt.get("ws/data", 0) is None and "ws/data" not in before:
            assert not any(k.startswith("ws/data/") for k in after_attempt)
            del after_attempt["ws/data"]
        assert after_attempt == before
    after = await ws.offload_context("s", msgs=[Msg(role="user", content="after")])
    assert (after.first_line, after.last_line) == (2, 2)
    assert [m["content"] for m in await ws.read_context("s")] == ["before", "after"]
    assert str(ref) == str(after)
