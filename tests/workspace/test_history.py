"""`HistoryLog`: a host's saved conversation as records appended to history.jsonl, one a line,
on every workspace; read back from any line, a follower paying for what came since."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    InvalidSessionId,
    LocalWorkspace,
    ObjectStoreWorkspace,
    OffloadError,
    SqlWorkspace,
)
from ctxoffload.workspace import HistoryLog
from s3_server import S3Server, ThrottlingProxy


async def test_records_come_back_in_order_with_their_line_numbers(
    make_workspace: Callable[..., Any],
) -> None:
    workspace = make_workspace()
    assert isinstance(workspace, HistoryLog)
    assert await workspace.read_history("s") == []  # no history yet: none, no error
    records = [{"add": [{"role": "user", "content": f"turn {i} é\n"}]} for i in range(5)]
    lines = [await workspace.append_history("s", record) for record in records]
    assert lines == [1, 2, 3, 4, 5]
    assert await workspace.read_history("s") == list(zip(lines, records, strict=True))
    assert await workspace.read_history("s", after=3) == [(4, records[3]), (5, records[4])]
    assert await workspace.read_history("s", after=5) == []


async def test_a_new_object_on_the_same_store_reads_what_another_wrote(tmp_path: Path) -> None:
    for make in (
        lambda: LocalWorkspace(tmp_path / "ws"),
        lambda: SqlWorkspace(f"sqlite:///{tmp_path / 'ws.db'}"),
    ):
        writer, reader = make(), make()  # two processes' objects
        assert await reader.read_history("s") == []
        await writer.append_history("s", {"n": 1})
        assert await reader.read_history("s") == [(1, {"n": 1})]
        await writer.append_history("s", {"n": 2})
        assert await reader.read_history("s", after=1) == [(2, {"n": 2})]


async def test_concurrent_appends_get_consecutive_lines_and_lose_none(
    make_workspace: Callable[..., Any],
) -> None:
    workspace = make_workspace()
    lines = await asyncio.gather(*(workspace.append_history("s", {"n": i}) for i in range(30)))
    assert sorted(lines) == list(range(1, 31))
    read = await workspace.read_history("s")
    assert sorted(record["n"] for _, record in read) == list(range(30))
    assert [line for line, _ in read] == list(range(1, 31))


async def test_a_hostile_session_id_is_refused_before_any_io(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path / "ws")
    for bad in ("../x", "a/b", "", ".hidden"):
        with pytest.raises(InvalidSessionId):
            await workspace.append_history(bad, {"add": []})
        with pytest.raises(InvalidSessionId):
            await workspace.read_history(bad)
    assert not (tmp_path / "ws").exists()


async def test_a_record_that_is_not_json_writes_nothing(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path / "ws")
    await workspace.append_history("s", {"n": 1})
    with pytest.raises(TypeError):
        await workspace.append_history("s", {"n": b"bytes"})
    assert await workspace.read_history("s") == [(1, {"n": 1})]


async def test_a_torn_last_line_is_not_read_until_the_next_writer_closes_it(
    tmp_path: Path,
) -> None:
    workspace = LocalWorkspace(tmp_path / "ws")
    await workspace.append_history("s", {"n": 1})
    log = tmp_path / "ws" / "sessions" / "s" / "history.jsonl"
    with log.open("ab") as f:
        f.write(b'{"n": 2, "half": "a writer killed he')  # killed mid-line
    assert await workspace.read_history("s") == [(1, {"n": 1})]
    # The next writer starts on a fresh line; the torn one is skipped, its number kept.
    assert await LocalWorkspace(tmp_path / "ws").append_history("s", {"n": 3}) == 3
    assert await workspace.read_history("s") == [(1, {"n": 1}), (3, {"n": 3})]


async def test_a_planted_link_is_refused_not_read_as_empty(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path / "ws")
    await workspace.append_history("s", {"n": 1})
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"stolen": true}\n')
    log = tmp_path / "ws" / "sessions" / "s" / "history.jsonl"
    log.unlink()
    log.symlink_to(secret)
    with pytest.raises(OffloadError):
        await workspace.read_history("s")
    with pytest.raises(OffloadError):
        await workspace.append_history("s", {"n": 2})
    assert secret.read_text() == '{"stolen": true}\n'


async def test_a_read_after_an_append_starts_where_the_append_began(
    tmp_path: Path, read_starts: list[int]
) -> None:
    """A follower pays for what came since: its own appends (a mark where each began) and
    its earlier reads (where each ended), on disk too, however long the log."""
    workspace = LocalWorkspace(tmp_path / "ws", fsync=False)
    other = LocalWorkspace(tmp_path / "ws", fsync=False)  # another process's object
    log = tmp_path / "ws" / "sessions" / "s" / "history.jsonl"
    for i in range(300):
        await other.append_history("s", {"n": i, "padding": "x" * 200})
    starts = read_starts
    size = log.stat().st_size
    line = await workspace.append_history("s", {"n": "mine"})
    assert await workspace.read_history("s", after=line - 1) == [(line, {"n": "mine"})]
    assert starts[-1] == size  # from where the append began, not the log's start
    size = log.stat().st_size
    await other.append_history("s", {"n": "theirs"})
    assert await workspace.read_history("s", after=line) == [(line + 1, {"n": "theirs"})]
    assert starts[-1] == size  # from where the previous read ended


async def test_a_reader_of_a_bucket_reads_only_the_segments_added_since(s3: S3Server) -> None:
    """Another machine's reader reads the log whole once, then only what came after it."""
    url = f"s3://{s3.new_bucket()}/agents"
    writer = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    proxy = ThrottlingProxy(s3)
    try:
        reader = ObjectStoreWorkspace(url, **proxy.workspace_kwargs())
        for i in range(20):
            await writer.append_history("s", {"n": i})
        assert len(await reader.read_history("s")) == 20
        await writer.append_history("s", {"n": 20})
        before = proxy.requests
        assert await reader.read_history("s", after=20) == [(21, {"n": 20})]
        assert proxy.requests - before <= 2  # the listing after it and the new segment
    finally:
        proxy.stop()


