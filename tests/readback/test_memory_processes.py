"""The memory tool under real processes: two editing one file at once lose no edit, and a
writer killed at any moment leaves the old file or the new one, never a torn one."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from memory_tools import memory_on

SpawnPython = Callable[..., "subprocess.Popen[str]"]

EDITS = 60

# Waits for "go", then makes EDITS edits of one memory file: each inserts a line of its own at
# the top, and moves its own counter line on by one with str_replace. An edit that another
# process's overwrote would lose an inserted line or a count.
EDITOR = """
import asyncio, sys
from ctxoffload import LocalWorkspace
from ctxoffload.readback import memory_tool

workdir, name, edits = sys.argv[1], sys.argv[2], int(sys.argv[3])

async def main():
    memory = memory_tool(LocalWorkspace(workdir), session_id="edits-" + name)
    sys.stdin.readline()
    for i in range(edits):
        answer = await memory(
            command="insert", path="/memories/shared.md", insert_line=0,
            insert_text=f"{name} line {i}",
        )
        assert answer == "The file /memories/shared.md has been edited.", answer
        answer = await memory(
            command="str_replace", path="/memories/shared.md",
            old_str=f"{name} count: {i}\\n", new_str=f"{name} count: {i + 1}\\n",
        )
        assert answer.startswith("The memory file has been edited."), answer
    print("done", flush=True)

asyncio.run(main())
"""


@pytest.mark.slow
async def test_two_processes_editing_one_file_lose_no_edit(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    workspace, memory = memory_on(workdir)
    await memory(command="create", path="/memories/shared.md", file_text="A count: 0\nB count: 0\n")
    editors = [spawn_python(EDITOR, str(workdir), name, str(EDITS)) for name in "AB"]
    for editor in editors:
        assert editor.stdin is not None
        editor.stdin.write("go\n")
        editor.stdin.flush()
    for editor in editors:
        out, err = editor.communicate()
        assert editor.returncode == 0, err
        assert out == "done\n"
    lines = (workdir / "memories" / "shared.md").read_text().splitlines()
    assert f"A count: {EDITS}" in lines and f"B count: {EDITS}" in lines
    for name in "AB":
        mine = [line for line in lines if line.startswith(f"{name} line ")]
        # Each process's lines, all there, newest first (each went in at the top).
        assert mine == [f"{name} line {i}" for i in reversed(range(EDITS))]
    assert len(lines) == 2 * EDITS + 2
    # Every change is an event of the session that made it.
    for name in "AB":
        events = await workspace.read_events(f"edits-{name}")
        assert [e["command"] for e in events] == ["insert", "str_replace"] * EDITS


FILLER = "".join(f"{n:07d} the same filler line in every version\n" for n in range(4_000))

# Replaces the version line of a 180 KB memory file, version after version, until killed;
# each replacement rewrites the whole file (written, synced, renamed into place).
REWRITER = """
import asyncio, os, sys
from ctxoffload import LocalWorkspace
from ctxoffload.readback import memory_tool

async def main():
    memory = memory_tool(LocalWorkspace(sys.argv[1]), session_id="rewrites")
    version = int(sys.argv[2])
    os.write(1, b"started\\n")
    while True:
        answer = await memory(
            command="str_replace", path="/memories/big.md",
            old_str=f"version {version}\\n", new_str=f"version {version + 1}\\n",
        )
        assert answer.startswith("The memory file has been edited."), answer
        version += 1
        os.write(1, f"{version}\\n".encode())

asyncio.run(main())
"""


@pytest.mark.slow
async def test_a_writer_killed_mid_write_leaves_the_old_or_the_new_file(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    _, memory = memory_on(workdir)
    await memory(command="create", path="/memories/big.md", file_text="version 0\n" + FILLER)
    path = workdir / "memories" / "big.md"
    rng = random.Random(46)
    acknowledged = 0
    for _ in range(12):
        writer = spawn_python(REWRITER, str(workdir), str(acknowledged))
        assert writer.stdout is not None
        assert writer.stdout.readline() == "started\n"
        await asyncio.sleep(rng.uniform(0.0, 0.15))
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        # Read through the text stream: `readline` above may have buffered acknowledgements
        # past "started" (communicate() would read the pipe beneath and miss them).
        out = writer.stdout.read()
        done = [int(line) for line in out.split()] or [acknowledged]
        text = path.read_text()
        version = int(text.split("\n", 1)[0].removeprefix("version "))
        # Whole: one version line and the filler, never part of either.
        assert text == f"version {version}\n" + FILLER
        # Not older than what was acknowledged; at most the one being written past it.
        assert done[-1] <= version <= done[-1] + 1
        acknowledged = version
    # What the killed writers left (temporary files) goes with the next change.
    await memory(command="insert", path="/memories/big.md", insert_line=0, insert_text="last")
    assert [p.name for p in (workdir / "memories").iterdir()] == ["big.md"]
