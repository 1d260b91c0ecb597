"""`ctxoffload export` and `ctxoffload import`: sessions moved between a folder and a database
in the on-disk layout, byte for byte; what they refuse (a session there already, a folder
that is no workspace, planted links, data/ files that lie about their hash); what they keep
(every line, non-UTF-8 and 50 MB ones too, whole batches only)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    LocalWorkspace,
    Msg,
    SqlWorkspace,
    TextBlock,
    ToolResultBlock,
)
from helpers import image_block, snapshot_tree

PNG = b"\x89PNG\r\n\x1a\n" + b"exported picture" * 30
LOG = "\n".join(f"{i:04d} line of the log" for i in range(1, 801))
MESSAGES = [
    [Msg(role="user", content="Find the failing order")],
    [Msg(role="assistant", content="looking"), Msg(role="user", content="go on")],
    [Msg(role="user", content=[TextBlock(text="look at this"), image_block(PNG)])],
]


async def fill(ws: Any) -> None:
    """Two sessions: tool results (one with an image), messages with an image, state."""
    for session in ("run-1", "run-2"):
        await ws.offload_tool_result(
            session, ToolResultBlock(id="call_1", name="fetch_logs", output=LOG)
        )
    await ws.offload_tool_result(
        "run-2",
        ToolResultBlock(id="call_2", name="shot", output=[TextBlock(text="a"), image_block(PNG)]),
    )
    for batch in MESSAGES:
        await ws.offload_context("run-1", batch)
    await ws.write_state("run-1", {"session_id": "run-1", "steps": 3, "messages": []})


def files(root: Path) -> dict[str, bytes]:
    """Every file under `root`, by relative path (folders left out)."""
    return {k: v for k, v in snapshot_tree(root).items() if v is not None}


def events_without(raw: bytes, *fields: str) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in json.loads(line).items() if k not in fields} for line in raw.splitlines()
    ]


def test_export_from_a_database_is_what_the_disk_workspace_holds(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    # The same sessions written by a LocalWorkspace and by a SqlWorkspace; the disk one is
    # moved aside, and the database exported to the folder the disk one was written in.
    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    (tmp_path / "ws").rename(tmp_path / "by-disk")
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    asyncio.run(fill(SqlWorkspace(url)))
    result = cli("export", "--all", tmp_path / "ws", "--workdir", url)
    assert result.code == 0, result.err
    disk, exported = files(tmp_path / "by-disk"), files(tmp_path / "ws")
    assert sorted(exported) == sorted(disk)
    assert "sessions/run-1/context.jsonl.commit" in exported
    assert any(name.startswith("data/") for name in exported)
    for name in disk:
        if name.endswith("events.jsonl"):
            # When and by which process differ; a batch's `bytes` counts the references as
            # the database wrote them (its URL is longer than the folder's path).
            assert events_without(exported[name], "time", "writer", "bytes") == events_without(
                disk[name], "time", "writer", "bytes"
            ), name
        else:
            assert exported[name] == disk[name], name
    assert cli("verify", "--workdir", tmp_path / "ws").code == 0


def test_disk_to_database_to_disk_is_identical_byte_for_byte(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    before = files(tmp_path / "ws")
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    imported = cli("import", tmp_path / "ws", "--workdir", url)
    assert imported.code == 0, imported.err
    assert files(tmp_path / "ws") == before  # the folder read is never changed
    # In the database the references name the database.
    ws = SqlWorkspace(url)
    context = asyncio.run(ws.read_context("run-1"))
    assert url in json.dumps(context) and str(tmp_path / "ws") not in json.dumps(context)
    assert asyncio.run(ws.read_bytes(f"{url}/data/{_data_name(before)}"))[0] == PNG
    ws.close()
    (tmp_path / "ws").rename(tmp_path / "original")
    exported = cli("export", "--all", tmp_path / "ws", "--workdir", url)
    assert exported.code == 0, exported.err
    assert files(tmp_path / "ws") == before


def _data_name(tree: dict[str, bytes]) -> str:
    return next(name for name in tree if name.startswith("data/")).split("/", 1)[1]


def test_import_never_overwrites_a_session_the_database_holds(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    asyncio.run(SqlWorkspace(url).offload_context("run-2", [Msg(role="user", content="mine")]))
    database = (tmp_path / "agents.db").read_bytes()
    result = cli("import", tmp_path / "ws", "--workdir", url)
    assert result.code == 2
    assert "'run-2' exists" in result.err and "never overwrites" in result.err
    assert f"ctxoffload purge run-2 --workdir {url}" in result.err
    # Nothing of any session was written: run-1 comes before run-2 but is checked first.
    ws = SqlWorkspace(url)
    assert asyncio.run(ws.list_sessions()) == ["run-2"]
    assert len(asyncio.run(ws.read_context("run-2"))) == 1
    ws.close()
    del database
    # The others by name go in.
    assert cli("import", tmp_path / "ws", "run-1", "--workdir", url).code == 0
    assert asyncio.run(SqlWorkspace(url).list_sessions()) == ["run-1", "run-2"]


def test_import_into_a_folder_or_a_foreign_database_is_refused(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    to_folder = cli("import", tmp_path / "ws", "--workdir", tmp_path / "other")
    assert to_folder.code == 2 and "ctxoffload export" in to_folder.err
    assert not (tmp_path / "other").exists()
    import sqlite3

    with sqlite3.connect(tmp_path / "foreign.db") as db:
        db.execute("CREATE TABLE t (x)")
    foreign = (tmp_path / "foreign.db").read_bytes()
    result = cli("import", tmp_path / "ws", "--workdir", f"sqlite:///{tmp_path / 'foreign.db'}")
    assert result.code == 2 and "no ctxoffload workspace" in result.err
    assert (tmp_path / "foreign.db").read_bytes() == foreign


def test_import_without_dir_says_dir_is_needed_and_session_is_not(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    result = cli("import", "--workdir", f"sqlite:///{tmp_path / 'agents.db'}")
    assert result.code == 2 and result.out == ""
    assert "import needs DIR" in result.err and "SESSION is optional" in result.err
    assert "required: DIR, SESSION" not in result.err
    assert not (tmp_path / "agents.db").exists()


@pytest.mark.parametrize("session", ["../x", "/abs", "a/b", ".hidden", ""])
def test_hostile_session_ids_are_refused_before_anything_is_written(
    cli: Callable[..., Any], tmp_path: Path, session: str
) -> None:
    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    assert cli("import", tmp_path / "ws", session, "--workdir", url).code == 2
    assert (
        not (tmp_path / "agents.db").exists()
        or asyncio.run(SqlWorkspace(url).list_sessions()) == []
    )
    out = cli("export", session, tmp_path / "out", "--workdir", tmp_path / "ws")
    assert out.code == 2
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "x").exists()


def test_a_session_an_import_began_is_finished_and_a_whole_one_left_as_it_is(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    import sqlite3

    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    assert cli("import", tmp_path / "ws", "--workdir", url).code == 0
    # What an import killed on the way by an older release left of run-1: some of its
    # files, the first lines of its logs.
    with sqlite3.connect(tmp_path / "agents.db", isolation_level=None) as db:
        db.execute("DELETE FROM files WHERE session = 'run-1' AND name = 'state.json'")
        db.execute("DELETE FROM lines WHERE session = 'run-1' AND line > 1")
        db.execute("DELETE FROM message_keys WHERE session = 'run-1' AND line > 1")
    db.close()
    again = cli("import", tmp_path / "ws", "--workdir", url)
    assert again.code == 0, again.err
    assert "run-1: finished" in again.out and "run-2: there already" in again.out
    (tmp_path / "ws").rename(tmp_path / "original")
    assert cli("export", "--all", tmp_path / "ws", "--workdir", url).code == 0
    assert files(tmp_path / "ws") == files(tmp_path / "original")
    # A log holding a line the import does not write is no beginning of it: refused,
    # nothing written.
    ws = SqlWorkspace(url)
    asyncio.run(ws.offload_context("run-1", [Msg(role="user", content="written there")]))
    before = [asyncio.run(ws.read_context(s)) for s in ("run-1", "run-2")]
    refused = cli("import", tmp_path / "original", "--workdir", url)
    assert refused.code == 2 and "'run-1' exists" in refused.err
    assert "ctxoffload purge run-1" in refused.err
    assert [asyncio.run(ws.read_context(s)) for s in ("run-1", "run-2")] == before
    ws.close()


def test_a_session_named_twice_is_taken_once(cli: Callable[..., Any], tmp_path: Path) -> None:
    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    imported = cli("import", tmp_path / "ws", "run-1", "run-1", "run-2", "--workdir", url)
    assert imported.code == 0, imported.err
    assert "imported run-1, run-2 from" in imported.out
    assert asyncio.run(SqlWorkspace(url).list_sessions()) == ["run-1", "run-2"]
    exported = cli("export", "run-1", "run-2", "run-1", tmp_path / "out", "--workdir", url)
    assert exported.code == 0, exported.err
    assert "exported 2 session(s)" in exported.out
    assert sorted(os.listdir(tmp_path / "out" / "sessions")) == ["run-1", "run-2"]
    assert not [p for p in os.listdir(tmp_path / "out") if p.startswith(".")]
    assert cli("verify", "--workdir", tmp_path / "out").code == 0
    # From Python too: `upload` takes each session once.
    other = SqlWorkspace(f"sqlite:///{tmp_path / 'other.db'}")
    assert asyncio.run(other.upload(tmp_path / "ws", sessions=["run-2", "run-2"])) == []
    assert asyncio.run(other.list_sessions()) == ["run-2"]
    other.close()


def _import_refused(cli: Callable[..., Any], folder: Path, url: str, needle: str) -> None:
    result = cli("import", folder, "--workdir", url)
    assert result.code == 2, result.err
    assert needle in result.err
    ws = SqlWorkspace(url)
    assert asyncio.run(ws.list_sessions()) == []  # nothing of any session was written
    ws.close()


def test_a_link_planted_in_the_folder_to_import_stops_it(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the workspace")
    os.symlink(secret, tmp_path / "ws" / "sessions" / "run-2" / "tool_result-leak.txt")
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    _import_refused(cli, tmp_path / "ws", url, "tool_result-leak.txt")
    assert b"outside the workspace" not in (tmp_path / "agents.db").read_bytes()


def test_a_data_file_whose_bytes_are_not_its_hash_stops_the_import(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    (data,) = (tmp_path / "ws" / "data").iterdir()
    data.write_bytes(b"not the picture")
    _import_refused(cli, tmp_path / "ws", f"sqlite:///{tmp_path / 'agents.db'}", "hash")


def test_a_session_folder_that_is_a_link_is_left_out(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    asyncio.run(fill(LocalWorkspace(tmp_path / "elsewhere", fsync=False)))
    os.symlink(tmp_path / "elsewhere" / "sessions" / "run-1", tmp_path / "ws" / "sessions" / "x")
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    result = cli("import", tmp_path / "ws", "--workdir", url)
    assert result.code == 1 and "sessions/x" in result.err and "left out" in result.err
    assert asyncio.run(SqlWorkspace(url).list_sessions()) == ["run-1", "run-2"]
    named = cli("import", tmp_path / "ws", "x", "--workdir", f"sqlite:///{tmp_path / 'b.db'}")
    assert named.code == 2 and "no session 'x'" in named.err


@pytest.mark.slow
def test_every_line_is_kept_non_utf8_and_50_mb_too_and_a_torn_one_is_said(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    # A folder as an older writer, or a crash, leaves it: no commit record, a line that is
    # not UTF-8, one of 50 MB, and a last line cut by a kill.
    session = tmp_path / "ws" / "sessions" / "odd"
    session.mkdir(parents=True)
    big = b'{"role":"user","content":"' + b"x" * (50 << 20) + b'"}\n'
    lines = [
        b'{"role":"user","content":"first"}\n',
        b"\xff\xfe not UTF-8 \x80\n",
        b"a bare carriage\rreturn is no end of line\n",
        big,
    ]
    (session / "context.jsonl").write_bytes(b"".join(lines) + b'{"role":"us')
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    result = cli("import", tmp_path / "ws", "--workdir", url)
    assert result.code == 1, result.err
    assert "incomplete" in result.err and "context.jsonl" in result.err
    ws = SqlWorkspace(url)
    ref = f"{url}/sessions/odd/context.jsonl"
    for number, line in enumerate(lines, 1):
        assert asyncio.run(ws.read_lines(ref, number, number)) == line
    assert asyncio.run(ws.read_lines(ref, 5, 9)) == b""
    ws.close()
    exported = cli("export", "odd", tmp_path / "back", "--workdir", url)
    assert exported.code == 0, exported.err
    assert (tmp_path / "back" / "sessions" / "odd" / "context.jsonl").read_bytes() == b"".join(
        lines
    )


def test_lines_nested_5000_deep_are_imported_and_exported_as_they_are(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    # A log and a record another writer left: reading each line for its message key and the
    # prefixes its events name raised RecursionError, a traceback for import and export.
    session = tmp_path / "ws" / "sessions" / "deep"
    session.mkdir(parents=True)
    deep = b"[" * 5_000 + b"]" * 5_000
    context = b'{"id": "a", "role": "user", "content": "a"}\n{"id": "x", "content": %s}\n' % deep
    events = b'{"kind": "offload", "reference": %s}\n' % deep
    (session / "context.jsonl").write_bytes(context)
    (session / "events.jsonl").write_bytes(events)
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    imported = cli("import", tmp_path / "ws", "--workdir", url)
    assert imported.code == 0, imported.err
    exported = cli("export", "deep", tmp_path / "back", "--workdir", url)
    assert exported.code == 0, exported.err
    back = tmp_path / "back" / "sessions" / "deep"
    assert (back / "context.jsonl").read_bytes() == context
    assert (back / "events.jsonl").read_bytes() == events


def test_a_batch_past_the_commit_record_is_not_imported(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    asyncio.run(ws.offload_context("s", [Msg(role="user", content="acknowledged")]))
    # A batch a killed writer left half-written: whole lines, but never committed.
    with open(tmp_path / "ws" / "sessions" / "s" / "context.jsonl", "ab") as f:
        f.write(b'{"role":"user","content":"never acknowledged"}\n')
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    assert cli("import", tmp_path / "ws", "--workdir", url).code == 0
    context = asyncio.run(SqlWorkspace(url).read_context("s"))
    assert [m["content"] for m in context] == ["acknowledged"]


def test_export_refuses_a_folder_that_is_not_empty_unless_the_sessions_are_absent(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    asyncio.run(fill(SqlWorkspace(url)))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    refused = cli("export", "run-1", tmp_path / "notes", "--workdir", url)
    assert refused.code == 2 and "no workspace" in refused.err
    assert snapshot_tree(tmp_path / "notes") == {"todo.txt": b"mine"}
    a_file = cli("export", "run-1", tmp_path / "notes" / "todo.txt", "--workdir", url)
    assert a_file.code == 2
    # A workspace holding run-2 takes run-1, and run-2 is left as it was.
    other = LocalWorkspace(tmp_path / "ws")
    asyncio.run(other.offload_context("run-2", [Msg(role="user", content="m")]))
    before = files(tmp_path / "ws")
    assert cli("export", "run-1", tmp_path / "ws", "--workdir", url).code == 0
    after = files(tmp_path / "ws")
    assert {k: v for k, v in after.items() if k in before} == before
    assert "sessions/run-1/context.jsonl" in after
    again = cli("export", "--all", tmp_path / "ws", "--workdir", url)
    assert again.code == 2 and "holds session 'run-1'" in again.err
    assert files(tmp_path / "ws") == after
    assert not [p for p in os.listdir(tmp_path / "ws") if p.startswith(".")]  # staging gone


def test_export_of_a_link_in_place_of_the_session_is_refused(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    asyncio.run(fill(SqlWorkspace(url)))
    (tmp_path / "ws" / "sessions").mkdir(parents=True)
    (tmp_path / "target").mkdir()
    os.symlink(tmp_path / "target", tmp_path / "ws" / "sessions" / "run-1")
    result = cli("export", "run-1", tmp_path / "ws", "--workdir", url)
    assert result.code == 2
    assert os.listdir(tmp_path / "target") == []


@pytest.mark.parametrize("kind", ["sqlite", "bucket"])
def test_a_folders_lease_is_not_imported(
    cli: Callable[..., Any],
    tmp_path: Path,
    new_workspace: Callable[[str], tuple[str, Any]],
    kind: str,
) -> None:
    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    # The lease an agent on another machine left in the folder (it lives a long time).
    held = {"token": "t" * 32, "pid": 1, "host": "elsewhere", "agent": "old", "ttl": 1e6}
    (tmp_path / "ws" / "sessions" / "run-1" / "lease.json").write_text(json.dumps(held))
    where, ws = new_workspace(kind)
    imported = cli("import", tmp_path / "ws", "--workdir", where)
    assert imported.code == 0, imported.err
    # A lease is no content: the target's own lease of run-1 is free once imported...
    lease = asyncio.run(ws.acquire_lease("run-1", agent="next"))
    asyncio.run(lease.release())
    # ...and no file of the session is the folder's lease.
    assert cli("export", "run-1", tmp_path / "back", "--workdir", where).code == 0
    copied = tmp_path / "back" / "sessions" / "run-1" / "lease.json"
    # (a bucket keeps its lease as an object of the session: the one just released)
    assert not copied.exists() or b"elsewhere" not in copied.read_bytes()


@pytest.mark.parametrize("kind", ["sqlite", "folder", "bucket"])
@pytest.mark.parametrize("planted", ["data", "sessions"])
def test_export_follows_no_link_planted_in_the_folder_it_writes(
    cli: Callable[..., Any],
    tmp_path: Path,
    new_workspace: Callable[[str], tuple[str, Any]],
    kind: str,
    planted: str,
) -> None:
    where, source = new_workspace(kind)
    asyncio.run(fill(source))
    # A workspace holding another session, whose data/ (or sessions/) is a link elsewhere.
    out = tmp_path / "out"
    asyncio.run(LocalWorkspace(out).offload_context("mine", [Msg(role="user", content="m")]))
    elsewhere = tmp_path / "elsewhere"
    if (out / planted).exists():
        os.rename(out / planted, elsewhere)
    else:
        elsewhere.mkdir()
    os.symlink(elsewhere, out / planted)
    before, outside = files(out), files(elsewhere)
    result = cli("export", "run-1", out, "--workdir", where)
    assert result.code == 2, result.err
    assert f"{out / planted}" in result.err and "link" in result.err
    assert files(elsewhere) == outside  # nothing written through the link
    assert files(out) == before
    assert not [p for p in os.listdir(out) if p.startswith(".")]  # staging gone


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from ctxoffload import LocalWorkspace, Msg, SqlWorkspace
    where = sys.argv[1]
    ws = SqlWorkspace(where) if where.startswith("sqlite:") else LocalWorkspace(where)
    async def main():
        n = 0
        while True:
            await ws.offload_context(
                "live", [Msg(role="user", content=f"{n}-{k}") for k in range(3)]
            )
            n += 1
            if n == 5:
                print("ready", flush=True)
    asyncio.run(main())
    """
)


