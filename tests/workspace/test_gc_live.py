"""What is live for gc, on every workspace that collects garbage (a folder, a bucket on a real
S3 API, obstore's memory store): a session whose lease is held, and a session whose files
another session that stays names (a fork's origin)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ContextConfig,
    LocalWorkspace,
    ObjectStoreWorkspace,
    ScriptedModel,
    SessionBusyError,
    SqlWorkspace,
    ToolResultBlock,
)
from helpers import ChildLines, call, start_lease_worker, wait_held


def fetch_log(log: str) -> str:
    """Fetch a log.

    Args:
        log: which log.
    """
    return "\n".join(f"{log} line {i} " + "words " * 6 for i in range(400))


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.slow), "memory", "sqlite"])
def collector(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A workspace with `gc`: a folder, a bucket on a real S3 API, obstore's memory store, a
    SQLite file."""
    if request.param == "local":
        return LocalWorkspace(tmp_path / "ws", fsync=False)
    if request.param == "sqlite":
        return SqlWorkspace(f"sqlite:///{tmp_path / 'ws.db'}")
    if request.param == "memory":
        return ObjectStoreWorkspace("memory://")
    s3 = request.getfixturevalue("s3")
    return ObjectStoreWorkspace(f"s3://{s3.new_bucket()}/ws", **s3.workspace_kwargs())


async def later(ws: Any) -> None:
    """Let the clock that stamps the workspace's files move on: S3 stamps to the second."""
    is_s3 = isinstance(ws, ObjectStoreWorkspace) and ws.url.startswith("s3://")
    await asyncio.sleep(1.1 if is_s3 else 0.05)


async def offloading_session(ws: Any, session: str) -> None:
    """A session whose agent offloaded a big tool result to a file of the session."""
    bot = Agent(
        name="analyst",
        model=ScriptedModel([call("c1", "fetch_log", log="a"), "done"], context_window=16_000),
        tools=[fetch_log],
        offloader=ws,
        session_id=session,
        context_config=ContextConfig(tool_result_limit=300),
    )
    async with bot:
        await bot.reply("why did the job fail?")
    assert await ws.list_files(session)


async def test_gc_keeps_the_origin_of_a_fork_while_the_fork_stays(collector: Any) -> None:
    await offloading_session(collector, "nightly-job")
    await later(collector)
    await collector.offload_tool_result("other", ToolResultBlock(id="c", output="o" * 8000))
    await later(collector)
    await collector.fork_session("nightly-job", "nightly-retry")
    everything = (await collector.gc(max_bytes=0, dry_run=True)).bytes_freed

    # Oldest first, nightly-job would go; the fork names its files, so it is live.
    for dry_run in (True, False):
        report = await collector.gc(max_bytes=everything - 1, dry_run=dry_run)
        assert report.sessions_removed == ["other"]
        assert report.sessions_kept == {
            "nightly-job": "session 'nightly-retry' references its files"
        }
    assert await collector.list_sessions() == ["nightly-job", "nightly-retry"]
    state = await collector.read_state("nightly-retry")
    assert state is not None
    named = [
        ref
        for ref in await collector.list_files("nightly-job")
        if ref in json.dumps(state["messages"])
    ]
    assert named, "the fork names none of its origin's files"
    for ref in named:
        assert await collector.read_reference(ref)

    # With a budget only removing both meets, the fork goes first: no reference is ever left
    # naming a removed file.
    report = await collector.gc(max_bytes=0)
    assert report.sessions_removed == ["nightly-retry", "nightly-job"]
    assert report.sessions_kept == {}


@pytest.mark.slow
async def test_gc_keeps_a_session_whose_lease_is_held(collector: Any) -> None:
    await collector.offload_tool_result("held", ToolResultBlock(id="c", output="h" * 1000))
    await collector.offload_tool_result("free", ToolResultBlock(id="c", output="f" * 1000))
    lease = await collector.acquire_lease("held", agent="coder")
    try:
        for dry_run in (True, False):
            report = await collector.gc(older_than=0, dry_run=dry_run)
            assert report.sessions_removed == ["free"]
            assert list(report.sessions_kept) == ["held"]
            why = report.sessions_kept["held"]
            assert why.startswith(f"its lease is held by agent 'coder' (pid {os.getpid()} on ")
        assert await collector.list_sessions() == ["held"]
    finally:
        await lease.release()
    # Released, the lease keeps nothing.
    report = await collector.gc(older_than=0)
    assert report.sessions_removed == ["held"] and report.sessions_kept == {}
    assert await collector.list_sessions() == []
    again = await collector.acquire_lease("held")
    await again.release()


