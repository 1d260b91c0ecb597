"""A demo session to evaluate, made once."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from ctxoffload.cli import main

DEMO_SESSION = "nightly-job"


@pytest.fixture(scope="session")
def demo_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`ctxoffload demo --workdir <tmp>/d`, run once for every test that reads it (never
    written to by them)."""
    workdir = tmp_path_factory.mktemp("eval-demo") / "d"
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        assert main(["demo", "--workdir", str(workdir)]) == 0
    return workdir
