"""`ctxoffload demo`, and the end-to-end recovery of a fact that left the context."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from ctxoffload.cli._demo import FAILED_ORDER

# `demo` (tests/cli/conftest.py) is one `ctxoffload demo` run that these tests share.


def test_demo_recovers_a_fact_only_a_file_still_holds(demo: Any) -> None:
    report = demo.report
    assert report.compressions >= 2
    assert report.truncations >= 5
    assert FAILED_ORDER in report.answer
    # The Grep step was planned from a context in which the failing order appears nowhere:
    # the fact survived only in the offloaded log file.
    grep_step = next(s for s in report.steps if s[1] == "Grep")
    assert len([s for s in report.steps if s[4] and s[0] < grep_step[0]]) >= 2
    session = demo.workdir / "sessions" / report.session_id
    log = (session / "tool_result-call_2.txt").read_text()
    assert f"order_id={FAILED_ORDER}" in log
    assert len(log) > 2_000_000
    assert (session / "context.jsonl").stat().st_size > 0
    assert (session / "state.json").exists()
    assert list((demo.workdir / "data").glob("*.png"))


def test_the_model_never_saw_the_fact_before_grepping(demo: Any) -> None:
    seen = demo.grep_planned_from
    assert seen, "the Grep step never ran"
    assert FAILED_ORDER not in seen[0]
    assert "tool_result-call_2.txt" in seen[0]


def test_demo_command_prints_the_report(demo: Any) -> None:
    """The command prints its report.

    Run in this process by the shared `demo`; test_demo_with_a_relative_workdir runs the
    demo as a real `python -m ctxoffload` process.
    """
    assert demo.result.code == 0
    out = demo.result.out
    assert "context tokens" in out and "without ctxoffload" in out
    assert "compressions of older history" in out
    assert FAILED_ORDER in out
    assert f"grep -n ERROR {demo.workdir}" in out
    # The table counts the messages; the line under it says what the tool schemas add, so
    # its numbers and `show`'s "tokens counted" (messages and schemas) can be told apart.
    report = demo.report
    assert report.tools == 8 and report.tools_tokens > 1_000
    assert f"the 8 tool schemas add {report.tools_tokens:,} to every call" in out


def test_demo_in_a_deep_workdir_finds_the_log_through_the_session_folder(tmp_path: Path) -> None:
    """A long workspace path leaves room in the summary for the newest files only.

    The 2026-11-20 log is then named nowhere in the context; the demo found it under a short
    path and failed under a long one (pytest-xdist's temp folders). The summary still names
    the session folder, and the run must reach the same answer from it.
    """
    import asyncio

    from ctxoffload.cli._demo import run_demo

    workdir = tmp_path / ("a-rather-long-folder-name-" * 3) / "workspace"
    report = asyncio.run(run_demo(workdir))
    assert FAILED_ORDER in report.answer
    assert len(str(workdir)) > 100


def test_demo_refuses_to_overwrite_a_session(tmp_path: Path) -> None:
    (tmp_path / "d" / "sessions" / "nightly-job").mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "demo", "--workdir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "already exists" in done.stderr


def test_demo_with_a_relative_workdir(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "demo", "--workdir", "rel-ws"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert f"order {FAILED_ORDER}" in done.stdout
    assert (tmp_path / "rel-ws" / "sessions" / "nightly-job" / "state.json").exists()
