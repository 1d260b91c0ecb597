"""What does offloading the same 5 MB image again and again cost?

Offloads one 5 MB image (a base64 `DataBlock`) 1,000 times with `LocalWorkspace` (fsync on)
and compares with one plain write + fsync of its bytes. Only the first call writes; every
later one finds data/<sha256>.png already there. What to expect: a
repeat of the same base64 text finds it in the workspace's table of payloads it stored, checks
that the data/ file is the one it verified (inode, size, ctime) and touches it for gc: well
under a millisecond. The decode and hash times printed are what a repeat would cost without
that table (binascii decodes at roughly 0.3-0.5 GB/s). The ratios printed are the total of all
offloads over one write, and the median repeat over one write (target <= 2).

Runs in a temporary directory under the current one, so it measures the disk you work on.

Usage: python bench/bench_data.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ctxoffload import Base64Source, DataBlock, LocalWorkspace

SIZE = 5 * 1024 * 1024


def _raw_write(path: Path, data: bytes) -> float:
    start = time.perf_counter()
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - start


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 offloads instead of 1,000")
    args = parser.parse_args()
    count = 100 if args.quick else 1000
    image = os.urandom(SIZE)
    block = DataBlock(
        source=Base64Source(media_type="image/png", data=base64.b64encode(image).decode())
    )
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        ws = LocalWorkspace(Path(tmp) / "ws")
        # One write of the bytes (median of a few, each to a new file).
        raw_writes = [_raw_write(Path(tmp) / f"raw{i}.png", image) for i in range(5)]
        one_write = statistics.median(raw_writes)
        per_call = []
        start_all = time.perf_counter()
        for _ in range(count):
            start = time.perf_counter()
            stored = await ws.offload_data_block(block)
            per_call.append(time.perf_counter() - start)
        total = time.perf_counter() - start_all
        stored_files = list(ws.data_dir.iterdir())
        assert len(stored_files) == 1 and stored_files[0].read_bytes() == image
        assert Path(stored.source.url) == stored_files[0]

    encoded = base64.b64encode(image).decode()
    decode = statistics.median(
        _time(lambda: base64.b64decode(encoded, validate=True)) for _ in range(5)
    )
    digest = statistics.median(_time(lambda: hashlib.sha256(image).digest()) for _ in range(5))
    repeat = statistics.median(per_call[1:])
    print(f"{count} offloads of one 5 MB image (fsync on), stored once")
    print(f"  one write + fsync of the bytes   {one_write * 1e3:8.2f} ms")
    print(f"  first offload (writes)           {per_call[0] * 1e3:8.2f} ms")
    print(f"  median repeat (dedup)            {repeat * 1e3:8.2f} ms")
    print(f"    of which base64 decode ~{decode * 1e3:.2f} ms, sha256 ~{digest * 1e3:.2f} ms")
    print(f"  all {count} offloads                {total * 1e3:8.1f} ms")
    print(f"  ratio all offloads / one write   {total / one_write:8.1f}")
    print(f"  ratio median repeat / one write  {repeat / one_write:8.2f}")


def _time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    asyncio.run(main())
