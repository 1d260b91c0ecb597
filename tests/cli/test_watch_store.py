"""`ctxoffload watch --workdir sqlite:///...`: following a database while a real process
writes to it, each look reading only the lines appended since the last."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from watching import PATIENCE, end_watch, start_watch, stop_watch

from ctxoffload import Msg, SqlWorkspace, ToolResultBlock
from ctxoffload.cli._cmd_watch import StoreFollower
from helpers import pipe_lines, wait_for_line

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from ctxoffload import Msg, SqlWorkspace, ToolResultBlock

    async def main():
        ws = SqlWorkspace(sys.argv[1])
        for n in range(20):
            await ws.offload_context("live", [Msg(role="user", content=f"live message {n}")])
        await ws.offload_tool_result("live", ToolResultBlock(id="c7", name="probe", output="x"))
        await ws.offload_context("brand-new", [Msg(role="assistant", content="new session")])

    asyncio.run(main())
    """
)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new database: a SQLite file, or a schema of its own on the test session's
    PostgreSQL server (followed there by LISTEN/NOTIFY)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'agents.db'}"
    server = request.getfixturevalue("postgres")
    return server.new_schema()  # type: ignore[no-any-return]


@pytest.mark.slow
def test_watch_follows_a_writer_process_in_a_database_and_ends_on_ctrl_c(db_url: str) -> None:
    url = db_url
    ws = SqlWorkspace(url)
    asyncio.run(ws.offload_context("live", [Msg(role="user", content="written before")]))
    ws.close()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    watch = start_watch("--workdir", url, env=env)
    try:
        out, err = pipe_lines(watch.stdout), pipe_lines(watch.stderr)
        seen_err: list[str] = []
        wait_for_line(err, "watching all sessions", seen_err)
        writer = subprocess.run(
            [sys.executable, "-c", WRITER, url],
            capture_output=True,
            text=True,
            timeout=PATIENCE,
            env=env,
        )
        assert writer.returncode == 0, writer.stderr
        seen: list[str] = []
        wait_for_line(out, "brand-new", seen)
        wait_for_line(out, "tool_result-c7.txt", seen)
        wait_for_line(out, "live message 19", seen)
        messages = [
            line for line in seen if "live message" in line and "context.jsonl line" in line
        ]
        # Each message once, in order, numbered as the log numbers it.
        assert [m.split("live message ")[1].split()[0] for m in messages] == [
            str(n) for n in range(20)
        ]
        assert "context.jsonl line 2 " in messages[0]
        assert not any("written before" in line for line in seen)
        assert "Traceback" not in end_watch(watch, err, seen_err)
    finally:
        stop_watch(watch)


