"""A commit record that does not match its log is not trusted by the commands either: `cat`,
`grep` and `ls` read the whole log, as the workspace's readers do (`Folder.committed_end`),
instead of stopping in the middle of a line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxoffload import LocalWorkspace, Msg
from ctxoffload._disk.commit import encode_commit_record
from ctxoffload._disk.layout import COMMIT_SUFFIX, CONTEXT_FILE


def ctxoffload(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxoffload", "--workdir", str(workdir), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    """A session of four messages whose commit record ends 5 bytes into the third line."""
    import asyncio

    async def build() -> None:
        ws = LocalWorkspace(tmp_path, fsync=False)
        await ws.initialize()
        for word in ("alpha", "bravo", "charlie", "delta"):
            await ws.offload_context("s", [Msg(role="user", content=f"{word} needle")])

    asyncio.run(build())
    log = tmp_path / "sessions" / "s" / CONTEXT_FILE
    raw = log.read_bytes()
    second_end = [i for i, b in enumerate(raw) if b == 0x0A][1] + 1
    log.with_name(CONTEXT_FILE + COMMIT_SUFFIX).write_bytes(encode_commit_record(second_end + 5, 2))
    return tmp_path


def test_grep_reads_every_line_past_a_record_ending_mid_line(damaged: Path) -> None:
    done = ctxoffload(damaged, "grep", "needle", "s")
    assert done.returncode == 0, done.stderr
    for word in ("alpha", "bravo", "charlie", "delta"):
        assert word in done.stdout


def test_cat_prints_every_line_past_a_record_ending_mid_line(damaged: Path) -> None:
    log = damaged / "sessions" / "s" / CONTEXT_FILE
    done = ctxoffload(damaged, "cat", str(log))
    assert done.returncode == 0, done.stderr
    assert "charlie" in done.stdout and "delta" in done.stdout


def test_ls_counts_every_message_past_a_record_ending_mid_line(damaged: Path) -> None:
    done = ctxoffload(damaged, "ls", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["message_lines"] == 4, row
