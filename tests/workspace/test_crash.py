"""Writers that die mid-write: every acknowledged message survives, torn lines are skipped."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxoffload import LocalWorkspace, Msg, ToolResultBlock
from helpers import makes_unnamed_files

SpawnPython = Callable[..., "subprocess.Popen[str]"]

# A zygote: imports ctxoffload once, then for each round number read on stdin forks a writer
# (which prints "pid N"), waits for that writer to die, and prints "dead". (Forking from a process
# that has imported everything makes a round cost milliseconds instead of an interpreter
# start-up; the zygote has no threads, so fork is safe.)
#
# The writer appends messages of 0.2-0.6 MB until killed, acknowledging each one on stdout once
# offload_context has returned (fsync on: an acknowledged message is on disk). Messages this
# big take long enough to write that a kill can land in the middle of one.
WRITER_ZYGOTE = """
import asyncio, os, sys
from ctxoffload import LocalWorkspace

workdir = sys.argv[1]

async def write_forever(round_no):
    ws = LocalWorkspace(workdir)
    seq = 0
    while True:
        msg_id = f"r{round_no}-{seq}"
        repeat = (1 << 18) // (len(msg_id) + 1) * (1 + seq % 4) // 2 + 12_500
        msg = {"role": "user", "id": msg_id, "repeat": repeat, "content": (msg_id + ";") * repeat}
        ref = await ws.offload_context("crash", msgs=[msg])
        # One write: print() writes its parts one by one when stdout is unbuffered
        # (PYTHONUNBUFFERED), and a kill between them would tear the acknowledgement.
        os.write(1, f"{msg_id} {ref.first_line}\\n".encode())
        seq += 1

for line in sys.stdin:
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            print("pid", os.getpid(), flush=True)
            asyncio.run(write_forever(line.strip()))
        finally:
            os._exit(1)
    os.waitpid(pid, 0)
    print("dead", flush=True)