@pytest.mark.slow
async def test_gc_frees_a_lease_whose_object_this_process_dropped(collector: Any) -> None:
    # An agent dropped without aclose(), kept only by a reference cycle (a notebook cell run
    # again): its lease is free for gc as for the next agent.
    await collector.offload_tool_result("dropped", ToolResultBlock(id="c", output="d"))
    cycle: list[Any] = [await collector.acquire_lease("dropped", agent="notebook")]
    cycle.append(cycle)
    del cycle
    report = await collector.gc(older_than=0)
    assert report.sessions_removed == ["dropped"] and report.sessions_kept == {}


@pytest.mark.slow
async def test_gc_keeps_what_a_leased_session_names(collector: Any) -> None:
    await offloading_session(collector, "nightly-job")
    await collector.fork_session("nightly-job", "nightly-retry")
    lease = await collector.acquire_lease("nightly-retry", agent="retry")
    try:
        report = await collector.gc(older_than=0)
    finally:
        await lease.release()
    assert report.sessions_removed == []
    assert report.sessions_kept["nightly-job"] == "session 'nightly-retry' references its files"
    assert report.sessions_kept["nightly-retry"].startswith("its lease is held by agent 'retry'")


async def test_gc_keeps_a_bucket_sub_agent_whose_parent_is_written_while_gc_removes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import obstore

    from ctxoffload.workspace import _collected

    ws = ObjectStoreWorkspace("memory://")
    await ws.offload_tool_result("lead--helper-1", ToolResultBlock(id="c", output="h"))
    await ws.record_event("lead--helper-1", "session_start", parent={"session": "lead"})
    await ws.record_event("lead", "subagent", session="lead--helper-1", status="done")
    # The parent is written after gc measured both and decided to remove them (the child
    # first, as the older): it names the child's files, so the child must stay with it.
    decide = _collected.sessions_to_remove

    def decide_then_write(*args: Any, **kwargs: Any) -> Any:
        decided = decide(*args, **kwargs)
        obstore.put(ws._client.store, "sessions/lead/tool_result-late.txt", b"late")
        return decided

    monkeypatch.setattr(_collected, "sessions_to_remove", decide_then_write)
    report = await ws.gc(older_than=0)
    assert report.sessions_removed == []
    assert set(report.sessions_kept) == {"lead", "lead--helper-1"}
    assert await ws.list_files("lead--helper-1")
    lease = await ws.acquire_lease("lead--helper-1", agent="next")  # given back by gc
    await lease.release()


