"""LocalWorkspace.gc: old sessions, a size budget, unreferenced data, and a live writer."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import os
import subprocess
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    ConfigError,
    LocalWorkspace,
    Msg,
    TextBlock,
    ToolResultBlock,
)
from ctxoffload._disk.layout import purging_name
from ctxoffload.workspace import GcReport
from helpers import ChildLines, chain_of_sub_agents, image_block

SpawnPython = Callable[..., "subprocess.Popen[str]"]
DAY = 86_400.0


def _age(path: Path, seconds: float) -> None:
    """Make every file under `path` (and `path`) look last written `seconds` ago."""
    when = time.time() - seconds
    for p in [path, *path.rglob("*")]:
        # A live writer's temporary files come and go meanwhile.
        with contextlib.suppress(FileNotFoundError):
            os.utime(p, (when, when), follow_symlinks=False)


async def _session_with_image(ws: LocalWorkspace, session_id: str, payload: bytes) -> str:
    msg = Msg(role="user", content=[TextBlock(text=session_id), image_block(payload)])
    await ws.offload_context(session_id, msgs=[msg])
    await ws.offload_tool_result(session_id, ToolResultBlock(id="c1", output="x" * 1000))
    [name] = [p.name for p in (ws.data_dir).iterdir() if payload in p.read_bytes()]
    return name


async def test_gc_removes_sessions_older_than_the_limit_and_their_unused_data(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    old_image = await _session_with_image(local_ws, "old", b"old image")
    new_image = await _session_with_image(local_ws, "new", b"new image")
    _age(local_ws.session_dir("old"), 3 * DAY)
    _age(workdir / "data", 3 * DAY)
    report = await local_ws.gc(older_than=DAY)
    assert report.sessions_removed == ["old"]
    assert report.data_removed == [old_image]
    assert report.bytes_freed > 1000
    assert report.dry_run is False
    assert await local_ws.list_sessions() == ["new"]
    assert (workdir / "data" / new_image).exists()
    assert not (workdir / "data" / old_image).exists()
    assert not [p for p in (workdir / "sessions").iterdir() if p.name.startswith(".")]


async def test_gc_dry_run_reports_the_same_and_removes_nothing(
    local_ws: LocalWorkspace, workdir: Path, tree: Callable[[Path], object]
) -> None:
    await _session_with_image(local_ws, "old", b"old image")
    await _session_with_image(local_ws, "new", b"new image")
    _age(local_ws.session_dir("old"), 3 * DAY)
    _age(workdir / "data", 3 * DAY)
    before = tree(workdir)
    dry = await local_ws.gc(older_than=DAY, dry_run=True)
    assert tree(workdir) == before
    real = await local_ws.gc(older_than=DAY)
    assert (dry.sessions_removed, dry.data_removed, dry.bytes_freed, dry.dry_run) == (
        real.sessions_removed,
        real.data_removed,
        real.bytes_freed,
        True,
    )


async def test_gc_finishes_the_removal_a_killed_gc_left_half_done(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    # What a gc killed -9 in the middle of removing session 'big' leaves: the folder renamed
    # aside (a hidden name no reader lists), with part of its files still in it.
    for i in range(3):
        await local_ws.offload_tool_result("big", ToolResultBlock(id=f"c{i}", output="z" * 10_000))
    await local_ws.offload_tool_result("other", ToolResultBlock(id="c", output="o"))
    left = workdir / "sessions" / purging_name("big")
    local_ws.session_dir("big").rename(left)
    (left / "tool_result-c0.txt").unlink()
    _age(workdir / "sessions", 3 * DAY)
    dry = await local_ws.gc(older_than=DAY, dry_run=True)
    assert left.exists()
    report = await local_ws.gc(older_than=DAY)
    assert not left.exists()
    assert report.sessions_removed == ["other"]
    assert report.bytes_freed > 20_000
    assert dry.bytes_freed == report.bytes_freed
    assert os.listdir(workdir / "sessions") == []


async def test_gc_removes_oldest_sessions_first_until_under_max_bytes(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    for i, name in enumerate(["a", "b", "c"]):
        await local_ws.offload_tool_result(name, ToolResultBlock(id="c", output="y" * 10_000))
        _age(local_ws.session_dir(name), (3 - i) * DAY)
    report = await local_ws.gc(max_bytes=25_000)
    assert report.sessions_removed == ["a"]
    assert await local_ws.list_sessions() == ["b", "c"]
    report = await local_ws.gc(max_bytes=0)
    assert report.sessions_removed == ["b", "c"]


async def test_gc_never_removes_a_referenced_data_file(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    # Referenced only from a tool_result file and from state.json, both old.
    image = image_block(b"kept image")
    block = await local_ws.offload_data_block(image)
    await local_ws.offload_tool_result(
        "s", ToolResultBlock(id="c", output=[TextBlock(text="see"), image])
    )
    await local_ws.write_state("t", {"image": block.source.url})
    name = Path(block.source.url).name
    _age(workdir, 3 * DAY)
    report = await local_ws.gc()
    assert report == GcReport(dry_run=False)
    assert (workdir / "data" / name).exists()


async def test_gc_keeps_unreferenced_data_used_recently(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    block = await local_ws.offload_data_block(image_block(b"just stored"))
    assert (await local_ws.gc()).data_removed == []
    _age(workdir / "data", 3 * DAY)
    # Storing the same bytes again counts as a use.
    await local_ws.offload_data_block(image_block(b"just stored"))
    assert (await local_ws.gc()).data_removed == []
    _age(workdir / "data", 3 * DAY)
    assert (await local_ws.gc()).data_removed == [Path(block.source.url).name]


async def test_gc_rejects_negative_limits(local_ws: LocalWorkspace) -> None:
    with pytest.raises(ConfigError, match="older_than=-1"):
        await local_ws.gc(older_than=-1)
    with pytest.raises(ConfigError, match="max_bytes=-5"):
        await local_ws.gc(max_bytes=-5)


# Appends to session "live" (each message with a new image) and prints each acked id.
LIVE_WRITER = """
import asyncio, base64, sys
from ctxoffload import LocalWorkspace, Msg, TextBlock, DataBlock, Base64Source

