"""Where one cold compaction of 10,000 messages spends its time, part by part.

The compaction of `bench_compression.py` (its messages, window, scripted summary model and
`LocalWorkspace` with fsync on), timed part by part without a profiler: each part is wrapped
and its time counted without the parts inside it. The worker threads' work (serialising the
rows, the append, the read-back, the artifact scan) runs on the event loop's thread here, so
that every part is on one clock and the parts add up to the compaction; the bench itself runs
the scan in a worker thread beside the rest. CPU time is the figure (thread time, the process's
for the whole); wall time beside it, which on a loaded machine stretches what computes more
than what waits on the disk (the fsyncs). The garbage collector's passes land inside whichever
part allocated when they ran: they are counted there and shown apart as well.

Prints a Markdown table of the run with the least CPU time of `--runs` (each a fresh
compressor and workspace after the baseline, as in the bench).

Usage: python bench/profile_compaction.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import functools
import gc
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_compression as bench

import ctxoffload._disk.jsonl as jsonl
import ctxoffload.compression._compaction as compaction
import ctxoffload.compression._compaction_index as compaction_index
import ctxoffload.compression._services as services
import ctxoffload.workspace._core as core
from ctxoffload import ContextConfig, LocalWorkspace, Msg, get_token_counter
from ctxoffload._loop import _INLINE
from ctxoffload.compression import Compressor
from ctxoffload.tokens import TiktokenCounter

PARTS = {
    "count": "counting what decides (the newest messages, an estimate of the rest)",
    "rows": "serialising the rows (each message's JSON, its payload and depth checks)",
    "keys": "the rows' keys (a hash of each line)",
    "append": "writing context.jsonl (one write, its commit record)",
    "fsync": "fsync (context.jsonl, its commit record, events.jsonl)",
    "read": "reading back what was stored, to check it",
    "scan": "the artifact scan of what leaves",
    "found": "noting the artifacts found (`find_artifacts`)",
    "index": "the artifact index built and fitted to its budget",
    "summary": "the summary (the extract, its requests, the scripted model)",
    "events": "the events (the batch, the summary, the compression and its artifacts)",
    "rest": "the rest (the split, the summary message, the assembly)",
}
GC = "of which the garbage collector's passes"


class _Clock:
    """Exclusive CPU and wall time per part: a part's nested parts are taken out of it."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.wall: dict[str, float] = defaultdict(float)
        self._open: list[list[float]] = []

    def enter(self) -> None:
        self._open.append([time.perf_counter(), time.thread_time(), 0.0, 0.0])

    def leave(self, part: str) -> None:
        wall0, cpu0, inner_wall, inner_cpu = self._open.pop()
        wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
        self.wall[part] += wall - inner_wall
        self.cpu[part] += cpu - inner_cpu
        if self._open:
            self._open[-1][2] += wall
            self._open[-1][3] += cpu

    def wrap(self, owner: Any, name: str, part: str) -> None:
        """Count the time of `owner.name` (a function or a coroutine function) as `part`."""
        work: Callable[..., Any] = getattr(owner, name)
        clock = self
        if asyncio.iscoroutinefunction(work):

            @functools.wraps(work)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                clock.enter()
                try:
                    return await work(*args, **kwargs)
                finally:
                    clock.leave(part)

            setattr(owner, name, timed_async)
            return

        @functools.wraps(work)
        def timed(*args: Any, **kwargs: Any) -> Any:
            clock.enter()
            try:
                return work(*args, **kwargs)
            finally:
                clock.leave(part)

        setattr(owner, name, timed)


