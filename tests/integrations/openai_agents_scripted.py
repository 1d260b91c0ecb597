"""The runs the OpenAI Agents SDK tests share: an `Agent` on `OpenAIChatCompletionsModel`
talking to the project's loopback server (tests/openai_server.py), offline."""

from __future__ import annotations

import json
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
from openai import AsyncOpenAI

from ctxoffload.integrations.openai_agents import OffloadingInputFilter
from openai_server import OpenAIServer, chat_completion


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    """A chat completion that calls tool `name` with `arguments` as call `call_id`."""
    function = {"name": name, "arguments": json.dumps(arguments)}
    return chat_completion(tool_calls=[{"id": call_id, "type": "function", "function": function}])


async def run(
    server: OpenAIServer, offload: OffloadingInputFilter, tools: list[Any], question: str, **kw: Any
) -> Any:
    """One run of an agent on `server` with `offload` as its input filter (the client closed
    on the run's own event loop); `kw` goes to `Runner.run` (`session=`, `max_turns=`)."""
    async with AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client:
        model = OpenAIChatCompletionsModel(model="test-model", openai_client=client)
        agent = Agent(name="ops", instructions="You run exports.", model=model, tools=tools)
        config = RunConfig(call_model_input_filter=offload)
        return await Runner.run(agent, question, run_config=config, **kw)
