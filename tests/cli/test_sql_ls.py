"""`ctxoffload ls` on a database reads its rows (`SqlWorkspace.session_facts`), writing no
copy in the on-disk layout: its output, text and JSON, warnings and exit status, is byte for
byte what `ls` prints on that copy (`SqlWorkspace.download`, how it read a database before),
for sessions that hold every figure a row shows, hand-written odd rows included, on SQLite
and on a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace, Msg, SqlWorkspace, ToolResultBlock


def event(kind: str, **fields: Any) -> bytes:
    return json.dumps({"kind": kind, **fields}).encode() + b"\n"


async def fill(ws: Any) -> None:
    """Sessions with each figure of a row, and rows no writer makes (put there by hand)."""
    await ws.offload_tool_result("run-1", ToolResultBlock(id="c1", name="logs", output="x" * 5000))
    await ws.offload_tool_result("run-1", ToolResultBlock(id="c2", name="logs", output="y\n" * 99))
    await ws.offload_context(
        "run-1", [Msg(role="user", content="hello"), Msg(role="user", content="again")]
    )
    files = ws._sql  # the store under the workspace: raw lines, as a hand edit would write them
    await files.append(
        "run-1",
        "events.jsonl",
        [
            event("session_start"),
            event("model_call", step=1),
            event("model_call", step=2),
            event("compression"),
            b"not json\n",
            b"[1, 2]\n",
            b"\n",
        ],
    )
    # A sub-agent's session under run-1, and a fork of it.
    await files.append("sub", "events.jsonl", [event("session_start", parent={"session": "run-1"})])
    await files.append("forked", "events.jsonl", [event("fork", origin={"session": "run-1"})])
    # Steps from replay, then from state.json alone.
    await files.append("replayed", "events.jsonl", [event("replay", model_calls=7)])
    await ws.write_state("stateful", {"session_id": "stateful", "steps": 4, "messages": []})
    # A context log whose lines end oddly: a bare \r, \r\n, and a last line without newline.
    await files.append("odd", "context.jsonl", [b'{"a": 1}\r', b'{"b": 2}\r\n', b'{"c": 3}'])
    await files.append("odd", "events.jsonl", [b'{"kind": "model_call"}'])  # torn: skipped
    # Names no copy writes (not of the layout): left out of sizes, and a session holding
    # nothing else is not listed at all.
    await files.put("odd", ".hidden", b"z" * 1000)
    await files.put("only-hidden", ".hidden", b"z")
    # Non-UTF-8 bytes in a tool result and in an event line.
    await files.put("bytes", "tool_result-bin.txt", bytes(range(256)) * 4)
    await files.append("bytes", "events.jsonl", [b"\xff\xfe\n", event("compression")])


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        found = f"sqlite:///{tmp_path / 'agents.db'}"
    else:
        found = SqlWorkspace(request.getfixturevalue("postgres").new_database()).url
    asyncio.run(fill(SqlWorkspace(found)))
    return found


def copy_of(url: str, into: Path) -> Path:
    """The database in the on-disk layout, as `ls` read it before (`download`)."""
    asyncio.run(SqlWorkspace(url).download(into, data=False))
    return into


def test_ls_on_the_database_prints_what_it_printed_on_a_copy(
    cli: Callable[..., Any], url: str, tmp_path: Path
) -> None:
    copy = copy_of(url, tmp_path / "copy")
    for flags in ((), ("--json",)):
        rows = cli("ls", *flags, "--workdir", url)
        on_copy = cli("ls", *flags, "--workdir", copy)
        assert rows.out == on_copy.out, flags
        assert rows.err == on_copy.err.replace(str(copy), url), flags
        assert rows.code == on_copy.code == 0
    listed = {row["session"]: row for row in json.loads(cli("ls", "--json", "--workdir", url).out)}
    # Every figure is there: what this test checks is not two empty tables.
    assert sorted(listed) == ["bytes", "forked", "odd", "replayed", "run-1", "stateful", "sub"]
    assert listed["run-1"]["steps"] == 2
    assert listed["run-1"]["compressions"] == 1
    assert listed["run-1"]["message_lines"] == 2
    assert listed["run-1"]["tool_results"] == 2
    assert listed["sub"]["parent"] == "run-1" and listed["sub"]["depth"] == 1
    assert listed["forked"]["forked_from"] == "run-1"
    assert listed["replayed"]["steps"] == 7
    assert listed["stateful"]["steps"] == 4
    assert listed["odd"]["message_lines"] == 1 and listed["odd"]["steps"] is None
    assert listed["odd"]["bytes"] == len(b'{"a": 1}\r{"b": 2}\r\n{"c": 3}{"kind": "model_call"}')
    assert listed["bytes"]["bytes"] > 1024 and listed["bytes"]["compressions"] == 1
    assert "not valid JSON" in cli("ls", "--workdir", url).err


def test_ls_on_the_database_writes_no_copy(
    cli: Callable[..., Any], url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Temporary folders go to a folder of the test's own: ls leaves it empty.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert cli("ls", "--workdir", url).code == 0
    assert os.listdir(scratch) == []
    assert cli("show", "stateful", "--workdir", url).code == 0  # a copy, removed after
    assert os.listdir(scratch) == []


def test_ls_on_a_database_and_on_a_folder_agree_but_for_the_time(
    cli: Callable[..., Any], url: str, tmp_path: Path
) -> None:
    """The same writes to a folder and to a database list the same figures (the times are
    each workspace's own, and so are the sizes: a reference names the workspace it is in)."""

    async def same(ws: Any) -> None:
        await ws.offload_tool_result("a", ToolResultBlock(id="c1", name="t", output="x" * 300))
        await ws.offload_context("a", [Msg(role="user", content="one")])
        await ws.write_state("b", {"session_id": "b", "steps": 9, "messages": []})

    folder = tmp_path / "ws"
    asyncio.run(same(LocalWorkspace(folder, fsync=False)))
    database = f"sqlite:///{tmp_path / 'same.db'}"
    asyncio.run(same(SqlWorkspace(database)))

    def figures(where: Any) -> list[dict[str, Any]]:
        rows = json.loads(cli("ls", "--json", "--workdir", where).out)
        return sorted(
            ({**r, "last_activity": None, "bytes": None} for r in rows), key=lambda r: r["session"]
        )

    assert figures(database) == figures(folder)
    assert [r["session"] for r in figures(folder)] == ["a", "b"]


def test_ls_on_an_empty_database_names_it(cli: Callable[..., Any], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    asyncio.run(SqlWorkspace(url).initialize())
    result = cli("ls", "--workdir", url)
    assert result.code == 0, result.err
    assert result.out == f"no sessions in {SqlWorkspace(url).url}\n"
    assert cli("ls", "--json", "--workdir", url).out.strip() == "[]"


def test_show_without_a_session_copies_the_newest_one_only(
    cli: Callable[..., Any], url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`show` picks the newest session from the rows (as on the copy: the latest write, of
    two as recent the greater id) and copies that one alone."""
    asyncio.run(SqlWorkspace(url).write_state("zz-last", {"session_id": "zz-last", "steps": 1}))
    copies: list[str | None] = []
    real = SqlWorkspace.download

    async def watched(self: SqlWorkspace, folder: Any, **options: Any) -> list[str]:
        copies.append(options.get("session"))
        return await real(self, folder, **options)

    monkeypatch.setattr(SqlWorkspace, "download", watched)
    result = cli("show", "--workdir", url)
    assert result.code == 0, result.err
    assert copies == ["zz-last"]
    assert "the newest session of 8 is zz-last" in result.err
    monkeypatch.setattr(SqlWorkspace, "download", real)
    # The same choice and the same words as on a copy of the whole database.
    copy = copy_of(url, tmp_path / "copy")
    on_copy = cli("show", "--workdir", copy)
    assert on_copy.err == result.err
    assert on_copy.out.replace(str(copy), SqlWorkspace(url).url) == result.out


def test_show_on_an_empty_database_says_so(cli: Callable[..., Any], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    asyncio.run(SqlWorkspace(url).initialize())
    result = cli("show", "--workdir", url)
    assert result.code == 2
    assert f"no session in {SqlWorkspace(url).url!r} yet" in result.err


def test_rows_with_hostile_ids_and_names_are_left_out_as_a_copy_leaves_them(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    """Rows put into the tables by hand with a session id or a name that is no part of the
    layout (`../x`, an absolute path, a slash) are not listed nor counted, as `download`
    does not write them, and `ls` still writes nothing anywhere."""
    import sqlite3

    url = f"sqlite:///{tmp_path / 'agents.db'}"
    asyncio.run(SqlWorkspace(url).write_state("ok", {"session_id": "ok", "steps": 2}))
    with sqlite3.connect(tmp_path / "agents.db") as db:
        for session, name in (
            ("../evil", "state.json"),
            ("/abs", "state.json"),
            ("ok", "../../escape.txt"),
            ("ok", "sub/dir.txt"),
            ("ok", "/etc/passwd"),
        ):
            db.execute("INSERT INTO files VALUES (?, ?, ?, 0)", (session, name, b"x" * 77))
            if session != "ok":
                db.execute("INSERT INTO lines VALUES (?, 'events.jsonl', 1, ?)", (session, b"{}\n"))
        db.execute("INSERT INTO lines VALUES ('ok', '../log', 1, ?)", (b"\n" * 5,))
    before = sorted(p.name for p in tmp_path.iterdir())
    rows = json.loads(cli("ls", "--json", "--workdir", url).out)
    copy = copy_of(url, tmp_path / "copy")
    assert cli("ls", "--json", "--workdir", copy).out == cli("ls", "--json", "--workdir", url).out
    assert [r["session"] for r in rows] == ["ok"]
    assert rows[0]["steps"] == 2 and rows[0]["message_lines"] == 0
    assert rows[0]["bytes"] == os.path.getsize(copy / "sessions" / "ok" / "state.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == [*before, "copy"]
