"""The contract's driver for deepagents' `create_deep_agent` with `WorkspaceBackend` routed for
its evicted tool results and history (LangChain's fake chat model, a real checkpointer)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from contract import DoorDriver, Outcome, Turn, answer, call_id

from ctxoffload._disk.ids import session_id_for
from ctxoffload._doors.doors import DOORS


class _Made:
    def __init__(self, workspace: Any, routes: dict[str, Any]) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        self.workspace = workspace
        self.routes = routes
        self.saver = InMemorySaver()


class DeepAgentsDriver(DoorDriver):
    door = "deepagents"
    module = "deepagents"
    extra = "deepagents"
    reasons: ClassVar[dict[str, str]] = {
        "one writer": DOORS["deepagents"].one_writer,
        "no shared default": "the backend sees file calls, not runs: runs without a thread_id "
        "write the backend's own new session (one per backend, logged at INFO); LangGraph "
        "keeps a conversation across runs only under a thread_id",
        "same tools": "deepagents' own read_file, grep and glob read the stored files through "
        "the backend, by deepagents' paths (tests/integrations/test_deepagents_agent.py); "
        "ContextOffloadMiddleware beside it adds ctxoffload's Read, Grep and Glob",
        "readers named": "deepagents writes the notice of a result it evicts, naming its own "
        "read_file; the backend writes none",
        "tokens, not characters": "deepagents decides which result it evicts, by its own "
        "limit (20,000 tokens); the backend stores what it is given",
        "call arguments": "deepagents decides what its model is sent (its summarisation "
        "cuts the arguments of older write_file and edit_file calls, by its own trigger); the "
        "backend stores what it is given. ContextOffloadMiddleware beside it cuts any call's "
        "long arguments, as the langchain door does",
    }

    def make(self, workspace: Any) -> _Made:
        from ctxoffload.integrations.deepagents import WorkspaceBackend

        return _Made(workspace, WorkspaceBackend.routes(workspace))

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from deepagents import create_deep_agent
        from deepagents.backends import CompositeBackend, StateBackend
        from langchain_core.messages import AIMessage, ToolMessage
        from langchain_core.tools import tool
        from langchain_scripted import ToolCallingFakeModel, call

        replies: list[Any] = []
        outputs: list[str] = []
        for turn in turns:
            if turn.tool_output is not None:
                replies.append(call("fetch", turn.arguments, call_id(turn)))
                # deepagents evicts only results over its own limit (20,000 tokens).
                outputs.append(turn.tool_output * (1 + 200_000 // len(turn.tool_output)))
            replies.append(AIMessage(content=answer(turn)))
        model = ToolCallingFakeModel(messages=iter(replies))

        @tool
        def fetch(note: str = "") -> str:
            """Fetch the next output (`note`: what the caller says of it)."""
            return outputs.pop(0)

        backend = CompositeBackend(default=StateBackend(), routes=made.routes)
        agent = create_deep_agent(
            model=model,
            tools=[fetch],
            backend=backend,
            checkpointer=made.saver if conversation is not None else None,
        )
        config = {"configurable": {"thread_id": conversation}} if conversation else {}
        state: dict[str, Any] = {}
        for turn in turns:
            state = agent.invoke({"messages": [("user", turn.user)]}, config)
        results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        if conversation is not None:
            session = session_id_for(conversation)
        else:
            # The backend's own session, made when the first route was.
            session = next(iter(made.routes.values())).session_id
        kept = str(results[-1].content) if results else ""
        names = f"/large_tool_results/{results[-1].tool_call_id}" if results else ""
        return Outcome(
            session=session,
            sent=[[_sent(m) for m in request] for request in model.seen],
            kept=kept,
            names=names,
        )


def _sent(message: Any) -> str:
    """A message as the model is sent it: its content and its tool calls' arguments."""
    calls = getattr(message, "tool_calls", None) or []
    return str(message.content) + "".join(json.dumps(c["args"]) for c in calls)


DRIVER = DeepAgentsDriver()
