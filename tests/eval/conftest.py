"""A demo session to evaluate, made once, and the deterministic reader served on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from eval_session import run_cli
from reader import answer_as_reader

from openai_server import OpenAIServer


@pytest.fixture(scope="session")
def demo_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`ctxoffload demo --workdir <tmp>/d`, run once for every test that reads it (never
    written to by them)."""
    workdir = tmp_path_factory.mktemp("eval-demo") / "d"
    ran = run_cli("demo", "--workdir", str(workdir))
    assert ran.code == 0, ran.err
    return workdir


@pytest.fixture
def reader_server() -> Iterator[OpenAIServer]:
    """An OpenAI-compatible server on 127.0.0.1 answering as the deterministic reader."""
    with OpenAIServer() as server:
        server.responder = answer_as_reader
        yield server
