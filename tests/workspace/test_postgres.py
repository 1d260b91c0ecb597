"""The SQL workspace on a real PostgreSQL server (the `postgres` fixture: tests/pg_server.py),
for what only PostgreSQL has: the server restarted under a writer, a lock per session, the
server's clock, schemas side by side, connection URLs with passwords and hostile ones, and
psycopg missing. (The behaviour every backend shares runs on it through the workspace
fixtures; processes appending, a writer killed mid-batch and leases between processes run
on it in tests/workspace/test_sql.py.)"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    ConfigError,
    InvalidReference,
    Msg,
    OffloadError,
    SessionBusyError,
    SqlWorkspace,
    ToolResultBlock,
)
from ctxoffload.workspace._sql_schema import SCHEMA_VERSION
from helpers import SQL_TABLES, install_hint
from pg_server import PostgresServer

psycopg = pytest.importorskip("psycopg", reason=f"no psycopg: {install_hint('sql')}")


@pytest.fixture
def url(postgres: PostgresServer) -> str:
    """A schema of its own on the test session's server."""
    return postgres.new_schema()


def sql(url: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one statement in the workspace's schema, as another client would; its rows."""
    with psycopg.connect(url, autocommit=True) as db:
        cursor = db.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


# -- the schema -----------------------------------------------------------------------------


async def test_the_tables_are_created_versioned_and_a_newer_schema_is_refused(url: str) -> None:
    await SqlWorkspace(url).initialize()
    columns = dict(
        sql(
            url,
            "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema()",
        )
    )
    assert {name.split(".")[0] for name in columns} == SQL_TABLES
    # Bytes as bytea; times as 53-bit floats (PostgreSQL's REAL would keep minutes only).
    assert columns["lines.body"] == columns["data.body"] == "bytea"
    assert columns["leases.expires"] == columns["sessions.updated"] == "double precision"
    assert sql(url, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    await SqlWorkspace(url).initialize()  # opened again: nothing changes
    assert sql(url, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    sql(url, "UPDATE schema_version SET version = 99")
    with pytest.raises(ConfigError, match="schema version 99, newer than"):
        await SqlWorkspace(url).initialize()


async def test_a_schema_of_another_program_is_migrated_forward_and_kept(url: str) -> None:
    sql(url, "CREATE TABLE notes (text TEXT)")
    sql(url, "INSERT INTO notes VALUES ('kept')")
    ws = SqlWorkspace(url)
    await ws.offload_context("s", [Msg(role="user", content="hi")])
    assert [r["content"] for r in await ws.read_context("s")] == ["hi"]
    assert sql(url, "SELECT text FROM notes") == [("kept",)]


async def test_a_schema_whose_tables_clash_is_refused_and_left_as_it_was(url: str) -> None:
    sql(url, "CREATE TABLE sessions (name TEXT)")
    sql(url, "INSERT INTO sessions VALUES ('theirs')")
    ws = SqlWorkspace(url)
    with pytest.raises(ConfigError, match="table 'sessions' of another program"):
        await ws.offload_context("s", [Msg(role="user", content="hi")])
    ws.close()
    tables = sql(
        url,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()",
    )
    assert tables == [("sessions",)]
    assert sql(url, "SELECT name FROM sessions") == [("theirs",)]


OPENER = textwrap.dedent(
    """
    import asyncio, sys, time
    from ctxoffload import SqlWorkspace

    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
    asyncio.run(SqlWorkspace(sys.argv[1]).initialize())
    print("ok", flush=True)
    """
)


@pytest.mark.slow
def test_processes_opening_a_new_schema_at_once_create_its_tables_once(url: str) -> None:
    at = str(time.time() + 3.0)  # all started (imports done) before any connects
    openers = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, url, at],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for opener in openers:
        out, err = opener.communicate(timeout=120)
        assert (opener.returncode, out) == (0, "ok\n"), err
    assert sql(url, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]


async def test_a_reader_that_may_not_create_refuses_an_empty_schema_and_writes_nothing(
    url: str,
) -> None:
    with pytest.raises(ConfigError, match="holds no ctxoffload workspace"):
        await SqlWorkspace(url, create=False).initialize()
    assert sql(url, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()") == [(0,)]


# -- locks and the server's clock -----------------------------------------------------------


def _hold_session_lock(url: str, session: str) -> Any:
    """Another client in the middle of a write to `session`: its transaction holds the
    session's lock until rolled back."""
    db = psycopg.connect(url)
    db.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ' ' || %s, 0))",
        (f"session {session}",),
    )
    return db


