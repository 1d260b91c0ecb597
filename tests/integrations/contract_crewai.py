"""The contract's driver for CrewAI with `ContextOffloadHooks` (a subclass of CrewAI's own
`BaseLLM` answering from a script, offline).

CrewAI names no conversation: a conversation here is the kickoffs of one-task crews, one per
turn, run inside `with hooks:` of hooks built with `session_id=` the conversation's name (a
plain name); without one, each kickoff is a session of its own."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator
from typing import Any, ClassVar

from contract import DoorDriver, Outcome, Turn, run_held_in_its_tool, scripted

from ctxoffload import ContextConfig

with contextlib.suppress(ImportError), warnings.catch_warnings():
    # CrewAI's import sets attributes on a namespace package, which Python warns of: imported
    # here once, quietly, before the contract's checks import it (where it is installed).
    warnings.simplefilter("ignore", ImportWarning)
    import crewai  # noqa: F401

CONFIG = ContextConfig(context_window=4_000, tool_result_limit=300)


class _Made:
    """The workspace, the hooks of kickoffs that name no conversation, and per conversation
    its hooks, scripted model and the outputs its tool has left; a gate a live run's tool
    waits at."""

    def __init__(self, workspace: Any, default: Any) -> None:
        self.workspace = workspace
        self.default = default
        self.conversations: dict[str, tuple[Any, Any, list[str]]] = {}
        self.gate: threading.Event | None = None
        self.entered = threading.Event()


class CrewAIDriver(DoorDriver):
    door = "crewai"
    module = "crewai"
    extra = "crewai"
    door_object = "default"
    reasons: ClassVar[dict[str, str]] = {
        "identity": "CrewAI names no conversation: each kickoff is a session of its own, or "
        "the one session_id= names (a plain name, checked when the hooks are built)",
        "resume": "CrewAI starts each kickoff from its task, with no way to load an earlier "
        "conversation in a new process; hooks built with the same session_id go on with the "
        "session's record (its steps numbered on, its files readable), from the new task",
    }

    def make(self, workspace: Any) -> _Made:
        from ctxoffload.integrations.crewai import ContextOffloadHooks

        # The scripted LLM plays the conversation's turns: a summary request would take one
        # (test_crewai_summary_model.py holds the summaries a model writes).
        return _Made(workspace, ContextOffloadHooks(workspace, config=CONFIG, summary_model=False))

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from crewai_scripted import (
            Fetch,
            Scripted,
            agent_with,
            call,
            crew_of,
            host_warnings_ignored,
            say,
            texts,
        )

        from ctxoffload.integrations.crewai import ContextOffloadHooks

        replies, outputs = scripted(turns, call, say)
        known = made.conversations.get(conversation) if conversation is not None else None
        if known is None:
            hooks = made.default
            if conversation is not None:
                hooks = ContextOffloadHooks(
                    made.workspace, config=CONFIG, session_id=conversation, summary_model=False
                )
            known = (hooks, Scripted(model="scripted"), [])
            if conversation is not None:
                made.conversations[conversation] = known
        hooks, model, pending = known
        pending.extend(outputs)
        model.script(replies)
        first = len(model.seen)
        session = ""
        given: list[str] = []
        for turn in turns:
            with host_warnings_ignored():
                tools = [Fetch().give(pending, before=_gated(made)), *hooks.tools]
                crew = crew_of(agent_with(model, tools), turn.user)
                given = [tool.name for tool in tools]
                with hooks:
                    crew.kickoff()
            session = hooks.session_of(crew) or ""
        tool_messages = [
            m["content"]
            for sent in model.seen[first:]
            for m in sent
            if m["role"] == "tool" and m.get("name") == "fetch"
        ]
        return Outcome(
            session=session,
            sent=[texts(sent) for sent in model.seen[first:]],
            kept=str(tool_messages[-1]) if tool_messages else "",
            tools=given,
        )

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        with run_held_in_its_tool(self, self.make(workspace), conversation):
            yield

    def grep(self, made: _Made, conversation: str, pattern: str) -> str:
        known = made.conversations.get(conversation)
        hooks = known[0] if known is not None else made.default
        (grep,) = [tool for tool in hooks.tools if tool.name == "Grep"]
        return str(grep.run(pattern=pattern))


def _gated(made: _Made) -> Any:
    """What the tool does before it answers: with a gate, wait there (a live run)."""
    gate = made.gate
    if gate is None:
        return None

    def wait() -> None:
        made.entered.set()
        gate.wait(60)

    return wait


DRIVER = CrewAIDriver()