def test_a_look_reads_the_new_lines_only_however_long_the_log(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    ws = SqlWorkspace(url)
    for b in range(10):
        batch = [Msg(role="user", content=f"old {b}-{n}") for n in range(500)]
        asyncio.run(ws.offload_context("long", batch))
    follower = StoreFollower("", "long", True, store=ws)

    async def look() -> tuple[list[str], int]:
        whole = 0
        connection = ws._database._connect()

        def count(statement: str) -> None:
            # A read of the lines that is neither an index range nor a one-row probe reads
            # the whole log.
            nonlocal whole
            if "FROM lines" in statement and "BETWEEN" not in statement:
                whole += "LIMIT 1" not in statement

        connection.set_trace_callback(count)
        try:
            found = await follower.poll_store()
        finally:
            connection.set_trace_callback(None)
        return found, whole

    asyncio.run(follower.start_store(from_start=False))
    assert follower.marks[("long", "context.jsonl")] == 5001
    asyncio.run(ws.offload_context("long", [Msg(role="user", content="the new one")]))
    found, whole_reads = asyncio.run(look())
    assert whole_reads == 0
    assert [line for line in found if "the new one" in line]
    assert not [line for line in found if "old " in line]
    found, whole_reads = asyncio.run(look())
    assert found == [] and whole_reads == 0  # nothing new: nothing printed, nothing read
    ws.close()


def _write(url: str, session: str, texts: list[str]) -> None:
    ws = SqlWorkspace(url)
    for text in texts:
        asyncio.run(ws.offload_context(session, [Msg(role="user", content=text)]))
    ws.close()


def _numbers(seen: list[str]) -> list[tuple[str, str]]:
    """(line number, text) of each message watch printed."""
    found = []
    for line in seen:
        if " context.jsonl line " in line:
            number, _, rest = line.split(" context.jsonl line ")[1].partition(" ")
            if rest.startswith("["):  # (a message's line, not an event naming the file)
                found.append((number, rest.removeprefix("[user] ").strip()))
    return found


@pytest.mark.slow
def test_watch_follows_a_session_purged_and_written_again(db_url: str) -> None:
    """As on a folder: a session purged while watch runs and written again from its first
    line is printed, each message under its number in the new log."""
    _write(db_url, "p1", [f"old message {n}" for n in range(10)])
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    watch = start_watch("--workdir", db_url, env=env)
    try:
        out, err = pipe_lines(watch.stdout), pipe_lines(watch.stderr)
        seen_err: list[str] = []
        wait_for_line(err, "watching all sessions", seen_err)
        purge = subprocess.run(
            [sys.executable, "-m", "ctxoffload", "--workdir", db_url, "purge", "p1"],
            capture_output=True,
            text=True,
            timeout=PATIENCE,
            env=env,
        )
        assert purge.returncode == 0, purge.stderr
        _write(db_url, "p1", [f"new message {n}" for n in range(3)])
        seen: list[str] = []
        wait_for_line(out, "new message 2", seen)
        assert "Traceback" not in end_watch(watch, err, seen_err)
    finally:
        stop_watch(watch)
    assert _numbers(seen) == [
        ("1", "new message 0"),
        ("2", "new message 1"),
        ("3", "new message 2"),
    ]


def test_a_session_purged_and_written_again_between_two_looks_is_read_from_its_start(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    _write(url, "p1", [f"old message {n}" for n in range(10)])
    ws = SqlWorkspace(url)
    result = ToolResultBlock(id="c1", name="probe", output="x")
    asyncio.run(ws.offload_tool_result("p1", result))
    follower = StoreFollower("", None, False, store=ws)
    asyncio.run(follower.start_store(from_start=True))
    announced = "new file sqlite:///"  # a tool result, as watch says it is new
    assert any(announced in line for line in asyncio.run(follower.poll_store()))
    asyncio.run(ws.purge_session("p1"))
    # Longer than before, and its tool result named as before.
    _write(url, "p1", [f"new message {n}" for n in range(12)])
    asyncio.run(ws.offload_tool_result("p1", result))
    found = asyncio.run(follower.poll_store())
    assert _numbers(found) == [(str(n + 1), f"new message {n}") for n in range(12)]
    assert [line for line in found if announced in line and "tool_result-c1.txt" in line], found
    ws.close()


@pytest.mark.slow
@pytest.mark.parametrize("session", ["../x", "missing"])
def test_watch_refuses_a_hostile_or_missing_session_in_a_database(
    tmp_path: Path, session: str
) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    asyncio.run(SqlWorkspace(url).offload_context("live", [Msg(role="user", content="x")]))
    result = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "watch", session, "--workdir", url],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr


def test_watch_help_says_how_each_database_is_looked_at() -> None:
    """SQLite is polled, PostgreSQL LISTENs (docs/guides/database.md says the same)."""
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "watch", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        check=True,
    )
    said = " ".join(done.stdout.split())
    assert "SQLite is looked at every 0.5 s" in said
    assert "PostgreSQL as soon as a write's NOTIFY arrives (watch LISTENs)" in said
    assert "polled every half second" not in said
