"""The `ctxoffload` commands on a database (`--workdir sqlite:///agents.db`, and
`postgresql://...` on a real server): the same sessions written to a folder and to a
database read the same, line for line, through ls, show, cat, grep, stats, verify, gc and
fork; a command that reads never creates or changes a database it was pointed at by
mistake."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace, Msg, SqlWorkspace, TextBlock, ToolResultBlock
from helpers import image_block

PNG = b"\x89PNG\r\n\x1a\n" + b"a tiny picture" * 20
LOG = "\n".join(
    f"{i:05d} ERROR order_id=ORD-58213 disk quota exceeded" if i == 1500 else f"{i:05d} INFO ok"
    for i in range(1, 2001)
)
# One set of messages for both workspaces: their ids and timestamps are the same lines.
MESSAGES = [
    [Msg(role="user", content="Find the failing order")],
    [Msg(role="assistant", content='print("FAILURE: quoted needle")')],
    [Msg(role="user", content=[TextBlock(text="look at this"), image_block(PNG)])],
]


async def fill(ws: Any) -> None:
    for session in ("run-1", "run-2"):
        await ws.offload_tool_result(
            session, ToolResultBlock(id="call_1", name="fetch_logs", output=LOG)
        )
    for batch in MESSAGES:
        await ws.offload_context("run-1", batch)
    await ws.write_state("run-1", {"session_id": "run-1", "steps": 3, "messages": []})


@pytest.fixture(params=["sqlite", "postgres"])
def both(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    """The same sessions in a database (its URL: a SQLite file, a PostgreSQL database of
    its own, spelled as its references spell it) and in a folder."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'agents.db'}"
    else:
        url = SqlWorkspace(request.getfixturevalue("postgres").new_database()).url
    asyncio.run(fill(SqlWorkspace(url)))
    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    return url, tmp_path / "ws"


def test_ls_lists_the_sessions_of_the_database(cli: Callable[..., Any], both: Any) -> None:
    url, _ = both
    result = cli("ls", "--workdir", url)
    assert result.code == 0, result.err
    assert [line.split()[0] for line in result.out.splitlines()[1:]] == ["run-1", "run-2"]


def test_cat_prints_the_context_log_as_the_folder_holds_it(
    cli: Callable[..., Any], both: Any
) -> None:
    url, folder = both
    from_db = cli("cat", "--raw", "sessions/run-1/context.jsonl", "--workdir", url)
    from_folder = cli("cat", "--raw", "sessions/run-1/context.jsonl", "--workdir", folder)
    assert from_db.code == from_folder.code == 0, from_db.err
    # Line for line the same bytes; a data/ reference names the workspace it is in.
    assert from_db.out == from_folder.out.replace(str(folder), url)
    assert from_db.out.count("\n") == 3
    # The messages as people read them, and a tool result by its full reference alone.
    assert cli("cat", "sessions/run-1/context.jsonl", "--workdir", url).out == (
        cli("cat", "sessions/run-1/context.jsonl", "--workdir", folder).out.replace(
            str(folder), url
        )
    )
    alone = cli("cat", "--lines", "1500:1500", f"{url}/sessions/run-2/tool_result-call_1.txt")
    assert alone.code == 0, alone.err
    assert "01500 ERROR order_id=ORD-58213" in alone.out


def test_grep_finds_a_line_and_names_it_in_the_database(cli: Callable[..., Any], both: Any) -> None:
    url, folder = both
    result = cli("grep", "ORD-58213", "--workdir", url)
    assert result.code == 0, result.err
    assert sorted(result.out.splitlines()) == [
        f"{url}/sessions/{s}/tool_result-call_1.txt:1500:01500 ERROR order_id=ORD-58213 disk "
        "quota exceeded"
        for s in ("run-1", "run-2")
    ]
    in_folder = cli("grep", "quoted needle", "--workdir", folder).out
    assert cli("grep", "quoted needle", "--workdir", url).out == in_folder.replace(str(folder), url)