class _Collections:
    """The CPU and wall time of the garbage collector's passes while counting."""

    def __init__(self) -> None:
        self.cpu = self.wall = 0.0
        self.passes = [0, 0, 0]
        self._start = (0.0, 0.0)
        gc.callbacks.append(self._note)

    def _note(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = (time.perf_counter(), time.thread_time())
            return
        self.wall += time.perf_counter() - self._start[0]
        self.cpu += time.thread_time() - self._start[1]
        self.passes[info["generation"]] += 1


class _Inline(concurrent.futures.ThreadPoolExecutor):
    """An executor that runs each call at once, on the caller's thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


def _install(clock: _Clock) -> None:
    clock.wrap(services.RunServices, "count_until", PARTS["count"])
    clock.wrap(core, "context_rows", PARTS["rows"])
    clock.wrap(core, "lines_and_keys", PARTS["keys"])
    clock.wrap(jsonl.JsonlAppender, "append", PARTS["append"])
    clock.wrap(os, "fsync", PARTS["fsync"])
    clock.wrap(services.RunServices, "_read_back", PARTS["read"])
    clock.wrap(compaction, "scan_messages", PARTS["scan"])
    clock.wrap(compaction_index, "find_artifacts", PARTS["found"])
    clock.wrap(compaction, "artifact_index", PARTS["index"])
    clock.wrap(compaction.Compaction, "_summarise", PARTS["summary"])
    clock.wrap(compaction.Compaction, "_record_summary", PARTS["events"])
    clock.wrap(services.RunServices, "events", PARTS["events"])
    clock.wrap(services.RunServices, "event", PARTS["events"])
    clock.wrap(core.StoreWorkspace, "_record", PARTS["events"])


async def _compact(workdir: Path, context: list[Msg]) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    loop.set_default_executor(_Inline())
    _INLINE.add(loop)  # the workspace's blocking work, inline (`off_loop`)
    compressor = Compressor(
        ContextConfig(context_window=bench.WINDOW),
        model=bench._Answering(default=bench.SUMMARY),
        offloader=LocalWorkspace(workdir),
        session_id="bench",
        counter=TiktokenCounter(),
    )
    start, cpu = time.perf_counter(), time.process_time()
    result = await compressor.maybe_compress(context)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert result.compressed
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="compactions; the least CPU shown")
    args = parser.parse_args()
    steps, source = bench._steps()
    system = Msg(role="system", content="You are a helpful assistant that can run bash commands.")
    messages = bench._messages(10_000, steps)
    get_token_counter(exact=True)
    clock = _Clock()
    _install(clock)
    collections = _Collections()
    print(f"source: {source}")
    best: tuple[float, float, float, dict[str, float], dict[str, float], Any] | None = None
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        for run in range(args.runs):
            baseline = bench._baseline(Path(tmp) / f"baseline-{run}.jsonl", messages)
            clock.cpu.clear()
            clock.wall.clear()
            collections.cpu = collections.wall = 0.0
            collections.passes = [0, 0, 0]
            wall, cpu = asyncio.run(_compact(Path(tmp) / f"run-{run}", [system, *messages]))
            load = os.getloadavg()[0]
            print(
                f"run {run + 1}: {wall * 1e3:.0f} ms wall, {cpu * 1e3:.0f} ms CPU; baseline "
                f"{baseline * 1e3:.0f} ms; load {load:.1f}"
            )
            if best is None or cpu < best[1]:
                gc_part = (collections.cpu, collections.wall, list(collections.passes))
                best = (wall, cpu, baseline, dict(clock.cpu), dict(clock.wall), gc_part)
    assert best is not None
    wall, cpu, baseline, cpus, walls, (gc_cpu, gc_wall, passes) = best
    cpus[PARTS["rest"]] = cpu - sum(cpus.values())
    walls[PARTS["rest"]] = wall - sum(walls.values())
    print(f"\nthe run with the least CPU time; garbage collector passes by generation: {passes}")
    print("| part | CPU ms | share of CPU | wall ms |")
    print("|---|---|---|---|")
    for part in PARTS.values():
        share = cpus[part] / cpu
        print(f"| {part} | {cpus[part] * 1e3:.0f} | {share:.0%} | {walls[part] * 1e3:.0f} |")
    print(f"| {GC} | {gc_cpu * 1e3:.0f} | {gc_cpu / cpu:.0%} | {gc_wall * 1e3:.0f} |")
    print(f"| the compaction | {cpu * 1e3:.0f} | 100% | {wall * 1e3:.0f} |")


if __name__ == "__main__":
    main()
