"""Compaction asked for from outside (`request_compaction`) and the follower an agent reads
the requests with (`CompactRequests`), on every workspace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace
from ctxoffload._disk.compact_requests import CompactRequests
from ctxoffload._disk.events import Compact, EventKind
from ctxoffload.exceptions import ConfigError, InvalidSessionId
from ctxoffload.workspace import request_compaction


async def answer(workspace: Any, *requests: str) -> None:
    event = Compact(changed=False, reason="test", requests=list(requests), requested_by=[])
    await workspace.record_event("s", EventKind.COMPACT, **event.fields())


async def test_a_follower_finds_each_request_once_until_it_is_answered(
    make_workspace: Callable[..., Any],
) -> None:
    agent_side = make_workspace()
    follower = CompactRequests(agent_side, "s")
    assert await follower.look() == []  # no events.jsonl yet
    await agent_side.record_event("s", "model_call", step=1)
    asker = agent_side  # another object on the same place: test_two_objects_on_a_bucket
    first = await request_compaction(asker, "s", "keep the paths")
    assert [r.request for r in await follower.look()] == [first]
    for step in range(2, 30):  # the agent's own events between two looks
        await agent_side.record_event("s", "model_call", step=step)
    second = await request_compaction(asker, "s")
    pending = await follower.look()
    assert [r.request for r in pending] == [first, second]
    assert pending[0].instructions == "keep the paths" and pending[1].instructions is None
    assert pending[0].by["pid"] > 0 and pending[0].by["host"]
    await answer(agent_side, first)
    assert [r.request for r in await follower.look()] == [second]
    assert [r.request for r in await follower.look()] == [second]  # nothing read twice
    assert first in follower.answers
    # A new follower (the next holder) reads the log once and finds the same.
    assert [r.request for r in await CompactRequests(agent_side, "s").look()] == [second]


async def test_a_follower_reads_only_what_the_log_gained(
    tmp_path: Path, read_starts: list[int]
) -> None:
    """After the first look, each look starts reading where the previous one ended, however
    long the log, and however many lines another process appended meanwhile."""
    agent_side = LocalWorkspace(tmp_path / "ws")
    asker = LocalWorkspace(tmp_path / "ws")  # another process's object: no shared marks
    events = tmp_path / "ws" / "sessions" / "s" / "events.jsonl"
    for step in range(500):
        await agent_side.record_event("s", "model_call", step=step, padding="x" * 200)
    follower = CompactRequests(agent_side, "s")
    assert await follower.look() == []
    starts = read_starts
    for round_ in range(3):
        size = events.stat().st_size
        await asker.record_event("s", "model_call", step=1000 + round_, padding="y" * 200)
        request = await request_compaction(asker, "s")
        assert request in [r.request for r in await follower.look()]
        assert starts[-1] == size  # not 0: the 500 lines before are not read again


async def test_a_follower_does_not_read_back_its_own_workspaces_appends(
    tmp_path: Path, read_starts: list[int]
) -> None:
    """The projector looks for requests at every model call, and what was appended since its
    last look is mostly its own record of the last call: its workspace knows it wrote all of
    that, with no request or answer in it, and the look reads nothing. Whatever another
    writer appended (another object, another process), and any request or answer its own
    workspace wrote, is read and found, with every line skipped before it."""
    import subprocess
    import sys

    root = tmp_path / "ws"
    agent_side = LocalWorkspace(root)
    follower = CompactRequests(agent_side, "s")
    assert await follower.look() == []  # no events.jsonl yet
    for step in range(40):
        await agent_side.record_event("s", "model_call", step=step, padding="x" * 300)
        assert await follower.look() == []
    assert read_starts == []  # nothing read back

    # Another object on the same folder (another process's view): found when it wrote
    # last, and when this workspace appended after it.
    other = LocalWorkspace(root)
    last = await request_compaction(other, "s")
    assert [r.request for r in await follower.look()] == [last]
    await answer(agent_side, last)
    assert await follower.look() == []
    by_other = await request_compaction(other, "s", "from the other object")
    await agent_side.record_event("s", "model_call", step=100)
    assert [r.request for r in await follower.look()] == [by_other]
    await answer(agent_side, by_other)  # answered by this workspace: read, and popped
    assert await follower.look() == []
    assert by_other in follower.answers

    # A request made through the workspace itself (a tool of the agent, in this process).
    reads = len(read_starts)
    own = await request_compaction(agent_side, "s")
    assert [r.request for r in await follower.look()] == [own]
    assert len(read_starts) > reads
    await answer(agent_side, own)
    assert await follower.look() == []
    reads = len(read_starts)
    await agent_side.record_event("s", "model_call", step=101)
    assert await follower.look() == [] and len(read_starts) == reads

    # A real other process appends a request between two of this workspace's appends.
    script = (
        "import asyncio, sys\n"
        "from ctxoffload import LocalWorkspace\n"
        "from ctxoffload.workspace import request_compaction\n"
        "print(asyncio.run(request_compaction(LocalWorkspace(sys.argv[1]), 's')))\n"
    )
    await agent_side.record_event("s", "model_call", step=102)
    done = subprocess.run(
        [sys.executable, "-c", script, str(root)], capture_output=True, text=True, check=True
    )
    await agent_side.record_event("s", "model_call", step=103)
    assert [r.request for r in await follower.look()] == [done.stdout.strip()]

    # The log replaced under the follower (a person restoring a copy): read again whole.
    await answer(agent_side, done.stdout.strip())
    assert await follower.look() == []
    events = root / "sessions" / "s" / "events.jsonl"
    copy = events.read_bytes() + b'{"kind":"compact_request","request":"restored","by":{}}\n'
    replacement = events.with_name("events.new")
    replacement.write_bytes(copy)
    replacement.replace(events)
    await agent_side.record_event("s", "model_call", step=104)
    assert [r.request for r in await follower.look()] == ["restored"]


async def test_a_torn_last_line_is_read_once_it_is_whole(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path / "ws")
    await workspace.record_event("s", "model_call", step=1)
    follower = CompactRequests(workspace, "s")
    await follower.look()
    events = tmp_path / "ws" / "sessions" / "s" / "events.jsonl"
    line = b'{"kind":"compact_request","request":"r1","by":{}}\n'
    with events.open("ab") as log:
        log.write(line[:20])  # a writer part-way through its line
    assert await follower.look() == []
    with events.open("ab") as log:
        log.write(line[20:])
    assert [r.request for r in await follower.look()] == ["r1"]


@pytest.mark.parametrize("session", ["../x", "/etc", "a/b", "", "x\x00"])
async def test_a_hostile_session_id_is_refused_before_any_write(
    tmp_path: Path, session: str
) -> None:
    workspace = LocalWorkspace(tmp_path / "ws")
    with pytest.raises(InvalidSessionId):
        await request_compaction(workspace, session)
    with pytest.raises(InvalidSessionId):
        CompactRequests(workspace, session)
    assert not (tmp_path / "ws").exists() or not any((tmp_path / "ws").rglob("*.jsonl"))


async def test_instructions_are_a_bounded_string(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path / "ws")
    with pytest.raises(ConfigError, match="too long"):
        await request_compaction(workspace, "s", "x" * 100_000)
    with pytest.raises(ConfigError, match="must be a string"):
        await request_compaction(workspace, "s", 42)  # type: ignore[arg-type]
    assert await workspace.read_events("s") == []


async def test_a_follower_on_a_bucket_sees_another_objects_requests(s3: Any) -> None:
    """Two `ObjectStoreWorkspace` objects on one bucket, as an agent and `ctxoffload compact`
    on two machines: each look lists only the segments after the last it read."""
    from ctxoffload import ObjectStoreWorkspace

    url = f"s3://{s3.new_bucket()}/ws"
    agent_side = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    asker = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    await agent_side.record_event("s", "model_call", step=1)
    follower = CompactRequests(agent_side, "s")
    assert await follower.look() == []
    found = []
    for round_ in range(3):
        found.append(await request_compaction(asker, "s", f"round {round_}"))
        await agent_side.record_event("s", "model_call", step=round_ + 2)
        assert [r.request for r in await follower.look()] == found
    await answer(asker, *found)
    assert await follower.look() == []