async def test_a_write_waits_for_its_sessions_lock_then_fails_clearly_writing_nothing(
    url: str,
) -> None:
    ws = SqlWorkspace(url, timeout=0.3)
    await ws.offload_context("s", [Msg(role="user", content="before")])
    other = _hold_session_lock(url, "s")
    try:
        with pytest.raises(OffloadError, match=r"refused the operation.*lock timeout") as refused:
            await ws.offload_context("s", [Msg(role="user", content="blocked")])
        assert "\n" not in str(refused.value)
        # Another session's writers do not wait for it.
        await ws.offload_context("t", [Msg(role="user", content="elsewhere")])
    finally:
        other.rollback()
        other.close()
    assert [r["content"] for r in await ws.read_context("s")] == ["before"]
    assert [r["content"] for r in await ws.read_context("t")] == ["elsewhere"]
    await ws.offload_context("s", [Msg(role="user", content="after")])
    assert [r["content"] for r in await ws.read_context("s")] == ["before", "after"]


async def test_schemas_on_one_server_are_workspaces_apart(postgres: PostgresServer) -> None:
    first, second = postgres.new_schema(), postgres.new_schema()
    await SqlWorkspace(first).offload_context("s", [Msg(role="user", content="first's")])
    other = _hold_session_lock(first, "s")
    try:  # a session's lock is its schema's: the same id in another schema does not wait
        ws = SqlWorkspace(second, timeout=5)
        await ws.offload_context("s", [Msg(role="user", content="second's")])
    finally:
        other.rollback()
        other.close()
    assert [r["content"] for r in await ws.read_context("s")] == ["second's"]
    assert [r["content"] for r in await SqlWorkspace(first).read_context("s")] == ["first's"]


def _plant_lease(url: str, expires_in: float, host: str) -> None:
    """A lease row of a holder on another machine, expiring `expires_in` seconds from the
    server's now (negative: expired)."""
    holder = {"token": "t" * 32, "pid": 4242, "host": host, "agent": "remote", "started": "x"}
    sql(
        url,
        "INSERT INTO leases VALUES ('s', %s, %s, extract(epoch from clock_timestamp()) + %s) "
        "ON CONFLICT (session) DO UPDATE SET holder = excluded.holder, "
        "token = excluded.token, expires = excluded.expires",
        json.dumps(holder),
        holder["token"],
        expires_in,
    )


