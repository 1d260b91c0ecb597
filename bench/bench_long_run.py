"""The worst case of exact counting: one unbroken run of characters.

BPE on a single run of letters (a DNA line, an encoded blob) costs more than linear time:
tiktoken took 10-19 s to count 8 MB of `A`. ctxoffload counts a run of 2,048 non-space
characters or more in pieces (`RUN_PIECE_CHARS` in `ctxoffload._tokens.counters`). Measured
in the same run, each a fresh counter (no cached counts): counting, and truncating a tool
result of that text (what an agent waits for after the tool returns), for 8 MB of `A`
against 8 MB of words.

    python bench/bench_long_run.py
    python bench/bench_long_run.py --mb 2
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time

from ctxoffload import ContextConfig, LocalWorkspace, ToolResultBlock
from ctxoffload.compression import Compressor
from ctxoffload.tokens import TiktokenCounter


def texts(size: int) -> dict[str, str]:
    words = ("the quick brown fox jumps over the lazy dog " * (size // 44 + 1))[:size]
    return {"words": words, "one run": "A" * size}


async def truncate(text: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        comp = Compressor(
            ContextConfig(context_window=128_000),
            offloader=LocalWorkspace(tmp),
            session_id="bench",
            counter=TiktokenCounter(),
        )
        started = time.perf_counter()
        await comp.process_tool_result(ToolResultBlock(id="c1", name="cat", output=text))
        return time.perf_counter() - started


def count(text: str) -> float:
    counter = TiktokenCounter()
    started = time.perf_counter()
    counter.count_text(text)
    return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=8.0)
    args = parser.parse_args()
    size = int(args.mb * 1_000_000)
    print(f"{args.mb:g} MB of text; best of 3")
    print("text       count (s)  truncate (s)")
    best: dict[str, tuple[float, float]] = {}
    for name, text in texts(size).items():
        counted = min(count(text) for _ in range(3))
        cut = min([await truncate(text) for _ in range(3)])
        best[name] = (counted, cut)
        print(f"{name:9}  {counted:9.2f}  {cut:12.2f}")
    (cw, tw), (cr, tr) = best["words"], best["one run"]
    print(f"one run vs words: counting {cr / cw:.2f}x, truncating {tr / tw:.2f}x (target <= 3x)")


if __name__ == "__main__":
    asyncio.run(main())
