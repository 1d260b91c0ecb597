"""Fixtures shared by the test suite: workspaces on real directories and real child processes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from ctxoffload import InMemoryWorkspace, LocalWorkspace, SqlWorkspace
from ctxoffload.workspace import Workspace
from helpers import snapshot_tree
from openai_server import OpenAIServer
from pg_server import PostgresServer, start_or_skip
from s3_server import s3  # noqa: F401  (the fixture: an S3 API on loopback, for every folder)

# No wall-clock limit on any example: the suite runs on more workers than cores, and a slow
# moment on a busy machine is not a failure.
settings.register_profile("ctxoffload", deadline=None)
settings.load_profile("ctxoffload")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (the default, pyproject.toml): one pytest-xdist worker per core, plus one.

    Many tests spend their time waiting (on child processes, a local server, a deadline), so
    a spare worker keeps the cores busy; the timings that chose it are in docs/benchmarks.md
    (the test suite). `-n 0` runs it in this process.
    """
    return (os.cpu_count() or 1) + 1


@pytest.fixture(autouse=True)
def no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts without $COLUMNS, as a command in a pipe does: pytest-xdist sets it
    to 80 in its workers, which made the tables of in-process commands fit 80 columns under
    `-n` and not under `-n 0`. A test about widths sets it itself."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """Where a test's LocalWorkspace lives (not created: the workspace creates it)."""
    return tmp_path / "ws"


@pytest.fixture
def local_ws(workdir: Path) -> LocalWorkspace:
    """A LocalWorkspace on a fresh directory, with the default fsync on."""
    return LocalWorkspace(workdir)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the whole test session (one per xdist worker), on a
    unix socket in a temporary folder (tests/pg_server.py); a skip saying how to run the
    tests where there is none, a failure under CI=true."""
    server = start_or_skip()
    yield server
    server.stop()


@pytest.fixture(params=["local", "memory", "sqlite", "postgres"])
def workspace(request: pytest.FixtureRequest, workdir: Path) -> Workspace:
    """Each workspace implementation in turn, for the behaviour they must share (the SQL one
    on a SQLite file beside the workdir, and in a schema of its own on a real PostgreSQL
    server)."""
    if request.param == "local":
        return LocalWorkspace(workdir)
    if request.param == "sqlite":
        return SqlWorkspace(f"sqlite:///{workdir.parent / 'ws.db'}")
    if request.param == "postgres":
        return SqlWorkspace(request.getfixturevalue("postgres").new_schema())
    return InMemoryWorkspace()


@pytest.fixture
def tree() -> Callable[[Path], dict[str, bytes | None]]:
    """`tree(root)`: a snapshot of every directory and file under `root`, to compare."""
    return snapshot_tree


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    """A scripted OpenAI-compatible server on 127.0.0.1 (tests/openai_server.py), stopped when
    the test ends."""
    with OpenAIServer() as running:
        yield running


SpawnPython = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def spawn_python() -> Iterator[SpawnPython]:
    """`spawn_python(code, *args)` starts `sys.executable -c code args...` as a real process.

    stdin, stdout and stderr are text pipes. Every child still running when the test ends is
    killed and reaped, so a failing test leaves no process (and no ResourceWarning) behind.
    """
    children: list[subprocess.Popen[str]] = []

    def spawn(code: str, *args: str) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        children.append(child)
        return child

    yield spawn
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()
        for pipe in (child.stdin, child.stdout, child.stderr):
            if pipe is not None:
                # A child killed early cannot take what is still buffered for its stdin.
                with contextlib.suppress(BrokenPipeError):
                    pipe.close()
