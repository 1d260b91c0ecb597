"""What does a host's call cost the Projector when its history has one new message?

A host that keeps its own history (LangChain, pydantic-ai, the OpenAI Agents SDK) sends all
of it on every model call. The `Projector` turns it into what the model sees. Measured, over
a `LocalWorkspace` (fsync on) with a 32,000-token window and a `ScriptedModel` that writes
summaries at once (so what is timed is ctxoffload's own work):

- from nothing: a new projector given a history of N messages (requests, tool calls, tool
  results, replies; every 50th result 20 KB, so it is offloaded), which truncates the big
  results, appends what a summary stands for to context.jsonl and summarises;
- the next call: the same projector given that history plus one message.

Printed: both times (median of the runs) and their ratio. Target: <= 0.02 (a call costs what
is new, not the history: issue 44).

Usage: python bench/bench_projection.py [--messages N] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ToolCallBlock, ToolResultBlock
from ctxoffload.compression import Projector
from ctxoffload.model import ScriptedModel

SUMMARY = {
    "task_overview": "debug the build",
    "current_state": "reading logs",
    "important_discoveries": "row 7 fails",
    "next_steps": "fix row 7",
    "context_to_preserve": "paths named above",
}


def history(n: int) -> list[Msg]:
    msgs: list[Msg] = [Msg(role="system", content="You debug builds.")]
    for i in range(n - 1):
        kind = i % 4
        if kind == 0:
            msgs.append(Msg(role="user", content=f"request {i}: look at part {i}"))
        elif kind == 1:
            call = ToolCallBlock(id=f"c{i}", name="grep", input={"pattern": f"p{i}"})
            msgs.append(Msg(role="assistant", content=[call]))
        elif kind == 2:
            size = 20_000 if i % 50 == 2 else 200
            output = "\n".join(f"line {j} of {i}" for j in range(size // 16))
            result = ToolResultBlock(id=f"c{i - 1}", name="grep", output=output)
            msgs.append(Msg(role="tool", content=[result]))
        else:
            msgs.append(Msg(role="assistant", content=f"part {i} holds nothing unusual"))
    return msgs


async def one_run(root: Path, n: int, run: int) -> tuple[float, float]:
    workspace = LocalWorkspace(root / f"run-{run}")
    projector = Projector(
        workspace,
        "thread-1",
        config=ContextConfig(context_window=32_000),
        model=ScriptedModel([], default=SUMMARY),
    )
    msgs = history(n)
    start = time.perf_counter()
    await projector.project(msgs)
    cold = time.perf_counter() - start
    msgs.append(Msg(role="user", content="and now?"))
    start = time.perf_counter()
    await projector.project(msgs)
    warm = time.perf_counter() - start
    return cold, warm


async def main(n: int, runs: int) -> None:
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        times = [await one_run(Path(tmp), n, run) for run in range(runs)]
    cold = statistics.median(t[0] for t in times)
    warm = statistics.median(t[1] for t in times)
    ratio = warm / cold
    print(f"history of {n:,} messages, median of {runs} runs")
    print(f"  from nothing                 {cold * 1000:9.1f} ms")
    print(f"  the next call (one new msg)  {warm * 1000:9.1f} ms")
    verdict = "met" if ratio <= 0.02 else "MISSED"
    print(f"  ratio {ratio:.4f} (target <= 0.02): {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.messages, args.runs))
