"""Fixtures shared by the test suite: workspaces on real directories and real child processes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path


def _cache_bytecode() -> None:
    """Where PYTHONDONTWRITEBYTECODE is set (some CI machines set it), every pytest-xdist
    worker would rewrite and compile every test module again (most of collection's CPU), and
    every interpreter a test starts would compile the package from source again. The suite
    keeps its bytecode in one folder of the system's temporary directory instead
    (PYTHONPYCACHEPREFIX), never beside the sources, so what that variable keeps clean stays
    clean. Set here, before the package is imported, and inherited by the workers and every
    child process. A PYTHONPYCACHEPREFIX already set is kept."""
    if not sys.dont_write_bytecode:
        return
    prefix = os.environ.get("PYTHONPYCACHEPREFIX") or os.path.join(
        tempfile.gettempdir(), f"ctxoffload-tests-pycache-{os.getuid()}"
    )
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_cache_bytecode()

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from ctxoffload import InMemoryWorkspace, LocalWorkspace, SqlWorkspace  # noqa: E402
from ctxoffload.workspace import Workspace  # noqa: E402
from helpers import examples, snapshot_tree  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402
from pg_server import PostgresServer, start_or_skip  # noqa: E402
from s3_server import s3  # noqa: E402, F401  (the fixture: an S3 API on loopback, for every folder)

# No wall-clock limit on any example: the suite runs on more workers than cores, and a slow
# moment on a busy machine is not a failure. A property test that sets no count of its own
# draws hypothesis's 100 examples where CI runs it, a quarter in a contributor's run (see
# `helpers.examples`, which the others use).
settings.register_profile("ctxoffload", deadline=None, max_examples=examples(100))
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
