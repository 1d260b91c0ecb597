"""What does a host's call cost the Projector when its history has one new message?

A host that keeps its own history (LangChain, pydantic-ai, the OpenAI Agents SDK) sends all
of it on every model call. The `Projector` turns it into what the model sees. Measured, over
a `LocalWorkspace` (fsync on) with a 32,000-token window and a `ScriptedModel` that writes
summaries at once (so what is timed is ctxoffload's own work):

- from nothing: a new projector given a history of N messages (requests, tool calls, tool
  results, replies; one result in 25 is 20 KB, so it is offloaded), which truncates the big
  results, appends what a summary stands for to context.jsonl and summarises;
- the next call: the same projector given that history plus one message.

Printed: both times (median of the runs) and their ratio. Target: <= 0.02 (a call costs what
is new, not the history: issue 44).

Usage: python bench/bench_projection.py [--messages N] [--runs N]
"""

from __future__ import annotations

import time
from pathlib import Path

from _history import SUMMARY, arguments, history, median_times, report

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ToolCallBlock, ToolResultBlock
from ctxoffload.compression import Projector
from ctxoffload.model import ScriptedModel


class Messages:
    """The history as ctxoffload's `Msg`s."""

    def request(self, text: str) -> Msg:
        return Msg(role="user", content=text)

    def call(self, call_id: str, i: int) -> Msg:
        call = ToolCallBlock(id=call_id, name="grep", input={"pattern": f"p{i}"})
        return Msg(role="assistant", content=[call])

    def result(self, call_id: str, output: str) -> Msg:
        return Msg(role="tool", content=[ToolResultBlock(id=call_id, name="grep", output=output)])

    def reply(self, text: str) -> Msg:
        return Msg(role="assistant", content=text)


def messages(n: int) -> list[Msg]:
    """A system prompt, then the history's first `n - 1` messages."""
    return [Msg(role="system", content="You debug builds."), *history(n - 1, Messages())]


async def one_run(root: Path, n: int, run: int) -> tuple[float, float]:
    workspace = LocalWorkspace(root / f"run-{run}")
    projector = Projector(
        workspace,
        "thread-1",
        config=ContextConfig(context_window=32_000),
        model=ScriptedModel([], default=SUMMARY),
    )
    msgs = messages(n)
    start = time.perf_counter()
    await projector.project(msgs)
    cold = time.perf_counter() - start
    msgs.append(Msg(role="user", content="and now?"))
    start = time.perf_counter()
    await projector.project(msgs)
    warm = time.perf_counter() - start
    return cold, warm


def main(n: int, runs: int) -> None:
    cold, warm = median_times(one_run, n, runs)
    report(
        f"history of {n:,} messages, median of {runs} runs",
        [("from nothing", cold), ("the next call (one new msg)", warm)],
        warm / cold,
    )


if __name__ == "__main__":
    args = arguments(__doc__)
    main(args.messages, args.runs)
