"""`new_session` and `take_new_session`: a session that must be new, even with writers in
other processes drawing the same id at the same moment."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxoffload import ConfigError, InMemoryWorkspace, LocalWorkspace
from ctxoffload.workspace import new_session, take_new_session
from helpers import forced_tags

SpawnPython = Callable[..., "subprocess.Popen[str]"]

# Draws a new session `p-...` whose first tag is forced to `abcdef`, once the file `go`
# exists, prints its id and holds its lease until stdin closes.
DRAWER = """
import asyncio, os, sys, time
from ctxoffload import LocalWorkspace
from ctxoffload.workspace import _new_session, new_session

tags = ["abcdef"]
random_tag = _new_session.random_tag
_new_session.random_tag = lambda: tags.pop(0) if tags else random_tag()

async def main():
    ws = LocalWorkspace(sys.argv[1])
    print("ready", flush=True)
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.001)
    session, lease = await new_session(ws, "p", "drawer")
    await ws.record_event(session, "session_start", agent="drawer")
    print(session, flush=True)
    sys.stdin.read()
    if lease is not None:
        await lease.release()

asyncio.run(main())
"""


@pytest.mark.slow
async def test_processes_drawing_one_id_at_once_each_get_a_new_session(
    tmp_path: Path, spawn_python: SpawnPython
) -> None:
    workdir = tmp_path / "ws"
    await LocalWorkspace(workdir).initialize()
    go = tmp_path / "go"
    drawers = [spawn_python(DRAWER, str(workdir), str(go)) for _ in range(3)]
    for drawer in drawers:
        assert drawer.stdout is not None and drawer.stdout.readline() == "ready\n"
    go.touch()
    sessions = []
    for drawer in drawers:
        assert drawer.stdout is not None
        sessions.append(drawer.stdout.readline().strip())
    for drawer in drawers:
        drawer.communicate("")
        assert drawer.returncode == 0
    assert len(set(sessions)) == 3 and "p-abcdef" in sessions, sessions
    assert all(s.startswith("p-") for s in sessions)


@pytest.mark.parametrize("kind", ["local", "memory"])
async def test_take_new_session_refuses_a_session_with_a_record(tmp_path: Path, kind: str) -> None:
    ws = LocalWorkspace(tmp_path / "ws") if kind == "local" else InMemoryWorkspace()
    await ws.record_event("old", "session_start", agent="a")
    with pytest.raises(ConfigError, match="session 'old' already exists"):
        await take_new_session(ws, "old")
    lease = await take_new_session(ws, "fresh", "b")
    assert lease is not None and lease.held
    await lease.release()


async def test_new_session_gives_up_naming_what_it_drew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    await ws.record_event("p-abcdef", "session_start", agent="a")
    forced_tags(monkeypatch, *["abcdef"] * 16)
    with pytest.raises(ConfigError, match=r"found no new session id after 'p'.*p-abcdef"):
        await new_session(ws, "p")


@pytest.mark.parametrize("planted", ["link", "file", "fifo"])
async def test_new_session_passes_over_a_planted_entry_without_a_false_warning(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    planted: str,
) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    await ws.initialize()
    entry = tmp_path / "ws/sessions/p-abcdef"
    if planted == "link":
        entry.symlink_to(tmp_path)
    elif planted == "file":
        entry.write_text("not a session")
    else:
        os.mkfifo(entry)
    forced_tags(monkeypatch, "abcdef")
    session, lease = await new_session(ws, "p", "me")
    assert session != "p-abcdef" and lease is not None and lease.held
    await lease.release()
    # Passed over, not written through: nothing says the new session goes on without a lease.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
