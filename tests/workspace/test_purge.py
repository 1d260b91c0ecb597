"""purge_session against live writers in other processes, and cleanup of what crashes leave."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace, Msg, ToolResultBlock
from helpers import ChildLines

SpawnPython = Callable[..., "subprocess.Popen[str]"]

PURGES = 12
"""Purges raced against a live writer in each test: the count is what the test checks."""

SAFETY_NET = 300
"""Seconds before a test gives up on a writer that prints nothing: only for a machine so
loaded that the child never runs, never a measure of speed."""

# Appends one message at a time and prints each acknowledged id with its reported line.
APPENDER = """
import asyncio, sys, time
from ctxoffload import LocalWorkspace

async def main():
    ws = LocalWorkspace(sys.argv[1])
    sys.stdin.readline()
    for seq in range(int(sys.argv[2])):
        started = time.monotonic()
        ref = await ws.offload_context("s", msgs=[{"role": "user", "id": f"a{seq}",
                                                    "content": "x" * (seq % 5 * 100)}])
        print(f"a{seq}", ref.first_line, started, time.monotonic(), flush=True)

asyncio.run(main())
"""

TOOL_WRITER = """
import asyncio, sys, time
from ctxoffload import LocalWorkspace, ToolResultBlock

async def main():
    ws = LocalWorkspace(sys.argv[1])
    sys.stdin.readline()
    for seq in range(int(sys.argv[2])):
        # The time the offload *started*: a file written and acknowledged before a purge
        # may rightly be removed by it, even if this process prints its line later.
        started = time.monotonic()
        path = await ws.offload_tool_result(
            "s", ToolResultBlock(id=f"t{seq}", output=f"result {seq}\\n" * 3000))
        print(path, started, flush=True)

