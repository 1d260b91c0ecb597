"""The SQL workspace on SQLite, and where it says so on PostgreSQL too (`db_url`: a schema
of its own on a real server): real processes appending to one session, a writer killed
with SIGKILL mid-batch, leases between processes on the database's clock, the schema
migrated forward, and references, URLs and rows put there by hand that try to reach
outside. (What only PostgreSQL has: tests/workspace/test_postgres.py.)

(The behaviour every backend shares runs on it through the workspace fixtures: see
tests/conftest.py and tests/workspace/conftest.py.)"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    ConfigError,
    InvalidReference,
    LocalWorkspace,
    Msg,
    OffloadError,
    SessionBusyError,
    SqlWorkspace,
    ToolResultBlock,
)
from ctxoffload.workspace._sql_schema import SCHEMA_VERSION
from helpers import (
    SQL_TABLES,
    lease_worker_result,
    racing_start,
    start_lease_worker,
    wait_held,
)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'agents.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, url: str) -> str:
    """A SQLite file, then a schema of its own on a real PostgreSQL server."""
    if request.param == "sqlite":
        return url
    return str(request.getfixturevalue("postgres").new_schema())


# A process that appends BATCHES batches of SIZE messages to session "shared", each message
# tagged with its writer and batch, and prints "started" after its first batch.
APPENDER = textwrap.dedent(
    """
    import asyncio, os, sys
    from ctxoffload import Msg, SqlWorkspace

    url, tag, batches, size, pad = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])

    async def main():
        ws = SqlWorkspace(url)
        for b in range(batches):
            msgs = [
                Msg(role="user", content=f"{tag} {b} {i} " + "x" * pad) for i in range(size)
            ]
            await ws.offload_context("shared", msgs)
            if b == 0:
                print("started", flush=True)
        print("done", flush=True)

    asyncio.run(main())
    """
)


def start_appender(
    url: str, tag: str, batches: int, size: int, pad: int = 0
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", APPENDER, url, tag, str(batches), str(size), str(pad)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def batches_of(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[int]]:
    """(writer, batch) -> the line numbers of its messages, from `read_context` rows."""
    found: dict[tuple[str, str], list[int]] = {}
    for line, row in enumerate(rows, 1):
        tag, batch, _ = row["content"].split(" ", 2)
        found.setdefault((tag, batch), []).append(line)
    return found


# -- many writers -----------------------------------------------------------------------------


@pytest.mark.slow
def test_two_processes_appending_to_one_session_lose_no_line(db_url: str) -> None:
    writers = [start_appender(db_url, tag, 60, 3) for tag in ("a", "b")]
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        assert out.splitlines()[-1] == "done"
    ws = SqlWorkspace(db_url)
    rows = asyncio.run(ws.read_context("shared"))
    assert len(rows) == 2 * 60 * 3
    found = batches_of(rows)
    assert len(found) == 120
    # Each batch's lines are consecutive, whatever the other process appended meanwhile.
    for lines in found.values():
        assert lines == list(range(lines[0], lines[0] + 3))
    events = asyncio.run(ws.read_events("shared"))
    spans = sorted(tuple(e["lines"]) for e in events if e["kind"] == "context")
    assert spans == [(n, n + 2) for n in range(1, 361, 3)]


async def test_tasks_appending_at_once_get_consecutive_spans(db_url: str) -> None:
    ws = SqlWorkspace(db_url)
    refs = await asyncio.gather(
        *(
            ws.offload_context("s", [Msg(role="user", content=f"{t} {i}") for i in range(4)])
            for t in range(40)
        )
    )
    spans = sorted((r.first_line, r.last_line) for r in refs)
    assert spans == [(n, n + 3) for n in range(1, 161, 4)]
    for ref in refs:
        got = await ws.read_lines(ref, ref.first_line, ref.last_line)
        assert len({json.loads(line)["content"].split()[0] for line in got.splitlines()}) == 1


@pytest.mark.slow
def test_a_writer_killed_mid_batch_leaves_no_part_of_it(db_url: str) -> None:
    # Batches of 400 messages of 2 KB: each a transaction of ~800 KB, long enough for the kill
    # to land inside one; whatever it cuts is absent, not half there.
    writer = start_appender(db_url, "k", 1000, 400, 2000)
    assert writer.stdout is not None
    assert writer.stdout.readline() == "started\n"
    time.sleep(0.3)
    writer.send_signal(signal.SIGKILL)
    writer.communicate()
    ws = SqlWorkspace(db_url)
    rows = asyncio.run(ws.read_context("shared"))
    found = batches_of(rows)
    assert found and all(len(lines) == 400 for lines in found.values())
    assert sorted(int(batch) for _, batch in found) == list(range(len(found)))
    # The next writer goes on at the next line: no lock or half batch left behind.
    ref = asyncio.run(ws.offload_context("shared", [Msg(role="user", content="k next 0")]))
    assert ref.first_line == len(rows) + 1


async def test_a_write_waits_for_the_lock_then_fails_clearly_and_writes_nothing(
    url: str, tmp_path: Path
) -> None:
    ws = SqlWorkspace(url, timeout=0.2)
    await ws.offload_context("s", [Msg(role="user", content="before")])
    other = sqlite3.connect(tmp_path / "agents.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's write in progress
    try:
        with pytest.raises(OffloadError, match=r"agents\.db refused the operation"):
            await ws.offload_context("s", [Msg(role="user", content="blocked")])
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert [r["content"] for r in await ws.read_context("s")] == ["before"]


async def test_a_repeated_message_is_not_written_again_by_another_object(db_url: str) -> None:
    # The message keys are rows: a second workspace object (another replica) finds them.
    msgs = [Msg(role="user", content="a", id="m1"), Msg(role="user", content="b", id="m2")]
    await SqlWorkspace(db_url).offload_context("s", msgs)
    again = await SqlWorkspace(db_url).offload_context(
        "s", [*msgs, Msg(role="user", content="c", id="m3")]
    )
    assert (again.first_line, again.last_line) == (1, 3)
    assert [r["id"] for r in await SqlWorkspace(db_url).read_context("s")] == ["m1", "m2", "m3"]


# -- leases -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_process_holding_the_lease_keeps_others_out_until_it_is_killed(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = db_url
    holder = start_lease_worker("hold", url, "s")
    try:
        held = wait_held(holder)
        assert held["held"] is True
        taker = lease_worker_result(start_lease_worker("take", url, "s"))
        assert taker["outcome"] == "busy"
        assert f"pid {holder.pid}" in taker["message"]
        assert "a row of the leases table" in taker["message"]
        assert "by the store's clock" in taker["message"]
    finally:
        holder.kill()
        holder.communicate()
    # Its process has ended: the lease is free now, not after its time to live.
    with caplog.at_level(logging.INFO, logger="ctxoffload"):
        lease = asyncio.run(_take_and_release(url))
    assert lease["agent"] == "next"
    assert any(f"pid {holder.pid}) has ended" in r.getMessage() for r in caplog.records)


async def _take_and_release(url: str) -> dict[str, Any]:
    lease = await SqlWorkspace(url).acquire_lease("s", agent="next")
    await lease.release()
    return lease.holder


@pytest.mark.slow
def test_two_agents_racing_for_one_session_one_writes(db_url: str, tmp_path: Path) -> None:
    at = racing_start(tmp_path, 2)
    racers = [start_lease_worker("agent", db_url, "race", "raise", at) for _ in range(2)]
    outcomes = [lease_worker_result(p) for p in racers]
    assert sorted(o["outcome"] for o in outcomes) == ["busy", "ok"], outcomes
    winner = next(o for o in outcomes if o["outcome"] == "ok")
    events = asyncio.run(SqlWorkspace(db_url).read_events("race"))
    assert {e["writer"]["pid"] for e in events} == {winner["pid"]}


def _plant_lease(path: Path, expires_in: float, host: str) -> None:
    """A lease row of a holder on another machine, expiring `expires_in` seconds from the
    database's now (negative: expired)."""
    holder = {"token": "t" * 32, "pid": 4242, "host": host, "agent": "remote", "started": "x"}
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute(
            "INSERT OR REPLACE INTO leases VALUES "
            "('s', ?, ?, (julianday('now') - 2440587.5) * 86400.0 + ?)",
            (json.dumps(holder), holder["token"], expires_in),
        )
    db.close()


