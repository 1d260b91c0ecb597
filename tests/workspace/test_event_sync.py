"""Which appends to events.jsonl are synced: the records of model calls and the decisions of
a compaction or a cut (`UNSYNCED_KINDS`) are written at once and made durable by the next
synced append or when the run's lease is released, and so are the events of an offload whose
content is synced itself (a context.jsonl batch, a tool_result file that names no data/
file); every other event (a door's, a pin's, a tool result's that names data/ files, which gc
keeps by it) is synced before its call returns. What leaves the context (the context.jsonl
batch, the tool_result file) is synced before the decision that moved it is written.

`os.fsync` is wrapped (it still syncs: the `syncs` fixture) to note, per file, how many syncs
it had and how many bytes of it the last one covered; the files are real, in tmp_path.
"""

from __future__ import annotations

import base64
import logging
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ctxoffload import (
    Base64Source,
    ContextConfig,
    DataBlock,
    LocalWorkspace,
    Msg,
    ToolCallBlock,
    ToolResultBlock,
)
from ctxoffload.compression import Projector
from helpers import PNG, Syncs


def synced_whole(syncs: Syncs, events: Path, count: int) -> None:
    """events.jsonl had `count` syncs, and the last covered all of it: every line before
    that sync is durable with it."""
    assert syncs.of(events) == count
    assert syncs.covered[str(events)] == events.stat().st_size


MESSAGE = {"message": {"id": "m1", "role": "user", "content": "hello"}}
MODEL_CALL = {"step": 1, "attempt": 1, "messages": ["m1"]}


async def test_the_records_of_a_model_call_are_not_synced_and_the_next_event_syncs_them(
    tmp_path: Path, syncs: Syncs
) -> None:
    ws = LocalWorkspace(tmp_path)
    events = ws.session_dir("s") / "events.jsonl"
    await ws.record_events("s", [("message", MESSAGE), ("model_call", MODEL_CALL)])
    await ws.record_event("s", "model_call", **{**MODEL_CALL, "step": 2})
    assert [e["kind"] for e in await ws.read_events("s")] == ["message", "model_call"] * 1 + [
        "model_call"
    ]
    assert syncs.of(events) == 0
    # Any other kind is synced, and with it every line before it.
    await ws.record_events("s", [("model_call", MODEL_CALL), ("door", {"door": "langchain"})])
    synced_whole(syncs, events, 1)


async def test_a_compactions_decisions_ride_unsynced_and_the_lease_release_syncs_them(
    tmp_path: Path, syncs: Syncs
) -> None:
    ws = LocalWorkspace(tmp_path)
    events = ws.session_dir("s") / "events.jsonl"
    lease = await ws.acquire_lease("s")
    for kind in ["compression", "summary", "artifacts", "projection", "projection_cut"]:
        await ws.record_events("s", [("model_call", MODEL_CALL), (kind, {"tokens": 1})])
    await ws.record_event("s", "truncation", tokens=1)
    assert len(await ws.read_events("s")) == 11
    assert syncs.of(events) == 0
    # The run ends: its record is durable with its lease's release, all of it.
    await lease.release()
    synced_whole(syncs, events, 1)
    # A lease released with nothing written unsynced since syncs nothing more.
    await ws.record_event("s", "door", door="langchain")
    synced_whole(syncs, events, 2)
    await (await ws.acquire_lease("s")).release()
    synced_whole(syncs, events, 2)


async def test_every_other_event_is_synced_before_its_call_returns(
    tmp_path: Path, syncs: Syncs
) -> None:
    ws = LocalWorkspace(tmp_path)
    events = ws.session_dir("s") / "events.jsonl"
    for number, kind in enumerate(["door", "pin", "tool_call", "compact", "memory"], 1):
        await ws.record_event("s", kind, n=number)
        synced_whole(syncs, events, number)


async def test_an_offload_syncs_its_content_and_its_event_rides_on_the_next_synced_append(
    tmp_path: Path, syncs: Syncs
) -> None:
    ws = LocalWorkspace(tmp_path)
    session = ws.session_dir("s")
    events = session / "events.jsonl"
    await ws.offload_context("s", [Msg(id="m1", role="user", content="the first request")])
    await ws.offload_tool_result("s", ToolResultBlock(id="c1", name="grep", output="x\n" * 500))
    # The content is synced before each call returns: the batch and its commit record, the
    # file (written unnamed, synced, linked) and its folder.
    assert syncs.of(session / "context.jsonl") >= 1
    assert syncs.of(session) >= 1
    assert (session / "tool_result-c1.txt").read_text() == "x\n" * 500
    # The two events that say where it went are in the file for every reader, unsynced.
    assert [e["kind"] for e in await ws.read_events("s")] == ["context", "tool_result"]
    assert syncs.of(events) == 0
    # The next synced event makes them durable with it.
    await ws.record_event("s", "pin", message="m1")
    synced_whole(syncs, events, 1)


async def test_a_tool_results_event_naming_data_files_is_synced_before_it_returns(
    tmp_path: Path, syncs: Syncs
) -> None:
    # gc keeps a data/ file that a tool_result event names: that event is synced at once.
    ws = LocalWorkspace(tmp_path)
    events = ws.session_dir("s") / "events.jsonl"
    image = DataBlock(
        source=Base64Source(media_type="image/png", data=base64.b64encode(PNG).decode())
    )
    await ws.offload_tool_result("s", ToolResultBlock(id="c1", name="shot", output=[image]))
    [event] = await ws.read_events("s")
    assert event["kind"] == "tool_result" and event["data_files"]
    synced_whole(syncs, events, 1)