async def test_history_moves_with_its_session_into_a_database_line_for_line(
    tmp_path: Path,
) -> None:
    folder = LocalWorkspace(tmp_path / "ws")
    for i in range(3):
        await folder.append_history("s", {"n": i})
    log = tmp_path / "ws" / "sessions" / "s" / "history.jsonl"
    with log.open("ab") as f:
        f.write(b"not json\n")  # a damaged line keeps its number
    await folder.append_history("s", {"n": 4})
    database = SqlWorkspace(f"sqlite:///{tmp_path / 'ws.db'}")
    assert await database.upload(tmp_path / "ws") == []
    assert await database.read_history("s") == await folder.read_history("s")
    assert await database.append_history("s", {"n": 5}) == 6
    # And back: the copy a folder gets reads as the database does.
    await database.download(tmp_path / "copy")
    copied = LocalWorkspace(tmp_path / "copy")
    assert await copied.read_history("s") == await database.read_history("s")
    assert json.loads((tmp_path / "copy/sessions/s/history.jsonl").read_bytes().splitlines()[-1])


async def test_a_damaged_line_is_skipped_with_a_warning_and_keeps_its_number(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workspace = LocalWorkspace(tmp_path / "ws")
    await workspace.append_history("s", {"n": 1})
    log = tmp_path / "ws" / "sessions" / "s" / "history.jsonl"
    with log.open("ab") as f:
        f.write(b"\xff\xfe not json\n")
    await workspace.append_history("s", {"n": 3})
    assert await LocalWorkspace(tmp_path / "ws").read_history("s") == [(1, {"n": 1}), (3, {"n": 3})]
    assert f"{log} line 2 is not valid JSON" in caplog.text
    assert os.path.getsize(log) > 0
