"""LangChain's own fake chat model, taught to call tools, and the runs the LangChain tests share
(offline `create_agent` runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    convert_to_openai_messages,
)
from pydantic import Field

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload.integrations.langchain import ContextOffloadMiddleware, DeltaAgentState

CONFIG = ContextConfig(context_window=4_000, tool_result_limit=300)
"""A small window, so that a few dozen turns are compacted."""


class ToolCallingFakeModel(GenericFakeChatModel):
    """`GenericFakeChatModel` plays its replies in order; its `bind_tools` raises (the
    default of `BaseChatModel`) and `create_agent` binds the tools, so this one accepts and
    ignores them. `seen` holds the messages of every call, as the model received them."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def scripted(*replies: AIMessage | str) -> ToolCallingFakeModel:
    """A fake model that answers with `replies`, one per call."""
    return ToolCallingFakeModel(messages=iter(list(replies)))


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    """An assistant turn that calls one tool."""
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}]
    )


def wire(messages: list[BaseMessage]) -> list[str]:
    """Each message as the bytes a provider would be sent (OpenAI JSON), for comparisons."""
    return [json.dumps(m, sort_keys=True) for m in convert_to_openai_messages(messages)]


def thread(name: str) -> dict[str, Any]:
    """A run's config naming its thread."""
    return {"configurable": {"thread_id": name}}


def answers(count: int) -> list[str]:
    """The model's replies of a long chat, one per turn."""
    return [
        f"Answer {i}: " + "the batch finished and the next one started. " * 8 for i in range(count)
    ]


def converse(agent: Any, turns: range, name: str) -> dict[str, Any]:
    """One question per turn on thread `name`; the last state."""
    state: dict[str, Any] = {}
    for turn in turns:
        question = f"Question {turn}: " + "what happened in the export job next? " * 8
        state = agent.invoke({"messages": [HumanMessage(question)]}, thread(name))
    return state


def agent_on(folder: Path, model: Any, saver: Any, *, delta: bool = False) -> Any:
    """A tool-less `create_agent` with the middleware on a workspace in `folder`; with
    `delta`, its messages checkpointed as deltas (`DeltaAgentState`)."""
    offload = ContextOffloadMiddleware(LocalWorkspace(folder), config=CONFIG, summary_model=False)
    schema = DeltaAgentState if delta else None
    return create_agent(
        model, tools=[], middleware=[offload], checkpointer=saver, state_schema=schema
    )