async def test_gc_keeps_a_bucket_session_given_a_new_object_in_the_second_it_was_measured(
    s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxoffload.workspace import _collected

    bucket = s3.new_bucket()
    ws = ObjectStoreWorkspace(f"s3://{bucket}/ws", **s3.workspace_kwargs())
    # S3 stamps objects to the second: written at the start of one, the session is
    # measured, and written again by a writer without a lease, all within that second.
    while time.time() % 1 > 0.2:
        await asyncio.sleep(0.01)
    await ws.offload_tool_result("s", ToolResultBlock(id="c1", output="first"))
    decide = _collected.sessions_to_remove

    def decide_then_write(*args: Any, **kwargs: Any) -> Any:
        decided = decide(*args, **kwargs)
        s3.put_object(bucket, "ws/sessions/s/tool_result-c2.txt", b"written meanwhile")
        return decided

    monkeypatch.setattr(_collected, "sessions_to_remove", decide_then_write)
    report = await ws.gc(max_bytes=0)
    assert report.sessions_kept == {"s": "it was written while gc ran"}
    assert len(await ws.list_files("s")) == 2


# Runs gc in a process of its own and prints its report as JSON.
GC = """
import asyncio, dataclasses, json, sys
from ctxoffload import LocalWorkspace

report = asyncio.run(LocalWorkspace(sys.argv[1]).gc(older_than=float(sys.argv[2])))
print(json.dumps(dataclasses.asdict(report)))
"""


@pytest.mark.slow
async def test_gc_in_another_process_never_removes_a_session_a_live_agent_holds(
    tmp_path: Path, spawn_python: Any
) -> None:
    workdir = tmp_path / "ws"

    def bot(name: str, script: list[str]) -> Agent:
        return Agent(
            name=name,
            model=ScriptedModel(script, context_window=16_000),
            offloader=LocalWorkspace(workdir),
            session_id="s",
        )

    first = bot("a", ["first answer", "second answer"])
    async with first:
        await first.reply("first question")
        then = time.time() - 3600
        for path in [workdir / "sessions/s", *(workdir / "sessions/s").iterdir()]:
            os.utime(path, (then, then))
        child = spawn_python(GC, str(workdir), "1.0")
        out, err = child.communicate()
        assert child.returncode == 0, err
        report = json.loads(out)
        assert report["sessions_removed"] == []
        assert report["sessions_kept"]["s"].startswith("its lease is held by agent 'a'")
        second = bot("b", ["never"])
        with pytest.raises(SessionBusyError, match="agent 'a'"):
            async with second:
                await second.reply("a question of b")
        await first.reply("second question")
    state = await LocalWorkspace(workdir).read_state("s")
    assert state is not None
    said = json.dumps(state["messages"])
    assert "first answer" in said and "second answer" in said


# Takes and gives back the lease of session "s" again and again, checking each time, while it
# holds it, that the lease where it took it is its own (not gone with a session gc removed),
# and that what it wrote is there.
TAKER = """
import asyncio, json, sys
from ctxoffload import InvalidReference, LocalWorkspace, ObjectStoreWorkspace

async def main():
    where, rounds, options = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    ws = ObjectStoreWorkspace(where, **options) if "://" in where else LocalWorkspace(where)
    lost = 0
    for n in range(rounds):
        lease = await ws.acquire_lease("s", agent="taker")
        await ws.record_event("s", "note", n=n)
        try:
            on_record = json.loads(await ws.read_reference(lease.where))
        except InvalidReference:
            on_record = {}
        lost += on_record.get("token") != lease.holder["token"]
        lost += not any(e.get("n") == n for e in await ws.read_events("s"))
        await lease.release()
        print(n, flush=True)
    print("lost", lost, flush=True)

asyncio.run(main())
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["local", "s3"])
async def test_gc_racing_a_lease_taker_never_removes_a_held_session(
    tmp_path: Path, spawn_python: Any, request: pytest.FixtureRequest, where: str
) -> None:
    if where == "local":
        url, options = str(tmp_path / "ws"), {}
        ws: Any = LocalWorkspace(url, fsync=False)
        rounds = 150
    else:
        s3 = request.getfixturevalue("s3")
        url, options = f"s3://{s3.new_bucket()}/ws", s3.workspace_kwargs()
        ws = ObjectStoreWorkspace(url, **options)
        rounds = 25
    child = spawn_python(TAKER, url, str(rounds), json.dumps(options))
    assert child.stdout is not None
    lines = ChildLines(child.stdout)
    deadline = time.monotonic() + 300  # a safety net: the rounds are counted, not timed
    for _ in range(rounds):
        await ws.gc(older_than=0)
        lines.next(deadline)
    rest = lines.rest(deadline)
    _, err = child.communicate()
    assert child.returncode == 0, err
    assert rest == ["lost 0\n"]
    # Given back, the session is gc's to remove (as it may have been between the leases).
    await ws.gc(older_than=0)
    assert await ws.list_sessions() == []


@pytest.mark.slow
async def test_a_bucket_session_whose_holder_process_lives_is_kept(s3: Any) -> None:
    url = f"s3://{s3.new_bucket()}/agents"
    env = {"CTXOFFLOAD_TEST_S3": json.dumps(s3.workspace_kwargs())}
    ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    await ws.offload_tool_result("s", ToolResultBlock(id="c", output="x" * 100))
    holder = start_lease_worker("hold", url, "s", "3", env=env)
    try:
        wait_held(holder)
        report = await ws.gc(older_than=0)
        assert report.sessions_removed == []
        assert report.sessions_kept["s"].startswith(
            f"its lease is held by agent 'holder' (pid {holder.pid}"
        )
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()


def gc_lease(ttl: float = 60) -> bytes:
    """The lease record gc writes on a bucket session while it removes it."""
    record = {"agent": "gc", "pid": 1, "host": "elsewhere", "ttl": ttl, "removing": True}
    return (json.dumps(record) + "\n").encode()


async def test_a_writer_arriving_while_gc_removes_a_bucket_session_waits_for_it(
    s3: Any,
) -> None:
    bucket = s3.new_bucket()
    ws = ObjectStoreWorkspace(f"s3://{bucket}/ws", **s3.workspace_kwargs())
    s3.put_object(bucket, "ws/sessions/s/lease.json", gc_lease())
    taking = asyncio.create_task(ws.acquire_lease("s", agent="late"))
    for _ in range(20):  # the taker reads the lease and waits; it never takes a held one
        await asyncio.sleep(0.01)
        assert not taking.done()
    s3.delete_object(bucket, "ws/sessions/s/lease.json")  # gc's last delete
    lease = await taking
    assert lease.holder["agent"] == "late"
    await lease.release()


async def test_a_gc_that_died_holding_a_bucket_lease_is_named_after_the_wait(
    s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxoffload.workspace import _objectstore

    monkeypatch.setattr(_objectstore, "GC_WAIT", 0.2)
    bucket = s3.new_bucket()
    ws = ObjectStoreWorkspace(f"s3://{bucket}/ws", **s3.workspace_kwargs())
    s3.put_object(bucket, "ws/sessions/s/lease.json", gc_lease())
    with pytest.raises(SessionBusyError, match="agent 'gc'"):
        await ws.acquire_lease("s", agent="late")
