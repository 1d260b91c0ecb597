"""`ctxoffload eval` asks a pydantic-ai `Model` through the pydantic-ai door's adapter: the
reader served on 127.0.0.1, asked once as ctxoffload's `OpenAIChatModel` and once as
pydantic-ai's own OpenAI model (its requests, its tool definitions, its parsing), answers and
reads alike, probe by probe."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("pydantic_ai", "pydantic_ai")

from host_eval import asked_alike  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel as PydanticOpenAIModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402


@asynccontextmanager
async def _pydantic_ai_model(base_url: str) -> AsyncIterator[Any]:
    """pydantic-ai's OpenAI model over a client the test closes (a provider made with
    `base_url=` keeps one nobody closes)."""
    async with AsyncOpenAI(base_url=base_url, api_key="test") as client:
        yield PydanticOpenAIModel("reader", provider=OpenAIProvider(openai_client=client))


# The host's OpenAI client may leave a socket for the collector (its pool, not ctxoffload's):
# `asked_alike` collects it inside this test, rather than failing whichever test runs next.
@pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)
def test_a_pydantic_ai_model_is_asked_as_the_same_model_over_http(tmp_path: Path) -> None:
    asked_alike(tmp_path, _pydantic_ai_model)
