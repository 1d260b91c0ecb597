"""The hints a bucket holds are starting points, never the truth: a tail.json or a segment's
metadata that lies (written by hand, by another tool, or damaged) never hides an append or
makes a writer report line numbers the log does not have. On moto's S3 on 127.0.0.1."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxoffload import Msg, ObjectStoreWorkspace, OffloadError
from s3_server import S3Server

LOG = "sessions/s/context.jsonl"


def msg(text: str) -> Msg:
    return Msg(role="user", content=text)


@pytest.fixture
def bucket(s3: S3Server) -> str:
    return s3.new_bucket()


def workspace(s3: S3Server, bucket: str) -> ObjectStoreWorkspace:
    """A fresh writer: it knows nothing of the log but what the bucket says."""
    return ObjectStoreWorkspace(f"s3://{bucket}/p", **s3.workspace_kwargs())


async def two_lines(s3: S3Server, bucket: str) -> None:
    """The log: segment 0 holds line 1, segment 1 line 2."""
    ws = workspace(s3, bucket)
    for text in ("a", "b"):
        await ws.offload_context("s", [msg(text)])


async def texts(s3: S3Server, bucket: str) -> list[str]:
    return [row["content"] for row in await workspace(s3, bucket).read_context("s")]


@pytest.mark.parametrize(
    "hint",
    [
        {"seq": 999_999_999_999, "next_line": 1000},  # the last seq the naming can hold
        {"seq": 5_000_000_000_000, "next_line": 1000},  # past it
        {"seq": 7, "next_line": 1000},  # ahead of the log
        {"seq": 1, "next_line": 1000},  # at a real segment, a wrong line
        {"seq": 1, "next_line": -49},
        {"seq": -3, "next_line": 3},
        {"seq": "x", "next_line": []},
    ],
    ids=[
        "last-seq",
        "past-the-naming",
        "ahead",
        "wrong-line",
        "negative-line",
        "negative-seq",
        "garbage",
    ],
)
async def test_a_lying_tail_hint_never_hides_an_append_nor_shifts_its_lines(
    s3: S3Server, bucket: str, hint: dict[str, Any]
) -> None:
    await two_lines(s3, bucket)
    s3.put_object(bucket, f"p/{LOG}.d/tail.json", json.dumps(hint).encode())
    ref = await workspace(s3, bucket).offload_context("s", [msg("c")])
    assert (ref.first_line, ref.last_line) == (3, 3)
    assert await texts(s3, bucket) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "changes",
    [
        {"first-line": "1000"},
        {"lines": "-50"},
        {"first-line": "-50"},
        {"lines": "1000"},
        {"lines": "x"},
    ],
    ids=["first-line-ahead", "negative-lines", "negative-first-line", "too-many-lines", "garbage"],
)
async def test_lying_segment_metadata_never_shifts_a_fresh_writers_lines(
    s3: S3Server, bucket: str, changes: dict[str, str]
) -> None:
    await two_lines(s3, bucket)
    s3.replace_metadata(bucket, f"p/{LOG}.d/000000000001.jsonl", changes)
    ref = await workspace(s3, bucket).offload_context("s", [msg("c")])
    assert (ref.first_line, ref.last_line) == (3, 3)
    assert await texts(s3, bucket) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "changes",
    [{"first-line": "1000"}, {"lines": "-50"}, {"lines": "1000"}],
    ids=["first-line-ahead", "negative-lines", "too-many-lines"],
)
async def test_lying_segment_metadata_never_shifts_a_writer_that_lost_a_race(
    s3: S3Server, bucket: str, changes: dict[str, str]
) -> None:
    behind = workspace(s3, bucket)
    await behind.offload_context("s", [msg("a")])  # `behind` knows the log ends at line 1
    await workspace(s3, bucket).offload_context("s", [msg("b")])
    s3.replace_metadata(bucket, f"p/{LOG}.d/000000000001.jsonl", changes)
    # `behind` loses seq 1, wins seq 2, and learns its line from the segments before it.
    ref = await behind.offload_context("s", [msg("c")])
    assert (ref.first_line, ref.last_line) == (3, 3)
    assert await texts(s3, bucket) == ["a", "b", "c"]


async def test_a_segment_at_the_last_seq_ends_the_log_with_an_error(
    s3: S3Server, bucket: str
) -> None:
    # A key past the last seq could be written but never listed: an append acknowledged and
    # never readable. The log refuses instead.
    await two_lines(s3, bucket)
    s3.put_object(
        bucket,
        f"p/{LOG}.d/999999999999.jsonl",
        b'{"role": "user", "content": "z"}\n',
        {"lines": "1", "first-line": "3"},
    )
    with pytest.raises(OffloadError, match="999999999999"):
        await workspace(s3, bucket).offload_context("s", [msg("c")])
    assert await texts(s3, bucket) == ["a", "b", "z"]