async def main():
    ws = LocalWorkspace(sys.argv[1])
    sys.stdin.readline()
    for seq in range(100_000):
        image = DataBlock(source=Base64Source(media_type="image/png",
                          data=base64.b64encode(f"live image {seq}".encode()).decode()))
        ref = await ws.offload_context("live", msgs=[
            Msg(id=f"m{seq}", role="user", content=[TextBlock(text=f"m{seq}"), image])])
        print(f"m{seq}", ref.first_line, flush=True)

asyncio.run(main())
"""


@pytest.mark.slow
async def test_gc_while_an_agent_writes_loses_nothing_it_acknowledged(
    local_ws: LocalWorkspace, workdir: Path, spawn_python: SpawnPython
) -> None:
    await local_ws.offload_context("live", msgs=[Msg(id="first", role="user", content="x")])
    child = spawn_python(LIVE_WRITER, str(workdir))
    assert child.stdin is not None and child.stdout is not None
    lines = ChildLines(child.stdout)
    child.stdin.write("go\n")
    child.stdin.flush()
    # Counted, not timed: each gc round is followed by one more acknowledged append, so the
    # rounds and the writer interleave whatever the machine's speed. The deadline is a
    # safety net for a machine so loaded that the writer never runs.
    deadline = time.monotonic() + 300
    acked = []
    for rounds in range(12):
        # Old data on disk, as far as mtimes tell: only references can keep it.
        _age(workdir / "data", 3 * DAY)
        await local_ws.offload_tool_result(f"old{rounds}", ToolResultBlock(id="c", output="o"))
        _age(local_ws.session_dir(f"old{rounds}"), 3 * DAY)
        report = await local_ws.gc(older_than=DAY)
        assert "live" not in report.sessions_removed
        acked.append(lines.next(deadline).split())
    child.kill()
    child.wait()
    acked += [line.split() for line in lines.rest(deadline)]
    log = await local_ws.read_context("live")
    for msg_id, first in acked:
        message = log[int(first) - 1]
        assert message["id"] == msg_id
        for block in message["content"]:
            if block["type"] == "data":
                assert (await local_ws.read_reference(block["source"]["url"])).startswith(
                    b"live image"
                )
    assert await local_ws.list_sessions() == ["live"]


async def test_gc_keeps_a_chain_of_sub_agents_while_its_newest_stays(workdir: Path) -> None:
    # Each child's record names its parent: the newest keeps the whole chain.
    names = await chain_of_sub_agents(workdir, 4)
    ws = LocalWorkspace(workdir)
    for name in names[:-1]:
        _age(ws.session_dir(name), 3 * DAY)
    report = await ws.gc(older_than=DAY)
    assert report.sessions_removed == []
    assert report.sessions_kept == {
        parent: f"session '{child}' references its files"
        for parent, child in itertools.pairwise(names)
    }
    # Once the newest is old too, the chain goes, each child before its parent.
    _age(ws.session_dir(names[-1]), 3 * DAY)
    report = await ws.gc(older_than=DAY)
    assert report.sessions_removed == names[::-1]


async def _parent_and_child(ws: LocalWorkspace, parent: str, child: str) -> None:
    """Records that name each other, as `Agent.as_tool` writes them."""
    await ws.record_event(parent, "subagent", session=child, status="done")
    await ws.record_event(child, "session_start", parent={"session": parent, "step": 1})


async def test_gc_removes_a_sub_agent_and_its_parent_together(local_ws: LocalWorkspace) -> None:
    await _parent_and_child(local_ws, "lead", "lead--helper-1")
    await local_ws.offload_tool_result("newer", ToolResultBlock(id="c", output="n" * 100))
    for name, days in (("lead", 5), ("lead--helper-1", 4), ("newer", 3)):
        _age(local_ws.session_dir(name), days * DAY)
    # Each names the other: neither is ever alone, and both go before a newer session.
    report = await local_ws.gc(max_bytes=1)
    assert report.sessions_removed[:2] == ["lead", "lead--helper-1"]
    await _parent_and_child(local_ws, "lead", "lead--helper-1")
    for name in ("lead", "lead--helper-1"):
        _age(local_ws.session_dir(name), 5 * DAY)
    assert (await local_ws.gc(older_than=DAY)).sessions_removed == ["lead", "lead--helper-1"]


def _run_elsewhere(write: Coroutine[Any, Any, Any]) -> None:
    """Run another writer's `write` to its end in a thread of its own, as another process
    would, while gc (which decides in the event loop) waits."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, write).result()


