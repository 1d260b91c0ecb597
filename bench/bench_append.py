"""Does appending to context.jsonl stay cheap as the log grows?

Measures `LocalWorkspace.offload_context` of one message into a log that already holds
8,000 lines against the same append into a log that starts empty, alternating the two so
that disk and scheduler noise hit both alike. Target: ratio <= 1.2, with fsync on and off.

Also prints, for information, the first append by a *new* workspace to the 8,000-line log:
it has no line count or id index cached yet and must read the file once. Then the same
two appends to an `InMemoryWorkspace` (same target): its logs grow in place, where a copy
of the whole log per append made a session's appends cost O(its length squared).

Usage: python bench/bench_append.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from ctxoffload import InMemoryWorkspace, LocalWorkspace, Msg

PRIOR_LINES = 8_000
TARGET = 1.2


def _message(i: int) -> Msg:
    return Msg(role="assistant", content=f"step {i}: " + "observations and reasoning " * 20)


async def _timed_append(ws: LocalWorkspace | InMemoryWorkspace, session_id: str, i: int) -> float:
    msg = [_message(i)]
    start = time.perf_counter()
    await ws.offload_context(session_id, msgs=msg)
    return time.perf_counter() - start


async def measure(workdir: Path | None, *, fsync: bool, samples: int) -> dict[str, float]:
    """Median seconds per append: into an empty log, an 8,000-line log, and cold (on disk;
    `workdir` None: in memory, with no cold figure)."""
    ws: LocalWorkspace | InMemoryWorkspace = (
        InMemoryWorkspace() if workdir is None else LocalWorkspace(workdir, fsync=fsync)
    )
    # Fill quickly in batches; how the lines got there does not matter to the append.
    for start in range(0, PRIOR_LINES, 500):
        await ws.offload_context("big", msgs=[_message(i) for i in range(start, start + 500)])
    await ws.offload_context("warmup", msgs=[_message(0)])
    empty, loaded = [], []
    for i in range(samples):
        empty.append(await _timed_append(ws, "empty", i))
        loaded.append(await _timed_append(ws, "big", i))
    if workdir is None:
        return {"empty": statistics.median(empty), "loaded": statistics.median(loaded)}
    cold = [await _timed_append(LocalWorkspace(workdir, fsync=fsync), "big", i) for i in range(5)]
    return {
        "empty": statistics.median(empty),
        "loaded": statistics.median(loaded),
        "cold": statistics.median(cold),
    }


def report(label: str, result: dict[str, float]) -> bool:
    """Print one workspace's two appends and their ratio; whether the target is met."""
    ratio = result["loaded"] / result["empty"]
    print(
        f"  {label}: empty log {result['empty'] * 1e6:8.1f} us, "
        f"{PRIOR_LINES} prior lines {result['loaded'] * 1e6:8.1f} us, "
        f"ratio {ratio:.2f} (target <= {TARGET})"
    )
    return ratio <= TARGET


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    samples = 50 if args.quick else 400
    print(f"offload_context of one message; median of {samples} appends each")
    ok = True
    for fsync in (True, False):
        with tempfile.TemporaryDirectory(dir=".") as tmp:
            result = await measure(Path(tmp), fsync=fsync, samples=samples)
        ok = report(f"fsync={'on ' if fsync else 'off'}", result) and ok
        print(
            f"             first append by a new workspace to the {PRIOR_LINES}-line log "
            f"(counts it and indexes its message ids once): {result['cold'] * 1e6:8.1f} us"
        )
    ok = report("in memory", await measure(None, fsync=False, samples=samples)) and ok
    print("target met" if ok else "TARGET MISSED")


if __name__ == "__main__":
    asyncio.run(main())