async def test_without_fsync_nothing_is_synced(tmp_path: Path, syncs: Syncs) -> None:
    ws = LocalWorkspace(tmp_path, fsync=False)
    await ws.record_events("s", [("message", MESSAGE), ("compression", {"tokens": 1})])
    assert syncs.count == {}


def _turn(call_id: str, output: str) -> list[Msg]:
    return [
        Msg(role="assistant", content=[ToolCallBlock(id=call_id, name="grep", input={})]),
        Msg(role="tool", content=[ToolResultBlock(id=call_id, name="grep", output=output)]),
    ]


async def test_a_projected_call_syncs_only_what_leaves_the_context(
    tmp_path: Path, syncs: Syncs
) -> None:
    ws = LocalWorkspace(tmp_path)
    lease = await ws.acquire_lease("p")  # as a door holds it for a run
    projector = Projector(ws, "p", config=ContextConfig(context_window=3000, tool_result_limit=200))
    session = ws.session_dir("p")
    events = session / "events.jsonl"
    history = [Msg(role="user", content="find the failing row"), *_turn("c1", "row 1 ok")]
    await projector.project(history)
    await projector.project([*history, Msg(role="assistant", content="all rows pass")])
    # Two calls recorded (their messages and model_call events), nothing left the context.
    kinds = [e["kind"] for e in await ws.read_events("p")]
    assert kinds.count("model_call") == 2
    assert syncs.count == {}
    # A big result leaves for its file: the file (written unnamed, synced, then linked under
    # its name) and its folder are synced before the call returns; the truncation event that
    # says so rides unsynced.
    big = "\n".join(f"row {i}: " + "x" * 40 for i in range(2000))
    history += _turn("c2", big)
    sent = await projector.project(history)
    stored = session / "tool_result-c2.txt"
    assert str(stored) in str(sent[-1].tool_results[0].output)
    assert stored.read_text() == big
    assert syncs.of(session) >= 1
    assert any(p.startswith(f"{session}/") and p != str(events) for p in syncs.count)
    assert "truncation" in [e["kind"] for e in await ws.read_events("p")]
    assert syncs.of(events) == 0
    # A compaction: the messages it moves out are synced into context.jsonl (and its commit
    # record) before the call returns; its decisions (compression, summary, projection) ride
    # unsynced.
    for n in range(3, 40):
        history += [*_turn(f"c{n}", f"row {n}: " + "y" * 300)]
    history.append(Msg(role="user", content="now summarise what failed"))
    await projector.project(history)
    kinds = [e["kind"] for e in await ws.read_events("p")]
    assert "compression" in kinds and "projection" in kinds
    context = session / "context.jsonl"
    assert syncs.of(context) >= 1
    assert syncs.covered[str(context)] == context.stat().st_size
    assert syncs.of(session / "context.jsonl.commit") >= 1
    assert syncs.of(events) == 0
    # The run ends: its lease's release makes the whole record durable.
    await lease.release()
    synced_whole(syncs, events, 1)


def test_a_process_killed_after_unsynced_records_leaves_every_line(tmp_path: Path) -> None:
    # Unsynced is not unwritten: each record is in the file (the kernel's page cache) when
    # its call returns, so a process killed then loses none of it.
    child = textwrap.dedent(
        """
        import asyncio, os, signal, sys
        from ctxoffload import LocalWorkspace

        async def main():
            ws = LocalWorkspace(sys.argv[1])
            for step in range(1, 201):
                message = {"id": f"m{step}", "role": "user", "content": "x" * step}
                await ws.record_events(
                    "s",
                    [("message", {"message": message}),
                     ("model_call", {"step": step, "attempt": 1, "messages": [f"m{step}"]})],
                )
            print("recorded", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert done.stdout == "recorded\n"
    lines = (tmp_path / "sessions" / "s" / "events.jsonl").read_text().splitlines()
    assert len(lines) == 400
    assert '"step": 200' in lines[-1] or '"step":200' in lines[-1]


async def test_a_release_never_makes_a_removed_session_again_nor_follows_a_planted_link(
    tmp_path: Path, syncs: Syncs, caplog: pytest.LogCaptureFixture
) -> None:
    ws = LocalWorkspace(tmp_path)
    gone = ws.session_dir("gone")
    lease = await ws.acquire_lease("gone")
    await ws.record_event("gone", "compression", tokens=1)
    shutil.rmtree(gone)  # removed by hand while the run held it
    await lease.release()
    assert not gone.exists()
    # events.jsonl swapped for a link to a file outside: not opened, not synced; the lease
    # goes all the same, and the warning names the log.
    outside = tmp_path / "outside.jsonl"
    outside.write_text("{}\n")
    lease = await ws.acquire_lease("s")
    await ws.record_event("s", "compression", tokens=1)
    events = ws.session_dir("s") / "events.jsonl"
    events.unlink()
    events.symlink_to(outside)
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        await lease.release()
    assert syncs.of(outside) == 0
    assert "could not sync the record of session 's'" in caplog.text
    assert str(events) in caplog.text
    await (await ws.acquire_lease("s")).release()  # the lease was let go
