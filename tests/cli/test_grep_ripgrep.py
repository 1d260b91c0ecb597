"""`ctxoffload grep` through ripgrep prints exactly what the RE2 search prints.

ripgrep (the `fast` extra's binary wheel; the test extra installs it) searches tool-result
files where it reads a pattern as RE2 does. Each case runs the real command twice, as a user
would, once with `CTXOFFLOAD_GREP=python` (RE2 in this process) and once through a wrapper
that records that ripgrep ran, and compares stdout, stderr and the exit status: Unicode,
case folding, terminal escapes, bidi controls, NUL bytes, carriage returns, bytes that are not
UTF-8, lines past --max-columns.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ctxoffload import LocalWorkspace, ToolResultBlock
from ctxoffload.cli._cmd_grep import ripgrep_can, ripgrep_path

LINES = [
    "2026-11-20T03:42:00Z ERROR export-worker-7 order_id=ORD-58213 disk quota exceeded",
    "2026-11-20T03:42:01Z INFO exported ORD-10001 rows=7 bytes=100",
    "2026-11-20T03:42:02Z WARN été ÉTÉ naïve 日本語 🙂 done",
    "escape \x1b[2J\x1b]52;c;aGk=\x07 bidi \u202etxt.exe ERROR in the middle",
    "carriage\rreturn ERROR",
    "nul\x00byte ERROR",
    "not utf-8: \udcff\udcfe ERROR a\udcffb",
    "",
    "x" * 5000 + " ERROR at the end of a long line",
    "a.b(c) literal punctuation [x] {2}",
    "rows=300 rows=399 rows=3000",
]

CASES = [
    ["ERROR"],
    ["-F", "a.b(c)"],
    ["-F", "[x] {2}"],
    ["-i", "été"],
    ["-i", "error"],
    ["rows=3[0-9]{2} "],
    ["(ERROR|WARN)"],
    ["^2026"],
    ["done$"],
    ["日本."],
    ["a.b"],
    [""],
    ["no such text anywhere"],
    ["--max-columns", "100", "ERROR"],
    ["--max-columns", "0", "ERROR"],
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("rg") / "ws"
    ws = LocalWorkspace(workdir)

    async def fill() -> None:
        for session in ("run-1", "run-2"):
            output = "\n".join(LINES) + "\n"
            block = ToolResultBlock(id="call_1", name="logs", output=output)
            await ws.offload_tool_result(session, block)

    asyncio.run(fill())
    return workdir


@pytest.fixture(scope="module")
def recording_rg(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A wrapper that notes each run in a log, then runs the real ripgrep."""
    real = ripgrep_path()
    if real is None:
        pytest.fail("ripgrep is missing: pip install -e '.[test]' installs its binary wheel")
    folder = tmp_path_factory.mktemp("rg-wrapper")
    log = folder / "runs.log"
    wrapper = folder / "rg"
    wrapper.write_text(f'#!/bin/sh\necho run >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper, log


def grep(workdir: Path, args: list[str], engine: str) -> tuple[int, bytes, bytes]:
    env = {**os.environ, "CTXOFFLOAD_GREP": engine, "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "--workdir", str(workdir), "grep", *args],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a) or "empty")
def test_ripgrep_prints_what_re2_prints(
    workspace: Path, recording_rg: tuple[Path, Path], args: list[str]
) -> None:
    wrapper, log = recording_rg
    runs_before = log.read_text().count("run") if log.exists() else 0
    expected = grep(workspace, args, "python")
    got = grep(workspace, args, str(wrapper))
    assert got == expected
    assert log.read_text().count("run") > runs_before, "ripgrep did not run"


def test_what_ripgrep_would_read_otherwise_is_left_to_re2(
    workspace: Path, recording_rg: tuple[Path, Path]
) -> None:
    """Patterns whose classes mean other things in the two engines, context lines and
    --json stay with RE2; the results are the usual ones."""
    wrapper, log = recording_rg
    for args in (
        [r"\d{4}-\d\d"],
        [r"\bERROR\b"],
        ["(?i)error"],
        ["-C", "1", "ERROR"],
        ["--json", "ERROR"],
    ):
        before = log.read_text().count("run") if log.exists() else 0
        assert grep(workspace, args, str(wrapper)) == grep(workspace, args, "python")
        after = log.read_text().count("run") if log.exists() else 0
        assert after == before, args
    assert not ripgrep_can(r"\w+", fixed=False) and ripgrep_can(r"\w+", fixed=True)


def test_a_ripgrep_that_fails_leaves_the_search_to_re2(workspace: Path, tmp_path: Path) -> None:
    broken = tmp_path / "rg"
    broken.write_text("#!/bin/sh\necho 'rg: broken' >&2\nexit 2\n")
    broken.chmod(0o755)
    assert grep(workspace, ["ERROR"], str(broken)) == grep(workspace, ["ERROR"], "python")


def test_ripgrep_reads_no_link_and_no_hard_link(workspace: Path, tmp_path: Path) -> None:
    """The file ripgrep searches is the one this command opened and checked: a symbolic
    link is passed over and a hard-linked file refused, as without ripgrep."""
    copy = tmp_path / "ws"
    import shutil

    shutil.copytree(workspace, copy)
    secret = tmp_path / "secret.txt"
    secret.write_text("ERROR the secret\n")
    session = copy / "sessions" / "run-1"
    (session / "tool_result-link.txt").symlink_to(secret)
    os.link(secret, session / "tool_result-hard.txt")
    code, out, err = grep(copy, ["secret"], ripgrep_path() or "")
    assert b"the secret" not in out
    assert code == 2 and b"hard link" in err
    assert (code, out, err) == grep(copy, ["secret"], "python")
