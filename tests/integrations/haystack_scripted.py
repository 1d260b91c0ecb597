"""A Haystack Agent for the WorkspaceResultStore tests: Haystack's own `MockChatGenerator`
answering from a script and keeping what each call was sent, offline."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import Tool

from ctxoffload import Msg
from ctxoffload.tokens import get_token_counter

BIG = "".join(f"03:{i % 60:02d} INFO export batch {i} done\n" for i in range(160_000))  # ~5 MB


def call(name: str, arguments: dict[str, Any], call_id: str | None) -> ChatMessage:
    """A reply that calls one tool."""
    return ChatMessage.from_assistant(
        tool_calls=[ToolCall(tool_name=name, arguments=arguments, id=call_id)]
    )


def say(text: str) -> ChatMessage:
    return ChatMessage.from_assistant(text)


class Scripted:
    """A `MockChatGenerator` whose replies come from `replies`; `seen` holds what each call
    was sent, as (role, text) pairs, and `sent` the messages themselves."""

    def __init__(self, replies: Iterable[ChatMessage] = ()) -> None:
        self.replies = iter(replies)
        self.seen: list[list[tuple[str, str]]] = []
        self.sent: list[list[ChatMessage]] = []
        self._lock = threading.Lock()
        self.generator = MockChatGenerator(response_fn=self._reply)

    def _reply(self, messages: list[ChatMessage]) -> ChatMessage:
        with self._lock:
            sent = [as_sent(m) for m in messages]
            self.seen.append(sent)
            self.sent.append(list(messages))
            chosen = next(self.replies)
        # The usage a provider reports (what Haystack's CompactionHook sizes the context by):
        # the mock's own is a word count, far below any tokenizer's. The reply counts as what
        # it says (a call's arguments among it).
        usage = {"prompt_tokens": tokens(sent), "completion_tokens": tokens([as_sent(chosen)])}
        return ChatMessage.from_assistant(
            chosen.text, tool_calls=chosen.tool_calls, meta={"usage": usage}
        )


def as_sent(message: ChatMessage) -> tuple[str, str]:
    """A message as its role and the text the model reads of it."""
    result = message.tool_call_result
    if result is not None:
        return "tool", str(result.result)
    text = message.text or ""
    calls = " ".join(f"{c.tool_name}({c.arguments})" for c in message.tool_calls)
    return message.role.value, (text + " " + calls).strip()


def tokens(sent: list[tuple[str, str]]) -> int:
    msgs = [Msg(role="user" if role == "tool" else role, content=text) for role, text in sent]  # type: ignore[arg-type]
    return get_token_counter(None).count_messages(msgs)


def returning(name: str, outputs: list[str], gate: threading.Event | None = None) -> Tool:
    """A tool that returns the next of `outputs`."""

    def run(note: str = "") -> str:
        if gate is not None:
            gate.wait(60)
        return outputs.pop(0)

    return Tool(
        name=name,
        description="Fetch the next output.",
        parameters={"type": "object", "properties": {"note": {"type": "string"}}},
        function=run,
    )


def agent_with(model: Scripted, tools: list[Tool], hooks: dict[str, list[Any]]) -> Agent:
    return Agent(chat_generator=model.generator, tools=tools, hooks=hooks, max_agent_steps=100)
