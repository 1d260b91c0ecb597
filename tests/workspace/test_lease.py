"""One live writer per session: the lease on disk, in a bucket and in memory, with real
processes racing, killed with SIGKILL, and taken over."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    InMemoryWorkspace,
    LocalWorkspace,
    ObjectStoreWorkspace,
    OffloadError,
    ScriptedModel,
    SessionBusyError,
)
from helpers import (
    Syncs,
    forced_tags,
    lease_worker_result,
    racing_start,
    start_lease_worker,
    wait_held,
)
from s3_server import S3Server


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


@pytest.mark.slow
@pytest.mark.parametrize("if_busy", ["raise", "fork"])
def test_two_processes_racing_for_one_session(tmp_path: Path, if_busy: str) -> None:
    """Two processes start an agent on one session id at the same moment: exactly one
    writes it; the other gets SessionBusyError naming it, or (if_busy="fork") writes a fork
    of it. No line is written twice anywhere."""
    ws = tmp_path / "ws"
    at = racing_start(tmp_path, 2)
    racers = [start_lease_worker("agent", str(ws), "race", if_busy, at) for _ in range(2)]
    outcomes = [lease_worker_result(p) for p in racers]
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
    holder = start_lease_worker("hold", str(tmp_path), "s")
    try:
        wait_held(holder)
        with pytest.raises(SessionBusyError, match=f"pid {holder.pid}"):
            await LocalWorkspace(tmp_path).acquire_lease("s")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()
    # The kernel dropped the lock with the process; its record names it, so the takeover
    # says whose lease it was. The kernel also shows that process has ended: a script that
    # ended without closing its agent, run again, is told so at INFO, not warned.
    with caplog.at_level(logging.INFO, logger="ctxoffload"):
        lease = await LocalWorkspace(tmp_path).acquire_lease("s", agent="next")
    (took,) = [r for r in caplog.records if "took over" in r.getMessage()]
    assert f"pid {holder.pid}" in took.getMessage() and "has ended" in took.getMessage()
    assert took.levelno == logging.INFO
    assert lease.holder["agent"] == "next"
    await lease.release()


async def test_taking_and_releasing_a_lease_waits_for_no_fsync(
    tmp_path: Path, syncs: Syncs
) -> None:
    # The lease is the flock; lease.json only says who holds it. Its record is written (a
    # killed holder is named: the test above) but not synced: an agent's run would wait for
    # two syncs at its start and end for a record no content rests on.
    ws = LocalWorkspace(tmp_path)
    lease = await ws.acquire_lease("s", agent="first")
    await lease.release()
    record = json.loads((tmp_path / "sessions" / "s" / "lease.json").read_text())
    assert record["agent"] == "first" and record["released"]
    assert syncs.of(tmp_path / "sessions" / "s" / "lease.json") == 0


def plant_unreleased_lease(workdir: Path, session: str, *, pid: int, host: str) -> None:
    """A lease record no process holds a lock on, naming `pid` on `host` as its holder."""
    folder = workdir / "sessions" / session
    folder.mkdir(parents=True)
    record = {"token": "t" * 32, "pid": pid, "host": host, "agent": "old", "started": "x"}
    (folder / "lease.json").write_text(json.dumps(record))


async def test_taking_a_lease_whose_holder_still_runs_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A holder that let go of its lock without release() while its process runs on (an
    agent dropped in a long-lived process): the kernel does not show it ended."""
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=-1)
    try:
        plant_unreleased_lease(tmp_path, "s", pid=live.pid, host=socket.gethostname())
        with caplog.at_level(logging.INFO, logger="ctxoffload"):
            lease = await LocalWorkspace(tmp_path).acquire_lease("s")
    finally:
        live.communicate(b"")
    (took,) = [r for r in caplog.records if "took over" in r.getMessage()]
    assert took.levelno == logging.WARNING and f"pid {live.pid}" in took.getMessage()
    assert "still runs" in took.getMessage()
    await lease.release()