def test_show_stats_and_verify_read_the_database(cli: Callable[..., Any], both: Any) -> None:
    url, _ = both
    show = cli("show", "run-1", "--workdir", url)
    assert show.code == 0, show.err
    # The first lines name the database's session; the lines after name its files in it.
    folder = f"{url}/sessions/run-1"
    assert show.out.startswith((f"session run-1 ({folder})\n", f"session run-1\n  in {folder}\n"))
    assert " into context.jsonl line 1\n" in show.out, show.out
    assert cli("stats", "--workdir", url).code == 0
    verify = cli("verify", "--workdir", url)
    assert verify.code == 0, verify.out + verify.err
    assert "ok:" in verify.out


def test_gc_acts_on_the_database(cli: Callable[..., Any], both: Any) -> None:
    url, _ = both
    dry = cli("gc", "--max-bytes", "0", "--dry-run", "--workdir", url)
    assert dry.code == 0, dry.err
    assert asyncio.run(SqlWorkspace(url).list_sessions()) == ["run-1", "run-2"]
    done = cli("gc", "--max-bytes", "0", "--workdir", url)
    assert done.code == 0, done.err
    assert asyncio.run(SqlWorkspace(url).list_sessions()) == []


def test_fork_starts_a_session_in_the_database(cli: Callable[..., Any], both: Any) -> None:
    url, folder = both
    result = cli("fork", "run-1", "--as", "run-1b", "--workdir", url)
    assert result.code == 0, result.err
    assert f"{url}/sessions/run-1b/state.json" in result.out
    in_folder = cli("fork", "run-1", "--as", "run-1b", "--workdir", folder)
    assert result.out == in_folder.out.replace(str(folder), url)
    assert asyncio.run(SqlWorkspace(url).list_sessions()) == ["run-1", "run-1b", "run-2"]


def test_a_missing_or_foreign_database_is_refused_and_left_as_it_was(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    missing = cli("ls", "--workdir", f"sqlite:///{tmp_path / 'typo.db'}")
    assert missing.code == 2 and "no database at" in missing.err
    assert not (tmp_path / "typo.db").exists()
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    db.close()
    before = hashlib.sha256(other.read_bytes()).hexdigest()
    foreign = cli("ls", "--workdir", f"sqlite:///{other}")
    assert foreign.code == 2 and "is no ctxoffload workspace" in foreign.err
    assert hashlib.sha256(other.read_bytes()).hexdigest() == before
    (tmp_path / "text.db").write_text("not a database")
    assert cli("ls", "--workdir", f"sqlite:///{tmp_path / 'text.db'}").code == 2


@pytest.mark.parametrize("session", ["../run-1", "..", "-rf"])
def test_a_hostile_session_id_is_refused(cli: Callable[..., Any], both: Any, session: str) -> None:
    url, _ = both
    result = cli("show", "--workdir", url, "--", session)
    assert result.code == 2


def test_a_postgres_database_that_is_missing_empty_or_out_of_reach_is_one_line(
    cli: Callable[..., Any], postgres: Any
) -> None:
    empty = postgres.new_database()
    foreign = cli("ls", "--workdir", empty)
    assert foreign.code == 2 and "holds no ctxoffload workspace" in foreign.err
    assert foreign.err.count("\n") == 1
    # Nothing was created in it.
    assert asyncio.run(_tables(empty)) == 0
    missing = cli("ls", "--workdir", empty.replace("/d_", "/typo_d_", 1))
    assert missing.code == 2 and "does not exist" in missing.err
    assert missing.err.count("\n") == 1
    down = cli("ls", "--workdir", "postgresql://postgres@/postgres?host=/no/such/folder")
    assert down.code == 2 and "cannot connect to the database postgresql://" in down.err
    assert down.err.count("\n") == 1
    bad = cli("ls", "--workdir", "postgresql://postgres:hunter2@/?host=/x")
    assert bad.code == 2 and "names no database" in bad.err and "hunter2" not in bad.err


async def _tables(url: str) -> int:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as db:
        cursor = await db.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        row = await cursor.fetchone()
    return int(row[0]) if row else -1
