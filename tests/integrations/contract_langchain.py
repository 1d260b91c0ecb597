"""The contract's driver for LangChain v1's `create_agent` with `ContextOffloadMiddleware`
(LangChain's own fake chat model, a real LangGraph checkpointer)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

from contract import DoorDriver, Outcome, Turn, answer, call_id, run_held_in_its_tool, sessions_of

from ctxoffload import ContextConfig
from ctxoffload._disk.ids import session_id_for

CONFIG = ContextConfig(context_window=4_000, tool_result_limit=300)


class _Made:
    """The middleware, the checkpointer its threads keep their state in, and a gate a live
    run's tool waits at."""

    def __init__(self, middleware: Any) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        self.middleware = middleware
        self.saver = InMemorySaver()
        self.gate: threading.Event | None = None
        self.entered = threading.Event()


class LangChainDriver(DoorDriver):
    door = "langchain"
    module = "langchain"
    extra = "langchain"
    door_object = "middleware"

    def make(self, workspace: Any) -> _Made:
        from ctxoffload.integrations.langchain import ContextOffloadMiddleware

        return _Made(ContextOffloadMiddleware(workspace, config=CONFIG, summary_model=False))

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from langchain.agents import create_agent
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        from langchain_core.tools import tool
        from langchain_scripted import ToolCallingFakeModel, call

        replies: list[Any] = []
        outputs: list[str] = []
        for turn in turns:
            if turn.tool_output is not None:
                replies.append(call("fetch", turn.arguments, call_id(turn)))
                outputs.append(turn.tool_output)
            replies.append(AIMessage(content=answer(turn)))
        model = ToolCallingFakeModel(messages=iter(replies))
        gate, entered = made.gate, made.entered

        @tool
        def fetch(note: str = "") -> str:
            """Fetch the next output (`note`: what the caller says of it)."""
            if gate is not None:
                entered.set()
                gate.wait(30)
            return outputs.pop(0)

        agent = create_agent(
            model,
            tools=[fetch, *made.middleware.tools],
            middleware=[made.middleware],
            checkpointer=made.saver if conversation is not None else None,
        )
        config = {"configurable": {"thread_id": conversation}} if conversation else {}
        before = sessions_of(made.middleware.workspace)
        state: dict[str, Any] = {}
        for turn in turns:
            state = agent.invoke({"messages": [HumanMessage(turn.user)]}, config)
        results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        if conversation is not None:
            session = session_id_for(conversation)
        else:  # a new session of its own: the one folder the run added
            (session,) = sessions_of(made.middleware.workspace) - before
        return Outcome(
            session=session,
            sent=[[_sent(m) for m in call] for call in model.seen],
            kept=str(results[-1].content) if results else "",
            tools=[fetch.name, *(t.name for t in made.middleware.tools)],
        )

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        with run_held_in_its_tool(self, self.make(workspace), conversation):
            yield

    def grep(self, made: _Made, conversation: str, pattern: str) -> str:
        (grep,) = [t for t in made.middleware.tools if t.name == "Grep"]
        return str(grep.invoke({"pattern": pattern}))

    def reopen(self, made: _Made, workspace: Any) -> _Made:
        again = self.make(workspace)
        again.saver = made.saver  # the thread's checkpoints, as LangGraph keeps them
        return again


def _sent(message: Any) -> str:
    """A message as the model is sent it: its content and its tool calls' arguments."""
    calls = getattr(message, "tool_calls", None) or []
    return str(message.content) + "".join(json.dumps(c["args"]) for c in calls)


DRIVER = LangChainDriver()
