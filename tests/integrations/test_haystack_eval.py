"""`ctxoffload eval` asks a Haystack chat generator through the Haystack door's adapter: the
reader served on 127.0.0.1, asked once as ctxoffload's `OpenAIChatModel` and once as
Haystack's own `OpenAIChatGenerator` (its messages, its `Tool`s, its tool calls), answers and
reads alike, probe by probe."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest
from frameworks import require_framework

require_framework("haystack", "haystack")

from haystack.components.generators.chat import OpenAIChatGenerator  # noqa: E402
from haystack.utils import Secret  # noqa: E402
from host_eval import (  # noqa: E402
    DEMO_SESSION,
    READER,
    demo_workdir,
    over_http,
    read_only_by_reading,
    seen,
)

from ctxoffload.eval import evaluate  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402


# The host's OpenAI client may leave a socket for the collector (its pool, not ctxoffload's):
# collected here, inside this test, rather than failing whichever test runs next.
@pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)
def test_a_haystack_generator_is_asked_as_the_same_model_over_http(tmp_path: Path) -> None:
    workdir = demo_workdir(tmp_path)
    direct = over_http(workdir)
    with OpenAIServer() as server:
        server.responder = READER.answer_as_reader
        generator = OpenAIChatGenerator(
            api_key=Secret.from_token("test"), model="reader", api_base_url=server.base_url
        )
        through = asyncio.run(evaluate(str(workdir), DEMO_SESSION, generator))
        bodies = list(server.requests)
    offered = [[t["function"]["name"] for t in body.get("tools") or []] for body in bodies]
    assert through.results and seen(through) == seen(direct)
    assert read_only_by_reading(through)  # Haystack offered the tools, its calls ran
    assert [] in offered and any(names[:2] == ["Read", "Grep"] for names in offered)
    gc.collect()
