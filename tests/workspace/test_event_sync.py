"""Which appends to events.jsonl are synced: the records of model calls (`RECORD_KINDS`) are
written at once and made durable by the next synced append, and so are the events of an
offload whose content is synced itself (a context.jsonl batch, a tool_result file that names
no data/ file); every other event (a drop's, a cut's, a door's, a tool result's that names
data/ files, which gc keeps by it) is synced before its call returns.

`os.fsync` is wrapped (it still syncs: the `syncs` fixture) to note, per file, how many syncs
it had and how many bytes of it the last one covered; the files are real, in tmp_path.
"""

from __future__ import annotations

import base64
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

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
    await ws.record_events("s", [("model_call", MODEL_CALL), ("compression", {"tokens": 1})])
    synced_whole(syncs, events, 1)


async def test_every_other_event_is_synced_before_its_call_returns(
    tmp_path: Path, syncs: Syncs
) -> None:
    ws = LocalWorkspace(tmp_path)
    events = ws.session_dir("s") / "events.jsonl"
    for number, kind in enumerate(["truncation", "artifacts", "door", "pin", "tool_call"], 1):
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
    await ws.record_event("s", "compression", tokens=1)
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


async def test_a_projected_call_syncs_only_when_something_leaves_the_context(
    tmp_path: Path, syncs: Syncs
) -> None:
    ws = LocalWorkspace(tmp_path)
    projector = Projector(ws, "p", config=ContextConfig(context_window=3000, tool_result_limit=200))
    events = ws.session_dir("p") / "events.jsonl"
    history = [Msg(role="user", content="find the failing row"), *_turn("c1", "row 1 ok")]
    await projector.project(history)
    await projector.project([*history, Msg(role="assistant", content="all rows pass")])
    # Two calls recorded (their messages and model_call events), nothing left the context.
    kinds = [e["kind"] for e in await ws.read_events("p")]
    assert kinds.count("model_call") == 2
    assert syncs.of(events) == 0
    # A big result leaves for its file: the file and its event are synced before the call
    # returns, and the event's sync makes the records before it durable too.
    big = "\n".join(f"row {i}: " + "x" * 40 for i in range(2000))
    history += _turn("c2", big)
    sent = await projector.project(history)
    stored = ws.session_dir("p") / "tool_result-c2.txt"
    assert str(stored) in str(sent[-1].tool_results[0].output)
    # (The file is written unnamed, synced, then linked under its name; its folder synced.)
    folder = str(ws.session_dir("p"))
    assert syncs.of(ws.session_dir("p")) >= 1
    assert any(p.startswith(folder + "/") and p != str(events) for p in syncs.count)
    assert syncs.of(events) >= 1
    truncation = next(
        n for n, e in enumerate(await ws.read_events("p"), 1) if e["kind"] == "truncation"
    )
    lines = events.read_bytes().split(b"\n")
    assert syncs.covered[str(events)] >= sum(len(line) + 1 for line in lines[:truncation])


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