@pytest.mark.slow
async def test_a_lease_is_judged_on_the_database_clock(
    url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ws = SqlWorkspace(url)
    await ws.initialize()
    other_host = socket.gethostname() + "-elsewhere"
    _plant_lease(tmp_path / "agents.db", 30, other_host)
    with pytest.raises(SessionBusyError, match="agent 'remote'") as busy:
        await ws.acquire_lease("s")
    assert busy.value.holder["host"] == other_host
    _plant_lease(tmp_path / "agents.db", -1, other_host)
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        lease = await ws.acquire_lease("s", agent="me")
    assert any("expired without being renewed" in r.getMessage() for r in caplog.records)
    with pytest.raises(SessionBusyError, match="agent 'me'"):
        await SqlWorkspace(url).acquire_lease("s")
    await lease.release()
    await (await SqlWorkspace(url).acquire_lease("s")).release()


async def test_a_lease_is_renewed_on_the_database_clock(url: str, tmp_path: Path) -> None:
    ws = SqlWorkspace(url)
    lease = await ws.acquire_lease("s", ttl=0.3)

    def expires() -> float:
        with sqlite3.connect(tmp_path / "agents.db") as db:
            value = db.execute("SELECT expires FROM leases").fetchone()[0]
        db.close()
        return float(value)

    first = expires()
    while expires() == first:  # renewed every 0.1 s
        await asyncio.sleep(0.05)
    assert lease.held
    await lease.release()


# -- the schema ---------------------------------------------------------------------------------


async def test_the_tables_are_created_versioned_and_a_newer_schema_is_refused(
    url: str, tmp_path: Path
) -> None:
    await SqlWorkspace(url).initialize()
    path = tmp_path / "agents.db"
    with sqlite3.connect(path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        version = db.execute("SELECT version FROM schema_version").fetchall()
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    db.close()
    assert tables == SQL_TABLES
    assert version == [(SCHEMA_VERSION,)] and mode == "wal"
    await SqlWorkspace(url).initialize()  # opened again: nothing changes
    with sqlite3.connect(path, isolation_level=None) as db:
        assert db.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        db.execute("UPDATE schema_version SET version = 99")
    db.close()
    with pytest.raises(ConfigError, match="schema version 99, newer than"):
        await SqlWorkspace(url).initialize()


async def test_a_database_of_an_older_version_is_migrated_forward(url: str, tmp_path: Path) -> None:
    # Version 0: the file of another program, holding a table of its own.
    with sqlite3.connect(tmp_path / "agents.db") as db:
        db.execute("CREATE TABLE notes (text TEXT)")
        db.execute("INSERT INTO notes VALUES ('kept')")
    db.close()
    ws = SqlWorkspace(url)
    await ws.offload_context("s", [Msg(role="user", content="hi")])
    assert [r["content"] for r in await ws.read_context("s")] == ["hi"]
    with sqlite3.connect(tmp_path / "agents.db") as db:
        assert db.execute("SELECT text FROM notes").fetchall() == [("kept",)]
    db.close()


@pytest.mark.parametrize("table", ["sessions", "leases", "data_v2", "files (a view)"])
async def test_a_database_whose_tables_clash_is_refused_unchanged(
    url: str, tmp_path: Path, table: str
) -> None:
    # Another program's file, holding a table (or a view) of a name ctxoffload's take.
    path = tmp_path / "agents.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE theirs (name TEXT)")
        db.execute("INSERT INTO theirs VALUES ('theirs')")
        if table.endswith("(a view)"):
            table = table.split()[0]
            db.execute(f"CREATE VIEW {table} AS SELECT name FROM theirs")
        else:
            db.execute(f"CREATE TABLE {table} (name TEXT)")
    db.close()
    before = path.read_bytes()
    ws = SqlWorkspace(url)
    with pytest.raises(ConfigError, match=f"table {table!r} of another program"):
        await ws.offload_context("s", [Msg(role="user", content="hi")])
    ws.close()
    # Refused before anything changed: not even its journal mode (WAL) was switched.
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agents.db"]


# -- URLs, references and rows that reach outside -------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "sqlite://",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite://host/x.db",
        "sqlite:///x.db?mode=ro",
        "sqlite:///folder/",
        "mysql://user:pw@host/x",
        "x.db",
    ],
)
def test_a_url_that_names_no_sqlite_file_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError):
        SqlWorkspace(bad)


