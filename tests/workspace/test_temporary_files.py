"""Temporary files carry proof of life: a dead writer's are removed at once, a live one's never.

A file is written under a `.tmp-` name, then linked or renamed into place. Its writer holds
a lock on it from the moment it is created until its name is gone; the kernel drops that
lock when the writer dies. `initialize()` removes exactly the temporary files whose lock it
can take, however new they are, and keeps every one a writer still holds, however old.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxoffload import LocalWorkspace
from ctxoffload._disk.layout import TEMPORARY_PREFIX
from helpers import makes_unnamed_files

SpawnPython = Callable[..., "subprocess.Popen[str]"]

# Writes one kind of whole file (by temporary name) over and over, each 8 MB and different,
# printing "ok N" after each; the test stops or kills it while a temporary file exists. It
# gives up after WRITES files (the test then fails on its exit), so a writer that never makes
# a temporary file cannot fill the disk. On Linux a tool result is made with no name at all
# (O_TMPFILE): the flag is hidden here, so the writer takes the temporary name used where it
# is missing.
WRITES = 100
WRITER = """
import asyncio, base64, os, sys
from ctxoffload import Base64Source, DataBlock, LocalWorkspace, ToolResultBlock

workdir, kind, writes = sys.argv[1], sys.argv[2], int(sys.argv[3])
SIZE = 8 << 20
if kind == "tool_result" and sys.argv[4:] != ["unnamed"]:
    os.__dict__.pop("O_TMPFILE", None)

async def main():
    ws = LocalWorkspace(workdir)
    n = 0
    while n < writes:
        if kind == "tool_result":
            await ws.offload_tool_result(
                "s", ToolResultBlock(id=f"call_{n}", output=f"{n:08d}" * (SIZE // 8)))
        elif kind == "state":
            await ws.write_state("s", {"n": n, "pad": "p" * SIZE})
        else:
            raw = n.to_bytes(8, "big") * (SIZE // 8)
            await ws.offload_data_block(DataBlock(source=Base64Source(
                media_type="image/png", data=base64.b64encode(raw).decode())))
        print("ok", n, flush=True)
        n += 1

asyncio.run(main())
"""

KINDS = {"tool_result": ("sessions", "s"), "state": ("sessions", "s"), "data": ("data",)}


def _temporaries(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return [p for p in folder.iterdir() if p.name.startswith(TEMPORARY_PREFIX)]


def _held(path: Path) -> bool:
    """Whether another open file holds a lock on `path` (a live writer's proof of life)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing lets go of a lock this took
    return False


def _stop_while_writing(child: subprocess.Popen[str], folder: Path) -> list[Path]:
    """Stop `child` (SIGSTOP) at a moment when it has a temporary file in `folder`.

    Waits for one to appear, stops the writer, and looks again: a file still there, and
    locked, while the writer is stopped is one it is writing. A file the writer has created
    but not yet locked (stopped between the two) is a dead writer's as far as anyone can
    tell, and `initialize` would rightly remove it (the writer then makes another): then,
    as when no file is there, the writer goes on and the next write is tried. Returns the
    temporary files found with the writer stopped.
    """
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        if not _temporaries(folder):
            os.sched_yield()
            continue
        os.kill(child.pid, signal.SIGSTOP)
        # The signal is delivered asynchronously: wait until the writer has stopped.
        _, status = os.waitpid(child.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), status
        found = _temporaries(folder)
        if found and all(_held(path) for path in found):
            return found
        os.kill(child.pid, signal.SIGCONT)
    raise AssertionError(f"no temporary file appeared in {folder} in 120 s")


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_initialize_removes_a_killed_writers_temporary_file_at_once(
    workdir: Path, spawn_python: SpawnPython, kind: str
) -> None:
    folder = workdir.joinpath(*KINDS[kind])
    child = spawn_python(WRITER, str(workdir), kind, str(WRITES))
    found = _stop_while_writing(child, folder)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert all(path.exists() for path in found)
    await LocalWorkspace(workdir).initialize()
    assert _temporaries(folder) == []


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_initialize_keeps_a_live_writers_temporary_file_however_old(
    workdir: Path, spawn_python: SpawnPython, kind: str
) -> None:
    folder = workdir.joinpath(*KINDS[kind])
    child = spawn_python(WRITER, str(workdir), kind, str(WRITES))
    found = _stop_while_writing(child, folder)
    an_hour_ago = time.time() - 3600
    for path in found:
        os.utime(path, (an_hour_ago, an_hour_ago))
    await LocalWorkspace(workdir).initialize()
    assert all(path.exists() for path in found)
    # The writer goes on, puts that file in place and removes its temporary name.
    os.kill(child.pid, signal.SIGCONT)
    deadline = time.monotonic() + 120
    while any(path.exists() for path in found) and time.monotonic() < deadline:
        os.sched_yield()
    assert not any(path.exists() for path in found)
    child.kill()
    _, err = child.communicate(timeout=60)
    assert "Traceback" not in err, err


@pytest.mark.slow
def test_a_tool_result_made_without_a_name_never_has_a_temporary_file(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    """Each 8 MB tool result takes milliseconds to write; written under a temporary name,
    the folder would show that name for all of them. Made with no name, it never does."""
    if not makes_unnamed_files(workdir.parent):
        pytest.skip("no O_TMPFILE here: tool results take a temporary name")
    folder = workdir.joinpath(*KINDS["tool_result"])
    writes = 20
    child = spawn_python(WRITER, str(workdir), "tool_result", str(writes), "unnamed")
    seen: set[str] = set()
    while child.poll() is None:
        seen.update(path.name for path in _temporaries(folder))
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0 and out.count("ok") == writes, err
    assert seen == set()
    assert len(list(folder.glob("tool_result-*"))) == writes
