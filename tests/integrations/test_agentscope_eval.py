"""`ctxoffload eval` asks an AgentScope chat model through the AgentScope door's adapter: the
reader served on 127.0.0.1, asked once as ctxoffload's `OpenAIChatModel` and once as
AgentScope's own `OpenAIChatModel` (its `Msg`s with their tool call and result blocks, its own
formatter, the tools as its `tools=` schemas, its `ToolCallBlock`s read back), answers and
reads alike, probe by probe, streamed or not."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("agentscope", "agentscope")

from agentscope.credential import OpenAICredential  # noqa: E402
from agentscope.model import OpenAIChatModel  # noqa: E402
from host_eval import asked_alike  # noqa: E402

from ctxoffload import Msg, Summary  # noqa: E402
from ctxoffload.integrations import chat_model_of  # noqa: E402
from openai_server import OpenAIServer, chat_completion  # noqa: E402


def _agentscope_model(*, stream: bool) -> Any:
    @asynccontextmanager
    async def model_at(url: str) -> AsyncIterator[Any]:
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key="test", base_url=url),
            model="reader",
            stream=stream,
            max_retries=0,
        )
        try:
            yield model
        finally:
            await model.client.close()

    return model_at


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_agentscope_chat_model_is_asked_as_the_same_model_over_http(
    tmp_path: Path, stream: bool
) -> None:
    asked_alike(tmp_path, _agentscope_model(stream=stream))


def _summary_call(body: Any) -> dict[str, Any]:
    """A reply calling AgentScope's structured-output tool with a summary, whatever the
    request asked."""
    fields = {name: f"the {name}" for name in Summary.model_fields}
    call = {
        "id": "summary_1",
        "type": "function",
        "function": {"name": "generate_structured_output", "arguments": json.dumps(fields)},
    }
    return chat_completion(None, tool_calls=[call])


def test_a_summary_request_carrying_the_agents_tools_is_asked_without_them() -> None:
    """A summary shaped as the agent's last request (for its cache) carries the agent's
    tools: the adapter asks it through AgentScope's structured output, its one tool the
    summary's, as before eval."""

    async def summarised(url: str) -> Any:
        async with _agentscope_model(stream=False)(url) as model:
            read = {
                "type": "function",
                "function": {"name": "Read", "parameters": {"type": "object"}},
            }
            return await chat_model_of(model).generate(
                [Msg(role="user", content="Summarise the conversation so far.")],
                tools=[read],
                response_schema=Summary.model_json_schema(),
            )

    with OpenAIServer() as server:
        server.responder = _summary_call
        reply = asyncio.run(summarised(server.base_url))
        bodies = list(server.requests)
    offered = [[t["function"]["name"] for t in body.get("tools") or []] for body in bodies]
    assert offered == [["generate_structured_output"]]
    assert json.loads(reply.message.text)["task_overview"] == "the task_overview"


def test_a_model_without_structured_output_is_asked_for_the_summary_as_text() -> None:
    """A model that answers AgentScope's structured-output tool with text under each of its
    strategies is asked once more, with no tool, and its text goes to ctxoffload's parser."""
    written = json.dumps({name: f"the {name}" for name in Summary.model_fields})

    async def summarised(url: str) -> Any:
        async with _agentscope_model(stream=False)(url) as model:
            return await chat_model_of(model).generate(
                [Msg(role="user", content="Summarise the conversation so far.")],
                response_schema=Summary.model_json_schema(),
            )

    with OpenAIServer() as server:
        server.responder = lambda body: chat_completion(written)
        reply = asyncio.run(summarised(server.base_url))
        bodies = list(server.requests)
    offered = [[t["function"]["name"] for t in body.get("tools") or []] for body in bodies]
    assert offered[:-1] and all(names == ["generate_structured_output"] for names in offered[:-1])
    assert offered[-1] == []
    assert reply.message.text == written