def test_a_relative_url_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ws = SqlWorkspace("sqlite:///agents.db")
    assert ws.url == f"sqlite:///{tmp_path}/agents.db"
    assert not (tmp_path / "agents.db").exists()  # opened on first use only


async def test_a_reference_outside_the_workspace_is_refused(url: str, tmp_path: Path) -> None:
    ws = SqlWorkspace(url)
    ref = await ws.offload_tool_result("s", ToolResultBlock(id="c", output="secret"))
    assert await ws.read_reference(ref) == b"secret"
    for bad in [
        f"sqlite:///{tmp_path}/other.db/sessions/s/tool_result-c.txt",
        f"{url}/sessions/../s/tool_result-c.txt",
        f"{url}/sessions/s/../../etc/passwd",
        f"{url}/sessions/s/.hidden",
        f"{url}/data/../sessions/s/tool_result-c.txt",
        "/etc/passwd",
        "sessions/s",
    ]:
        with pytest.raises(InvalidReference):
            await ws.read_reference(bad)
    # A key relative to the workspace is accepted, as in a bucket.
    assert await ws.read_reference("sessions/s/tool_result-c.txt") == b"secret"


async def test_isolated_sessions_refuse_each_others_rows(db_url: str) -> None:
    from ctxoffload.workspace import writing_as

    ws = SqlWorkspace(db_url, isolate_sessions=True)
    theirs = await ws.offload_tool_result("b", ToolResultBlock(id="c", output="b's"))
    with writing_as("reader", session="a"), pytest.raises(InvalidReference):
        await ws.read_reference(theirs)


