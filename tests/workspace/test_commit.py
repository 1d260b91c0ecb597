"""Crash consistency of context.jsonl: batches are all or nothing, and ids are never repeated.

A batch is visible to readers only once its commit record (context.jsonl.commit) covers it;
the next writer trims what a killed writer left beyond it. A message whose id is already in
the log is not written again: the span where it already is comes back instead.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import InMemoryWorkspace, LocalWorkspace, Msg
from ctxoffload._disk.commit import decode_commit_record, encode_commit_record
from ctxoffload._disk.layout import COMMIT_SUFFIX
from ctxoffload._disk.rows import message_key, row_line_and_key
from ctxoffload.workspace import Workspace

SpawnPython = Callable[..., "subprocess.Popen[str]"]


def _msgs(*names: str) -> list[Msg]:
    return [Msg(id=name, role="user", content=f"content of {name}") for name in names]


async def test_same_messages_twice_are_written_once_and_get_their_span_back(
    workspace: Workspace,
) -> None:
    first = await workspace.offload_context("s", msgs=_msgs("a", "b"))
    again = await workspace.offload_context("s", msgs=_msgs("a", "b"))
    assert (again.first_line, again.last_line) == (first.first_line, first.last_line) == (1, 2)
    assert [m["id"] for m in await workspace.read_context("s")] == ["a", "b"]


async def test_overlapping_batch_writes_only_the_new_messages(
    workspace: Workspace,
) -> None:
    await workspace.offload_context("s", msgs=_msgs("a", "b"))
    ref = await workspace.offload_context("s", msgs=_msgs("a", "b", "c"))
    assert (ref.first_line, ref.last_line) == (1, 3)
    assert [m["id"] for m in await workspace.read_context("s")] == ["a", "b", "c"]


async def test_messages_without_ids_are_always_written(
    workspace: Workspace,
) -> None:
    msg = {"role": "user", "content": "no id"}
    await workspace.offload_context("s", msgs=[msg])
    ref = await workspace.offload_context("s", msgs=[msg])
    assert (ref.first_line, ref.last_line) == (2, 2)


async def test_a_fresh_workspace_knows_the_ids_already_in_the_log(workdir: Path) -> None:
    await LocalWorkspace(workdir).offload_context("s", msgs=_msgs("a", "b"))
    await LocalWorkspace(workdir).offload_context("s", msgs=_msgs("x"))
    ref = await LocalWorkspace(workdir).offload_context("s", msgs=_msgs("a", "b"))
    assert (ref.first_line, ref.last_line) == (1, 2)
    assert len(await LocalWorkspace(workdir).read_context("s")) == 3


# A process that offloads a batch and is killed before it could save state.json, as an Agent
# killed in the middle of a compression is.
KILLED_BEFORE_STATE = """
import asyncio, os, signal, sys
from ctxoffload import InMemoryWorkspace, LocalWorkspace, Msg