asyncio.run(main())
"""


def _start(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()


async def test_append_acknowledged_after_purge_is_at_the_line_it_reported(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    ws = LocalWorkspace(workdir)
    await ws.offload_context("s", msgs=[Msg(role="user", content="first")])
    child = spawn_python(APPENDER, str(workdir), str(10**9))  # appends until killed
    assert child.stdout is not None
    lines = ChildLines(child.stdout)
    _start(child)
    # Counted, not timed: each purge is followed by at least one append begun after it
    # returned (the writer never stops), and each such append is checked.
    deadline = time.monotonic() + SAFETY_NET
    checked = 0
    orphans: list[tuple[int, int]] = []
    for _ in range(PURGES):
        # Hold the log about to be purged open: whatever reaches it after the purge returned
        # was written to a file nobody can find any more.
        try:
            doomed = os.open(ws.context_path("s"), os.O_RDONLY)
        except FileNotFoundError:
            doomed = None
        await ws.purge_session("s")
        # CLOCK_MONOTONIC is one clock for every process on the machine.
        purged_at = time.monotonic()
        if doomed is not None:
            orphans.append((doomed, os.fstat(doomed).st_size))
        acks: list[tuple[str, int, float]] = []
        while not acks or acks[-1][2] <= purged_at:
            msg_id, first, started, acked = lines.next(deadline).split()
            if float(acked) > purged_at:
                acks.append((msg_id, int(first), float(started)))
        log = [json.loads(raw)["id"] for raw in ws.context_path("s").read_bytes().splitlines()]
        for msg_id, first, started in acks:
            if started > purged_at:
                # Begun after the purge returned: it must be in the new log where it said.
                assert first <= len(log) and log[first - 1] == msg_id, (msg_id, first)
                checked += 1
            elif msg_id in log:
                # Begun before: purged with the old log, or in the new one where it said.
                assert log[first - 1] == msg_id, (msg_id, first)
    child.kill()
    child.wait()
    for fd, size_at_purge in orphans:
        size_now = os.fstat(fd).st_size
        os.close(fd)
        assert size_now == size_at_purge, "an append landed in a purged log"
    assert checked >= PURGES
    assert not [p for p in (workdir / "sessions").iterdir() if p.name.startswith(".")]


@pytest.mark.slow
async def test_purge_racing_tool_result_writers_never_raises_and_leaves_nothing(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    ws = LocalWorkspace(workdir)
    writers = [spawn_python(TOOL_WRITER, str(workdir), "400") for _ in range(2)]
    for child in writers:
        _start(child)
    # Counted, not timed: the race starts once a writer has written, and runs a number of
    # purges (or until both writers are done), however slow this machine is.
    deadline = time.monotonic() + SAFETY_NET
    while not (workdir / "sessions" / "s").exists() and time.monotonic() < deadline:
        if all(c.poll() is not None for c in writers):
            break
        await asyncio.sleep(0.01)
    for _ in range(300):
        if all(c.poll() is not None for c in writers):
            break
        await ws.purge_session("s")
    for child in writers:
        child.kill()
        _, err = child.communicate()
        assert "Traceback" not in err, err
    await ws.purge_session("s")
    assert [p.name for p in (workdir / "sessions").iterdir()] == []  # it was written, and purged


async def test_every_acknowledged_tool_result_exists_until_the_next_purge(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    ws = LocalWorkspace(workdir)
    child = spawn_python(TOOL_WRITER, str(workdir), str(10**9))  # writes until killed
    assert child.stdout is not None
    lines = ChildLines(child.stdout)
    _start(child)
    # Counted, not timed: after each purge, read until a result begun after it returned
    # arrives (the writer never stops), and check it; so every purge checks one at least.
    deadline = time.monotonic() + SAFETY_NET
    checked = 0
    for _ in range(PURGES):
        await ws.purge_session("s")
        purged_at = time.monotonic()
        while True:
            path, started_at = lines.next(deadline).split()
            if float(started_at) > purged_at:
                # Written entirely after the purge returned, so it must be readable.
                assert (await ws.read_reference(path)).startswith(b"result ")
                checked += 1
                break
    child.kill()
    child.wait()
    assert checked == PURGES


async def test_initialize_removes_temp_files_no_writer_holds_and_killed_purges(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    """Left by writers of an older version or by hand: no lock, so no live writer, however new
    (tests/workspace/test_temporary_files.py kills and stops real writers)."""
    await local_ws.offload_context("s", msgs=[Msg(role="user", content="x")])
    session = local_ws.session_dir("s")
    (workdir / "data").mkdir(exist_ok=True)
    leftovers = [
        session / ".tmp-tool_result-c1-dead",
        workdir / "data" / ".tmp-abc.png-dead",
        session / ".tmp-tool_result-c2-just-made",
    ]
    for path in leftovers:
        path.write_bytes(b"partial")
    leftover_purge = workdir / "sessions" / ".purge-gone-123"
    leftover_purge.mkdir()
    (leftover_purge / "context.jsonl").write_text("{}\n")
    await LocalWorkspace(workdir).initialize()
    assert [p.exists() for p in leftovers] == [False, False, False]
    assert not leftover_purge.exists()


@pytest.mark.slow
async def test_no_append_lands_in_a_log_after_its_purge_returned(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    ws = LocalWorkspace(workdir, fsync=False)
    children = [spawn_python(APPENDER, str(workdir), "100000") for _ in range(2)]
    for child in children:
        _start(child)
        # Read what the writers print: a full pipe would stop them mid-test (they print a
        # line per append), and the purges below would wait for a log nobody recreates.
        threading.Thread(target=lambda out=child.stdout: out.read(), daemon=True).start()
    held: list[tuple[int, int]] = []
    # Enough purges to race the writers many times; the deadline is only a safety net for a
    # machine so loaded that the children never write (the count, not the time, is the test).
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and len(held) < 30:
            # Hold the log about to be purged open: whatever reaches it after the purge
            # returned went to a file nobody can find any more (an acknowledged line lost).
            try:
                doomed = os.open(ws.context_path("s"), os.O_RDONLY)
            except FileNotFoundError:
                await asyncio.sleep(0)
                continue
            await ws.purge_session("s")
            held.append((doomed, os.fstat(doomed).st_size))
        time.sleep(0.2)  # let any writer still holding an orphan write into it
    finally:
        for child in children:
            child.kill()
            child.wait()
    late = 0
    for fd, size_at_purge in held:
        late += os.fstat(fd).st_size != size_at_purge
        os.close(fd)
    assert len(held) == 30
    assert late == 0, f"{late} of {len(held)} purged logs were written to after the purge"


@pytest.mark.slow
async def test_reads_racing_replacements_and_purges_see_whole_values_or_nothing(
    workdir: Path,
) -> None:
    # A reader may open state.json or context.jsonl a moment before a rename replaces it or
    # a purge removes it, and then finds the file it holds has no link left. That file is
    # read as it was, never refused as "hard-linked": the race is run until it has happened.
    ws = LocalWorkspace(workdir)
    values = [{"n": n, "pad": "x" * (n * 97)} for n in range(40)]
    seen: list[dict[str, object] | None] = []
    logs: list[list[str]] = []
    appended: list[str] = []

    async def writer(start: int) -> None:
        for value in values[start::2]:
            await ws.write_state("s", value)

    async def appender() -> None:
        for _ in range(40):
            n = len(appended)
            await ws.offload_context("s", msgs=[Msg(role="user", content=f"m{n}", id=f"m{n}")])
            appended.append(f"m{n}")

    async def purger() -> None:
        for _ in range(15):
            await ws.purge_session("s")
            await asyncio.sleep(0)

    async def reader() -> None:
        for _ in range(80):
            seen.append(await ws.read_state("s"))
            logs.append([row["id"] for row in await ws.read_context("s")])

    for _ in range(4):
        await asyncio.gather(writer(0), writer(1), appender(), purger(), reader(), reader())
    assert seen and all(value is None or value in values for value in seen)
    # Each log read holds whole appends, in the order they were made.
    assert all(log == sorted(log, key=lambda i: int(i[1:])) for log in logs)
    assert all(set(log) <= set(appended) for log in logs)


async def test_a_purge_takes_a_tool_result_and_its_event_together_or_neither(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An offload writes its file, then the event recording it. A purge arriving between the
    # two waits for the offload (it holds the session as every writer does), then removes
    # both: it never leaves an event naming a file it removed, in a session it re-created.
    from ctxoffload.workspace import _disk_store

    ws = LocalWorkspace(workdir)
    await ws.offload_context("s", [Msg(role="user", content="start")])
    event_due = asyncio.Event()
    append = _disk_store.DiskStore.append

    async def slow_event(self: Any, session_id: str, name: str, lines: Any, **sync: Any) -> Any:
        if name == "events.jsonl" and not event_due.is_set():
            event_due.set()
            await asyncio.sleep(0.5)  # the purge below starts meanwhile
        return await append(self, session_id, name, lines, **sync)

    monkeypatch.setattr(_disk_store.DiskStore, "append", slow_event)

    async def purge_when_due() -> bool:
        await event_due.wait()
        return await ws.purge_session("s")

    path, purged = await asyncio.gather(
        ws.offload_tool_result("s", ToolResultBlock(id="c1", output="out")), purge_when_due()
    )
    assert purged
    assert not Path(path).exists()
    assert await ws.list_sessions() == []  # no session re-created for an orphan event
