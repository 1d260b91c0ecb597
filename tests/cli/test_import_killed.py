"""`ctxoffload import` killed with SIGKILL at several points, into a SQLite file, a schema
of a real PostgreSQL server and a bucket (moto's S3 on loopback): every session the target
lists is whole (all its files, lines and events) or not there at all, and running the same
import again finishes what the killed run began, byte for byte."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace, Msg, ObjectStoreWorkspace, SqlWorkspace, ToolResultBlock
from helpers import install_hint, snapshot_tree

SESSIONS = [f"s{n}" for n in range(1, 7)]
FILES = 12  # tool results per session, each with its event
LINES = 400  # context lines per session, in one batch: its 13th event
# How far the killed run got when it is killed: files (rows, or objects) the target shows.
KILL_AFTER = [1, 14, 40]
SAFETY_NET = 300
"""Seconds before a test gives up on an import that shows no progress: for a machine so
loaded that the child never runs, never a measure of speed."""


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace folder of six sessions, each of 12 tool results, 400 context lines and
    13 events: what the issue's interrupted import was given."""
    root = tmp_path_factory.mktemp("import") / "ws"

    async def fill() -> None:
        ws = LocalWorkspace(root, fsync=False)
        for session in SESSIONS:
            for n in range(FILES):
                output = "\n".join(f"{session} result {n} line {i}" for i in range(1000))
                await ws.offload_tool_result(session, ToolResultBlock(id=f"c{n}", output=output))
            msgs = [Msg(role="user", content=f"{session} message {i}") for i in range(LINES)]
            await ws.offload_context(session, msgs)

    asyncio.run(fill())
    return root


def tree(root: Path) -> dict[str, bytes]:
    return {k: v for k, v in snapshot_tree(root).items() if v is not None}


class Target:
    """Where the import writes, how to read its progress, and how to open it."""

    def __init__(self, url: str, progress: Callable[[], int], env: dict[str, str]) -> None:
        self.url = url
        self.progress = progress
        self.env = env

    def open(self) -> Any:
        if self.url.startswith("s3://"):
            return ObjectStoreWorkspace(self.url)
        return SqlWorkspace(self.url)


def sqlite_target(tmp_path: Path, request: pytest.FixtureRequest) -> Target:
    path = tmp_path / "agents.db"

    def progress() -> int:
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        except sqlite3.Error:
            return 0
        try:
            return int(db.execute("SELECT count(*) FROM files").fetchone()[0])
        except sqlite3.Error:  # not made yet
            return 0
        finally:
            db.close()

    return Target(f"sqlite:///{path}", progress, {})


def postgres_target(tmp_path: Path, request: pytest.FixtureRequest) -> Target:
    psycopg = pytest.importorskip("psycopg", reason=f"no psycopg: {install_hint('sql')}")
    url = request.getfixturevalue("postgres").new_schema()

    db = psycopg.connect(url, autocommit=True)  # one: a connection costs the server a process
    request.addfinalizer(db.close)

    def progress() -> int:
        try:
            return int(db.execute("SELECT count(*) FROM files").fetchone()[0])
        except psycopg.errors.UndefinedTable:  # not made yet
            return 0

    return Target(url, progress, {})


def bucket_target(tmp_path: Path, request: pytest.FixtureRequest) -> Target:
    s3 = request.getfixturevalue("s3")
    bucket = s3.new_bucket()
    monkeypatch = request.getfixturevalue("monkeypatch")
    for name, value in s3.environment().items():
        monkeypatch.setenv(name, value)
    return Target(
        f"s3://{bucket}/agents",
        lambda: s3.count_objects(bucket, "agents/sessions/"),
        s3.environment(),
    )


TARGETS = {"sqlite": sqlite_target, "postgres": postgres_target, "bucket": bucket_target}


def start_import(target: Target, source: Path, *sessions: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ctxoffload", "import", str(source), *sessions],
        env={**os.environ, **target.env, "CTXOFFLOAD_WORKDIR": target.url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def kill_after(target: Target, process: subprocess.Popen[bytes], files: int) -> None:
    """SIGKILL the import once the target shows `files` files (at once for 0)."""
    deadline = time.monotonic() + SAFETY_NET
    while files and target.progress() < files and process.poll() is None:
        assert time.monotonic() < deadline, "the import showed no progress"
        time.sleep(0.002)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.stderr is not None
    process.stderr.close()


def listed_sessions_are_whole(target: Target, copy: Path) -> list[str]:
    """Each session the target lists, copied out: all its files, lines and events."""
    ws = target.open()
    listed = asyncio.run(ws.list_sessions())
    for session in listed:
        folder = copy / session
        asyncio.run(ws.download(folder, session=session, data=False))
        names = sorted(p.name for p in (folder / "sessions" / session).iterdir())
        results = [n for n in names if n.startswith("tool_result-")]
        assert len(results) == FILES, (session, names)
        context = (folder / "sessions" / session / "context.jsonl").read_bytes()
        events = (folder / "sessions" / session / "events.jsonl").read_bytes()
        assert context.count(b"\n") == LINES, session
        assert events.count(b"\n") == FILES + 1, session
    if isinstance(ws, SqlWorkspace):
        ws.close()
    return listed


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(TARGETS))
def test_an_import_killed_anywhere_leaves_whole_sessions_and_a_rerun_finishes_it(
    source: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    cli: Callable[..., Any],
    kind: str,
) -> None:
    expected = tree(source)
    for point, files in enumerate(KILL_AFTER):
        target = TARGETS[kind](tmp_path / f"at-{point}", request)
        kill_after(target, start_import(target, source), files)
        listed = listed_sessions_are_whole(target, tmp_path / f"at-{point}" / "listed")
        # Naming only a session the killed run did not finish: it goes in.
        missing = [s for s in SESSIONS if s not in listed]
        if missing:
            named = cli("import", source, missing[-1], "--workdir", target.url)
            assert named.code == 0, named.err
            assert f"{missing[-1]}: " in named.out
        # The whole import again: what the killed run wrote is there already, as it would
        # write it, and left as it is; what it began is finished; the rest goes in.
        again = cli("import", source, "--workdir", target.url)
        assert again.code == 0, again.err
        assert listed_sessions_are_whole(target, tmp_path / f"at-{point}" / "after") == SESSIONS
        for session in listed:
            assert f"{session}: there already" in again.out
        # Byte for byte what the folder holds, once exported back.
        back = tmp_path / f"at-{point}" / "back"
        exported = cli("export", "--all", back, "--workdir", target.url)
        assert exported.code == 0, exported.err
        # References name the copy: said as the folder's, it is the folder (with, from a
        # bucket, the lease each session's import took: an object of the session there).
        here, there = str(back).encode(), str(source).encode()
        back_tree = {k: v.replace(here, there) for k, v in tree(back).items()}
        assert {k: v for k, v in back_tree.items() if not k.endswith("/lease.json")} == expected
