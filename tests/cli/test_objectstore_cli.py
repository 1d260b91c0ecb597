"""The `ctxoffload` commands on a bucket (`--workdir s3://bucket/prefix`), over a real S3 API.

Endpoint and credentials reach the command the way they reach any S3 tool: environment
variables. Each command reads the bucket through a temporary local copy that it removes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import Msg, ObjectStoreWorkspace, TextBlock, ToolResultBlock
from ctxoffload.cli import main
from helpers import image_block
from s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Server

PNG = b"\x89PNG\r\n\x1a\n" + zlib.compress(b"a tiny picture" * 20)
NEEDLE_LINE = 1500


def log_text(lines: int = 2000) -> str:
    return "\n".join(
        f"{i:05d} ERROR order_id=ORD-58213 disk quota exceeded"
        if i == NEEDLE_LINE
        else f"{i:05d} INFO exported ORD-{10000 + i}"
        for i in range(1, lines + 1)
    )


@pytest.fixture
def env(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "AWS_ENDPOINT_URL": s3.endpoint_url,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def bucket(s3: S3Server) -> Iterator[tuple[str, ObjectStoreWorkspace]]:
    url = f"s3://{s3.new_bucket()}/team/agents"
    ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())

    async def fill() -> None:
        for session in ("run-1", "run-2"):
            await ws.offload_tool_result(
                session, ToolResultBlock(id="call_1", name="fetch_logs", output=log_text())
            )
        image = image_block(PNG)
        for batch in (
            [Msg(role="user", content="Find the failing order")],
            [Msg(role="assistant", content='print("FAILURE: quoted needle")')],
            [Msg(role="user", content=[TextBlock(text="look at this"), image])],
        ):
            await ws.offload_context("run-1", batch)
        await ws.record_event(
            "run-1",
            "truncation",
            tool_id="call_1",
            tool="fetch_logs",
            reference=f"{url}/sessions/run-1/tool_result-call_1.txt",
            tokens_before=30000,
            tokens_after=500,
        )
        await ws.write_state("run-1", {"session_id": "run-1", "steps": 3, "messages": []})

    asyncio.run(fill())
    yield url, ws


_MADE: list[str] = []


@pytest.fixture(autouse=True)
def _record_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Record the bucket copies this process makes: other test processes (pytest-xdist's
    workers) make and remove copies of their own in the same temporary folder meanwhile."""
    made = tempfile.mkdtemp

    def recording(*args: Any, **kwargs: Any) -> str:
        folder = made(*args, **kwargs)
        if os.path.basename(folder).startswith("ctxoffload-bucket-"):
            _MADE.append(os.path.basename(folder))
        return folder

    monkeypatch.setattr(tempfile, "mkdtemp", recording)


def copies() -> set[str]:
    """The copies this process made that are still on disk."""
    return {p for p in _MADE if os.path.exists(os.path.join(tempfile.gettempdir(), p))}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    assert SECRET_KEY not in captured.out + captured.err
    return code, captured.out, captured.err