async def main():
    ws = LocalWorkspace(sys.argv[1])
    msgs = [Msg(id=f"m{i}", role="user", content=f"message {i}") for i in range(20)]
    ref = await ws.offload_context("s", msgs=msgs)
    print(ref.first_line, ref.last_line, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    await ws.write_state("s", {"messages": []})

asyncio.run(main())
"""


async def test_resume_after_kill_between_offload_and_state_writes_nothing_twice(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    await LocalWorkspace(workdir).offload_context("s", msgs=_msgs("earlier"))
    child = spawn_python(KILLED_BEFORE_STATE, str(workdir))
    out, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert out.split() == ["2", "21"]
    # The resumed agent has the older state: it compresses the same messages again.
    ws = LocalWorkspace(workdir)
    assert await ws.read_state("s") is None
    msgs = [Msg(id=f"m{i}", role="user", content=f"message {i}") for i in range(20)]
    ref = await ws.offload_context("s", msgs=msgs)
    assert (ref.first_line, ref.last_line) == (2, 21)
    ids = [m["id"] for m in await ws.read_context("s")]
    assert ids == ["earlier"] + [f"m{i}" for i in range(20)]


# Writes one committed batch, says so, then one batch of 20,000 lines (a tool call and its
# result, 10,000 times) and is killed by the parent while that batch is on its way to disk.
BIG_BATCH_WRITER = """
import asyncio, sys
from ctxoffload import LocalWorkspace

async def main():
    ws = LocalWorkspace(sys.argv[1])
    await ws.offload_context("s", msgs=[{"role": "user", "content": "committed"}])
    print("committed", flush=True)
    msgs = []
    for i in range(10_000):
        msgs.append({"role": "assistant", "tool_calls": [{"id": f"c{i}", "type": "function",
                     "function": {"name": "t", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": "r" * 200})
    sys.stdin.readline()
    await ws.offload_context("s", msgs=msgs)
    print("acknowledged", flush=True)

asyncio.run(main())
"""


def _kill_during_big_batch(workdir: Path, spawn_python: SpawnPython) -> bool:
    """Run BIG_BATCH_WRITER and SIGKILL it once its batch shows up in the file.

    Returns:
        Whether the kill came before the batch was committed (on a busy machine the kill may
        land after the commit and before the acknowledgement is printed: that run proves
        nothing either).
    """
    log = workdir / "sessions" / "s" / "context.jsonl"
    child = spawn_python(BIG_BATCH_WRITER, str(workdir))
    assert child.stdin is not None and child.stdout is not None
    assert child.stdout.readline() == "committed\n"
    size = log.stat().st_size
    child.stdin.write("go\n")
    child.stdin.flush()
    deadline = time.monotonic() + 30
    while log.stat().st_size == size and time.monotonic() < deadline:
        pass
    os.kill(child.pid, signal.SIGKILL)
    out, _ = child.communicate(timeout=30)
    record = decode_commit_record((log.parent / (log.name + COMMIT_SUFFIX)).read_bytes())
    return "acknowledged" not in out and record is not None and record[0] == size


@pytest.mark.slow
async def test_kill_during_a_20000_line_batch_shows_none_of_it(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    """A batch killed on its way to disk: none of it is read, the next append trims it.

    20,000 lines (3.6 MB) rather than 100,000: the writer spent seconds turning 100,000
    messages into lines before the first byte reached the file. 3.6 MB still takes
    milliseconds to write and sync, so the kill, sent as soon as the file grows, lands inside
    the batch: in 10 of 10 tries, 5 in the middle of the write and 5 before the commit.
    """
    # The kill lands before the acknowledgement in practice (the batch takes tens of ms to
    # fsync); the rare run where it does not proves nothing, so try again, a few times.
    for _ in range(5):
        if _kill_during_big_batch(workdir, spawn_python):
            break
        os.unlink(workdir / "sessions" / "s" / "context.jsonl")
        os.unlink(workdir / "sessions" / "s" / "context.jsonl.commit")
    else:
        raise AssertionError("the writer always committed before the kill")
    log = workdir / "sessions" / "s" / "context.jsonl"
    assert log.stat().st_size > 1000, "the killed batch left nothing to test against"
    ws = LocalWorkspace(workdir)
    assert [m["content"] for m in await ws.read_context("s")] == ["committed"]
    ref = await ws.offload_context("s", msgs=[{"role": "user", "content": "after"}])
    assert (ref.first_line, ref.last_line) == (2, 2)
    lines = log.read_bytes().splitlines()
    assert [json.loads(line)["content"] for line in lines] == ["committed", "after"]


# Appends batches of 2,000 lines forever; each batch's lines carry the batch number.
BATCH_WRITER = """
import asyncio, sys
from ctxoffload import LocalWorkspace

async def main():
    ws = LocalWorkspace(sys.argv[1])
    batch = 0
    while True:
        await ws.offload_context(
            "s", msgs=[{"role": "user", "batch": batch, "content": "x" * 300}] * 2000)
        batch += 1

asyncio.run(main())
"""


@pytest.mark.slow
async def test_readers_never_see_part_of_a_batch_in_progress(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    ws = LocalWorkspace(workdir)
    await ws.offload_context("s", msgs=[{"role": "user", "batch": -1, "content": "start"}])
    child = spawn_python(BATCH_WRITER, str(workdir))
    try:
        # Counted, not timed: read until the reads have watched the writer commit several
        # batches (each read between two of them raced one in progress). The deadline is a
        # safety net for a machine so loaded that the writer never runs.
        reads, batches_seen = 0, set[int]()
        deadline = time.monotonic() + 300
        while len(batches_seen) < 5 or reads < 10:
            assert time.monotonic() < deadline, f"{reads} reads saw {sorted(batches_seen)}"
            messages = await ws.read_context("s")
            counts: dict[int, int] = {}
            for m in messages[1:]:
                counts[m["batch"]] = counts.get(m["batch"], 0) + 1
            assert all(n == 2000 for n in counts.values()), counts
            reads += 1
            batches_seen.add(len(counts))
    finally:
        child.kill()
        child.wait()


async def test_ids_are_found_across_appends_of_messages_without_ids(
    workspace: Workspace,
) -> None:
    plain = {"role": "user", "content": "no id"}
    await workspace.offload_context("s", msgs=[plain])
    await workspace.offload_context("s", msgs=_msgs("a"))
    await workspace.offload_context("s", msgs=[plain])
    ref = await workspace.offload_context("s", msgs=_msgs("a", "b"))
    assert (ref.first_line, ref.last_line) == (2, 4)
    assert [m.get("id") for m in await workspace.read_context("s")] == [None, "a", None, "b"]


async def test_a_message_that_grew_under_its_id_is_written_again(
    workspace: Workspace,
) -> None:
    # AgentScope keeps appending blocks to one reply Msg: each compression may drop a longer
    # version of the same id, and every version must reach the log.
    first = {"id": "reply-1", "role": "assistant", "content": ["call 1"], "created_at": "t1"}
    grown = {**first, "content": ["call 1", "result 1", "call 2"]}
    again = {**first, "created_at": "t2"}  # the same message rebuilt later: not new
    await workspace.offload_context("s", msgs=[first])
    ref = await workspace.offload_context("s", msgs=[grown])
    assert (ref.first_line, ref.last_line) == (2, 2)
    ref = await workspace.offload_context("s", msgs=[again])
    assert (ref.first_line, ref.last_line) == (1, 1)
    assert [row["content"] for row in await workspace.read_context("s")] == [
        first["content"],
        grown["content"],
    ]


@pytest.mark.parametrize(
    "row",
    [
        {"role": "user", "content": "x", "id": "a", "metadata": {}, "timestamp": "t"},
        {"id": "b", "created_at": "t1", "content": [{"created_at": "nested"}], "usage": {"n": 1}},
        {"id": "c", "content": "no volatile field", "note": "caf\u00e9 \U0001f600"},
        {"role": "user", "content": "no id"},
        {"id": "d", "content": "lone surrogate \udc80", "timestamp": "t"},
    ],
)
def test_a_line_and_its_key_come_from_one_serialisation(row: dict[str, object]) -> None:
    line, key = row_line_and_key(row)
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    assert json.loads(line) == row  # the same JSON, volatile fields last
    assert key == message_key(json.loads(line))  # what a fresh workspace finds by scanning


# -- a commit record that does not match its log ---------------------------------------------


async def _log_of(workdir: Path, session: str, *names: str) -> Path:
    """A session whose context.jsonl holds a message per name, committed by a workspace."""
    await LocalWorkspace(workdir).offload_context(session, msgs=_msgs(*names))
    return workdir / "sessions" / session / "context.jsonl"


def _line_ends(log: Path) -> list[int]:
    """The byte offset just after each line of `log`."""
    ends, offset = [], 0
    for line in log.read_bytes().splitlines(keepends=True):
        offset += len(line)
        ends.append(offset)
    return ends


async def _append_after_mismatch(
    workdir: Path, log: Path, caplog: pytest.LogCaptureFixture
) -> tuple[int, int]:
    """Append one message with a fresh workspace; check every acknowledged line is still
    readable, the new one where its span says, and the mismatch was reported."""
    ws = LocalWorkspace(workdir)
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        ref = await ws.offload_context("s", msgs=_msgs("new"))
    lines = log.read_bytes().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "b", "c", "d", "new"]
    assert json.loads(lines[ref.first_line - 1])["id"] == "new"
    assert [m["id"] for m in await LocalWorkspace(workdir).read_context("s")] == [
        "a",
        "b",
        "c",
        "d",
        "new",
    ]
    assert any(
        "commit record" in r.getMessage() and str(log) in r.getMessage() for r in caplog.records
    ), [r.getMessage() for r in caplog.records]
    return ref.first_line, ref.last_line


async def test_a_commit_record_copied_from_another_session_is_not_trusted(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = await _log_of(workdir, "s", "a", "b", "c", "d")
    other = await _log_of(workdir, "other", "a-much-longer-id", "x")
    commit = log.with_name(log.name + COMMIT_SUFFIX)
    commit.write_bytes(other.with_name(other.name + COMMIT_SUFFIX).read_bytes())
    assert await _append_after_mismatch(workdir, log, caplog) == (5, 5)


async def test_a_commit_record_ending_mid_line_is_not_trusted(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = await _log_of(workdir, "s", "a", "b", "c", "d")
    ends = _line_ends(log)
    commit = log.with_name(log.name + COMMIT_SUFFIX)
    commit.write_bytes(encode_commit_record(ends[1] + 5, 2))
    assert await _append_after_mismatch(workdir, log, caplog) == (5, 5)


async def test_a_commit_record_with_a_wrong_line_count_is_not_trusted(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = await _log_of(workdir, "s", "a", "b", "c", "d")
    commit = log.with_name(log.name + COMMIT_SUFFIX)
    commit.write_bytes(encode_commit_record(log.stat().st_size, 1))
    assert await _append_after_mismatch(workdir, log, caplog) == (5, 5)


async def test_readers_do_not_stop_mid_line_at_a_record_that_ends_there(
    workdir: Path,
) -> None:
    log = await _log_of(workdir, "s", "a", "b", "c", "d")
    commit = log.with_name(log.name + COMMIT_SUFFIX)
    commit.write_bytes(encode_commit_record(_line_ends(log)[1] + 5, 2))
    assert [m["id"] for m in await LocalWorkspace(workdir).read_context("s")] == [
        "a",
        "b",
        "c",
        "d",
    ]


async def test_a_batch_repeating_messages_apart_names_only_their_lines(
    workspace: Workspace,
) -> None:
    await workspace.offload_context("s", msgs=_msgs("a", "b", "c"))
    ref = await workspace.offload_context("s", msgs=_msgs("a", "c", "d"))
    assert (ref.first_line, ref.last_line) == (1, 4)
    assert ref.spans == ((1, 1), (3, 4))
    [*_, event] = await workspace.read_events("s")
    assert event["lines"] == [1, 4] and event["spans"] == [[1, 1], [3, 4]]


async def test_local_and_memory_workspaces_report_the_same_spans_and_events(
    workdir: Path,
) -> None:
    batches = [("a", "b"), ("a", "c"), ("b",), ("d", "a", "e"), ("a", "b", "c", "d", "e")]

    async def run(workspace: Workspace) -> tuple[list[Any], list[dict[str, Any]]]:
        refs = []
        for names in batches:
            ref = await workspace.offload_context("s", msgs=_msgs(*names))
            refs.append((ref.first_line, ref.last_line, ref.spans))
        events = [
            {k: v for k, v in event.items() if k not in ("time", "reference")}
            for event in await workspace.read_events("s")
        ]
        return refs, events

    on_disk = await run(LocalWorkspace(workdir))
    assert await run(InMemoryWorkspace()) == on_disk
    assert on_disk[0][1] == (1, 3, ((1, 1), (3, 3)))


async def test_a_commit_record_of_another_log_that_fits_this_one_is_not_trusted(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Copied from a session whose first lines have the same lengths: on a line boundary and
    with the right count, it still names other bytes, and trusting it would cut lines c, d."""
    log = await _log_of(workdir, "s", "a", "b", "c", "d")
    other = await _log_of(workdir, "other", "x", "y")
    assert _line_ends(other)[-1] == _line_ends(log)[1], "the lines should have the same lengths"
    commit = log.with_name(log.name + COMMIT_SUFFIX)
    commit.write_bytes(other.with_name(other.name + COMMIT_SUFFIX).read_bytes())
    assert await _append_after_mismatch(workdir, log, caplog) == (5, 5)
