"""Does a compaction late in a long session cost what one early in it does?

An agent-like loop: a `Compressor` with a 32,000-token window over a `LocalWorkspace` (fsync
on) is given one message at a time (assistant tool calls and their results, from a real
mini-swe-agent trajectory in ../shared/corpus when it is there), counts the context as an
agent does before each model call, and compacts whenever the trigger is passed; a
`ScriptedModel` writes the summaries at once, so what is timed is ctxoffload's own work.
20,000 messages make about 380 compactions and a context.jsonl of about 33 MB.

Printed: the mean time of a compaction in the first fifth of them and in the last fifth, and
their ratio (target: <= 1.5, flat); then, measured on the final log, what checking a
compaction's lines costs reading only them (`read_lines`, what the compressor does) against
reading the whole log back and splitting it (what it did before: each compaction then cost
O(the log), the session O(its length squared)).

`--agent N`: the same question of an `Agent`'s own loop instead: a `ScriptedModel` calls a
`bash` tool N times (the trajectory's commands and outputs), and what is timed is each
step, from one model call to the next (the tool, the truncation, counting, compaction, the
session record); printed, the mean step of the first fifth and of the last, and their ratio.

Usage: python bench/bench_long_session.py [--messages N] [--agent N]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench_compression import SUMMARY, _Answering, _messages, _steps

from ctxoffload import (
    Agent,
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    TextBlock,
    ToolCallBlock,
)
from ctxoffload.compression import Compressor
from ctxoffload.tokens import TiktokenCounter

WINDOW = 32_000


async def _session(
    workdir: Path, messages: list[Msg]
) -> tuple[list[float], LocalWorkspace, tuple[int, int]]:
    workspace = LocalWorkspace(workdir)
    compressor = Compressor(
        ContextConfig(context_window=WINDOW),
        model=_Answering(default=SUMMARY),
        offloader=workspace,
        session_id="long",
        counter=TiktokenCounter(),
    )
    context = [Msg(role="system", content="You are a helpful assistant that runs bash.")]
    times: list[float] = []
    span = (0, -1)
    for message in messages:
        context.append(message)
        compressor.count(context)
        start = time.perf_counter()
        result = await compressor.maybe_compress(context)
        if result.compressed:
            times.append(time.perf_counter() - start)
            context = result.messages
            assert result.line_span is not None
            span = result.line_span
    return times, workspace, span


async def _best(runs: int, work: Callable[[], Awaitable[object]]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await work()
        times.append(time.perf_counter() - start)
    return min(times)


async def _agent(workdir: Path, steps: list[tuple[str, str]], n: int) -> list[float]:
    """The time of each of an Agent's n steps, from one model call to the next."""
    outputs = {f"step {i}": f"{steps[i % len(steps)][1]}\n[{i}]" for i in range(n)}

    async def bash(command: str) -> str:
        """Run a shell command.

        Args:
            command: the command line.
        """
        return outputs[command]

    script: list[Msg | str] = [
        Msg(
            role="assistant",
            content=[
                TextBlock(text=steps[i % len(steps)][0][:2_000]),
                ToolCallBlock(id=f"call_{i}", name="bash", input={"command": f"step {i}"}),
            ],
        )
        for i in range(n)
    ]
    stamps: list[float] = []

    class Stamped(ScriptedModel):
        async def generate(self, messages: Any, **kwargs: Any) -> Any:
            stamps.append(time.perf_counter())
            return await super().generate(messages, **kwargs)

    agent = Agent(
        model=Stamped([*script, "done"], model_name="gpt-4o-mini"),
        tools=[bash],
        offloader=LocalWorkspace(workdir),
        context_config=ContextConfig(context_window=WINDOW),
        max_steps=n + 5,
    )
    await agent.reply("Fix the failing test.")
    return [b - a for a, b in itertools.pairwise(stamps)]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--agent", type=int, default=0, metavar="N", help="an Agent's N steps")
    args = parser.parse_args()
    steps, source = _steps()
    if args.agent:
        print(f"source: {source}")
        with tempfile.TemporaryDirectory(dir=".") as tmp:
            gaps = await _agent(Path(tmp), steps, args.agent)
            written = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
        fifth = max(1, len(gaps) // 5)
        early, late = statistics.mean(gaps[:fifth]), statistics.mean(gaps[-fifth:])
        print(f"an Agent's {len(gaps):,} steps, {written / 1e6:.1f} MB written to the workspace")
        print(f"  a step, first fifth   {early * 1e3:8.1f} ms")
        print(f"  a step, last fifth    {late * 1e3:8.1f} ms")
        print(f"  last / first: {late / early:.2f} (target <= 1.5)")
        return
    messages = _messages(args.messages, steps)
    print(f"source: {source}")
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        times, workspace, (first, last) = await _session(Path(tmp), messages)
        log = Path(tmp, "sessions", "long", "context.jsonl")
        fifth = max(1, len(times) // 5)
        early, late = statistics.mean(times[:fifth]), statistics.mean(times[-fifth:])
        print(
            f"{args.messages:,} messages, {len(times)} compactions, "
            f"context.jsonl {log.stat().st_size / 1e6:.1f} MB"
        )
        print(f"  a compaction, first fifth   {early * 1e3:8.1f} ms")
        print(f"  a compaction, last fifth    {late * 1e3:8.1f} ms")
        print(f"  last / first: {late / early:.2f} (target <= 1.5)")

        # The last compaction's lines, read as the compressor reads them, against the log
        # read whole and split, both on the final log in this run.
        async def lines() -> list[bytes]:
            return (await workspace.read_lines(str(log), first, last)).split(b"\n")

        async def whole() -> list[bytes]:
            return (await workspace.read_reference(str(log))).split(b"\n")

        part, full = await _best(5, lines), await _best(5, whole)
        print(f"  read back the last compaction's {last - first + 1} lines:")
        print(f"    read_lines                 {part * 1e3:8.1f} ms")
        print(f"    the whole log, split       {full * 1e3:8.1f} ms  ({full / part:.0f}x)")


if __name__ == "__main__":
    asyncio.run(main())