async def test_download_writes_the_on_disk_layout_line_for_line(url: str, tmp_path: Path) -> None:
    ws = SqlWorkspace(url)
    msgs = [Msg(role="user", content=f"m{i}") for i in range(5)]
    span = await ws.offload_context("s", msgs)
    tool = await ws.offload_tool_result("s", ToolResultBlock(id="c", output="a\nb\n"))
    image = await ws.store_bytes(b"\x89PNG...", "image/png")
    await ws.write_state("s", {"messages": []})
    copy = tmp_path / "copy"
    assert await ws.download(copy, check=True) == []
    local = LocalWorkspace(copy)
    assert await local.read_context("s") == await ws.read_context("s")
    assert (copy / "sessions/s/context.jsonl").read_bytes() == await ws.read_reference(str(span))
    assert (copy / "sessions/s/tool_result-c.txt").read_bytes() == b"a\nb\n"
    assert (copy / "data" / image.rsplit("/", 1)[1]).read_bytes() == b"\x89PNG..."
    assert await local.read_state("s") == {"messages": []}
    assert tool.endswith("/sessions/s/tool_result-c.txt")


async def test_rows_put_there_by_hand_never_write_outside_the_copy(
    url: str, tmp_path: Path
) -> None:
    ws = SqlWorkspace(url)
    await ws.offload_context("s", [Msg(role="user", content="hi")])
    with sqlite3.connect(tmp_path / "agents.db", isolation_level=None) as db:
        for session, name in [
            ("s", "../../escaped"),
            ("s", ".hidden"),
            ("../x", "f"),
            ("s", "a/b"),
        ]:
            db.execute("INSERT INTO files VALUES (?, ?, x'00', 0)", (session, name))
        db.execute("INSERT INTO sessions VALUES ('../x', 0, 0)")
        db.execute(
            "INSERT INTO data (name, sha256, media_type, body, size, stored) "
            "VALUES ('../../data-escaped', 'x', NULL, x'00', 1, 0)"
        )
        db.execute("INSERT INTO lines VALUES ('s', '../log', 1, x'0a')")
    db.close()
    assert await ws.list_sessions() == ["s"]  # the hand-made id is not listed
    copy = tmp_path / "deep" / "copy"
    await ws.download(copy)
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == [
        "agents.db",
        "agents.db-shm",
        "agents.db-wal",
        "deep/copy/sessions/s/context.jsonl",
        "deep/copy/sessions/s/events.jsonl",
    ]


async def test_download_follows_no_link_planted_in_the_folder(url: str, tmp_path: Path) -> None:
    ws = SqlWorkspace(url)
    await ws.offload_tool_result("s", ToolResultBlock(id="c", output="payload"))
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    copy = tmp_path / "copy"
    (copy / "sessions" / "s").mkdir(parents=True)
    os.symlink(victim, copy / "sessions" / "s" / "tool_result-c.txt")
    with pytest.raises(OSError):
        await ws.download(copy)
    assert victim.read_text() == "untouched"


async def test_gc_removes_idle_sessions_and_unnamed_data_rows(url: str, tmp_path: Path) -> None:
    ws = SqlWorkspace(url)
    await ws.offload_tool_result("old", ToolResultBlock(id="c", output="o" * 1000))
    orphan = await ws.store_bytes(b"nobody names me", "text/plain")
    with sqlite3.connect(tmp_path / "agents.db", isolation_level=None) as db:
        db.execute("UPDATE data SET stored = stored - 7200")  # past the grace
    db.close()
    await asyncio.sleep(0.05)
    await ws.offload_context("new", [Msg(role="user", content="fresh")])
    report = await ws.gc(older_than=0.02)
    assert report.sessions_removed == ["old"]
    assert report.data_removed == [orphan.rsplit("/", 1)[1]]
    assert await ws.list_sessions() == ["new"]
    with pytest.raises(InvalidReference):
        await ws.read_reference(orphan)
    counts = Counter(await ws.list_sessions())
    assert counts == {"new": 1}


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://agent:Zq7-pw@host/agents.db",
        "sqlite:///agents.db?password=Zq7-pw",
        "mysql://agent:Zq7-pw@db/agents",
    ],
)
def test_a_refused_database_url_is_named_without_its_password(url: str) -> None:
    with pytest.raises(ConfigError) as refused:
        SqlWorkspace(url)
    assert "***" in str(refused.value) and "Zq7" not in str(refused.value)