@pytest.mark.slow
async def test_a_lease_is_judged_on_the_server_clock(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    ws = SqlWorkspace(url)
    await ws.initialize()
    other_host = socket.gethostname() + "-elsewhere"
    _plant_lease(url, 30, other_host)
    with pytest.raises(SessionBusyError, match="agent 'remote'") as busy:
        await ws.acquire_lease("s")
    assert busy.value.holder["host"] == other_host
    _plant_lease(url, -1, other_host)
    ((before,),) = sql(url, "SELECT extract(epoch from clock_timestamp())::float8")
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        lease = await ws.acquire_lease("s", agent="me")
    assert any("expired without being renewed" in r.getMessage() for r in caplog.records)
    with pytest.raises(SessionBusyError, match="agent 'me'"):
        await SqlWorkspace(url).acquire_lease("s")
    (expires, now) = sql(
        url, "SELECT expires, extract(epoch from clock_timestamp())::float8 FROM leases"
    )[0]
    # The default ttl, from the server's now when it was taken (between `before` and `now`),
    # however long this machine took in between.
    assert before + 60 - 0.01 <= expires <= now + 60
    await lease.release()
    assert sql(url, "SELECT count(*) FROM leases") == [(0,)]


async def test_a_payload_gc_would_take_is_refreshed_when_used_again(url: str) -> None:
    ws = SqlWorkspace(url)
    old = await ws.store_bytes(b"used long ago", "text/plain")
    orphan = await ws.store_bytes(b"nobody names me", "text/plain")
    sql(url, "UPDATE data SET stored = stored - 7200")  # both past the grace
    # Used again by a new offload: its stamp is refreshed before the line naming it.
    assert await ws.store_bytes(b"used long ago", "text/plain") == old
    await ws.offload_context("new", [Msg(role="user", content=f"see {old}")])
    report = await ws.gc(older_than=3600)
    assert report.data_removed == [orphan.rsplit("/", 1)[1]]
    assert await ws.read_reference(old) == b"used long ago"
    with pytest.raises(InvalidReference):
        await ws.read_reference(orphan)


# -- the server restarted -----------------------------------------------------------------------


async def test_a_server_restart_between_writes_is_survived(
    url: str, postgres: PostgresServer
) -> None:
    ws = SqlWorkspace(url)
    await ws.offload_context("s", [Msg(role="user", content="before")])
    postgres.restart()  # the connection this workspace holds is cut
    # Nothing of the next write had reached the server: it runs once more on a new
    # connection, and is written once.
    ref = await ws.offload_context("s", [Msg(role="user", content="after")])
    assert (ref.first_line, ref.last_line) == (2, 2)
    postgres.restart()
    assert [r["content"] for r in await ws.read_context("s")] == ["before", "after"]


# Appends BATCHES batches of SIZE messages to session "shared", each tagged with its batch;
# prints "ok B" once batch B is acknowledged, "error B <message>" when it is refused.
RESILIENT_APPENDER = textwrap.dedent(
    """
    import asyncio, sys
    from ctxoffload import Msg, OffloadError, SqlWorkspace

    url, batches, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    async def main():
        ws = SqlWorkspace(url, timeout=5)
        for b in range(batches):
            msgs = [Msg(role="user", content=f"w {b} {i} " + "x" * 500) for i in range(size)]
            try:
                await ws.offload_context("shared", msgs)
            except OffloadError as exc:
                print("error", b, str(exc).replace("\\n", "\\\\n"), flush=True)
                await asyncio.sleep(0.05)
            else:
                print("ok", b, flush=True)

    asyncio.run(main())
    """
)


@pytest.mark.slow
def test_a_server_restarted_mid_run_loses_no_acknowledged_batch(
    url: str, postgres: PostgresServer, tmp_path: Path
) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", RESILIENT_APPENDER, url, "300", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    printed: list[str] = []
    for _ in range(3):  # three restarts, each some batches into the run
        for _ in range(20):
            printed.append(writer.stdout.readline())
        postgres.restart()
    # The rest through the same reader: `communicate` reads the pipe itself and would miss
    # what `readline` already took into the reader's buffer.
    with writer:  # the pipes closed at the end
        printed += writer.stdout.read().splitlines(keepends=True)
        err = writer.stderr.read() if writer.stderr else ""
    assert writer.returncode == 0, err
    acknowledged = {int(line.split()[1]) for line in printed if line.startswith("ok ")}
    errors = [line.split(" ", 2)[2] for line in printed if line.startswith("error ")]
    assert len(acknowledged) + len(errors) == 300
    # Each error is one clear line naming the database (a write cut before its commit was
    # run again instead; one cut while committing says its outcome is unknown).
    for message in errors:
        assert "\\n" not in message and "the database postgresql://" in message, message
    ws = SqlWorkspace(url)
    rows = asyncio.run(ws.read_context("shared"))
    found: dict[int, list[int]] = {}
    for line, row in enumerate(rows, 1):
        found.setdefault(int(row["content"].split()[1]), []).append(line)
    # Every acknowledged batch is there, whole and consecutive; nothing is half there.
    assert acknowledged <= set(found)
    for lines in found.values():
        assert lines == list(range(lines[0], lines[0] + 20))
    assert len(rows) == 20 * len(found)
    assert asyncio.run(ws.download(tmp_path / "copy", check=True)) == []  # no line missing


# -- URLs ---------------------------------------------------------------------------------------


async def test_a_password_never_reaches_a_reference_an_event_or_a_message(
    postgres: PostgresServer,
) -> None:
    secret = "s3cret-pw"
    # Trust authentication ignores the password: the URL still carries it.
    url = postgres.new_schema().replace("postgres@", f"postgres:{secret}@", 1)
    ws = SqlWorkspace(url)
    ref = await ws.offload_tool_result("s", ToolResultBlock(id="c", output="hello"))
    span = await ws.offload_context("s", [Msg(role="user", content="hi")])
    events = json.dumps(await ws.read_events("s"))
    shown = [repr(ws), ws.url, ref, str(span), events]
    assert all(secret not in text for text in shown), shown
    assert ref == f"{ws.url}/sessions/s/tool_result-c.txt"
    assert "?" not in ws.url and "&" not in ws.url  # nothing text quoting it would escape
    missing = url.replace("/postgres?", "/no_such_db?", 1)
    with pytest.raises(OffloadError) as refused:
        await SqlWorkspace(missing).initialize()
    assert secret not in str(refused.value)
    assert 'database "no_such_db" does not exist' in str(refused.value)


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("postgresql://u@h/", "names no database"),
        ("postgresql://u@h", "names no database"),
        ("postgresql://u@h/db/sessions/s", "would read as a path"),
        ("postgresql://u@h/db?no_such_option=1", "is not a PostgreSQL URL"),
        ("postgresql://u:p%zzpw@h/db", "is not a PostgreSQL URL"),
        ("postgres://u@h/db\x00x", "NUL"),
        ("mysql://u:pw@h/db", "is no database URL"),
    ],
)
def test_a_url_that_names_no_postgres_database_is_refused_in_one_line(bad: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said) as refused:
        SqlWorkspace(bad)
    message = str(refused.value)
    assert "\n" not in message and "pw" not in message.replace("postgresql", "")