@pytest.mark.parametrize("kind", ["sqlite", "folder"])
def test_export_while_another_process_appends_takes_whole_batches(
    cli: Callable[..., Any], tmp_path: Path, kind: str
) -> None:
    where = f"sqlite:///{tmp_path / 'agents.db'}" if kind == "sqlite" else str(tmp_path / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, where], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
        for attempt in range(4):
            dest = tmp_path / f"copy-{attempt}"
            result = cli("export", "live", dest, "--workdir", where)
            assert result.code == 0, result.err
            folder = dest / "sessions" / "live"
            raw = (folder / "context.jsonl").read_bytes()
            rows = [json.loads(line) for line in raw.splitlines()]
            assert len(rows) % 3 == 0 and len(rows) >= 15
            # Whole batches, in order: each batch's three messages together.
            for i in range(0, len(rows), 3):
                n = rows[i]["content"].split("-")[0]
                assert [r["content"] for r in rows[i : i + 3]] == [f"{n}-{k}" for k in range(3)]
            # Every event names lines the copy holds.
            for event in events_without((folder / "events.jsonl").read_bytes()):
                assert event["lines"][1] <= len(rows)
            assert cli("verify", "--workdir", dest).code == 0
    finally:
        writer.kill()
        writer.wait()
        if writer.stdout is not None:
            writer.stdout.close()


