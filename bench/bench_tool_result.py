"""What does offloading a 10 MB tool result cost over writing the bytes yourself?

Measures `LocalWorkspace.offload_tool_result` of a 10 MB text output (fsync on) against a
plain write of the same bytes to a new file followed by `fsync`, alternating the two.
The workspace does more for its money: a temporary name linked into place (so a reader
never sees half a file and nothing is overwritten), a directory fsync, and an events.jsonl
line. Target: ratio <= 1.5.

The extra CPU work (UTF-8 encoding the text, counting its lines for the event) is a few
milliseconds whatever the disk; it is printed too. On a disk that takes 40 ms to write and
fsync 10 MB it is noise, on one that takes 8 ms it is most of the difference.

Then what a compressor adds for the agent (`Compressor.process_tool_result`: the output
stored, its head and notice made) is timed in CPU against counting the output's tokens whole,
which is what deciding it was over the limit cost before the first lines decided it
(`count_over`).

Runs in a temporary directory under the current one, so it measures the disk you work on.

Usage: python bench/bench_tool_result.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ctxoffload import ContextConfig, LocalWorkspace, ToolResultBlock, get_token_counter
from ctxoffload.compression import Compressor

SIZE = 10 * 1024 * 1024
TARGET = 1.5


def _output(i: int) -> str:
    line = f"result {i}: " + "log line with a little variety 0123456789 " * 2 + "\n"
    return (line * (SIZE // len(line) + 1))[:SIZE]


def _raw_write(path: Path, data: bytes) -> None:
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


async def measure(workdir: Path, samples: int) -> tuple[float, float]:
    """Median seconds: (offload_tool_result, raw write + fsync)."""
    ws = LocalWorkspace(workdir / "ws")
    raw_dir = workdir / "raw"
    raw_dir.mkdir()
    await ws.offload_tool_result("s", ToolResultBlock(id="warmup", output="x"))
    offload, raw = [], []
    for i in range(samples):
        # A new id and new content each time: no dedup shortcut for either side.
        result = ToolResultBlock(id=f"call_{i}", output=_output(i))
        data = _output(i + samples).encode()
        start = time.perf_counter()
        await ws.offload_tool_result("s", result)
        offload.append(time.perf_counter() - start)
        start = time.perf_counter()
        _raw_write(raw_dir / f"out_{i}.txt", data)
        raw.append(time.perf_counter() - start)
    return statistics.median(offload), statistics.median(raw)


async def measure_cut(workdir: Path, samples: int) -> tuple[float, float]:
    """Median CPU seconds: (a 10 MB result through a compressor, its tokens counted whole)."""
    counter = get_token_counter("gpt-4o")
    compressor = Compressor(
        ContextConfig(context_window=200_000),
        offloader=LocalWorkspace(workdir / "cut"),
        session_id="s",
        counter=counter,
    )
    await compressor.process_tool_result(ToolResultBlock(id="warmup", output="x"))
    cut, whole = [], []
    for i in range(samples):
        text = _output(i)
        start = time.process_time()
        await compressor.process_tool_result(ToolResultBlock(id=f"cut_{i}", output=text))
        cut.append(time.process_time() - start)
        text = _output(i + samples)  # (a new text: the counter remembers long ones)
        start = time.process_time()
        counter.count_text(text)
        whole.append(time.process_time() - start)
    return statistics.median(cut), statistics.median(whole)


def _time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    samples = 5 if args.quick else 20
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        offload, raw = await measure(Path(tmp), samples)
    ratio = offload / raw
    text = _output(0)
    data = text.encode()
    encode = statistics.median(
        _time(lambda: text.encode("utf-8", "surrogateescape")) for _ in range(9)
    )
    count = statistics.median(_time(lambda: data.count(b"\n")) for _ in range(9))
    print(f"10 MB tool result, fsync on; median of {samples} each")
    print(f"  offload_tool_result   {offload * 1e3:8.2f} ms")
    print(f"  raw write + fsync     {raw * 1e3:8.2f} ms")
    print(
        f"  CPU work a raw write of bytes skips: UTF-8 encode {encode * 1e3:.2f} ms, "
        f"line count for the event {count * 1e3:.2f} ms"
    )
    print(f"  ratio {ratio:.2f} (target <= {TARGET}): {'met' if ratio <= TARGET else 'MISSED'}")
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        cut, whole = await measure_cut(Path(tmp), max(3, samples // 2))
    print(f"the same through Compressor.process_tool_result, CPU; median of {max(3, samples // 2)}")
    print(f"  stored, head and notice made  {cut * 1e3:8.2f} ms")
    print(f"  its tokens counted whole      {whole * 1e3:8.2f} ms   ratio {cut / whole:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
