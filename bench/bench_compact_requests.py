"""Does an agent's look for compaction requests stay cheap as its record grows?

An `Agent` looks for `compact_request` events at the start of every step
(`CompactRequests.look`). This measures one look, after another process's object appended one
event and a request, on a LocalWorkspace and an InMemoryWorkspace whose events.jsonl already
holds SMALL and then LARGE lines of about 500 bytes, against reading the record whole
(`read_events`, what a look would cost without following). Target: a look on the large log
costs at most 2x a look on the small one (it reads what was appended, not the log).

Usage: python bench/bench_compact_requests.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from typing import Any

from ctxoffload import InMemoryWorkspace, LocalWorkspace
from ctxoffload._disk.compact_requests import CompactRequests
from ctxoffload.workspace import request_compaction

SMALL = 1_000
LARGE = 100_000
TARGET = 2.0


async def fill(workspace: Any, lines: int) -> None:
    for start in range(0, lines, 1_000):
        await asyncio.gather(
            *(
                workspace.record_event("s", "model_call", step=n, padding="x" * 440)
                for n in range(start, min(lines, start + 1_000))
            )
        )


async def looks(make: Any, lines: int, rounds: int) -> tuple[float, float]:
    """(median seconds of one look, seconds of one read_events) on a log of `lines`."""
    agent_side, asker = make()
    await fill(agent_side, lines)
    follower = CompactRequests(agent_side, "s")
    await follower.look()  # the first look reads the log once
    times = []
    for n in range(rounds):
        await asker.record_event("s", "model_call", step=-n, padding="y" * 440)
        request = await request_compaction(asker, "s")
        started = time.perf_counter()
        found = await follower.look()
        times.append(time.perf_counter() - started)
        assert request in [r.request for r in found]
    started = time.perf_counter()
    await agent_side.read_events("s")
    whole = time.perf_counter() - started
    return statistics.median(times), whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 20,000-line log, fewer rounds")
    args = parser.parse_args()
    large, rounds = (20_000, 10) if args.quick else (LARGE, 30)
    folder = tempfile.mkdtemp()
    counter = iter(range(10**6))

    def local() -> tuple[Any, Any]:
        where = f"{folder}/{next(counter)}"
        return LocalWorkspace(where, fsync=False), LocalWorkspace(where, fsync=False)

    def memory() -> tuple[Any, Any]:
        workspace = InMemoryWorkspace()
        return workspace, workspace

    ok = True
    for name, make in (("LocalWorkspace", local), ("InMemoryWorkspace", memory)):
        small_look, small_whole = asyncio.run(looks(make, SMALL, rounds))
        large_look, large_whole = asyncio.run(looks(make, large, rounds))
        ratio = large_look / small_look
        ok &= ratio <= TARGET
        print(
            f"{name}: one look {small_look * 1e6:,.0f} us at {SMALL:,} lines, "
            f"{large_look * 1e6:,.0f} us at {large:,} lines (ratio {ratio:.2f}, target "
            f"<= {TARGET}); read_events whole: {small_whole * 1e3:,.1f} ms and "
            f"{large_whole * 1e3:,.1f} ms"
        )
    print("OK" if ok else "OVER TARGET")


if __name__ == "__main__":
    main()
