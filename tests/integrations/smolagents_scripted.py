"""A scripted smolagents model for the OffloadingStepCallbacks tests: a subclass of smolagents'
own `Model` (the way its docs say to bring a model), answering from a script and keeping the
messages each call was sent, offline."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from smolagents import Tool, ToolCallingAgent
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
    tool_role_conversions,
)
from smolagents.monitoring import TokenUsage

from ctxoffload import Msg
from ctxoffload.tokens import get_token_counter
from helpers import summary_reply

BIG = "".join(f"03:{i % 60:02d} INFO export batch {i} done\n" for i in range(160_000))  # ~5 MB


def call(name: str, arguments: dict[str, Any], call_id: str) -> ChatMessage:
    """A reply that calls one tool."""
    function = ChatMessageToolCallFunction(name=name, arguments=arguments)
    return ChatMessage(
        role=MessageRole.ASSISTANT,
        content=None,
        tool_calls=[ChatMessageToolCall(function=function, id=call_id, type="function")],
    )


def answer(text: str, call_id: str = "final") -> ChatMessage:
    """A reply that ends the run with `text` (smolagents' `final_answer` tool)."""
    return call("final_answer", {"answer": text}, call_id)


class Scripted(Model):  # type: ignore[misc]
    """Answers from `replies` (or `reply(messages)`), recording what each call was sent as
    (role, text) pairs, roles as the model sees them. A request for a `response_format` (a
    summary the door asks the agent's own model for) is no turn of the script: it is kept in
    `summaries` and answered with the five fields marked `scripted`."""

    def __init__(self, replies: Iterable[ChatMessage] = (), **kwargs: Any) -> None:
        super().__init__(model_id="scripted", **kwargs)
        self.replies = iter(replies)
        self.seen: list[list[tuple[str, str]]] = []
        self.summaries: list[dict[str, Any]] = []
        self.reply: Callable[[list[tuple[str, str]]], ChatMessage] | None = None
        self._lock = threading.Lock()

    def generate(self, messages: list[Any], **kwargs: Any) -> ChatMessage:
        sent = [as_sent(m) for m in messages]
        if kwargs.get("response_format") is not None:
            with self._lock:
                self.summaries.append(kwargs["response_format"])
            return ChatMessage(
                role=MessageRole.ASSISTANT,
                content=json.dumps(summary_reply("scripted")),
                token_usage=TokenUsage(
                    input_tokens=sum(len(t) for _, t in sent) // 4, output_tokens=60
                ),
            )
        with self._lock:
            self.seen.append(sent)
            chosen = self.reply(sent) if self.reply is not None else next(self.replies)
        usage = TokenUsage(input_tokens=sum(len(t) for _, t in sent) // 4, output_tokens=5)
        return ChatMessage(
            role=chosen.role,
            content=chosen.content,
            tool_calls=chosen.tool_calls,
            token_usage=usage,
        )


def as_sent(message: Any) -> tuple[str, str]:
    """A smolagents message as its role (converted as models send it) and text."""
    role = message.role if not isinstance(message, dict) else message["role"]
    role = tool_role_conversions.get(role, role)
    content = message.content if not isinstance(message, dict) else message["content"]
    if isinstance(content, list):
        text = "\n".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    else:
        text = str(content or "")
    return str(getattr(role, "value", role)), text


class Fetch(Tool):  # type: ignore[misc]
    """A tool that returns the next output of a list (and may wait at a gate first)."""

    name = "fetch"
    description = "Fetch the next output."
    inputs: ClassVar[dict[str, Any]] = {}
    output_type = "string"

    def __init__(self, outputs: list[str], gate: threading.Event | None = None) -> None:
        super().__init__()
        self.outputs = outputs
        self.gate = gate
        self.entered = threading.Event()

    def forward(self) -> str:
        if self.gate is not None:
            self.entered.set()
            self.gate.wait(60)
        return self.outputs.pop(0)


def agent_with(model: Scripted, offload: Any, *tools: Any, **kwargs: Any) -> ToolCallingAgent:
    """A ToolCallingAgent with the callbacks and their read-back tools, quiet."""
    return ToolCallingAgent(
        tools=[*tools, *offload.tools],
        model=model,
        step_callbacks=offload.step_callbacks,
        verbosity_level=0,
        **kwargs,
    )


def texts(sent: list[tuple[str, str]]) -> str:
    return json.dumps(sent)


def tokens(sent: list[tuple[str, str]]) -> int:
    """What a call sent costs, counted as ctxoffload counts a request."""
    counter = get_token_counter(None)
    return counter.count_messages([Msg(role=role, content=text) for role, text in sent])  # type: ignore[arg-type]
