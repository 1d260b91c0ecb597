"""What recording one model call costs a host, now that the record is not synced on its own.

Every door records each model call in the session's events.jsonl: the messages not recorded
yet and a `model_call` event naming them (`RECORD_KINDS`), one append. What they hold is
still in the context, and nothing that leaves it rests on them, so that append is written at
once without an fsync of its own: the next synced append to events.jsonl (a drop's: a
compaction, an offload) makes it durable too. This bench times that append against the same
lines appended synced, as every event was before, alternated so that noise falls on both,
into a `LocalWorkspace` (fsync on) in a folder on this machine's disk (not /tmp, which may be
a tmpfs where fsync costs nothing): the median wall time of each, and the ratio.

It then times the record as a sync host's projector writes it (its loop run by the calling
thread, the file work inline: `_loop.CallerLoop`), against the baseline of the same lines
(`json.dumps`) appended with one `os.write` to a file held open: the CPU time a call's record
costs beyond the write itself (the workspace's checks that its folder and log are still its
own, its lock against a purge, its writer's stamp).

    python bench/bench_record.py [--calls 300] [--dir PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxoffload import LocalWorkspace

ROOT = Path(__file__).resolve().parents[1]


def _records(step: int) -> list[tuple[str, dict[str, Any]]]:
    """One call's record: two new messages (an assistant's tool call, its result's preview)
    and the model_call event naming the call's messages."""
    messages = [
        {"id": f"a{step}", "role": "assistant", "content": "I will read the config. " * 8},
        {"id": f"t{step}", "role": "tool", "content": "key = value\n" * 60},
    ]
    call = {"step": step, "attempt": 1, "messages": [m["id"] for m in messages], "tokens": 900}
    return [*(("message", {"message": m}) for m in messages), ("model_call", call)]


async def measure(folder: Path, calls: int) -> tuple[list[float], list[float]]:
    """Wall seconds of each recorded call, as recorded now and synced."""
    ws = LocalWorkspace(folder)
    record: list[float] = []
    synced: list[float] = []
    for step in range(1, calls + 1):
        for into, extra in ((record, []), (synced, [("door", {"door": "bench"})])):
            # (A `door` event beside the record makes the append synced, as every event was.)
            lines = _records(step) + extra
            start = time.perf_counter()
            await ws.record_events("s" if not extra else "t", lines)
            into.append(time.perf_counter() - start)
    return record, synced


async def inline(folder: Path, calls: int) -> tuple[float, float]:
    """CPU seconds of one call's record made inline (as a sync host's projector makes it),
    and of the same lines dumped and appended with one `os.write`: the means of `calls`."""
    from ctxoffload._loop import _INLINE

    _INLINE.add(asyncio.get_running_loop())  # (what a `CallerLoop` marks its loop with)
    ws = LocalWorkspace(folder / "ws")
    fd = os.open(folder / "raw.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    ours = raw = 0.0
    try:
        for step in range(1, calls + 1):
            lines = _records(step)
            start = time.process_time()
            await ws.record_events("s", lines)
            ours += time.process_time() - start
            start = time.process_time()
            os.write(fd, b"".join(json.dumps({"kind": k, **f}).encode() + b"\n" for k, f in lines))
            raw += time.process_time() - start
    finally:
        os.close(fd)
    return ours / calls, raw / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--dir", type=Path, default=ROOT, help="where the workspace is made")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix=".bench-record-") as tmp:
        record, synced = asyncio.run(measure(Path(tmp), args.calls))
    now, before = statistics.median(record), statistics.median(synced)
    print(f"recording one model call (median of {args.calls}), fsync on, in {args.dir}")
    print(f"  synced, as before:  {before * 1e3:7.3f} ms")
    print(f"  the record now:     {now * 1e3:7.3f} ms   ratio {now / before:.2f}x")
    with tempfile.TemporaryDirectory(dir=args.dir, prefix=".bench-record-") as tmp:
        ours, raw = asyncio.run(inline(Path(tmp), 10 * args.calls))
    print(f"one call's record inline, CPU (mean of {10 * args.calls})")
    print(f"  json.dumps + os.write: {raw * 1e6:6.1f} us")
    print(f"  the workspace's:       {ours * 1e6:6.1f} us   ratio {ours / raw:.1f}x")


if __name__ == "__main__":
    main()
