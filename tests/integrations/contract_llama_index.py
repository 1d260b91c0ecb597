"""The contract's driver for LlamaIndex's `FunctionAgent` with an `OffloadingMemory` per
conversation (LlamaIndex's `MockFunctionCallingLLM`, scripted: offline; its chats in a
SQLite file beside the workspace)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from contract import DoorDriver, Outcome, Turn, gated_fetch, run_held_in_its_tool, scripted

from ctxoffload import ContextConfig

CONFIG = ContextConfig(context_window=3_500, tool_result_limit=300)
"""A window the resume test's conversation passes at its 11th call (a memory counts the
messages it keeps and the schemas of the tools it gave the agent, not the agent's system
prompt and this run's steps), so the first call after the resume re-applies that summary."""


class _Made:
    """The workspace, the memory of each conversation (LlamaIndex's door is the memory),
    where their chats are kept, and the gate a live run's tool waits at."""

    def __init__(self, workspace: Any) -> None:
        self.workspace = workspace
        self.memories: dict[str, Any] = {}
        # Beside the workspace's folder; for one with none, in a folder of its own.
        folder = Path(getattr(workspace, "workdir", None) or tempfile.mkdtemp())
        self.chats = folder.parent / f"{folder.name}-chats.db"
        self.gate: threading.Event | None = None
        self.entered = threading.Event()


class LlamaIndexDriver(DoorDriver):
    door = "llama-index"
    module = "llama_index.core"
    extra = "llama_index"
    reasons: ClassVar[dict[str, str]] = {
        "call arguments": "a run's own steps are the agent's scratchpad, which no memory "
        "sees: the requests of the run that made a big call send it whole (the next run's, "
        "through the memory, are cut; docs/guides/llama-index.md)",
    }

    def make(self, workspace: Any) -> _Made:
        from ctxoffload.integrations.llama_index import OffloadingMemory

        OffloadingMemory(workspace, config=CONFIG)  # what the application builds first: checked
        return _Made(workspace)

    def _memory(self, made: _Made, conversation: str | None) -> Any:
        from llama_index_scripted import chat_store

        from ctxoffload.integrations.llama_index import OffloadingMemory

        if conversation is None:  # a memory given no session_id: a new conversation each
            return OffloadingMemory.from_defaults(
                made.workspace, config=CONFIG, chat_store=chat_store(made.chats)
            )
        memory = made.memories.get(conversation)
        if memory is None:
            memory = made.memories[conversation] = OffloadingMemory.from_defaults(
                made.workspace,
                session_id=conversation,
                config=CONFIG,
                chat_store=chat_store(made.chats),
            )
        return memory

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from llama_index_scripted import host_warnings_ignored

        with host_warnings_ignored():
            return asyncio.run(self._converse(made, conversation, turns))

    async def _converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from llama_index.core.agent.workflow import FunctionAgent
        from llama_index_scripted import Scripted, call, say, wire

        replies, outputs = scripted(turns, call, say)
        fetch = gated_fetch(made, outputs)
        memory = self._memory(made, conversation)
        model = Scripted(*replies)
        tools = [*memory.offload_tools([fetch]), *memory.tools]
        agent = FunctionAgent(tools=tools, llm=model.llm, system_prompt="You fetch outputs.")
        for turn in turns:
            await agent.run(turn.user, memory=memory)
        results = [m for m in await memory.aget_all() if m.role.value == "tool"]
        return Outcome(
            session=memory.session,
            sent=[wire(messages) for messages in model.seen],
            kept=str(results[-1].content) if results else "",
            tools=[tool.metadata.name for tool in tools],
        )

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        made = self.make(workspace)
        with run_held_in_its_tool(self, made, conversation):
            yield
        self._close(made)  # the application is done with the conversation's memory

    def grep(self, made: _Made, conversation: str, pattern: str) -> str:
        """The memory's Grep tool, called as a LlamaIndex agent calls a tool (`acall`)."""
        (grep,) = [t for t in self._memory(made, conversation).tools if t.metadata.name == "Grep"]
        return str(asyncio.run(grep.acall(pattern=pattern)).content)

    def reopen(self, made: _Made, workspace: Any) -> _Made:
        self._close(made)  # the old process has ended: its memories let their sessions go
        return self.make(workspace)

    def _close(self, made: _Made) -> None:
        async def close() -> None:
            for memory in made.memories.values():
                await memory.aclose()

        asyncio.run(close())


DRIVER = LlamaIndexDriver()