def test_an_exported_session_keeps_its_last_activity(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    """The copy of a session with a context.jsonl got its commit record written at the
    export's time, so `ls` showed the export as the session's last activity and `show`
    opened another session as the newest."""
    import os

    url = f"sqlite:///{tmp_path / 'agents.db'}"
    asyncio.run(fill(SqlWorkspace(url)))
    assert cli("export", "--all", tmp_path / "ws", "--workdir", url).code == 0
    folder = tmp_path / "ws" / "sessions" / "run-1"
    commit = folder / "context.jsonl.commit"
    assert os.stat(commit).st_mtime_ns == os.stat(folder / "context.jsonl").st_mtime_ns


def test_ls_and_stats_date_an_imported_session_by_its_record_not_by_the_import(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    """A session's last activity is its latest event's time, which an import keeps; the
    files' times are the import's (a folder copied, rows written into SQLite now)."""
    asyncio.run(fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    events = tmp_path / "ws" / "sessions" / "run-1" / "events.jsonl"
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    for i, event in enumerate(lines):  # the run happened in 2021, a minute an event
        event["time"] = f"2021-05-04T03:{i:02d}:01.250+00:00"
    events.write_text("".join(json.dumps(event) + "\n" for event in lines))
    last = f"2021-05-04 03:{len(lines) - 1:02d}:01"
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    assert cli("import", tmp_path / "ws", "--workdir", url).code == 0

    for workdir in (tmp_path / "ws", url):
        listed = json.loads(cli("ls", "--json", "--workdir", workdir).out)
        row = next(r for r in listed if r["session"] == "run-1")
        assert row["last_activity"].startswith(last), (workdir, row["last_activity"])
        # The session written now (run-2's events were left as written) lists first.
        assert [r["session"] for r in listed][:2] == ["run-2", "run-1"]
        counted = json.loads(cli("stats", "run-1", "--json", "--workdir", workdir).out)
        (stats,) = counted["sessions"]
        assert stats["last_activity"].startswith(last), (workdir, stats)
    # A session whose events carry no time is dated by its files, as before.
    bare = [{k: v for k, v in event.items() if k != "time"} for event in lines]
    events.write_text("".join(json.dumps(event) + "\n" for event in bare))
    listed = json.loads(cli("ls", "--json", "--workdir", tmp_path / "ws").out)
    row = next(r for r in listed if r["session"] == "run-1")
    assert not row["last_activity"].startswith("2021")
