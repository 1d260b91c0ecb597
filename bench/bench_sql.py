"""What does an append to a `SqlWorkspace` on SQLite cost, against a raw INSERT?

Measures, in one run and alternating so that disk and scheduler noise hit all alike:

- `SqlWorkspace.offload_context` of one message, and of a batch of 20, into a session whose
  log already holds 5,000 lines (a transaction per batch: the next line number read, the
  lines, the message keys and the event written);
- the baseline: a raw `INSERT` of the same serialised lines into a table of the same shape
  in a database opened the same way (WAL, `synchronous=FULL`, `BEGIN IMMEDIATE`, one
  transaction per batch), from a worker thread as the workspace does;
- for comparison, `LocalWorkspace.offload_context` with fsync on;
- where a PostgreSQL server can be started (initdb and pg_ctl, as the tests start theirs:
  tests/pg_server.py, with psycopg installed), the same on it: `SqlWorkspace` on a schema of
  its own against a raw INSERT of the same lines through psycopg, one transaction per batch
  reading the next line number, from a worker thread. (That server runs with fsync off, as
  the tests' does: the ratio is what the workspace adds, not what a disk costs.)

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
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ctxoffload import LocalWorkspace, Msg, SqlWorkspace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from pg_server import PostgresServer, binaries  # noqa: E402  (the tests' server)

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


class RawPgInsert:
    """The PostgreSQL baseline: the same lines INSERTed by hand through psycopg, one
    transaction per batch, from a worker thread."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.db: Any = psycopg.connect(url, autocommit=True)
        self.db.execute(
            "CREATE TABLE raw_lines (session TEXT, log TEXT, line INTEGER, body BYTEA, "
            "PRIMARY KEY (session, log, line))"
        )

    def _append(self, lines: list[bytes]) -> None:
        with self.db.transaction():
            first = self.db.execute(
                "SELECT coalesce(max(line), 0) + 1 FROM raw_lines WHERE session = 's'"
            ).fetchone()[0]
            self.db.cursor().executemany(
                "INSERT INTO raw_lines VALUES ('s', 'context.jsonl', %s, %s)",
                [(first + i, line) for i, line in enumerate(lines)],
            )

    async def append(self, msgs: list[Msg]) -> None:
        lines = [m.model_dump_json().encode() + b"\n" for m in msgs]
        await asyncio.to_thread(self._append, lines)


async def _timed(append: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await append()
    return time.perf_counter() - start


async def measure(
    folder: Path, batch: int, samples: int, server: PostgresServer | None
) -> dict[str, float]:
    """Median seconds per append of `batch` messages, per way of appending."""
    sql = SqlWorkspace(f"sqlite:///{folder / f'ws-{batch}.db'}")
    local = LocalWorkspace(folder / f"ws-{batch}", fsync=True)
    raw = RawInsert(folder / f"raw-{batch}.db")
    appends: dict[str, Callable[[list[Msg]], Awaitable[object]]] = {
        "raw": raw.append,
        "sql": functools.partial(sql.offload_context, "s"),
        "local": functools.partial(local.offload_context, "s"),
    }
    closing: list[Callable[[], object]] = [sql.close, raw.db.close]
    if server is not None:
        pg = SqlWorkspace(server.new_schema())
        pg_raw = RawPgInsert(server.new_schema())
        appends["pg_raw"] = pg_raw.append
        appends["pg"] = functools.partial(pg.offload_context, "s")
        closing += [pg.close, pg_raw.db.close]
    for start in range(0, PRIOR_LINES, 500):
        filler = _messages(500, start)
        for append in appends.values():
            await append(filler)
    times: dict[str, list[float]] = {name: [] for name in appends}
    for i in range(samples):
        msgs = _messages(batch, PRIOR_LINES + i * batch)
        for name, append in appends.items():
            times[name].append(await _timed(functools.partial(append, msgs)))
    for close in closing:
        close()
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    samples = 20 if args.quick else 100
    server = None
    if binaries() is None:
        print("(no PostgreSQL server binaries: its rows are left out)")
    else:
        try:
            server = PostgresServer.start()
        except (RuntimeError, OSError) as exc:
            print(f"(no PostgreSQL server could be started: {exc})")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for batch in (1, 20):
                found = asyncio.run(measure(Path(tmp), batch, samples, server))
                print(
                    f"batch of {batch} message(s), {samples} appends, log of {PRIOR_LINES} lines:"
                )
                for name, label, baseline in (
                    ("raw", "raw INSERT (SQLite)", "raw"),
                    ("sql", "SqlWorkspace (SQLite)", "raw"),
                    ("local", "LocalWorkspace (fsync)", "raw"),
                    ("pg_raw", "raw INSERT (PostgreSQL)", "pg_raw"),
                    ("pg", "SqlWorkspace (PostgreSQL)", "pg_raw"),
                ):
                    if name not in found:
                        continue
                    seconds = found[name]
                    print(
                        f"  {label:26} {seconds * 1000:8.2f} ms/append  "
                        f"{batch / seconds:9.0f} msgs/s  x{seconds / found[baseline]:.2f} of "
                        "its raw INSERT"
                    )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
