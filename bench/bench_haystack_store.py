"""What does keeping everything cost a Haystack Agent, against Haystack's own built-ins?

The Haystack door does no work at a model call: Haystack calls the store once per result its
`ToolResultOffloadHook` offloads, and the compactor only when its `CompactionHook` decides to
compact. So what is measured is those two calls, each against the built-in that does the same
job without keeping anything in a workspace, in the same run:

- a 5 MB result written by `WorkspaceResultStore` (a `tool_result` file, fsync on, its event)
  against Haystack's `FileSystemToolResultStore` (a plain file write);
- a compaction of a 10,000-message conversation (requests, tool calls, results) by
  `WorkspaceCompactor` (every message that leaves appended to context.jsonl, an extractive
  summary naming it) against Haystack's `SlidingWindowCompactor` (which drops them).

Printed: the times (median of the runs) and each ratio. There is no target: the figures say
what a call that keeps everything costs over one that keeps nothing.

Usage: python bench/bench_haystack_store.py [--messages N] [--runs N]  (needs Haystack:
pip install -e '.[haystack]')
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from haystack.dataclasses import ChatMessage, ToolCall
from haystack.hooks.compaction import SlidingWindowCompactor
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from haystack.token_counters import ApproximateTokenCounter

from ctxoffload import LocalWorkspace
from ctxoffload.integrations.haystack import WorkspaceCompactor, WorkspaceResultStore

BIG = "".join(f"03:{i % 60:02d} INFO export batch {i} done\n" for i in range(160_000))


def conversation(n: int) -> list[ChatMessage]:
    messages = [ChatMessage.from_system("You debug builds.")]
    while len(messages) < n:
        i = len(messages)
        messages.append(ChatMessage.from_user(f"request {i}: look at part {i}"))
        call = ToolCall(tool_name="grep", arguments={"pattern": f"p{i}"}, id=f"c{i}")
        messages.append(ChatMessage.from_assistant(tool_calls=[call]))
        output = "\n".join(f"line {j} of {i}" for j in range(12))
        messages.append(ChatMessage.from_tool(output, origin=call))
        messages.append(ChatMessage.from_assistant(f"part {i} holds nothing unusual"))
    return messages[:n]


def timed(work: object) -> float:
    start = time.perf_counter()
    work()  # type: ignore[operator]
    return time.perf_counter() - start


def one_run(root: Path, n: int, run: int) -> tuple[float, float, float, float]:
    store = WorkspaceResultStore(LocalWorkspace(root / f"ws-{run}"), session_id="bench")
    plain = FileSystemToolResultStore(root / f"fs-{run}")
    ours_write = timed(lambda: store.write(key=f"{run}_fetch_call_1.txt", content=BIG))
    theirs_write = timed(lambda: plain.write(key=f"{run}_fetch_call_1.txt", content=BIG))
    messages = conversation(n)
    counter = ApproximateTokenCounter()
    target = 8_000
    compactor = WorkspaceCompactor(store)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Haystack marks its compactors experimental
        sliding = SlidingWindowCompactor()
    ours = timed(lambda: compactor.compact(list(messages), target, counter))
    theirs = timed(lambda: sliding.compact(list(messages), target, counter))
    return ours_write, theirs_write, ours, theirs


def main(n: int, runs: int) -> None:
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        times = [one_run(Path(tmp), n, run) for run in range(runs)]
    ours_write, theirs_write, ours, theirs = (
        statistics.median(t[i] for t in times) for i in range(4)
    )
    print(f"median of {runs} runs")
    print("  a 5 MB result written")
    print(f"    WorkspaceResultStore        {ours_write * 1000:9.1f} ms")
    print(f"    FileSystemToolResultStore   {theirs_write * 1000:9.1f} ms")
    print(f"    ratio {ours_write / theirs_write:.2f}")
    print(f"  a compaction of {n:,} messages")
    print(f"    WorkspaceCompactor (keeps)  {ours * 1000:9.1f} ms")
    print(f"    SlidingWindowCompactor      {theirs * 1000:9.1f} ms")
    print(f"    ratio {ours / theirs:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    main(args.messages, args.runs)
