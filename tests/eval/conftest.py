"""A demo session to evaluate, made once, and the deterministic reader served on loopback."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from reader import answer_as_reader

from ctxoffload.cli import main
from openai_server import OpenAIServer

DEMO_SESSION = "nightly-job"


@pytest.fixture(scope="session")
def demo_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`ctxoffload demo --workdir <tmp>/d`, run once for every test that reads it (never
    written to by them)."""
    workdir = tmp_path_factory.mktemp("eval-demo") / "d"
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        assert main(["demo", "--workdir", str(workdir)]) == 0
    return workdir


@dataclass
class Ran:
    """One `ctxoffload` command run in this process: its exit status and what it printed."""

    code: int
    out: str
    err: str


def run_cli(*argv: str) -> Ran:
    """Run `ctxoffload ARGV...` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return Ran(code, out.getvalue(), err.getvalue())


@pytest.fixture
def reader_server() -> Iterator[OpenAIServer]:
    """An OpenAI-compatible server on 127.0.0.1 answering as the deterministic reader."""
    with OpenAIServer() as server:
        server.responder = answer_as_reader
        yield server
