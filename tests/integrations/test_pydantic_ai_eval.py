"""`ctxoffload eval` asks a pydantic-ai `Model` through the pydantic-ai door's adapter: the
reader served on 127.0.0.1, asked once as ctxoffload's `OpenAIChatModel` and once as
pydantic-ai's own OpenAI model (its requests, its tool definitions, its parsing), answers and
reads alike, probe by probe."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("pydantic_ai", "pydantic_ai")

from host_eval import (  # noqa: E402
    DEMO_SESSION,
    READER,
    demo_workdir,
    over_http,
    read_only_by_reading,
    seen,
)
from openai import AsyncOpenAI  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel as PydanticOpenAIModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from ctxoffload.eval import evaluate  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402


# The host's OpenAI client may leave a socket for the collector (its pool, not ctxoffload's):
# collected here, inside this test, rather than failing whichever test runs next.
@pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)
def test_a_pydantic_ai_model_is_asked_as_the_same_model_over_http(tmp_path: Path) -> None:
    workdir = demo_workdir(tmp_path)
    direct = over_http(workdir)

    async def through_pydantic_ai(base_url: str) -> Any:
        async with AsyncOpenAI(base_url=base_url, api_key="test") as client:
            model = PydanticOpenAIModel("reader", provider=OpenAIProvider(openai_client=client))
            return await evaluate(str(workdir), DEMO_SESSION, model)

    with OpenAIServer() as server:
        server.responder = READER.answer_as_reader
        through = asyncio.run(through_pydantic_ai(server.base_url))
        bodies = list(server.requests)
    offered = [[t["function"]["name"] for t in body.get("tools") or []] for body in bodies]
    assert through.results and seen(through) == seen(direct)
    assert read_only_by_reading(through)  # pydantic-ai offered the tools, its calls ran
    assert [] in offered and any(names[:2] == ["Read", "Grep"] for names in offered)
    gc.collect()
