"""The contract's driver for smolagents' `ToolCallingAgent` with `OffloadingStepCallbacks`
(a subclass of smolagents' own `Model` answering from a script, offline).

smolagents names no conversation: a conversation here is one agent whose runs after the first
go on with `reset=False`, its callbacks built with `session_id=` the conversation's name (a
plain name); without one, each run is a session of its own."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

from contract import DoorDriver, Outcome, Turn, scripted

from ctxoffload import ContextConfig

CONFIG = ContextConfig(context_window=8_000, tool_result_limit=300)
"""smolagents' own system prompt is ~3,000 tokens: a window that leaves room for a few turns."""


class _Made:
    """The workspace, the callbacks of runs that name no conversation, and per conversation
    its callbacks, agent and scripted model; a gate a live run's second tool call waits at."""

    def __init__(self, workspace: Any, default: Any) -> None:
        self.workspace = workspace
        self.default = default
        self.conversations: dict[str, tuple[Any, Any, Any, list[str]]] = {}
        self.gate: threading.Event | None = None
        self.entered = threading.Event()


class SmolagentsDriver(DoorDriver):
    door = "smolagents"
    module = "smolagents"
    extra = "smolagents"
    reasons: ClassVar[dict[str, str]] = {
        "identity": "smolagents names no conversation: each run is a session of its own, or "
        "the one session_id= names (a plain name, checked when the callbacks are built)",
        "resume": "smolagents keeps a run's memory in the agent object and has no way to load "
        "it in a new process; callbacks built with the same session_id go on with the "
        "session's record (its steps numbered on), from the new agent's empty memory",
    }

    def make(self, workspace: Any) -> _Made:
        from ctxoffload.integrations.smolagents import OffloadingStepCallbacks

        return _Made(workspace, OffloadingStepCallbacks(workspace, config=CONFIG))

    def as_the_host_gives(self, output: str) -> str:
        return output.strip()  # a ToolCallingAgent strips each tool's output

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from smolagents_scripted import Scripted, agent_with, answer, call

        from ctxoffload.integrations.smolagents import OffloadingStepCallbacks

        replies, outputs = scripted(turns, call, answer)
        known = made.conversations.get(conversation) if conversation is not None else None
        if known is None:
            offload = made.default
            if conversation is not None:
                offload = OffloadingStepCallbacks(
                    made.workspace, config=CONFIG, session_id=conversation
                )
            model = Scripted()
            pending: list[str] = []
            agent = agent_with(model, offload, _fetch(pending, made), max_steps=10)
            known = (offload, agent, model, pending)
            if conversation is not None:
                made.conversations[conversation] = known
        offload, agent, model, pending = known
        pending.extend(outputs)
        model.replies = iter(replies)
        first = len(model.seen)
        for number, turn in enumerate(turns):
            goes_on = number > 0 or first > 0
            agent.run(turn.user, reset=not goes_on)
        session = offload.session_of(agent)
        kept = [
            step.observations
            for step in agent.memory.steps
            if getattr(step, "tool_calls", None) and step.tool_calls[0].name == "fetch"
        ]
        return Outcome(
            session=session,
            sent=[[text for _, text in sent] for sent in model.seen[first:]],
            kept=str(kept[-1]) if kept else "",
            tools=list(agent.tools),
        )

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        # A run takes its session at its first step's callback (smolagents calls nothing
        # before the first model call, and the door writes nothing before it either): this
        # run waits inside its second tool call.
        from smolagents_scripted import Scripted, agent_with, answer, call

        from ctxoffload.integrations.smolagents import OffloadingStepCallbacks

        made = self.make(workspace)
        made.gate = threading.Event()
        offload = OffloadingStepCallbacks(workspace, config=CONFIG, session_id=conversation)
        model = Scripted([call("fetch", {}, "warm"), call("fetch", {}, "wait"), answer("done")])
        agent = agent_with(model, offload, _fetch(["ready", "slow"], made), max_steps=10)
        done: list[object] = []
        runner = threading.Thread(target=lambda: done.append(agent.run("wait")))
        runner.start()
        try:
            assert made.entered.wait(60), "the run never reached its second tool call"
            yield
        finally:
            made.gate.set()
            runner.join(60)
        assert done == ["done"] and offload.session_of(agent) == conversation

    def grep(self, made: _Made, conversation: str, pattern: str) -> str:
        known = made.conversations.get(conversation)
        offload = known[0] if known is not None else made.default
        (grep,) = [tool for tool in offload.tools if tool.name == "Grep"]
        return str(grep(pattern=pattern))


def _fetch(outputs: list[str], made: _Made) -> Any:
    """The conversation's tool: the next output; with a gate, its second call waits there."""
    from smolagents_scripted import Fetch

    class NotedFetch(Fetch):  # type: ignore[misc]
        inputs: ClassVar[dict[str, Any]] = {
            "note": {"type": "string", "description": "what the caller says", "nullable": True}
        }

        def forward(self, note: str | None = None) -> str:
            return str(super().forward())

    tool = NotedFetch(outputs)
    calls = [0]
    original = tool.forward

    def forward(note: str | None = None) -> str:
        calls[0] += 1
        if made.gate is not None and calls[0] == 2:
            made.entered.set()
            made.gate.wait(60)
        return original()

    tool.forward = forward
    return tool


DRIVER = SmolagentsDriver()
