"""What does a read cost the LlamaIndex door when the conversation has one new message?

A LlamaIndex agent reads its memory before each step (`memory.aget()`); `OffloadingMemory`
answers with the projection of the whole history it keeps. Measured over a `LocalWorkspace`
(fsync on) with a 32,000-token window and a `ScriptedModel` that writes summaries at once
(so what is timed is ctxoffload's own work), the chats in LlamaIndex's SQL chat store on a
SQLite file:

- from nothing: a new memory over a chat store holding N messages (requests, tool calls,
  tool results, replies; one result in 25 is 20 KB), kept there as LlamaIndex's own `Memory`
  keeps them; its first read reads the store once, converts every message, truncates the big
  results, appends what a summary stands for to context.jsonl and summarises;
- the next read: the same memory after one more message is put.

Printed: both times (median of the runs) and their ratio. Target: <= 0.02 (a read costs what
is new, not the history: issue 60). The put of that one message (LlamaIndex's insert into its
store, and reading the message) is printed beside them.

Usage: python bench/bench_llama_index.py [--messages N] [--runs N]   (needs `.[llama-index]`)
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

from _history import SUMMARY, arguments, history, median_times, report
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore
from sqlalchemy.ext.asyncio import create_async_engine

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload.integrations.llama_index import OffloadingMemory
from ctxoffload.model import ScriptedModel


class Messages:
    """The history as LlamaIndex's `ChatMessage`s."""

    def request(self, text: str) -> ChatMessage:
        return ChatMessage(role="user", content=text)

    def call(self, call_id: str, i: int) -> ChatMessage:
        call = ToolCallBlock(tool_call_id=call_id, tool_name="grep", tool_kwargs={"p": i})
        return ChatMessage(role="assistant", blocks=[call])

    def result(self, call_id: str, output: str) -> ChatMessage:
        kwargs = {"tool_call_id": call_id, "name": "grep"}
        return ChatMessage(role="tool", content=output, additional_kwargs=kwargs)

    def reply(self, text: str) -> ChatMessage:
        return ChatMessage(role="assistant", content=text)


async def one_run(root: Path, n: int, run: int) -> tuple[float, float, float]:
    engine = create_async_engine(f"sqlite+aiosqlite:///{root / f'chats-{run}.db'}")
    store = SQLAlchemyChatStore(table_name="chats", async_engine=engine)
    await store.set_messages("session-1", history(n, Messages()))
    memory = OffloadingMemory.from_defaults(
        LocalWorkspace(root / f"run-{run}"),
        session_id="session-1",
        config=ContextConfig(context_window=32_000),
        summary_model=ScriptedModel([], default=SUMMARY),
        chat_store=store,
    )
    gc.collect()  # a collection owed by what came before is no cost of the call
    start = time.perf_counter()
    first = await memory.aget()
    cold = time.perf_counter() - start
    assert len(first) < n, "the history was not compacted"
    gc.collect()  # a collection owed by what came before is no cost of the call
    start = time.perf_counter()
    await memory.aput(ChatMessage(role="user", content="and now?"))
    put = time.perf_counter() - start
    gc.collect()  # a collection owed by what came before is no cost of the call
    start = time.perf_counter()
    await memory.aget()
    warm = time.perf_counter() - start
    await memory.aclose()
    await engine.dispose()
    return cold, warm, put


def main(n: int, runs: int) -> None:
    cold, warm, put = median_times(one_run, n, runs)
    report(
        f"LlamaIndex door: a conversation of {n:,} messages, median of {runs} runs",
        [
            ("from nothing (the first read)", cold),
            ("the next read (one new msg)", warm),
            ("putting that message", put),
        ],
        warm / cold,
        width=30,
    )


if __name__ == "__main__":
    args = arguments(__doc__)
    main(args.messages, args.runs)
