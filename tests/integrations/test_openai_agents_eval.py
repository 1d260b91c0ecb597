"""`ctxoffload eval` asks an OpenAI Agents SDK `Model` through the door's adapter: the reader
served on 127.0.0.1, asked once as ctxoffload's `OpenAIChatModel` and once as the SDK's own
`OpenAIChatCompletionsModel` (its requests, its function tools, its output items), answers and
reads alike, probe by probe."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("agents", "openai_agents")

from agents import OpenAIChatCompletionsModel  # noqa: E402
from host_eval import (  # noqa: E402
    DEMO_SESSION,
    READER,
    demo_workdir,
    over_http,
    read_only_by_reading,
    seen,
)
from openai import AsyncOpenAI  # noqa: E402

from ctxoffload.eval import evaluate  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402


def test_an_sdk_model_is_asked_as_the_same_model_over_http(tmp_path: Path) -> None:
    workdir = demo_workdir(tmp_path)
    direct = over_http(workdir)

    async def through_the_sdk(base_url: str) -> Any:
        async with AsyncOpenAI(base_url=base_url, api_key="test") as client:
            model = OpenAIChatCompletionsModel("reader", openai_client=client)
            return await evaluate(str(workdir), DEMO_SESSION, model)

    with OpenAIServer() as server:
        server.responder = READER.answer_as_reader
        through = asyncio.run(through_the_sdk(server.base_url))
        bodies = list(server.requests)
    offered = [[t["function"]["name"] for t in body.get("tools") or []] for body in bodies]
    assert through.results and seen(through) == seen(direct)
    assert read_only_by_reading(through)  # the SDK offered the tools, its calls ran
    assert [] in offered and any(names[:2] == ["Read", "Grep"] for names in offered)
