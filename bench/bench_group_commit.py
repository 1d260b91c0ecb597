"""How much does group commit buy threads appending to one log, and does it cost a lone writer?

N threads (1, 2, 4, 8) each append M one-message batches to one context.jsonl (committed log,
fsync on) through one `JsonlAppender`, with group commit (the default) and without it
(`group=False`: every batch written and synced on its own, as before group commit). Runs of
the two alternate, so disk and scheduler noise hit both alike; each figure is the median of
the rounds. Printed: appends per second, fsyncs per append (the log's and its commit record's,
counted by a wrapper around os.fsync) and the speed-up, grouped / ungrouped, measured in the
same run. The "free" rows replace os.fsync by a no-op (with fsync=True, so grouping is on): the
cost of the queue itself when there is no sync to share, which is why an appender with fsync
off does not group. The "off" row is that appender (fsync=False) against group=False.

Last, a lone writer's latency: one thread appends to two logs in turn, one through a grouped
appender and one through an ungrouped one, so both see the same disk at the same moments;
printed are the median latencies and their ratio (fsync on, then off).

Usage: python bench/bench_group_commit.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

# The appender itself is what is measured, below the workspace: its private module on purpose.
from ctxoffload._disk.jsonl import JsonlAppender
from ctxoffload._disk.layout import CONTEXT_FILE
from ctxoffload._disk.rows import row_line_and_key

LOG = CONTEXT_FILE


class _CountingFsync:
    def __init__(self, real: Callable[[int], None]) -> None:
        self.real = real
        self.free = False  # skip the real sync
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        if not self.free:
            self.real(fd)
        with self._lock:
            self.calls += 1


def run(directory: Path, *, threads: int, batches: int, group: bool, fsync: bool) -> float:
    """Seconds for `threads` threads to append `batches` batches each; fsyncs are counted."""
    appender = JsonlAppender(fsync=fsync, group=group)
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    shown = str(directory / LOG)
    start = threading.Barrier(threads + 1)

    def write(thread: int) -> None:
        prepared = [
            row_line_and_key(
                {"id": f"t{thread}-{seq}", "role": "assistant", "content": "step " * 40}
            )
            for seq in range(batches)
        ]
        start.wait()
        for line, key in prepared:
            appender.append(dir_fd, LOG, shown, [line], [key], commit=True)

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    try:
        for worker in workers:
            worker.start()
        start.wait()
        began = time.perf_counter()
        for worker in workers:
            worker.join()
        return time.perf_counter() - began
    finally:
        os.close(dir_fd)


def measure(
    *, threads: int, batches: int, fsync: bool, rounds: int, counter: _CountingFsync
) -> dict[bool, tuple[float, float]]:
    """Per mode (grouped or not): median appends/s and fsyncs per append."""
    rates: dict[bool, list[float]] = {True: [], False: []}
    syncs: dict[bool, list[float]] = {True: [], False: []}
    total = threads * batches
    for round_no in range(rounds):
        # Alternate which mode goes first.
        for group in (True, False) if round_no % 2 == 0 else (False, True):
            with tempfile.TemporaryDirectory(dir=".") as tmp:
                before = counter.calls
                seconds = run(Path(tmp), threads=threads, batches=batches, group=group, fsync=fsync)
                syncs[group].append((counter.calls - before) / total)
            rates[group].append(total / seconds)
    return {g: (statistics.median(rates[g]), statistics.median(syncs[g])) for g in (True, False)}


def lone_writer(*, appends: int, fsync: bool) -> tuple[float, float]:
    """Median seconds per append of a single thread: grouped, ungrouped (interleaved)."""
    latencies: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        targets = {}
        for group in (True, False):
            directory = Path(tmp) / str(group)
            directory.mkdir()
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            targets[group] = (JsonlAppender(fsync=fsync, group=group), fd, str(directory / LOG))
        try:
            for seq in range(appends):
                line, key = row_line_and_key(
                    {"id": f"m{seq}", "role": "assistant", "content": "step " * 40}
                )
                for group in (True, False) if seq % 2 else (False, True):
                    appender, fd, shown = targets[group]
                    began = time.perf_counter()
                    appender.append(fd, LOG, shown, [line], [key], commit=True)
                    latencies[group].append(time.perf_counter() - began)
        finally:
            for _, fd, _ in targets.values():
                os.close(fd)
    return statistics.median(latencies[True]), statistics.median(latencies[False])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer batches and rounds")
    args = parser.parse_args()
    batches, rounds = (60, 3) if args.quick else (200, 5)
    counter = _CountingFsync(os.fsync)
    os.fsync = counter  # counts the appender's syncs; the real fsync still runs
    print(
        f"one context.jsonl, one-message batches; {batches} per thread; median of {rounds} rounds"
    )
    print(
        f"  {'fsync':5} {'threads':>7}  {'grouped':>14} {'fsyncs/append':>13}"
        f"  {'ungrouped':>14} {'fsyncs/append':>13}  {'speed-up':>8}"
    )
    rows = [("on", n) for n in (1, 2, 4, 8)] + [("free", 1), ("free", 8), ("off", 1)]
    for mode, threads in rows:
        counter.free = mode == "free"
        result = measure(
            threads=threads, batches=batches, fsync=mode != "off", rounds=rounds, counter=counter
        )
        (grouped, grouped_syncs), (ungrouped, ungrouped_syncs) = result[True], result[False]
        print(
            f"  {mode:5} {threads:>7}  {grouped:>8.0f} app/s {grouped_syncs:>13.2f}"
            f"  {ungrouped:>8.0f} app/s {ungrouped_syncs:>13.2f}  {grouped / ungrouped:>7.2f}x"
        )
    print(
        "  (fsyncs/append counts the log's and its commit record's: 2.00 = one sync of each "
        "per batch; a 1-thread speed-up near 1.00x means a lone writer pays nothing; "
        "free: os.fsync a no-op)"
    )
    counter.free = False
    for fsync, appends in ((True, batches * 2), (False, batches * 20)):
        grouped, ungrouped = lone_writer(appends=appends, fsync=fsync)
        print(
            f"  lone writer, fsync {'on ' if fsync else 'off'}: median {grouped * 1e6:7.1f} us "
            f"grouped, {ungrouped * 1e6:7.1f} us ungrouped, ratio {grouped / ungrouped:.3f} "
            f"({appends} appends each, interleaved)"
        )


if __name__ == "__main__":
    main()
