"""`ctxoffload demo`, and the end-to-end recovery of a fact that left the context."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace
from ctxoffload._disk.read import rebuild_step
from ctxoffload.cli._demo import FAILED_ORDER, run_demo
from helpers import notes_in, tools_named, unreleased_leases

# `demo` (tests/cli/conftest.py) is one `ctxoffload demo` run that these tests share.


@pytest.mark.slow
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


@pytest.mark.slow
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
    # Read, Grep and Glob given, so no retrieval tool beside them (never both readers).
    assert report.tools == 7 and report.tools_tokens > 700
    assert f"the 7 tool schemas add {report.tools_tokens:,} to every call" in out


@pytest.mark.slow
def test_the_demo_releases_its_lease(demo: Any) -> None:
    assert (demo.workdir / "sessions" / "nightly-job" / "lease.json").exists()
    assert unreleased_leases(demo.workdir) == []


@pytest.mark.slow
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


@pytest.mark.slow
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


# -- the story in workdirs of any length -----------------------------------------------------
# Every notice and summary names the workspace's files by their full path, so the path's
# length moves the token counts and the steps at which compressions fall (docs/getting-
# started.md says so). What must not move is the story the page tells.


@contextlib.contextmanager
def workdir_of_length(length: int) -> Iterator[Path]:
    """A new folder whose absolute path has exactly `length` characters (at least 10),
    removed afterwards."""
    if length < 16:
        # Directly under /tmp: "/tmp/" and a random name, made with mkdir so that nothing
        # that exists is touched.
        while True:
            folder = Path("/tmp") / secrets.token_hex(8)[: length - len("/tmp/")]
            with contextlib.suppress(FileExistsError):
                folder.mkdir()
                break
        base = folder
    else:
        base = Path(tempfile.mkdtemp(dir="/tmp", prefix="d"))
        folder = base / ("w" * (length - len(str(base)) - 1))
    try:
        assert len(str(folder)) == length and str(folder) == os.path.abspath(folder)
        yield folder
    finally:
        shutil.rmtree(base, ignore_errors=True)


def tool_result_ids(message: dict[str, Any]) -> set[str]:
    """The call ids of the tool results a stored message holds."""
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return {b["id"] for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"}


@pytest.mark.slow
@pytest.mark.parametrize("length", [10, 40, 70, 100])
def test_the_demo_story_holds_in_a_workdir_path_of_any_length(length: int) -> None:
    """At least three compressions; the answer names the failing order; and it was found by
    a Grep and a Read of the 2026-11-20 log (call 2's file) at a step when that log's result
    had left the context for context.jsonl, and the order had never been in the context."""
    with workdir_of_length(length) as workdir:
        report = asyncio.run(run_demo(workdir))
        ws = LocalWorkspace(workdir)
        events = asyncio.run(ws.read_events(report.session_id))
        logged = asyncio.run(ws.read_context(report.session_id))
    assert report.compressions >= 3
    assert len([e for e in events if e["kind"] == "compression"]) == report.compressions
    assert FAILED_ORDER in report.answer

    log_file = ws.session_dir(report.session_id) / "tool_result-call_2.txt"
    calls = [e for e in events if e["kind"] == "tool_call"]
    grep = next(c for c in calls if c["name"] == "Grep")
    read = next(c for c in calls if c["name"] == "Read")
    # Read and Grep take paths absolute or relative to the workspace.
    assert workdir / grep["arguments"]["path_or_glob"] == log_file
    assert workdir / read["arguments"]["path"] == log_file and read["step"] == grep["step"] + 1

    # When the model planned the Grep, the log's result was no longer in its context: it was
    # in context.jsonl, put there by a compression before that step.
    planned_from = rebuild_step(events, grep["step"])
    assert not any("call_2" in tool_result_ids(m) for m in planned_from)
    line = next(i for i, m in enumerate(logged, 1) if "call_2" in tool_result_ids(m))
    assert any(
        e["kind"] == "compression" and e["lines"][0] <= line <= e["lines"][1]
        for e in events[: events.index(grep)]
    )
    # The order entered the context only with the Grep's answer.
    for step in range(1, grep["step"] + 1):
        assert FAILED_ORDER not in json.dumps(rebuild_step(events, step))
    answered_from = rebuild_step(events, read["step"] + 1)
    grep_answer = next(m for m in answered_from if grep["tool_id"] in tool_result_ids(m))
    assert f"order_id={FAILED_ORDER}" in json.dumps(grep_answer)


def test_every_notice_names_the_file_tools_the_demo_gives_its_model(demo: Any) -> None:
    # The prompt says "read them back with Read and Grep": every notice and summary the model
    # was sent names only tools it has, and the file tools among them.
    session = demo.workdir / "sessions" / demo.report.session_id
    events = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    tools = set(next(e for e in events if e["kind"] == "session_start")["tools"])
    steps = sorted({e["step"] for e in events if e["kind"] == "model_call"})
    notes = [
        note
        for step in steps
        for msg in rebuild_step(events, step)
        for note in notes_in(json.dumps(msg))
    ]
    assert len(notes) >= 5
    for note in notes:
        named = tools_named(note)
        assert named <= tools, f"names {named - tools}, not among {sorted(tools)}: {note}"
    truncations = [n for n in notes if n.startswith("<system-reminder>")]
    assert all(tools_named(n) & {"Read", "Grep"} for n in truncations), truncations[0]
