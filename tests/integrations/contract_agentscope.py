"""The contract's driver for AgentScope 2's `Agent` with `AgentScopeOffloader` and its
middleware: AgentScope's own `OpenAIChatModel` over real HTTP to a scripted server on
127.0.0.1 (tests/openai_server.py), offline.

An AgentScope conversation is an agent's `state.session_id` (AgentScope makes one up when the
agent is given no `AgentState`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

from contract import DoorDriver, Outcome, Turn, answer, call_id, run_held_in_its_tool

from ctxoffload._disk.ids import session_id_for


def _tool_call(call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from openai_server import chat_completion

    function = {"name": "fetch", "arguments": json.dumps(arguments)}
    return chat_completion(
        None, tool_calls=[{"id": call_id, "type": "function", "function": function}]
    )


def _tool_messages(request: dict[str, Any]) -> list[str]:
    out = []
    for message in request["messages"]:
        if message["role"] == "tool":
            content = message["content"]
            out.append(content if isinstance(content, str) else json.dumps(content))
    return out


class _Made:
    def __init__(self, offloader: Any) -> None:
        self.offloader = offloader
        self.gate: threading.Event | None = None
        self.entered = threading.Event()


class AgentScopeDriver(DoorDriver):
    door = "agentscope"
    module = "agentscope"
    extra = "agentscope"
    reasons = {  # noqa: RUF012 - ClassVar in the base
        "same tools": "AgentScope's own Read and Grep read the stored files by the absolute "
        "path its notice names; offloader.tools() adds ctxoffload's retrieve_offloaded_content "
        "(tests/integrations/test_agentscope_agent.py)",
        "readers named": "AgentScope writes the notice of a result it cuts, in its own words "
        "(the file, and no tool): its Read, or offloader.tools()' retrieve_offloaded_content, "
        "reads it back (tests/integrations/test_agentscope_agent.py)",
        "tokens, not characters": "AgentScope decides which result it splits, by its model's "
        "own count_tokens (UTF-8 bytes over 4 for OpenAI's); the middleware stores whole what "
        "it is about to split",
    }

    def make(self, workspace: Any) -> _Made:
        from ctxoffload.integrations.agentscope import AgentScopeOffloader

        return _Made(AgentScopeOffloader(workspace))

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        return asyncio.run(self._converse(made, conversation, turns))

    async def _converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from agentscope.agent import Agent, ContextConfig
        from agentscope.credential import OpenAICredential
        from agentscope.message import Msg, TextBlock
        from agentscope.model import OpenAIChatModel
        from agentscope.permission import PermissionBehavior, PermissionDecision
        from agentscope.state import AgentState
        from agentscope.tool import FunctionTool, Toolkit

        from openai_server import OpenAIServer, chat_completion

        outputs = [t.tool_output for t in turns if t.tool_output is not None]
        gate, entered = made.gate, made.entered

        def fetch(note: str = "") -> str:
            """Fetch the next output (`note`: what the caller says of it)."""
            if gate is not None:
                entered.set()
                gate.wait(60)
            return outputs.pop(0)

        allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="contract")
        with OpenAIServer() as server:
            for turn in turns:
                if turn.tool_output is not None:
                    server.add(_tool_call(call_id(turn), turn.arguments))
                server.add(chat_completion(answer(turn)))
            model = OpenAIChatModel(
                credential=OpenAICredential(api_key="test", base_url=server.base_url),
                model="gpt-4o",
                stream=False,
                max_retries=0,
                context_size=100_000,
            )
            state = AgentState(session_id=conversation) if conversation is not None else None
            agent = Agent(
                name="contract",
                system_prompt="You read logs.",
                model=model,
                toolkit=Toolkit(tools=[FunctionTool(fetch, permission=allow)]),
                offloader=made.offloader,
                middlewares=[made.offloader.middleware],
                context_config=ContextConfig(tool_result_limit=300),
                state=state,
            )
            try:
                for turn in turns:
                    await agent.reply(
                        Msg(name="user", role="user", content=[TextBlock(text=turn.user)])
                    )
            finally:
                await model.client.close()
            requests = list(server.requests)
        session = session_id_for(str(agent.state.session_id))
        kept = [m for r in requests for m in _tool_messages(r)]
        return Outcome(
            session=session,
            sent=[[json.dumps(m) for m in r["messages"]] for r in requests],
            kept=kept[-1] if kept else "",
        )

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        with run_held_in_its_tool(self, self.make(workspace), conversation):
            yield


DRIVER = AgentScopeDriver()
