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

Usage: python bench/bench_long_session.py [--messages N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench_compression import SUMMARY, _Answering, _messages, _steps

from ctxoffload import ContextConfig, LocalWorkspace, Msg
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


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    args = parser.parse_args()
    steps, source = _steps()
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
