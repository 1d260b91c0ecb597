"""The contract's driver for the OpenAI Agents SDK's `Runner` with `OffloadingInputFilter`
and `WorkspaceSession` (an SDK `Model` of the test's own, `Scripted`, offline).

A conversation the host names is the SDK's session: `WorkspaceSession(workspace, id)`, and
its filter `session.input_filter()`, as the guide builds them; a conversation it names no
way is a `Runner.run` with the one filter and no session.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from contract import DoorDriver, Outcome, Turn, call_id, run_held_in_its_tool, sessions_of
from contract import answer as answer_to

from ctxoffload import ContextConfig

CONFIG = ContextConfig(context_window=4_000, tool_result_limit=300)


class _Made:
    """The filter of the conversations the host names no way, each named conversation's
    session and filter, and a gate a live run's tool waits at."""

    def __init__(self, offload: Any) -> None:
        self.offload = offload
        self.sessions: dict[str, Any] = {}
        self.filters: dict[str, Any] = {}
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def of(self, conversation: str | None) -> tuple[Any, Any]:
        """The SDK session (None: none) and the filter of `conversation`."""
        from ctxoffload.integrations.openai_agents import WorkspaceSession

        if conversation is None:
            return None, self.offload
        if conversation not in self.sessions:
            session = WorkspaceSession(
                self.offload.workspace, conversation, config=CONFIG, summary_model=False
            )
            self.sessions[conversation] = session
            self.filters[conversation] = session.input_filter()
        return self.sessions[conversation], self.filters[conversation]


class OpenAIAgentsDriver(DoorDriver):
    door = "openai-agents"
    module = "agents"
    extra = "openai_agents"
    door_object = "offload"

    def make(self, workspace: Any) -> _Made:
        from ctxoffload.integrations.openai_agents import OffloadingInputFilter

        return _Made(OffloadingInputFilter(workspace, config=CONFIG, summary_model=False))

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        return asyncio.run(self._converse(made, conversation, turns))

    async def _converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from agents import Agent, RunConfig, Runner, function_tool
        from openai_agents_scripted import Scripted, answer, tool_call

        replies: list[Any] = []
        outputs: list[str] = []
        for turn in turns:
            if turn.tool_output is not None:
                replies.append(tool_call("fetch", call_id(turn), **turn.arguments))
                outputs.append(turn.tool_output)
            replies.append(answer(answer_to(turn)))
        model = Scripted(*replies)
        gate, entered = made.gate, made.entered

        @function_tool
        async def fetch(note: str = "") -> str:
            """Fetch the next output (`note`: what the caller says of it)."""
            if gate is not None:
                entered.set()
                await asyncio.to_thread(gate.wait, 30)
            return outputs.pop(0)

        session, offload = made.of(conversation)
        agent = Agent(
            name="ops", instructions="You run exports.", model=model, tools=[fetch, *offload.tools]
        )
        config = RunConfig(call_model_input_filter=offload)
        before = sessions_of(offload.workspace)
        kept: list[Any] = []
        for turn in turns:
            result = await Runner.run(agent, turn.user, session=session, run_config=config)
            kept = await session.get_items() if session is not None else result.to_input_list()
        if session is not None:
            written = session.session_id
        else:  # a new session of its own: the one folder the run added
            (written,) = sessions_of(offload.workspace) - before
        outputs_kept = [i["output"] for i in kept if i.get("type") == "function_call_output"]
        return Outcome(
            session=written,
            sent=[[str(item) for item in call] for call in model.seen],
            kept=str(outputs_kept[-1]) if outputs_kept else "",
            tools=[tool.name for tool in agent.tools],
        )

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        with run_held_in_its_tool(self, self.make(workspace), conversation):
            yield

    def grep(self, made: _Made, conversation: str, pattern: str) -> str:
        """The Grep of the conversation's filter, called by the SDK for a scripted call."""
        return asyncio.run(self._grep(made, conversation, pattern))

    async def _grep(self, made: _Made, conversation: str, pattern: str) -> str:
        from agents import Agent, RunConfig, Runner
        from openai_agents_scripted import Scripted, answer, tool_call

        session, offload = made.of(conversation)
        model = Scripted(tool_call("Grep", "grep_1", pattern=pattern), answer("found"))
        agent = Agent(name="ops", model=model, tools=offload.tools)
        config = RunConfig(call_model_input_filter=offload)
        result = await Runner.run(agent, "find it", session=session, run_config=config)
        (output,) = [
            item["output"]
            for item in result.to_input_list()
            if isinstance(item, dict) and item.get("call_id") == "grep_1" and "output" in item
        ]
        return str(output)


DRIVER = OpenAIAgentsDriver()
