"""A scripted pydantic-ai model and agent for the ContextOffload tests (pydantic-ai's own
`FunctionModel`, offline), shared by the tests and the resumed-run script."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload.integrations.pydantic_ai import ContextOffload, from_pydantic_ai
from ctxoffload.tokens import get_token_counter

BIG = "".join(f"03:{i % 60:02d} INFO export batch {i} done\n" for i in range(160_000))  # ~5 MB
CONFIG = ContextConfig(context_window=4_000, tool_result_limit=300)
"""A small window, so that a few dozen turns are compacted."""


def dump() -> str:
    """Dump the export job's whole log."""
    return BIG


class Scripted:
    """A `FunctionModel` that answers from a script and records the messages each request
    was sent."""

    def __init__(self, *replies: ModelResponse) -> None:
        self.replies = iter(replies)
        self.seen: list[list[ModelMessage]] = []
        self.model = FunctionModel(self.answer)

    def answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        return next(self.replies)


def call(name: str, args: dict[str, Any], call_id: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args, call_id)])


def say(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


def tokens(messages: list[ModelMessage]) -> int:
    return get_token_counter(None).count_messages(from_pydantic_ai(messages))


def wire(messages: list[ModelMessage]) -> list[str]:
    """What a request carried, one line a `Msg`, without timestamps."""
    return [
        json.dumps([msg.role, msg.model_dump(mode="json")["content"]])
        for msg in from_pydantic_ai(messages)
    ]


def agent_on(folder: Path, model: Scripted) -> Agent[None, str]:
    """A new agent with the capability on a new workspace object on `folder`."""
    offload = ContextOffload(LocalWorkspace(folder), config=CONFIG, summary_model=False)
    return Agent(model.model, tools=[dump], capabilities=[offload])


async def converse(
    agent: Agent[None, str],
    model: Scripted,
    turns: range,
    session: str,
    history: list[ModelMessage] | None = None,
) -> list[ModelMessage]:
    """Run `turns` of the long chat on `session`, each a run given the history before it."""
    history = list(history or [])
    for turn in turns:
        model.replies = iter([say(f"Noted, step {turn} is logged. " + "ok " * 30)])
        prompt = f"Step {turn}: record the reading {turn * 7} " + "and more detail " * 20
        result = await agent.run(prompt, message_history=history, conversation_id=session)
        history = result.all_messages()
    return history
