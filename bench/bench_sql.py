"""What does an append to a `SqlWorkspace` on SQLite cost, against a raw INSERT?

Measures, in one run and alternating so that disk and scheduler noise hit all alike:

- `SqlWorkspace.offload_context` of one message, and of a batch of 20, into a session whose
  log already holds 5,000 lines (a transaction per batch: the next line number read, the
  lines, the message keys and the event written);
- the baseline: a raw `INSERT` of the same serialised lines into a table of the same shape
  in a database opened the same way (WAL, `synchronous=FULL`, `BEGIN IMMEDIATE`, one
  transaction per batch), from a worker thread as the workspace does;
- for comparison, `LocalWorkspace.offload_context` with fsync on.

Prints the median latency per append and the messages per second; the ratio workspace /
raw INSERT is what the workspace adds (serialising, the key index, the event).

Usage: python bench/bench_sql.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from ctxoffload import LocalWorkspace, Msg, SqlWorkspace

PRIOR_LINES = 5_000


def _messages(n: int, start: int) -> list[Msg]:
    return [
        Msg(role="assistant", content=f"step {i}: " + "observations and reasoning " * 20)
        for i in range(start, start + n)
    ]


class RawInsert:
    """The baseline: the same lines INSERTed by hand, one transaction per batch."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            "CREATE TABLE lines (session TEXT, log TEXT, line INTEGER, body BLOB, "
            "PRIMARY KEY (session, log, line))"
        )

    def _append(self, lines: list[bytes]) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        first = (
            self.db.execute("SELECT coalesce(max(line), 0) + 1 FROM lines WHERE session = 's'")
        ).fetchone()[0]
        self.db.executemany(
            "INSERT INTO lines VALUES ('s', 'context.jsonl', ?, ?)",
            [(first + i, line) for i, line in enumerate(lines)],
        )
        self.db.execute("COMMIT")

    async def append(self, msgs: list[Msg]) -> None:
        lines = [m.model_dump_json().encode() + b"\n" for m in msgs]
        await asyncio.to_thread(self._append, lines)


async def _timed(append: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await append()
    return time.perf_counter() - start


async def measure(folder: Path, batch: int, samples: int) -> dict[str, float]:
    """Median seconds per append of `batch` messages, per way of appending."""
    sql = SqlWorkspace(f"sqlite:///{folder / f'ws-{batch}.db'}")
    local = LocalWorkspace(folder / f"ws-{batch}", fsync=True)
    raw = RawInsert(folder / f"raw-{batch}.db")
    for start in range(0, PRIOR_LINES, 500):
        filler = _messages(500, start)
        await sql.offload_context("s", filler)
        await local.offload_context("s", filler)
        await raw.append(filler)
    times: dict[str, list[float]] = {"sql": [], "raw": [], "local": []}
    for i in range(samples):
        msgs = _messages(batch, PRIOR_LINES + i * batch)
        times["sql"].append(await _timed(functools.partial(sql.offload_context, "s", msgs)))
        times["raw"].append(await _timed(functools.partial(raw.append, msgs)))
        times["local"].append(await _timed(functools.partial(local.offload_context, "s", msgs)))
    sql.close()
    raw.db.close()
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    samples = 20 if args.quick else 100
    with tempfile.TemporaryDirectory() as tmp:
        for batch in (1, 20):
            found = asyncio.run(measure(Path(tmp), batch, samples))
            print(f"batch of {batch} message(s), {samples} appends, log of {PRIOR_LINES} lines:")
            for name, label in (
                ("raw", "raw INSERT (baseline)"),
                ("sql", "SqlWorkspace (SQLite)"),
                ("local", "LocalWorkspace (fsync)"),
            ):
                seconds = found[name]
                print(
                    f"  {label:24} {seconds * 1000:8.2f} ms/append  "
                    f"{batch / seconds:9.0f} msgs/s  x{seconds / found['raw']:.2f} of raw"
                )


if __name__ == "__main__":
    main()
