"""The runs the OpenAI Agents SDK tests share: an `Agent` on `OpenAIChatCompletionsModel`
talking to the project's loopback server (tests/openai_server.py), offline; and `Scripted`,
an SDK `Model` of the test's own for runs that go on side by side (each its own script)."""

from __future__ import annotations

import json
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai import AsyncOpenAI
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

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


def tool_call(name: str, call_id: str, **arguments: Any) -> ResponseFunctionToolCall:
    """A model's output item calling tool `name` as call `call_id`."""
    return ResponseFunctionToolCall(
        type="function_call", name=name, arguments=json.dumps(arguments), call_id=call_id
    )


def answer(text: str) -> ResponseOutputMessage:
    """A model's output item answering `text`."""
    content = [ResponseOutputText(type="output_text", text=text, annotations=[])]
    return ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed", content=content
    )


class Scripted(Model):  # type: ignore[misc]
    """An SDK `Model` answering each call with the next of its output items, and keeping the
    input items each call was sent (`seen`)."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.seen: list[list[Any]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        self.seen.append(list(input) if isinstance(input, list) else [input])
        return ModelResponse(output=[self.replies.pop(0)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("Scripted answers Runner.run, not run_streamed")
