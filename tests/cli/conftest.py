"""Real workspaces on disk for the `ctxoffload` command's tests, and a way to run it."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_workspace import fill_workspace

from ctxoffload.cli import main


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    """A workspace with two sessions: tool results, messages, an image stored once, events."""
    workdir = tmp_path / "ws"
    asyncio.run(fill_workspace(workdir))
    return workdir


@pytest.fixture
def new_workspace(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[[str], tuple[str, Any]]:
    """`new_workspace(kind)`: an empty workspace of a kind, "folder", "sqlite", "postgres"
    (a schema of its own on the test session's server) or "bucket" (moto's S3, with the
    command's environment pointed at it); its --workdir, and a workspace on it."""

    def make(kind: str) -> tuple[str, Any]:
        from ctxoffload import LocalWorkspace, ObjectStoreWorkspace, SqlWorkspace

        if kind == "folder":
            return str(tmp_path / "ws"), LocalWorkspace(tmp_path / "ws", fsync=False)
        if kind in ("sqlite", "postgres"):
            url = (
                f"sqlite:///{tmp_path / 'agents.db'}"
                if kind == "sqlite"
                else request.getfixturevalue("postgres").new_schema()
            )
            ws = SqlWorkspace(url)
            request.addfinalizer(ws.close)
            return url, ws
        s3 = request.getfixturevalue("s3")
        monkeypatch = request.getfixturevalue("monkeypatch")
        for name, value in s3.environment().items():
            monkeypatch.setenv(name, value)
        url = f"s3://{s3.new_bucket()}/agents"
        return url, ObjectStoreWorkspace(url, **s3.workspace_kwargs())

    return make


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run `ctxoffload ARGS` in this process; returns exit status, stdout and stderr."""

    def run(*args: str | Path) -> Result:
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@dataclass
class DemoRun:
    """One `ctxoffload demo` run: where it wrote, what it printed, and what happened inside."""

    workdir: Path
    result: Result
    report: Any  # the DemoReport run_demo returned
    grep_planned_from: list[str]  # the context, as JSON lines, each time the Grep step was planned


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """`ctxoffload demo --workdir <tmp>/d`, run once in this process for every test that reads it.

    The demo takes seconds and its tests only read what it printed and wrote, so they share
    one run instead of running it once each. On the way, the run's report and the context
    from which the scripted model planned its Grep step are recorded (the calls are passed
    through unchanged).
    """
    from ctxoffload.cli import _demo

    workdir = tmp_path_factory.mktemp("demo") / "d"
    reports: list[Any] = []
    grep_planned_from: list[str] = []
    run_demo, find_log_reference = _demo.run_demo, _demo._find_log_reference

    async def recorded_run_demo(*args: Any, **kwargs: Any) -> Any:
        report = await run_demo(*args, **kwargs)
        reports.append(report)
        return report

    def spy(messages: Any) -> str:
        grep_planned_from.append("\n".join(m.model_dump_json() for m in messages))
        return find_log_reference(messages)

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(out), redirect_stderr(err):
        patch.setattr(_demo, "run_demo", recorded_run_demo)
        patch.setattr(_demo, "_find_log_reference", spy)
        code = main(["demo", "--workdir", str(workdir)])
    [report] = reports
    return DemoRun(workdir, Result(code, out.getvalue(), err.getvalue()), report, grep_planned_from)