@pytest.mark.parametrize(
    "unreachable",
    [
        "postgresql://postgres@/postgres?host=/no/such/folder",
        "postgresql://u@no-such-host.invalid/db",
        "postgresql://u@/db?hostaddr=not-an-address",
    ],
)
async def test_a_server_out_of_reach_fails_in_one_line(unreachable: str) -> None:
    ws = SqlWorkspace(unreachable, timeout=3)
    with pytest.raises(OffloadError, match="cannot connect to the database postgresql://") as e:
        await ws.initialize()
    assert "\n" not in str(e.value)
    with pytest.raises(OffloadError, match="cannot connect"):
        await ws.offload_context("s", [Msg(role="user", content="kept by the caller")])


async def test_the_spellings_of_a_url_reach_one_workspace(postgres: PostgresServer) -> None:
    url = postgres.new_database()
    await SqlWorkspace(url).offload_context("s", [Msg(role="user", content="hi")])
    folder = url.split("host=")[1]
    database = url.split("/")[3].split("?")[0]
    for spelling in [
        url.replace("postgresql://", "postgres://", 1),
        SqlWorkspace(url).url,  # as references spell it: the socket folder as the host
        f"postgresql:///{database}?host={folder}&user=postgres",
    ]:
        ws = SqlWorkspace(spelling)
        assert ws.url == SqlWorkspace(url).url
        assert [r["content"] for r in await ws.read_context("s")] == ["hi"]


def test_without_psycopg_a_postgres_url_says_what_to_install() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["psycopg"] = None  # not installed
        from ctxoffload import SqlWorkspace
        SqlWorkspace("sqlite:///x.db")  # SQLite needs nothing more
        try:
            SqlWorkspace("postgresql://u@h/db")
        except ImportError as exc:
            print(exc)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == (
        "SqlWorkspace on PostgreSQL needs psycopg 3: pip install 'ctxoffload[sql]'"
    )


def test_importing_ctxoffload_imports_no_driver() -> None:
    code = "import sys, ctxoffload; ctxoffload.SqlWorkspace; print('psycopg' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


# -- following writes (what `ctxoffload watch` waits on) -------------------------------------


@pytest.mark.slow
async def test_a_follower_is_told_of_a_write_committed_in_another_process(url: str) -> None:
    follower = SqlWorkspace(url)
    store = follower._sql  # the store `ctxoffload watch` follows
    assert await store.wait_for_change(0.01) is False  # listening now; nothing written yet
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import asyncio
                from ctxoffload import SqlWorkspace
                asyncio.run(SqlWorkspace({url!r}).record_event("s1", "note", text="hi"))
                """
            ),
        ]
    )
    # Told when the other process commits: no wall-clock bound here, but a follower that
    # was not told would wait out the whole minute and answer False.
    assert await store.wait_for_change(60) is True
    assert writer.wait(60) == 0
    assert [e["kind"] for e in await follower.read_events("s1")] == ["note"]
    # Told once per write: nothing written since, nothing told.
    assert await store.wait_for_change(0.01) is False
    follower.close()


async def test_a_follower_on_sqlite_waits_its_time(tmp_path: Path) -> None:
    store = SqlWorkspace(f"sqlite:///{tmp_path / 'w.db'}")._sql
    assert await store.wait_for_change(0.01) is False