async def test_a_holder_killed_but_not_yet_reaped_has_ended(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A zombie (killed, its parent not yet waiting for it) still has its pid, but the kernel
    shows it ended: the takeover is INFO."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        child.send_signal(signal.SIGKILL)
        while (
            not Path(f"/proc/{child.pid}/stat").read_bytes().rpartition(b")")[2].startswith(b" Z")
        ):
            await asyncio.sleep(0.01)
        plant_unreleased_lease(tmp_path, "s", pid=child.pid, host=socket.gethostname())
        with caplog.at_level(logging.INFO, logger="ctxoffload"):
            await (await LocalWorkspace(tmp_path).acquire_lease("s")).release()
    finally:
        child.wait()
    (took,) = [r for r in caplog.records if "took over" in r.getMessage()]
    assert took.levelno == logging.INFO and "has ended" in took.getMessage()


@pytest.mark.parametrize("pid", [2**70, -1, 0, "12"])
async def test_taking_a_lease_of_another_host_or_an_odd_pid_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, pid: Any
) -> None:
    """Whether a process of another machine (or of a pid no process can have) still runs is
    unknown here: the takeover warns."""
    plant_unreleased_lease(
        tmp_path, "other", pid=os.getpid() + 1, host="not-" + socket.gethostname()
    )
    plant_unreleased_lease(tmp_path, "odd", pid=pid, host=socket.gethostname())
    with caplog.at_level(logging.INFO, logger="ctxoffload"):
        for session in ("other", "odd"):
            await (await LocalWorkspace(tmp_path).acquire_lease(session)).release()
    took = [r for r in caplog.records if "took over" in r.getMessage()]
    assert [r.levelno for r in took] == [logging.WARNING, logging.WARNING]
    assert "another machine" in took[0].getMessage()


@pytest.mark.slow
async def test_a_killed_holder_in_a_bucket_is_taken_over_after_expiry(
    s3: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"s3://{s3.new_bucket()}/agents"
    env = {"CTXOFFLOAD_TEST_S3": json.dumps(s3.workspace_kwargs())}
    holder = start_lease_worker("hold", url, "s", "3", env=env)
    try:
        wait_held(holder)
        await asyncio.sleep(1.5)  # a renewal has happened (every ttl/3)
        ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
        with pytest.raises(SessionBusyError, match="expires at"):
            await ws.acquire_lease("s")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()
    # Dead, it renews no more: still busy until the expiry, then taken over; the holder ran on
    # this host and the kernel shows its process ended, so the takeover is an INFO line.
    deadline = time.monotonic() + 30
    while True:
        try:
            with caplog.at_level(logging.INFO, logger="ctxoffload"):
                lease = await ws.acquire_lease("s", agent="next", ttl=5)
            break
        except SessionBusyError:
            assert time.monotonic() < deadline, "the dead holder's lease never expired"
            await asyncio.sleep(0.5)
    (took,) = [r for r in caplog.records if "took over" in r.getMessage()]
    assert "expired without being renewed" in took.getMessage()
    assert took.levelno == logging.INFO and "has ended" in took.getMessage()
    # Exactly one of two takers wins a lapsed lease, and a live one is renewed.
    await asyncio.sleep(2.5)
    with pytest.raises(SessionBusyError):
        await ObjectStoreWorkspace(url, **s3.workspace_kwargs()).acquire_lease("s")
    await lease.release()
    again = await ObjectStoreWorkspace(url, **s3.workspace_kwargs()).acquire_lease("s")
    await again.release()


@pytest.mark.slow
def test_two_processes_racing_for_one_session_in_a_bucket(s3: S3Server, tmp_path: Path) -> None:
    url = f"s3://{s3.new_bucket()}/agents"
    env = {"CTXOFFLOAD_TEST_S3": json.dumps(s3.workspace_kwargs())}
    at = racing_start(tmp_path, 2)
    racers = [start_lease_worker("agent", url, "race", "raise", at, env=env) for _ in range(2)]
    outcomes = [lease_worker_result(p) for p in racers]
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
    refusal = "has 2 hard links" if planted == "hard link" else "is not a regular file"
    with pytest.raises(OffloadError, match=refusal):
        await LocalWorkspace(tmp_path / "ws").acquire_lease("s")
    assert outside.read_text() == "keep me"


def test_sub_agent_session_names_stay_plain() -> None:
    from ctxoffload._disk.ids import child_prefix, validate_session_id

    for name in ["../../etc", "a/b", "x" * 300, "naïve name", "", ".hidden"]:
        made = child_prefix("p" * 128, name) + "-abcdef"
        assert validate_session_id(made) == made and "/" not in made and ".." not in made


@pytest.mark.slow
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
