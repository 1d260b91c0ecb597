"""Every workspace reads a log by one rule: a torn last line is skipped silently, a line that
is not JSON is skipped and said, whether the log is a file, a bucket's segments or memory."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxoffload import Msg, ObjectStoreWorkspace
from ctxoffload._disk.commit import parse_log
from ctxoffload._disk.read import Folder
from s3_server import S3Server

# The kinds of line a log may hold after crashes and hand edits.
LINES = st.one_of(
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=20), max_size=3).map(
        lambda value: json.dumps(value).encode() + b"\n"
    ),
    st.sampled_from([b"\n", b"  \n", b"{not json\n", b"[1, 2\n", b"\xff\xfe\n"]),
)
TORN_TAIL = st.sampled_from([b"", b'{"half": ', b"garbage without a newline"])


@pytest.mark.slow
@given(lines=st.lists(LINES, max_size=8), tail=TORN_TAIL)
def test_a_log_held_in_memory_reads_as_the_same_bytes_on_disk(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], tail: bytes
) -> None:
    raw = b"".join(lines) + tail
    folder = tmp_path_factory.mktemp("log")
    (folder / "events.jsonl").write_bytes(raw)
    on_disk: list[str] = []
    in_memory: list[str] = []
    with Folder(str(folder)) as opened:
        from_file = opened.read_log("events.jsonl", warn=on_disk.append)
    shown = str(folder / "events.jsonl")
    assert parse_log(raw, shown, warn=in_memory.append) == from_file
    assert in_memory == on_disk


async def test_a_bucket_log_skips_a_corrupt_line_and_a_torn_tail(
    s3: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    bucket = s3.new_bucket()
    ws = ObjectStoreWorkspace(f"s3://{bucket}/agents", **s3.workspace_kwargs())
    await ws.offload_context("s", [Msg(role="user", content="first")])
    # A second segment written by hand: a line that is not JSON, a message, a torn tail.
    later: Any = json.dumps({"role": "user", "content": "second"}).encode()
    s3.put_object(
        bucket,
        "agents/sessions/s/context.jsonl.d/000000000001.jsonl",
        b"{not json\n" + later + b'\n{"role": "us',
    )
    s3.put_object(bucket, "agents/sessions/s/state.json", b"{not json either\n")
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        rows = await ws.read_context("s")
        state = await ws.read_state("s")
    assert [r["content"] for r in rows] == ["first", "second"]
    assert state is None
    warned = [r.getMessage() for r in caplog.records]
    assert [m for m in warned if "context.jsonl line 2 is not valid JSON" in m]
    assert [m for m in warned if "state.json line 1 is not valid JSON" in m]
    assert not [m for m in warned if "line 4" in m]  # the torn tail is skipped silently


def test_parse_log_counts_lines_as_the_file_has_them(tmp_path: Path) -> None:
    warned: list[str] = []
    values = parse_log(b'{"a": 1}\n\nnope\n{"b": 2}\n', "log", warn=warned.append)
    assert values == [{"a": 1}, {"b": 2}]
    assert warned == ["log line 3 is not valid JSON (torn write?): skipped"]