"""

ROUNDS = 50


def _kill_writers(spawn_python: SpawnPython, workdir: Path, seed: int) -> dict[str, int]:
    """Run ROUNDS writers one after another on one log, SIGKILL each mid-stream.

    Returns:
        Every acknowledged message id with the line number its writer reported.
    """
    rng = random.Random(seed)
    log = workdir / "sessions" / "crash" / "context.jsonl"
    acked: dict[str, int] = {}
    zygote = spawn_python(WRITER_ZYGOTE, str(workdir))
    assert zygote.stdin is not None and zygote.stdout is not None

    def take_ack(line: str) -> None:
        assert line.endswith("\n"), f"writer died early: {line!r}"
        msg_id, first_line = line.split()
        acked[msg_id] = int(first_line)

    for round_no in range(ROUNDS):
        zygote.stdin.write(f"{round_no}\n")
        zygote.stdin.flush()
        pid_line = zygote.stdout.readline().split()
        assert pid_line[:1] == ["pid"], f"no writer started in round {round_no}: {pid_line}"
        pid = int(pid_line[1])
        for _ in range(rng.randint(1, 3)):
            take_ack(zygote.stdout.readline())
        if rng.random() < 0.5:
            # Kill as soon as the next write shows up in the file: most likely mid-write,
            # which is what leaves a torn line.
            size = log.stat().st_size
            for _ in range(1_000_000):
                if log.stat().st_size != size:
                    break
        else:
            # Anywhere else: serialising the next message, fsyncing, writing the event.
            time.sleep(rng.uniform(0, 0.02))
        os.kill(pid, signal.SIGKILL)
        # Acks printed between the last read and the kill count too.
        while (line := zygote.stdout.readline()) != "dead\n":
            take_ack(line)
    zygote.stdin.close()
    assert zygote.wait() == 0
    return acked


@pytest.mark.slow
async def test_killed_writers_lose_no_acknowledged_message(
    workdir: Path, spawn_python: SpawnPython, caplog: pytest.LogCaptureFixture
) -> None:
    """50 writers killed one after another: mid-write, mid-fsync, between write and commit.

    Messages are 0.2-0.6 MB (they were 1-2 MB): still too big to be written in one step, so
    a kill still lands in the middle of one. Measured over runs of this test, about half of
    the 50 kills left a torn line and most others a whole batch beyond the commit or a clean
    end, at either size. Each new writer reads the whole log for its ids, so the bigger
    messages made the test three times slower for nothing the invariants below need.
    """
    acked = _kill_writers(spawn_python, workdir, seed=20240611)
    log = workdir / "sessions" / "crash" / "context.jsonl"
    raw = log.read_bytes()
    # Readers stop at the committed length: a kill between a batch's write and its commit
    # leaves whole lines after it that no reader returns.
    committed = int(log.with_name("context.jsonl.commit").read_bytes()[:20])
    complete = raw[:committed].split(b"\n")[:-1]
    tail = raw.split(b"\n")[-1]

    ws = LocalWorkspace(workdir)
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        messages = await ws.read_context("crash")
    ids = [m["id"] for m in messages]
    assert len(ids) == len(set(ids))
    assert set(acked) <= set(ids)
    for message in messages:
        assert message["content"] == (message["id"] + ";") * message["repeat"]
    for msg_id, first_line in acked.items():
        assert json.loads(complete[first_line - 1])["id"] == msg_id

    # Exactly the lines that are not JSON were skipped, each with a warning; an unfinished
    # last line is skipped without one.
    unreadable = []
    for line in complete:
        try:
            json.loads(line)
        except ValueError:
            unreadable.append(line)
    assert len(messages) == len(complete) - len(unreadable)
    warnings = [r for r in caplog.records if "not valid JSON" in r.getMessage()]
    assert len(warnings) == len(unreadable)
    if tail:
        with pytest.raises(ValueError):
            json.loads(tail)

    # The log stays usable: the next append reports where its line really is.
    ref = await ws.offload_context("crash", msgs=[Msg(role="user", content="after the kills")])
    lines = log.read_bytes().split(b"\n")
    assert json.loads(lines[ref.first_line - 1])["content"] == "after the kills"
    assert (await ws.read_context("crash"))[-1]["content"] == "after the kills"
    assert len(await ws.read_events("crash")) >= len(acked)


# -- a torn tail written by hand --------------------------------------------------------------

TORN = b'{"role":"user","content":"half a mess'


@pytest.fixture
async def torn_log(local_ws: LocalWorkspace) -> Path:
    """A context log of two messages followed by half a line, as a killed writer leaves it."""
    ref = await local_ws.offload_context(
        "s", msgs=[Msg(role="user", content="one"), Msg(role="user", content="two")]
    )
    with open(ref, "ab") as f:
        f.write(TORN)
    return Path(ref)


async def test_read_context_skips_a_torn_last_line_silently(
    local_ws: LocalWorkspace, torn_log: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        messages = await local_ws.read_context("s")
    assert [m["content"] for m in messages] == ["one", "two"]
    assert caplog.records == []


async def test_append_after_an_uncommitted_tail_trims_it_and_reports_its_true_line(
    local_ws: LocalWorkspace, torn_log: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        ref = await local_ws.offload_context("s", msgs=[Msg(role="user", content="three")])
    assert (ref.first_line, ref.last_line) == (3, 3)
    lines = torn_log.read_bytes().split(b"\n")
    assert [json.loads(line)["content"] for line in lines[:-1]] == ["one", "two", "three"]
    [record] = caplog.records
    assert "never committed" in record.getMessage()
    assert str(torn_log) in record.getMessage()


async def test_append_after_an_uncommitted_tail_by_a_fresh_workspace_reports_its_true_line(
    workdir: Path, torn_log: Path
) -> None:
    ref = await LocalWorkspace(workdir).offload_context(
        "s", msgs=[Msg(role="user", content="three")]
    )
    assert (ref.first_line, ref.last_line) == (3, 3)


@pytest.fixture
def legacy_torn_log(torn_log: Path) -> Path:
    """The torn log as an older version (without commit records) leaves it."""
    torn_log.with_name("context.jsonl.commit").unlink()
    return torn_log


async def test_append_after_a_torn_line_of_a_log_without_commit_record_closes_it(
    local_ws: LocalWorkspace, legacy_torn_log: Path
) -> None:
    ref = await local_ws.offload_context("s", msgs=[Msg(role="user", content="three")])
    assert (ref.first_line, ref.last_line) == (4, 4)
    lines = legacy_torn_log.read_bytes().split(b"\n")
    assert lines[2] == TORN
    assert json.loads(lines[3])["content"] == "three"


async def test_closed_torn_line_is_skipped_with_a_warning(
    local_ws: LocalWorkspace, legacy_torn_log: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await local_ws.offload_context("s", msgs=[Msg(role="user", content="three")])
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        messages = await local_ws.read_context("s")
    assert [m["content"] for m in messages] == ["one", "two", "three"]
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "line 3" in record.getMessage()
    assert str(legacy_torn_log) in record.getMessage()


@pytest.mark.parametrize(
    "garbage",
    [
        b'{"content":"caf\xc3',  # cut inside a UTF-8 sequence
        b"\x00" * 4096,  # a zero-filled block, as a power cut can leave on ext4
        b"\xff\xfe\xfd",
        b'{"a": 1} trailing',
    ],
    ids=["mid-utf8", "zeros", "binary", "trailing"],
)
async def test_unreadable_line_in_the_middle_is_skipped_not_raised(
    local_ws: LocalWorkspace, garbage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    ref = await local_ws.offload_context("s", msgs=[Msg(role="user", content="one")])
    # Written by hand into a log without a commit record (as older versions leave it); with
    # one, the next append would trim the garbage instead.
    Path(ref).with_name("context.jsonl.commit").unlink()
    with open(ref, "ab") as f:
        f.write(garbage + b"\n")
    await local_ws.offload_context("s", msgs=[Msg(role="user", content="three")])
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        messages = await local_ws.read_context("s")
    assert [m["content"] for m in messages] == ["one", "three"]
    assert len(caplog.records) == 1


async def test_read_events_skips_a_torn_last_line(local_ws: LocalWorkspace) -> None:
    await local_ws.offload_context("s", msgs=[Msg(role="user", content="one")])
    with open(local_ws.events_path("s"), "ab") as f:
        f.write(b'{"time":"2024')
    [event] = await local_ws.read_events("s")
    assert event["kind"] == "context"
    await local_ws.record_event("s", "note")
    assert [e["kind"] for e in await local_ws.read_events("s")] == ["context", "note"]


# -- a batch written and never committed: every reader agrees ---------------------------------

# Appends a committed batch, then a second one, killed (SIGKILL) after its lines are written
# and before its commit record is: the moment the commit record exists for.
KILLED_BEFORE_COMMIT = """
import asyncio, os, signal, sys
from ctxoffload import LocalWorkspace, Msg, ToolResultBlock
from ctxoffload._disk import jsonl as _jsonl