@pytest.mark.slow
def test_ls_grep_cat_show_stats_read_the_bucket(
    env: dict[str, str],
    bucket: tuple[str, ObjectStoreWorkspace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, _ws = bucket
    before = copies()
    code, out, _ = run(capsys, "ls", "--workdir", url, "--json")
    assert code == 0
    rows = {r["session"]: r for r in json.loads(out)}
    assert set(rows) == {"run-1", "run-2"}
    assert rows["run-1"]["message_lines"] == 3 and rows["run-1"]["tool_results"] == 1
    assert rows["run-1"]["steps"] == 3

    code, out, _ = run(capsys, "grep", "ORD-58213", "--workdir", url)
    assert code == 0
    hits = sorted(out.splitlines())
    assert hits == [
        f"{url}/sessions/{s}/tool_result-call_1.txt:{NEEDLE_LINE}:"
        f"{NEEDLE_LINE:05d} ERROR order_id=ORD-58213 disk quota exceeded"
        for s in ("run-1", "run-2")
    ]
    # context.jsonl is matched on decoded text: the string as the model saw it.
    code, out, _ = run(capsys, "grep", "-F", 'print("FAILURE:', "run-1", "--workdir", url)
    assert code == 0 and out.startswith(f"{url}/sessions/run-1/context.jsonl:2:")

    reference = f"{url}/sessions/run-1/tool_result-call_1.txt"
    code, out, _ = run(
        capsys, "cat", reference, "--lines", f"{NEEDLE_LINE}:{NEEDLE_LINE}", "--workdir", url
    )
    assert code == 0
    assert out.split("\t", 1)[1].startswith(f"{NEEDLE_LINE:05d} ERROR order_id=ORD-58213")

    code, out, err = run(capsys, "show", "run-1", "--workdir", url)
    assert code == 0, err
    folder = f"{url}/sessions/run-1"
    assert out.startswith((f"session run-1 ({folder})\n", f"session run-1\n  in {folder}\n"))
    assert "30,000" in out and " whole output in tool_result-call_1.txt" in out

    code, out, _ = run(capsys, "stats", "--workdir", url, "--json")
    assert code == 0
    total = json.loads(out)["total"]
    assert total["sessions"] == 2 and total["data_files"] == 1
    assert copies() == before  # every temporary copy was removed


@pytest.mark.slow
def test_verify_finds_a_missing_segment(
    env: dict[str, str],
    bucket: tuple[str, ObjectStoreWorkspace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, ws = bucket
    code, out, _ = run(capsys, "verify", "--workdir", url)
    assert code == 0 and out.startswith("ok:"), out
    asyncio.run(ws._client.delete(["sessions/run-1/context.jsonl.d/000000000001.jsonl"]))
    code, out, _ = run(capsys, "verify", "run-1", "--workdir", url)
    assert code == 1
    assert f"{url}/sessions/run-1/context.jsonl: segment 1 is missing" in out


def test_gc_acts_on_the_bucket(
    env: dict[str, str],
    bucket: tuple[str, ObjectStoreWorkspace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, ws = bucket
    code, out, _ = run(capsys, "gc", "--older-than", "0", "--dry-run", "--workdir", url, "--json")
    assert code == 0
    assert sorted(json.loads(out)["sessions_removed"]) == ["run-1", "run-2"]
    assert asyncio.run(ws.list_sessions()) == ["run-1", "run-2"]
    code, out, _ = run(capsys, "gc", "--older-than", "0", "--workdir", url)
    assert code == 0 and "removed 2 sessions" in out
    assert asyncio.run(ws.list_sessions()) == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["show", "../x"], "no session '../x' (a host's id, stored as 'x."),
        (["grep", "x", "../x"], "no session '../x' (a host's id, stored as 'x."),
        (["show", "missing"], "no session 'missing'"),
        (["grep", "x", "missing"], "no session 'missing'"),
        (["watch"], "watch follows a folder or a database"),
        (["replay", "{transcript}"], "works on a local folder"),
        (["demo"], "works on a local folder"),
    ],
)
def test_bad_input_on_a_bucket_is_one_line(
    env: dict[str, str],
    bucket: tuple[str, ObjectStoreWorkspace],
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, _ = bucket
    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    monkeypatch.chdir(tmp_path)
    before = copies()
    code, _out, err = run(
        capsys, *[a.format(transcript=transcript) for a in args], "--workdir", url
    )
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and expected in err, err
    assert copies() == before
    assert sorted(os.listdir(tmp_path)) == ["chat.json"]  # nothing created


def test_an_error_about_a_file_of_a_bucket_names_its_uri(
    env: dict[str, str],
    bucket: tuple[str, ObjectStoreWorkspace],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The commands read a temporary copy, which is gone when the error is read: the error
    names the object the user asked for."""
    url, _ = bucket
    missing = f"{url}/sessions/run-1/tool_result-nope.txt"
    code, _out, err = run(capsys, "cat", missing, "--workdir", url)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert missing in err or f"{url}/sessions/run-1" in err, err
    assert tempfile.gettempdir() not in err, err


@pytest.mark.slow
def test_a_bucket_that_does_not_answer_is_one_line(
    env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stopped = S3Server()  # never started: nothing listens on its port
    monkeypatch.setenv("AWS_ENDPOINT_URL", stopped.endpoint_url)
    monkeypatch.setenv("CTXOFFLOAD_DEADLINE", "2")
    code, _out, err = run(capsys, "ls", "--workdir", "s3://nobody/here")
    assert code == 2 and len(err.strip().splitlines()) == 1, err  # an error, not "none found"
    assert "within the 2 s deadline" in err
    monkeypatch.setenv("CTXOFFLOAD_DEADLINE", "soon")
    code, _out, err = run(capsys, "ls", "--workdir", "s3://nobody/here")
    assert code == 2 and "CTXOFFLOAD_DEADLINE='soon'" in err


@pytest.mark.slow
def test_the_installed_command_reads_a_bucket(
    env: dict[str, str], bucket: tuple[str, ObjectStoreWorkspace]
) -> None:
    url, _ = bucket
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "grep", "disk quota", "run-2", "--workdir", url],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{url}/sessions/run-2/tool_result-call_1.txt:{NEEDLE_LINE}:")
