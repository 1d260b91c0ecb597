"""A scripted LlamaIndex model (LlamaIndex's own `MockFunctionCallingLLM`, given a response
generator: offline) and the runs the LlamaIndex tests share, shared by the tests, the
resumed-run script and the contract's driver."""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore
from pydantic.warnings import PydanticDeprecationWarning
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload.integrations.llama_index import OffloadingMemory, from_llama_index
from ctxoffload.tokens import get_token_counter

BIG = "".join(f"03:{i % 60:02d} INFO export batch {i} done\n" for i in range(160_000))  # ~5 MB
CONFIG = ContextConfig(context_window=4_000, tool_result_limit=300)
"""A small window, so that a few dozen turns are compacted."""
SYSTEM = "You keep the export job's log."


class Scripted:
    """LlamaIndex's `MockFunctionCallingLLM` answering from a script, keeping the messages
    each call was sent."""

    def __init__(self, *replies: ChatMessage) -> None:
        self.replies = list(replies)
        self.seen: list[list[ChatMessage]] = []
        self.llm = MockFunctionCallingLLM(response_generator=self.answer)

    def answer(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.seen.append([message.model_copy(deep=True) for message in messages])
        return self.replies.pop(0)


def call(name: str, args: dict[str, Any], call_id: str) -> ChatMessage:
    """An assistant turn that calls one tool."""
    block = ToolCallBlock(tool_call_id=call_id, tool_name=name, tool_kwargs=args)
    return ChatMessage(role="assistant", blocks=[block])


def say(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


HOST_WARNINGS = "ignore::pydantic.warnings.PydanticDeprecationWarning"
"""LlamaIndex's workflows find a workflow's steps with `inspect.getmembers` when an agent is
built and at each run, which reads every attribute of the agent, pydantic's deprecated ones
(`__fields__`, `model_computed_fields` on an instance) among them: those warnings are the
host's, not ours (`pytest.mark.filterwarnings(HOST_WARNINGS)`)."""


@contextlib.contextmanager
def host_warnings_ignored() -> Iterator[None]:
    """`HOST_WARNINGS` ignored inside the block (where no pytest mark reaches: a driver)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=PydanticDeprecationWarning)
        yield


def wire(messages: list[ChatMessage]) -> list[str]:
    """What a call carried, one line a message (its JSON, as LlamaIndex serialises it)."""
    return [json.dumps(m.model_dump(mode="json"), sort_keys=True) for m in messages]


def tokens(messages: list[ChatMessage]) -> int:
    return get_token_counter(None).count_messages(from_llama_index(messages))


def dump() -> str:
    """Dump the export job's whole log."""
    return BIG


def chat_store(path: Path) -> SQLAlchemyChatStore:
    """LlamaIndex's SQL chat store in the SQLite file `path` (what a deployed agent keeps its
    chats in), each connection closed after use: LlamaIndex's default, in-memory store leaves
    an aiosqlite connection open until it is collected, which warns then."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}", poolclass=NullPool)
    return SQLAlchemyChatStore(table_name="chats", async_engine=engine)


def memory_on(folder: Path, session: str | None, **kwargs: Any) -> OffloadingMemory:
    """A new memory on a new workspace object on `folder`, its chats in a SQLite file beside
    it (the one every memory on `folder` uses)."""
    kwargs.setdefault("config", CONFIG)
    kwargs.setdefault("chat_store", chat_store(folder.parent / f"{folder.name}-chats.db"))
    return OffloadingMemory.from_defaults(LocalWorkspace(folder), session_id=session, **kwargs)


def agent_on(
    memory: OffloadingMemory, model: Scripted, tools: list[Callable[..., Any]] | None = None
) -> FunctionAgent:
    """A FunctionAgent with the memory's tools and `tools` (default: `dump`) wrapped by it."""
    wrapped = memory.offload_tools(tools if tools is not None else [dump])
    return FunctionAgent(tools=[*wrapped, *memory.tools], llm=model.llm, system_prompt=SYSTEM)


async def converse(memory: OffloadingMemory, model: Scripted, turns: range) -> None:
    """Run `turns` of the long chat on `memory`, each a run of its own."""
    agent = agent_on(memory, model)
    for turn in turns:
        model.replies = [say(f"Noted, step {turn} is logged. " + "ok " * 30)]
        prompt = f"Step {turn}: record the reading {turn * 7} " + "and more detail " * 20
        await agent.run(prompt, memory=memory)
