"""`ctxoffload eval` asks an OpenAI Agents SDK `Model` through the door's adapter: the reader
served on 127.0.0.1, asked once as ctxoffload's `OpenAIChatModel` and once as the SDK's own
`OpenAIChatCompletionsModel` (its requests, its function tools, its output items), answers and
reads alike, probe by probe."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("agents", "openai_agents")

from agents import OpenAIChatCompletionsModel  # noqa: E402
from host_eval import asked_alike  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402


@asynccontextmanager
async def _sdk_model(base_url: str) -> AsyncIterator[Any]:
    async with AsyncOpenAI(base_url=base_url, api_key="test") as client:
        yield OpenAIChatCompletionsModel("reader", openai_client=client)


def test_an_sdk_model_is_asked_as_the_same_model_over_http(tmp_path: Path) -> None:
    asked_alike(tmp_path, _sdk_model)
