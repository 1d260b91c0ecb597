"""A scripted CrewAI LLM (a subclass of CrewAI's own `BaseLLM`, offline) and the agents, crews
and tools the CrewAI door's tests drive with it.

CrewAI's telemetry is off here (`CREWAI_DISABLE_TELEMETRY`, `OTEL_SDK_DISABLED`, set before
CrewAI is imported): the tests make no network call."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator

from frameworks import require_framework

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

with warnings.catch_warnings():
    # CrewAI's own import sets attributes on a namespace package, which Python warns of.
    warnings.simplefilter("ignore", ImportWarning)
    require_framework("crewai", "crewai")

import json
import threading
from collections.abc import Callable
from typing import Any

from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import BaseTool
from pydantic import PrivateAttr

from ctxoffload.tokens import get_token_counter

HOST_WARNINGS = [
    "ignore:function_calling_llm is deprecated:DeprecationWarning",
    "ignore:deprecated:DeprecationWarning",  # pydantic's, as CrewAI reads that field
]
"""What CrewAI warns of on every agent it makes (its deprecated `function_calling_llm`, not
ours): `pytestmark = [pytest.mark.filterwarnings(w) for w in HOST_WARNINGS]`."""


@contextlib.contextmanager
def host_warnings_ignored() -> Iterator[None]:
    """`HOST_WARNINGS` ignored inside the block (where no pytest mark reaches: a driver)."""
    with warnings.catch_warnings():
        for warning in HOST_WARNINGS:
            action, message, _category = warning.split(":")
            warnings.filterwarnings(action, message, DeprecationWarning)  # type: ignore[arg-type]
        yield


Reply = Any
"""A scripted reply: the answer's text, or a list of OpenAI tool calls."""


def call(name: str, arguments: dict[str, Any], call_id: str) -> Reply:
    """A reply that calls one tool."""
    return [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
    ]


def say(text: str) -> Reply:
    """A reply that answers."""
    return text


class Scripted(BaseLLM):
    """Answers each call with the next scripted reply and keeps what each call was sent (a
    copy of the messages, as they were when the call was made)."""

    _replies: list[Reply] = PrivateAttr(default_factory=list)
    _seen: list[list[dict[str, Any]]] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def script(self, replies: list[Reply]) -> Scripted:
        self._replies.extend(replies)
        return self

    @property
    def seen(self) -> list[list[dict[str, Any]]]:
        return self._seen

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        with self._lock:
            self._seen.append([dict(m) for m in messages])
            if not self._replies:
                return "(the script is over)"
            return self._replies.pop(0)

    def supports_function_calling(self) -> bool:
        return True

    def get_context_window_size(self) -> int:
        return 1_000_000


class AtDefaults(Scripted):
    """`Scripted` with what CrewAI's `BaseLLM` says of a model it knows nothing of: a window
    of 4,096 tokens, and a token per four characters as its count."""

    def get_context_window_size(self) -> int:
        return BaseLLM.get_context_window_size(self)


class Fetch(BaseTool):
    """The tool `fetch`: returns the outputs it is given, in order."""

    name: str = "fetch"
    description: str = "Fetch the next part of the log."
    _outputs: list[str] = PrivateAttr(default_factory=list)
    _before: Callable[[], None] | None = PrivateAttr(default=None)

    def give(self, outputs: list[str], before: Callable[[], None] | None = None) -> Fetch:
        """Answer with `outputs` (the list itself, shared: each call takes its first);
        `before`, when given, runs before each answer."""
        self._outputs = outputs
        self._before = before
        return self

    def _run(self) -> str:
        if self._before is not None:
            self._before()
        return self._outputs.pop(0)


def agent_with(model: Scripted, tools: list[Any]) -> Agent:
    """An agent of CrewAI on the scripted model (its tool cache off: each call runs)."""
    return Agent(
        role="ops",
        goal="Answer questions about the nightly job.",
        backstory="You read logs.",
        llm=model,
        tools=tools,
        cache=False,
        max_iter=200,
        verbose=False,
    )


def crew_of(agent: Agent, question: str) -> Crew:
    """A crew of one agent and one task: `question`."""
    task = Task(description=question, expected_output="An answer.", agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=False)


def texts(messages: list[dict[str, Any]]) -> list[str]:
    """What each message says, as text (tool calls as their JSON)."""
    return [
        str(m.get("content") or "") + (json.dumps(m["tool_calls"]) if m.get("tool_calls") else "")
        for m in messages
    ]


def tokens(messages: list[dict[str, Any]]) -> int:
    """What the messages cost with the default counter (OpenAI's encoding)."""
    counter = get_token_counter(None)
    return sum(counter.count_text(text) for text in texts(messages))