async def main():
    ws = LocalWorkspace(sys.argv[1])
    await ws.offload_context("s", msgs=[Msg(role="user", content="needle one, committed")])

    def killed(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    _jsonl.encode_commit_record = killed
    await ws.offload_context("s", msgs=[Msg(role="user", content="needle two, never committed")])

asyncio.run(main())
"""


async def test_a_batch_killed_before_its_commit_is_shown_by_no_reader(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    """The agent's Read and Grep, the retrieval tool, `read_reference`, `read_lines`,
    `read_context` and `ctxoffload grep` all stop where the commit record says the log ends
    (`readable_end`), so none shows a line the next append trims."""
    from ctxoffload.readback import FileToolbox, retrieve_offloaded_content

    writer = spawn_python(KILLED_BEFORE_COMMIT, str(workdir))
    assert writer.wait() == -signal.SIGKILL, writer.stderr.read() if writer.stderr else ""
    log = workdir / "sessions" / "s" / "context.jsonl"
    assert b"never committed" in log.read_bytes()  # written, and past the commit record

    ws = LocalWorkspace(workdir)
    reference = str(log)
    assert b"never committed" not in await ws.read_reference(reference)
    assert await ws.read_lines(reference, 2, 2) == b""
    assert b"needle one" in await ws.read_lines(reference, 1, 5)
    assert [m["content"] for m in await ws.read_context("s")] == ["needle one, committed"]
    shown = await retrieve_offloaded_content(ws, reference, pattern="needle")
    assert "needle one" in shown and "never committed" not in shown

    tools = FileToolbox([workdir])
    read = tools.read("sessions/s/context.jsonl")
    assert isinstance(read, str) and "needle one" in read and "never" not in read
    assert "never" not in tools.read("sessions/s/context.jsonl", offset=1, char_offset=1)
    found = tools.grep("needle", "sessions")
    assert "needle one" in found and "never" not in found
    assert "never" not in tools.grep("needle", "sessions/s/context.jsonl", context_lines=1)

    by_cli = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "grep", "needle", "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "needle one" in by_cli.stdout and "never" not in by_cli.stdout

    # The next append trims the uncommitted batch: what every reader showed is what stays.
    ref = await ws.offload_context("s", msgs=[Msg(role="user", content="needle three")])
    assert (ref.first_line, ref.last_line) == (2, 2)
    assert "never" not in log.read_text()


# -- a tool result killed between its link and the removal of its temporary name -------------

# Stores one tool result, then dies (SIGKILL) the moment the second is linked into place.
KILLED_AFTER_LINK = """
import asyncio, os, signal, sys
from ctxoffload import LocalWorkspace, ToolResultBlock

async def main():
    ws = LocalWorkspace(sys.argv[1])
    await ws.offload_tool_result("s", ToolResultBlock(id="call-1", output="first result\\n"))
    link = os.link

    def link_then_die(*args, **kwargs):
        link(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    os.link = link_then_die
    await ws.offload_tool_result("s", ToolResultBlock(id="call-2", output="second result\\n"))

asyncio.run(main())
"""


async def test_a_tool_result_writer_killed_after_linking_leaves_one_readable_file(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    """The file is made with no name and linked into place, so it never has the second link
    (a temporary name) that readers refuse: a kill right after the link leaves the whole
    file, readable by the workspace and the agent's Read, and nothing else."""
    from ctxoffload.readback import FileToolbox

    if not makes_unnamed_files(workdir.parent):
        pytest.skip("no O_TMPFILE here: tool results take a temporary name")

    writer = spawn_python(KILLED_AFTER_LINK, str(workdir))
    assert writer.wait() == -signal.SIGKILL, writer.stderr.read() if writer.stderr else ""
    session = workdir / "sessions" / "s"
    second = session / "tool_result-call-2.txt"
    assert sorted(p.name for p in session.iterdir()) == [
        "events.jsonl",
        "tool_result-call-1.txt",
        "tool_result-call-2.txt",
    ]
    assert second.stat().st_nlink == 1
    assert await LocalWorkspace(workdir).read_reference(str(second)) == b"second result\n"
    assert FileToolbox([workdir]).read(str(second)) == "     1\tsecond result"
    # The same result offloaded again (the agent retrying the call) finds the file.
    again = await LocalWorkspace(workdir).offload_tool_result(
        "s", ToolResultBlock(id="call-2", output="second result\n")
    )
    assert again == str(second)
