"""What does a read cost the LlamaIndex door when the conversation has one new message?

A LlamaIndex agent reads its memory before each step (`memory.aget()`); `OffloadingMemory`
answers with the projection of the whole history it keeps. Measured over a `LocalWorkspace`
(fsync on) with a 32,000-token window and a `ScriptedModel` that writes summaries at once
(so what is timed is ctxoffload's own work), the chats in LlamaIndex's SQL chat store on a
SQLite file:

- from nothing: a new memory over a chat store holding N messages (requests, tool calls,
  tool results, replies; every 50th result 20 KB), kept there as LlamaIndex's own `Memory`
  keeps them; its first read reads the store once, converts every message, truncates the big
  results, appends what a summary stands for to context.jsonl and summarises;
- the next read: the same memory after one more message is put.

Printed: both times (median of the runs) and their ratio. Target: <= 0.02 (a read costs what
is new, not the history: issue 60). The put of that one message (LlamaIndex's insert into its
store, and reading the message) is printed beside them.

Usage: python bench/bench_llama_index.py [--messages N] [--runs N]   (needs `.[llama-index]`)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from pathlib import Path

from bench_projection import SUMMARY  # a script's own folder is on its path
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore
from sqlalchemy.ext.asyncio import create_async_engine

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload.integrations.llama_index import OffloadingMemory
from ctxoffload.model import ScriptedModel


def history(n: int) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append(ChatMessage(role="user", content=f"request {i}: look at part {i}"))
        elif kind == 1:
            call = ToolCallBlock(tool_call_id=f"c{i}", tool_name="grep", tool_kwargs={"p": i})
            out.append(ChatMessage(role="assistant", blocks=[call]))
        elif kind == 2:
            size = 20_000 if i % 50 == 2 else 200
            output = "\n".join(f"line {j} of {i}" for j in range(size // 16))
            kwargs = {"tool_call_id": f"c{i - 1}", "name": "grep"}
            out.append(ChatMessage(role="tool", content=output, additional_kwargs=kwargs))
        else:
            out.append(ChatMessage(role="assistant", content=f"part {i} holds nothing unusual"))
    return out


async def one_run(root: Path, n: int, run: int) -> tuple[float, float, float]:
    engine = create_async_engine(f"sqlite+aiosqlite:///{root / f'chats-{run}.db'}")
    store = SQLAlchemyChatStore(table_name="chats", async_engine=engine)
    await store.set_messages("session-1", history(n))
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


async def main(n: int, runs: int) -> None:
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        times = [await one_run(Path(tmp), n, run) for run in range(runs)]
    cold = statistics.median(t[0] for t in times)
    warm = statistics.median(t[1] for t in times)
    put = statistics.median(t[2] for t in times)
    ratio = warm / cold
    print(f"LlamaIndex door: a conversation of {n:,} messages, median of {runs} runs")
    print(f"  from nothing (the first read) {cold * 1000:9.1f} ms")
    print(f"  the next read (one new msg)   {warm * 1000:9.1f} ms")
    print(f"  putting that message          {put * 1000:9.1f} ms")
    verdict = "met" if ratio <= 0.02 else "MISSED"
    print(f"  ratio {ratio:.4f} (target <= 0.02): {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.messages, args.runs))
