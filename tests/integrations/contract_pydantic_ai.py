"""The contract's driver for pydantic-ai's `Agent` with the `ContextOffload` capability
(pydantic-ai's own `FunctionModel`, offline)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from contract import DoorDriver, Outcome, Turn, answer, call_id, run_held_in_its_tool, sessions_of

from ctxoffload import ContextConfig
from ctxoffload._disk.ids import session_id_for

CONFIG = ContextConfig(context_window=4_000, tool_result_limit=300)


class _Made:
    def __init__(self, capability: Any) -> None:
        self.capability = capability
        self.gate: threading.Event | None = None
        self.entered = threading.Event()
        self.history: dict[str | None, list[Any]] = {}


class PydanticAiDriver(DoorDriver):
    door = "pydantic-ai"
    module = "pydantic_ai"
    extra = "pydantic_ai"
    door_object = "capability"

    def make(self, workspace: Any) -> _Made:
        from ctxoffload.integrations.pydantic_ai import ContextOffload

        return _Made(ContextOffload(workspace, config=CONFIG, summary_model=False))

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        return asyncio.run(self._converse(made, conversation, turns))

    async def _converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ToolReturnPart
        from pydantic_ai_scripted import Scripted, call, say, wire

        replies: list[Any] = []
        outputs: list[str] = []
        for turn in turns:
            if turn.tool_output is not None:
                replies.append(call("fetch", turn.arguments, call_id(turn)))
                outputs.append(turn.tool_output)
            replies.append(say(answer(turn)))
        model = Scripted(*replies)
        gate, entered = made.gate, made.entered

        async def fetch(note: str = "") -> str:
            """Fetch the next output (`note`: what the caller says of it)."""
            if gate is not None:
                entered.set()
                await asyncio.to_thread(gate.wait, 30)
            return outputs.pop(0)

        agent = Agent(model.model, tools=[fetch], capabilities=[made.capability])
        before = sessions_of(made.capability.workspace)
        history = made.history.get(conversation, [])
        for turn in turns:
            result = await agent.run(
                turn.user, message_history=history, conversation_id=conversation
            )
            history = result.all_messages()
        if conversation is not None:
            made.history[conversation] = history
            session = session_id_for(conversation)
        else:  # pydantic-ai gives the run a conversation id of its own
            (session,) = sessions_of(made.capability.workspace) - before
        results = [
            p
            for m in history
            for p in getattr(m, "parts", [])
            if isinstance(p, ToolReturnPart) and p.tool_name == "fetch"
        ]
        return Outcome(
            session=session,
            sent=[wire(request) for request in model.seen],
            kept=str(results[-1].content) if results else "",
            tools=["fetch", *made.capability.get_toolset().tools],
        )

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        with run_held_in_its_tool(self, self.make(workspace), conversation):
            yield

    def grep(self, made: _Made, conversation: str, pattern: str) -> str:
        from ctxoffload.integrations import reading_functions

        toolset = made.capability.get_toolset()
        names = {tool.__name__ for tool in reading_functions(made.capability.workspace, 20_000)}
        assert "Grep" in names and "Grep" in toolset.tools
        grep = toolset.tools["Grep"].function
        return str(asyncio.run(grep(pattern=pattern)))

    def reopen(self, made: _Made, workspace: Any) -> _Made:
        again = self.make(workspace)
        again.history = made.history  # the message history the application saved
        return again


DRIVER = PydanticAiDriver()