async def test_gc_keeps_a_sub_agent_whose_parent_is_written_while_gc_removes_them(
    local_ws: LocalWorkspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxoffload.workspace import _collected

    await _parent_and_child(local_ws, "lead", "lead--helper-1")
    await local_ws.offload_tool_result("lead--helper-1", ToolResultBlock(id="c", output="h"))
    for name, days in (("lead", 5), ("lead--helper-1", 6)):
        _age(local_ws.session_dir(name), days * DAY)
    # The parent is resumed after gc measured both and decided to remove them: its context
    # names the child's files, so the child must stay with it.
    decide = _collected.sessions_to_remove

    def decide_then_resume(*args: Any, **kwargs: Any) -> Any:
        decided = decide(*args, **kwargs)
        other = LocalWorkspace(local_ws.workdir, fsync=False)
        _run_elsewhere(other.record_event("lead", "session_start", agent="lead"))
        return decided

    monkeypatch.setattr(_collected, "sessions_to_remove", decide_then_resume)
    report = await local_ws.gc(older_than=DAY)
    assert report.sessions_removed == []
    assert await local_ws.list_sessions() == ["lead", "lead--helper-1"]
    assert await local_ws.list_files("lead--helper-1")
    assert set(report.sessions_kept) == {"lead", "lead--helper-1"}


async def test_gc_keeps_a_session_written_within_one_tick_of_the_clock_it_was_measured_in(
    local_ws: LocalWorkspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxoffload.workspace import _collected

    await local_ws.offload_tool_result("s", ToolResultBlock(id="c1", output="first"))
    decide = _collected.sessions_to_remove

    def decide_then_write(*args: Any, **kwargs: Any) -> Any:
        decided = decide(*args, **kwargs)
        [measured] = decided[0]
        other = LocalWorkspace(local_ws.workdir, fsync=False)
        _run_elsewhere(other.offload_tool_result("s", ToolResultBlock(id="c2", output="late")))
        # A file system stamps files with a coarse clock (a tick of some milliseconds, or a
        # second): written in the tick it was measured in, the session looks no newer.
        folder = local_ws.session_dir("s")
        for path in [folder, *folder.iterdir()]:
            os.utime(path, (measured.last_activity, measured.last_activity))
        return decided

    monkeypatch.setattr(_collected, "sessions_to_remove", decide_then_write)
    report = await local_ws.gc(max_bytes=0)
    assert report.sessions_kept == {"s": "it was written while gc ran"}
    assert len(await local_ws.list_files("s")) == 2


async def test_gc_removes_by_age_what_only_a_session_the_budget_removed_named(
    local_ws: LocalWorkspace,
) -> None:
    await local_ws.offload_tool_result("origin", ToolResultBlock(id="c", output="o" * 100))
    await local_ws.write_state("fork", {"forked_from": {"session": "origin"}})
    await local_ws.offload_tool_result("big", ToolResultBlock(id="c", output="b" * 100))
    _age(local_ws.session_dir("origin"), 5 * DAY)
    _age(local_ws.session_dir("fork"), 2 * DAY)
    _age(local_ws.session_dir("big"), 1 * DAY)
    # By age the fork keeps its origin; the budget removes the fork, and then the origin is
    # idle for longer than allowed, with nothing naming it.
    everything = (await local_ws.gc(max_bytes=0, dry_run=True)).bytes_freed
    report = await local_ws.gc(older_than=3 * DAY, max_bytes=everything - 1)
    assert report.sessions_removed == ["fork", "origin"] and report.sessions_kept == {}
    assert await local_ws.list_sessions() == ["big"]
