"""`ctxoffload eval` asks a smolagents `Model` through the smolagents door's adapter: the
reader served on 127.0.0.1, asked once as ctxoffload's `OpenAIChatModel` and once as
smolagents' own `OpenAIServerModel` (its `generate`, its `Tool`s, its tool calls), answers and
reads alike, probe by probe.

smolagents' models send no tool message: a call and its result reach the model as a
`ToolCallingAgent` sends its steps, an assistant turn "Calling tools: [...]" and a user turn
"Observation: ...". The reader reads once per question whichever form its read's result
comes back in, so the answers are the same as over OpenAI's tool messages; a reader (or a
model) that took a user turn for a new request would read again and never answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("smolagents", "smolagents")

from host_eval import READER, asked_alike  # noqa: E402
from smolagents import OpenAIServerModel  # noqa: E402

from ctxoffload import Msg, Summary  # noqa: E402
from ctxoffload.integrations import chat_model_of  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402

READ = {
    "type": "function",
    "function": {
        "name": "Read",
        "description": "Read a workspace file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}},
            "required": ["path"],
        },
    },
}
"""A read-back tool in OpenAI's function format, as eval offers it."""


@asynccontextmanager
async def _server_model(base_url: str) -> AsyncIterator[Any]:
    model = OpenAIServerModel(model_id="reader", api_base=base_url, api_key="test")
    try:
        yield model
    finally:
        model.client.close()  # smolagents' OpenAI client, which it never closes


def test_a_smolagents_model_is_asked_as_the_same_model_over_http(tmp_path: Path) -> None:
    # smolagents sends a call's result as the user's "Observation:" turn, with no id.
    asked_alike(tmp_path, _server_model, by_id=False)


def _sent(**asked: Any) -> dict[str, Any]:
    """The body smolagents' `OpenAIServerModel` sent for one `generate` of the adapter's."""

    async def generate(base_url: str) -> None:
        async with _server_model(base_url) as model:
            await chat_model_of(model).generate(
                [Msg(role="user", content="Summarise the conversation so far.")], **asked
            )

    with OpenAIServer() as server:
        server.responder = READER.answer_as_reader
        asyncio.run(generate(server.base_url))
        (body,) = server.requests
    return dict(body)


def test_the_read_mode_leaves_the_model_free_to_answer_without_a_call() -> None:
    """smolagents asks its agent's model for a call at every step (`tool_choice` required);
    eval's model must be free to answer in text, after its read or without one."""
    body = _sent(tools=[READ])
    assert [t["function"]["name"] for t in body["tools"]] == ["Read"]
    assert body["tool_choice"] == "auto"
    # The tool as smolagents describes it: an optional argument nullable, the others required.
    parameters = body["tools"][0]["function"]["parameters"]
    assert parameters["required"] == ["path"] and parameters["properties"]["offset"]["nullable"]


def test_a_summary_request_carrying_the_agents_tools_is_asked_without_them() -> None:
    """A summary shaped as the agent's last request (for its cache) carries the agent's
    tools: the door's adapter asks it with the summary's schema alone, as before eval."""
    body = _sent(tools=[READ], response_schema=Summary.model_json_schema())
    assert "tools" not in body and "tool_choice" not in body
    assert body["response_format"]["json_schema"]["name"] == "summary"
