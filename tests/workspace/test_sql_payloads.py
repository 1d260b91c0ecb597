"""SqlWorkspace(payloads=...): data/ payloads kept in a folder or a bucket, the database's row
naming where each is; read back, exported and collected the same as rows, on SQLite and
PostgreSQL (run with CI=true so a missing server fails instead of skipping)."""

from __future__ import annotations

import os
import sqlite3
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
    LocalWorkspace,
    Msg,
    ObjectStoreWorkspace,
    SqlWorkspace,
    TextBlock,
)
from ctxoffload.workspace._datastore import data_name
from ctxoffload.workspace._sql_schema import MIGRATIONS, SCHEMA_VERSION
from helpers import image_block

DAY = 86400.0


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'agents.db'}"
    return str(request.getfixturevalue("postgres").new_schema())


@pytest.fixture(params=["folder", "bucket"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> LocalWorkspace | ObjectStoreWorkspace:
    if request.param == "folder":
        return LocalWorkspace(tmp_path / "blobs")
    s3 = request.getfixturevalue("s3")
    return ObjectStoreWorkspace(f"s3://{s3.new_bucket()}/blobs", **s3.workspace_kwargs())


async def _store_image(ws: SqlWorkspace, session_id: str, raw: bytes) -> str:
    """Offload a message holding `raw` as an image; the reference of its data/ payload."""
    msg = Msg(role="user", content=[TextBlock(text=session_id), image_block(raw)])
    await ws.offload_context(session_id, msgs=[msg])
    return f"{ws.url}/data/{data_name(raw, 'image/png')}"


def _sqlite_rows(path: Path, sql: str, *args: Any) -> list[Any]:
    with sqlite3.connect(path, isolation_level=None) as db:
        rows = db.execute(sql, args).fetchall()
    db.close()
    return rows


def _rows(url: str, sql: str, *args: Any) -> list[Any]:
    """Run one statement on the workspace's database as another client would; its rows."""
    if url.startswith("sqlite:///"):
        return _sqlite_rows(Path(url.removeprefix("sqlite:///")), sql, *args)
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        cursor = db.execute(sql.replace("?", "%s"), args)  # type: ignore[arg-type]
        return [tuple(row) for row in cursor.fetchall()] if cursor.description else []


async def test_a_payload_outside_is_read_back_and_its_row_names_where(
    db_url: str, place: LocalWorkspace | ObjectStoreWorkspace
) -> None:
    ws = SqlWorkspace(db_url, payloads=place)
    raw = b"\x89PNG not utf-8 \xff\xfe" * 1000
    ref = await _store_image(ws, "s", raw)
    assert await ws.read_reference(ref) == raw
    assert await ws.read_bytes(ref) == (raw, "image/png")
    name = ref.rsplit("/", 1)[1]
    # The place holds the bytes, under the disk's (or bucket's) own name.
    assert await place.read_reference(f"{ws.payloads}/data/{name}") == raw
    # The context line names the workspace's reference, which reads it.
    [line] = await ws.read_context("s")
    assert name in str(line)
    # A workspace configured otherwise is sent nowhere by the row: it says where, and how.
    with pytest.raises(InvalidReference, match="payloads=") as caught:
        await SqlWorkspace(db_url).read_reference(ref)
    assert f"{ws.payloads}/data/{name}" in str(caught.value)
    # The same payload stored again: one row, still outside.
    await _store_image(ws, "t", raw)
    assert await ws.read_reference(ref) == raw


async def test_the_row_holds_no_body_and_names_the_folder(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    ws = SqlWorkspace(f"sqlite:///{db}", payloads=tmp_path / "blobs")
    ref = await _store_image(ws, "s", b"png bytes")
    name = ref.rsplit("/", 1)[1]
    rows = _sqlite_rows(db, "SELECT name, body, location, size FROM data")
    assert rows == [(name, None, str(tmp_path / "blobs"), len(b"png bytes"))]
    assert (tmp_path / "blobs" / "data" / name).read_bytes() == b"png bytes"
    assert _sqlite_rows(db, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    assert "payloads=" in repr(ws)


async def test_a_missing_payload_reads_as_invalid_reference_naming_where(
    db_url: str, place: LocalWorkspace | ObjectStoreWorkspace, tmp_path: Path
) -> None:
    ws = SqlWorkspace(db_url, payloads=place)
    ref = await _store_image(ws, "s", b"soon gone")
    name = ref.rsplit("/", 1)[1]
    where = f"{ws.payloads}/data/{name}"
    if isinstance(place, LocalWorkspace):
        os.unlink(tmp_path / "blobs" / "data" / name)
    else:
        await place._client.delete([f"data/{name}"])
    with pytest.raises(InvalidReference, match="kept outside the database") as caught:
        await ws.read_reference(ref)
    assert where in str(caught.value)
    # The export says so too, and copies the rest.
    problems = await ws.download(tmp_path / "copy")
    assert any(where in p for p in problems)
    assert (tmp_path / "copy" / "sessions" / "s" / "context.jsonl").exists()


async def test_a_planted_symlink_in_the_folder_is_never_written_through_nor_read(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"secret")
    ws = SqlWorkspace(f"sqlite:///{tmp_path / 'agents.db'}", payloads=tmp_path / "blobs")
    raw = b"image one"
    name = data_name(raw, "image/png")
    (tmp_path / "blobs" / "data").mkdir(parents=True)
    (tmp_path / "blobs" / "data" / name).symlink_to(secret)
    ref = await _store_image(ws, "s", raw)
    # The link itself was replaced by the payload; the file it pointed to is untouched.
    assert secret.read_bytes() == b"secret"
    assert not (tmp_path / "blobs" / "data" / name).is_symlink()
    assert await ws.read_reference(ref) == raw
    # Planted after the store: refused on read, the secret never returned.
    os.unlink(tmp_path / "blobs" / "data" / name)
    (tmp_path / "blobs" / "data" / name).symlink_to(secret)
    with pytest.raises(InvalidReference, match="kept outside the database"):
        await ws.read_reference(ref)
    # A linked data/ folder itself is refused on write.
    other = tmp_path / "elsewhere"
    other.mkdir()
    (tmp_path / "blobs2").mkdir()
    (tmp_path / "blobs2" / "data").symlink_to(other)
    ws2 = SqlWorkspace(f"sqlite:///{tmp_path / 'agents2.db'}", payloads=tmp_path / "blobs2")
    with pytest.raises(Exception, match="link"):
        await _store_image(ws2, "s", b"image two")
    assert list(other.iterdir()) == []


def test_payloads_that_name_no_place_are_refused(tmp_path: Path) -> None:
    for bad in ("", 3, "ftp://x\x00"):
        with pytest.raises(ConfigError):
            SqlWorkspace(f"sqlite:///{tmp_path / 'a.db'}", payloads=bad)  # type: ignore[arg-type]


@pytest.mark.slow
async def test_two_processes_storing_one_payload_at_once_leave_one_file_and_one_row(
    tmp_path: Path,
) -> None:
    db, blobs = tmp_path / "agents.db", tmp_path / "blobs"
    await SqlWorkspace(f"sqlite:///{db}", payloads=blobs).initialize()
    raw = os.urandom(1 << 20)
    (tmp_path / "raw.bin").write_bytes(raw)
    code = textwrap.dedent(
        """
        import asyncio, base64, sys
        from ctxoffload import Msg, SqlWorkspace
        from ctxoffload.messages import Base64Source, DataBlock
        db, blobs, raw_path, sid = sys.argv[1:]
        raw = open(raw_path, "rb").read()
        block = DataBlock(source=Base64Source(media_type="image/png",
                                              data=base64.b64encode(raw).decode()))
        ws = SqlWorkspace("sqlite:///" + db, payloads=blobs)
        for i in range(5):
            asyncio.run(ws.offload_context(sid, msgs=[Msg(role="user", content=[block])]))
        print("ok")
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(db), str(blobs), str(tmp_path / "raw.bin"), sid],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for sid in ("a", "b")
    ]
    for proc in procs:
        out, err = proc.communicate()
        assert proc.returncode == 0, err
        assert out.strip() == "ok"
    name = data_name(raw, "image/png")
    assert [p.name for p in (blobs / "data").iterdir()] == [name]  # no temporary left
    assert (blobs / "data" / name).read_bytes() == raw
    assert _sqlite_rows(db, "SELECT name, body IS NULL FROM data") == [(name, 1)]
    ws = SqlWorkspace(f"sqlite:///{db}", payloads=blobs)
    assert len(await ws.read_context("a")) == len(await ws.read_context("b")) == 5


def _age(db: Path | str, session_id: str) -> None:
    """Make a session and every data/ row look three days old (`db`: a SQLite file or a
    database URL)."""
    url = db if isinstance(db, str) else f"sqlite:///{db}"
    past = time.time() - 3 * DAY
    _rows(url, "UPDATE sessions SET updated = ? WHERE id = ?", past, session_id)
    _rows(url, "UPDATE data SET stored = ?", past)


async def test_gc_collects_an_unreferenced_payload_outside_and_keeps_a_named_one(
    db_url: str, place: LocalWorkspace | ObjectStoreWorkspace
) -> None:
    ws = SqlWorkspace(db_url, payloads=place)
    old = await _store_image(ws, "old", b"old image")
    new = await _store_image(ws, "new", b"new image")
    _age(db_url, "old")
    report = await ws.gc(older_than=DAY)
    assert report.sessions_removed == ["old"]
    assert report.data_removed == [old.rsplit("/", 1)[1]]
    assert report.bytes_freed >= len(b"old image")
    with pytest.raises(InvalidReference):
        await ws.read_reference(old)
    assert await ws.read_reference(new) == b"new image"
    # Gone from its place too, and the named one is still there.
    old_where = f"{ws.payloads}/data/{old.rsplit('/', 1)[1]}"
    with pytest.raises(InvalidReference):
        await place.read_reference(old_where)
    assert await place.read_reference(f"{ws.payloads}/data/{new.rsplit('/', 1)[1]}")
    # Stored again after gc: written anew in the place, read back.
    await _store_image(ws, "again", b"old image")
    assert await ws.read_reference(old) == b"old image"


async def test_gc_dry_run_removes_nothing_outside(tmp_path: Path) -> None:
    db, blobs = tmp_path / "agents.db", tmp_path / "blobs"
    ws = SqlWorkspace(f"sqlite:///{db}", payloads=blobs)
    ref = await _store_image(ws, "old", b"old image")
    _age(db, "old")
    report = await ws.gc(older_than=DAY, dry_run=True)
    assert report.data_removed == [ref.rsplit("/", 1)[1]]
    assert (blobs / "data" / ref.rsplit("/", 1)[1]).read_bytes() == b"old image"


async def test_export_of_a_session_whose_payloads_are_outside(
    db_url: str, place: LocalWorkspace | ObjectStoreWorkspace, tmp_path: Path
) -> None:
    ws = SqlWorkspace(db_url, payloads=place)
    ref = await _store_image(ws, "s", b"exported image")
    name = ref.rsplit("/", 1)[1]
    assert await ws.download(tmp_path / "copy", session="s") == []
    assert (tmp_path / "copy" / "data" / name).read_bytes() == b"exported image"
    copy = LocalWorkspace(tmp_path / "copy")
    assert len(await copy.read_context("s")) == 1
    # And back into a database that keeps payloads as rows.
    back = SqlWorkspace(f"sqlite:///{tmp_path / 'back.db'}")
    await back.upload(tmp_path / "copy")
    assert await back.read_reference(f"{back.url}/data/{name}") == b"exported image"
    # And into one that keeps them in a folder: imported there.
    into = SqlWorkspace(f"sqlite:///{tmp_path / 'into.db'}", payloads=tmp_path / "into")
    assert await into.upload(tmp_path / "copy") == []
    assert (tmp_path / "into" / "data" / name).read_bytes() == b"exported image"
    assert await into.read_reference(f"{into.url}/data/{name}") == b"exported image"


async def test_a_version_1_database_is_migrated_and_its_payload_rows_kept(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    name = data_name(b"old row", "image/png")
    with sqlite3.connect(db, isolation_level=None) as c:
        c.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for statement in MIGRATIONS[0]:
            c.execute(statement.format(blob="BLOB", real="REAL"))
        c.execute("INSERT INTO schema_version VALUES (1)")
        c.execute(
            "INSERT INTO data VALUES (?, ?, ?, ?, ?)",
            (name, name[:64], "image/png", b"old row", time.time()),
        )
    c.close()
    ws = SqlWorkspace(f"sqlite:///{db}", payloads=tmp_path / "blobs")
    assert await ws.read_bytes(f"{ws.url}/data/{name}") == (b"old row", "image/png")
    assert _sqlite_rows(db, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    assert _sqlite_rows(db, "SELECT size, location FROM data") == [(7, None)]
    # A row may not hold both a body and a place, nor neither.
    with pytest.raises(sqlite3.IntegrityError):
        _sqlite_rows(db, "UPDATE data SET location = 'x'")


async def test_a_row_naming_another_place_sends_no_read_nor_delete_there(tmp_path: Path) -> None:
    """A row edited by hand to name a folder the caller never configured (a hostile
    database): nothing there is read, and gc removes neither the file nor the row."""
    db, blobs, other = tmp_path / "agents.db", tmp_path / "blobs", tmp_path / "other"
    ws = SqlWorkspace(f"sqlite:///{db}", payloads=blobs)
    ref = await _store_image(ws, "old", b"old image")
    name = ref.rsplit("/", 1)[1]
    (other / "data").mkdir(parents=True)
    (other / "data" / name).write_bytes(b"not yours")
    _sqlite_rows(db, "UPDATE data SET location = ?", str(other))
    with pytest.raises(InvalidReference, match="payloads=") as caught:
        await ws.read_reference(ref)
    assert "not yours" not in str(caught.value)
    _age(db, "old")
    report = await ws.gc(older_than=DAY)
    assert report.sessions_removed == ["old"] and report.data_removed == []
    assert (other / "data" / name).read_bytes() == b"not yours"
    assert _sqlite_rows(db, "SELECT location FROM data") == [(str(other),)]


async def test_gc_removes_a_copy_in_the_folder_that_no_row_names_there(tmp_path: Path) -> None:
    """A payload stored in the database first, then by a workspace keeping payloads in a
    folder: the row keeps the body, the folder's copy is named by no row; gc removes that
    copy once nothing names the payload (and a stray file too new is kept)."""
    db, blobs = tmp_path / "agents.db", tmp_path / "blobs"
    url = f"sqlite:///{db}"
    ref = await _store_image(SqlWorkspace(url), "old", b"old image")
    name = ref.rsplit("/", 1)[1]
    ws = SqlWorkspace(url, payloads=blobs)
    await _store_image(ws, "old", b"old image")
    assert (blobs / "data" / name).exists()
    assert _sqlite_rows(db, "SELECT location FROM data") == [(None,)]
    fresh = data_name(b"fresh stray", "image/png")
    (blobs / "data" / fresh).write_bytes(b"fresh stray")
    # While a session names it, the copy stays.
    _sqlite_rows(db, "UPDATE data SET stored = stored - ?", 3 * DAY)
    old = time.time() - 3 * DAY
    os.utime(blobs / "data" / name, (old, old))
    report = await ws.gc()
    assert report.data_removed == [] and (blobs / "data" / name).exists()
    _age(db, "old")
    report = await ws.gc(older_than=DAY)
    assert report.sessions_removed == ["old"]
    assert report.data_removed == [name]
    assert not (blobs / "data" / name).exists()
    assert (blobs / "data" / fresh).read_bytes() == b"fresh stray"
    assert _sqlite_rows(db, "SELECT count(*) FROM data") == [(0,)]


@pytest.mark.slow
async def test_gc_racing_a_writer_that_reuses_an_old_payload_never_loses_it(
    tmp_path: Path, place: LocalWorkspace | ObjectStoreWorkspace
) -> None:
    """A payload old enough to collect, stored again by one writer while another workspace
    (its own connection) runs gc, twenty times: once the writer's line is written, the
    payload reads back, whichever ran first."""
    import asyncio

    url = f"sqlite:///{tmp_path / 'agents.db'}"
    writer = SqlWorkspace(url, payloads=place)
    collector = SqlWorkspace(url, payloads=place)
    raw = b"old image, re-used"
    await writer.initialize()
    for i in range(20):
        if i:  # nothing names it now: collectable, but for the writer storing it again
            assert await writer.purge_session(f"s{i - 1}")
        _rows(url, "UPDATE data SET stored = stored - ?", 3 * DAY)
        if isinstance(place, LocalWorkspace) and (tmp_path / "blobs" / "data").exists():
            for p in (tmp_path / "blobs" / "data").iterdir():
                os.utime(p, (time.time() - 3 * DAY,) * 2)
        ref, _ = await asyncio.gather(
            _store_image(writer, f"s{i}", raw), collector.gc(max_bytes=10**12)
        )
        # (measured once: gc removed it in 2 of 20 rounds on a folder, 15 on a bucket)
        assert await writer.read_reference(ref) == raw, i
        assert await collector.read_reference(ref) == raw, i


async def test_the_read_tool_reads_a_payload_outside_by_lines(
    tmp_path: Path, place: LocalWorkspace | ObjectStoreWorkspace
) -> None:
    from ctxoffload.readback import retrieve_offloaded_content

    ws = SqlWorkspace(f"sqlite:///{tmp_path / 'agents.db'}", payloads=place)
    text = "".join(f"row {i} ok\n" for i in range(1, 500)) + "row 500 ERROR here\n"
    ref = await _store_image(ws, "s", text.encode())
    found = await retrieve_offloaded_content(ws, ref, pattern="ERROR")
    assert "500" in found and "ERROR here" in found
    head = await retrieve_offloaded_content(ws, ref, line_range=(2, 3))
    assert "row 2 ok" in head and "row 3 ok" in head and "row 4 ok" not in head
