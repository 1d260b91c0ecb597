"""What the tests of `ctxoffload eval` through a door's model share: the deterministic reader
(tests/eval/reader.py), the demo's session to evaluate, and the same evaluation asked of the
reader over HTTP as an `OpenAIChatModel`, to compare a host's model with."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from typing import Any

from ctxoffload.agent import OpenAIChatModel
from ctxoffload.cli import main
from ctxoffload.eval import evaluate
from openai_server import OpenAIServer

DEMO_SESSION = "nightly-job"


def _reader() -> Any:
    path = Path(__file__).parents[1] / "eval" / "reader.py"
    spec = importlib.util.spec_from_file_location("eval_reader", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


READER = _reader()
"""tests/eval/reader.py: `answer_as_reader(body)`, a chat completion for a request body."""


def demo_workdir(root: Path) -> Path:
    """`ctxoffload demo --workdir <root>/d`: the session `DEMO_SESSION`, compacted 4 times."""
    workdir = root / "d"
    assert main(["demo", "--workdir", str(workdir)]) == 0
    return workdir


def seen(report: Any) -> list[tuple[Any, ...]]:
    """What each probe was answered, and how it was graded, in both modes."""
    return [
        (
            r.probe.question,
            *(r.no_tools.text, r.no_tools_correct),
            *(r.one_read.text, r.one_read.read, r.one_read_correct),
        )
        for r in report.results
    ]


def over_http(workdir: Path) -> Any:
    """The demo session evaluated by the reader served on 127.0.0.1, as `OpenAIChatModel`."""

    async def evaluated(base_url: str) -> Any:
        async with OpenAIChatModel("reader", base_url=base_url, api_key="test") as model:
            return await evaluate(str(workdir), DEMO_SESSION, model)

    with OpenAIServer() as server:
        server.responder = READER.answer_as_reader
        return asyncio.run(evaluated(server.base_url))


def read_only_by_reading(report: Any) -> bool:
    """Whether a probe the model missed with no tools was answered by one read."""
    return any(
        r.one_read.read and r.one_read_correct and not r.no_tools_correct for r in report.results
    )
