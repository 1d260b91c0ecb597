"""One live writer per session: the lease on disk, in a bucket and in memory, with real
processes racing, killed with SIGKILL, and taken over."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from s3_server import S3Server

from ctxoffload import (
    Agent,
    InMemoryWorkspace,
    LocalWorkspace,
    ObjectStoreWorkspace,
    OffloadError,
    ScriptedModel,
    SessionBusyError,
)
from helpers import forced_tags

WORKER = Path(__file__).with_name("lease_worker.py")


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def finish(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def wait_held(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read() if process.stderr else "no output"
    return json.loads(line)  # type: ignore[no-any-return]


def no_line_twice(folder: Path) -> None:
    """No file of a session holds the same line twice (a message written by two writers)."""
    for path in folder.rglob("*.jsonl"):
        lines = [line for line in path.read_bytes().splitlines() if line.strip()]
        twice = [line[:120] for line, n in Counter(lines).items() if n > 1]
        assert not twice, f"{path} repeats {twice}"


# -- one process ------------------------------------------------------------------------------


async def test_a_second_holder_gets_the_error_naming_the_first(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    lease = await ws.acquire_lease("run", agent="coder")
    record = json.loads((tmp_path / "sessions/run/lease.json").read_text())
    assert record["pid"] == os.getpid() and record["agent"] == "coder"
    with pytest.raises(SessionBusyError) as busy:
        await LocalWorkspace(tmp_path).acquire_lease("run", agent="other")
    assert "agent 'coder'" in str(busy.value) and f"pid {os.getpid()}" in str(busy.value)
    assert busy.value.holder["token"] == lease.holder["token"]
    assert busy.value.session_id == "run"
    await lease.release()
    await lease.release()  # twice is harmless
    again = await ws.acquire_lease("run")
    assert json.loads((tmp_path / "sessions/run/lease.json").read_text())["agent"] is None
    await again.release()
    assert "released" in json.loads((tmp_path / "sessions/run/lease.json").read_text())


async def test_readers_are_never_blocked_by_a_lease(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    ref = await ws.offload_tool_result("run", {"id": "c1", "name": "t", "output": "x\n" * 10})
    async with await ws.acquire_lease("run"):
        assert await LocalWorkspace(tmp_path).read_reference(ref) == b"x\n" * 10
        assert await LocalWorkspace(tmp_path).read_events("run")


async def test_a_dropped_agent_lets_go_of_its_session(tmp_path: Path) -> None:
    """An Agent dropped without aclose (a notebook cell run again) is kept only by reference
    cycles; the next writer of its session collects it and takes the lease."""
    ws = LocalWorkspace(tmp_path)
    first = Agent(model=ScriptedModel(["one"], context_window=8_000), offloader=ws, session_id="s")
    await first.reply("hi")
    assert first.lease is not None
    del first
    second = Agent(model=ScriptedModel(["two"], context_window=8_000), offloader=ws, session_id="s")
    assert (await second.reply("again")).text == "two"
    await second.aclose()


async def test_a_live_agent_keeps_its_session_until_aclose(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    first = Agent(model=ScriptedModel(["one"], context_window=8_000), offloader=ws, session_id="s")
    await first.reply("hi")
    second = Agent(model=ScriptedModel(["two"], context_window=8_000), offloader=ws, session_id="s")
    with pytest.raises(SessionBusyError, match="agent 'agent'"):
        await second.reply("again")
    assert [m.text for m in second.messages] == []  # nothing was added, nothing written
    await first.aclose()
    assert first.lease is None
    assert (await second.reply("again")).text == "two"
    await second.aclose()


async def test_in_memory_leases(tmp_path: Path) -> None:
    ws = InMemoryWorkspace()
    lease = await ws.acquire_lease("s", agent="a")
    with pytest.raises(SessionBusyError):
        await ws.acquire_lease("s")
    await lease.release()
    await (await ws.acquire_lease("s")).release()


async def test_a_planted_link_in_place_of_the_lease_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    (tmp_path / "ws/sessions/s").mkdir(parents=True)
    (tmp_path / "ws/sessions/s/lease.json").symlink_to(outside)
    with pytest.raises(OffloadError, match="symbolic link"):
        await LocalWorkspace(tmp_path / "ws").acquire_lease("s")
    assert outside.read_text() == "keep me"


async def test_if_busy_is_checked() -> None:
    from ctxoffload import ConfigError

    with pytest.raises(ConfigError, match="if_busy 'wait'"):
        Agent(model=ScriptedModel([], context_window=8_000), if_busy="wait")


# -- real processes -----------------------------------------------------------------------------


@pytest.mark.parametrize("if_busy", ["raise", "fork"])
def test_two_processes_racing_for_one_session(tmp_path: Path, if_busy: str) -> None:
    """Two processes start an agent on one session id at the same moment: exactly one
    writes it; the other gets SessionBusyError naming it, or (if_busy="fork") writes a fork
    of it. No line is written twice anywhere."""
    ws = tmp_path / "ws"
    at = str(time.time() + 2.0)
    racers = [start("agent", str(ws), "race", if_busy, at) for _ in range(2)]
    outcomes = [finish(p) for p in racers]
    winners = [o for o in outcomes if o["outcome"] == "ok" and o["session"] == "race"]
    assert len(winners) == 1, outcomes
    other = next(o for o in outcomes if o is not winners[0])
    if if_busy == "raise":
        assert other["outcome"] == "busy"
        assert other["holder"]["pid"] == winners[0]["pid"]
        assert f"pid {winners[0]['pid']}" in other["message"]
        assert sorted(os.listdir(ws / "sessions")) == ["race"]
    else:
        assert other["outcome"] == "ok" and other["session"].startswith("race-fork-")
        fork_events = [
            json.loads(line)
            for line in (ws / "sessions" / other["session"] / "events.jsonl")
            .read_text()
            .splitlines()
        ]
        assert fork_events[0]["kind"] == "fork"
        assert fork_events[0]["origin"]["session"] == "race"
    # The session itself was written by one process only.
    events = [json.loads(x) for x in (ws / "sessions/race/events.jsonl").read_text().splitlines()]
    assert {e["writer"]["pid"] for e in events} == {winners[0]["pid"]}
    for folder in (ws / "sessions").iterdir():
        no_line_twice(folder)


async def test_a_killed_holder_frees_the_session_at_once_on_disk(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    holder = start("hold", str(tmp_path), "s")
    try:
        wait_held(holder)
        with pytest.raises(SessionBusyError, match=f"pid {holder.pid}"):
            await LocalWorkspace(tmp_path).acquire_lease("s")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()
    # The kernel dropped the lock with the process; its record names it, so the takeover
    # says whose lease it was.
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        lease = await LocalWorkspace(tmp_path).acquire_lease("s", agent="next")
    assert f"pid {holder.pid}" in caplog.text and "took over" in caplog.text
    assert lease.holder["agent"] == "next"
    await lease.release()


async def test_a_killed_holder_in_a_bucket_is_taken_over_after_expiry(
    s3: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"s3://{s3.new_bucket()}/agents"
    env = {"CTXOFFLOAD_TEST_S3": json.dumps(s3.workspace_kwargs())}
    holder = start("hold", url, "s", "3", env=env)
    try:
        wait_held(holder)
        await asyncio.sleep(1.5)  # a renewal has happened (every ttl/3)
        ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
        with pytest.raises(SessionBusyError, match="expires at"):
            await ws.acquire_lease("s")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()
    # Dead, it renews no more: still busy until the expiry, then taken over with a warning.
    deadline = time.monotonic() + 30
    while True:
        try:
            with caplog.at_level(logging.WARNING, logger="ctxoffload"):
                lease = await ws.acquire_lease("s", agent="next", ttl=5)
            break
        except SessionBusyError:
            assert time.monotonic() < deadline, "the dead holder's lease never expired"
            await asyncio.sleep(0.5)
    assert "took over" in caplog.text and "expired without being renewed" in caplog.text
    # Exactly one of two takers wins a lapsed lease, and a live one is renewed.
    await asyncio.sleep(2.5)
    with pytest.raises(SessionBusyError):
        await ObjectStoreWorkspace(url, **s3.workspace_kwargs()).acquire_lease("s")
    await lease.release()
    again = await ObjectStoreWorkspace(url, **s3.workspace_kwargs()).acquire_lease("s")
    await again.release()


def test_two_processes_racing_for_one_session_in_a_bucket(s3: S3Server) -> None:
    url = f"s3://{s3.new_bucket()}/agents"
    env = {"CTXOFFLOAD_TEST_S3": json.dumps(s3.workspace_kwargs())}
    at = str(time.time() + 2.5)
    racers = [start("agent", url, "race", "raise", at, env=env) for _ in range(2)]
    outcomes = [finish(p) for p in racers]
    assert sorted(o["outcome"] for o in outcomes) == ["busy", "ok"], outcomes

    async def writers() -> set[int]:
        ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
        return {e["writer"]["pid"] for e in await ws.read_events("race")}

    winner = next(o for o in outcomes if o["outcome"] == "ok")
    assert asyncio.run(writers()) == {winner["pid"]}


@pytest.mark.parametrize("planted", ["hard link", "fifo"])
async def test_a_planted_lease_file_is_never_written(tmp_path: Path, planted: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    folder = tmp_path / "ws/sessions/s"
    folder.mkdir(parents=True)
    if planted == "hard link":
        os.link(outside, folder / "lease.json")
    else:
        os.mkfifo(folder / "lease.json")
    with pytest.raises(OffloadError, match="not a regular file with one link"):
        await LocalWorkspace(tmp_path / "ws").acquire_lease("s")
    assert outside.read_text() == "keep me"


def test_sub_agent_session_names_stay_plain() -> None:
    from ctxoffload.agent._subagent import child_prefix
    from ctxoffload.workspace import validate_session_id

    for name in ["../../etc", "a/b", "x" * 300, "naïve name", "", ".hidden"]:
        made = child_prefix("p" * 128, name) + "-abcdef"
        assert validate_session_id(made) == made and "/" not in made and ".." not in made


async def test_a_fork_of_a_busy_session_never_continues_an_earlier_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    forced_tags(monkeypatch, "abcdef", "abcdef")
    holder = Agent(model=ScriptedModel(["one"], context_window=8_000), offloader=ws, session_id="s")
    await holder.reply("hello")
    first = Agent(
        model=ScriptedModel(["two"], context_window=8_000),
        offloader=ws,
        session_id="s",
        if_busy="fork",
    )
    await first.reply("hello again")
    assert first.session_id == "s-fork-abcdef"
    await first.aclose()
    record = ws.events_path("s-fork-abcdef").read_bytes()

    second = Agent(
        model=ScriptedModel(["three"], context_window=8_000),
        offloader=ws,
        session_id="s",
        if_busy="fork",
    )
    await second.reply("and again")
    assert second.session_id.startswith("s-fork-") and second.session_id != "s-fork-abcdef"
    assert ws.events_path("s-fork-abcdef").read_bytes() == record
    await second.aclose()
    await holder.aclose()
