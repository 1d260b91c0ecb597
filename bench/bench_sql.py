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

Then, in the same run, a tool result carrying a 5 MB file (a data/ payload, new bytes each
time) stored both ways: as a row of the database (`SqlWorkspace(url)`, the default) and in a
folder (`SqlWorkspace(url, payloads=folder)`, fsync on), on SQLite (and PostgreSQL where it
starts): the median time to offload it and to read it back, and what the database grew by.

Usage: python bench/bench_sql.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ctxoffload import LocalWorkspace, Msg, SqlWorkspace, ToolResultBlock
from ctxoffload.messages import Base64Source, DataBlock

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


PAYLOAD_BYTES = 5 << 20


def _tool_result(i: int) -> Msg:
    """A tool result carrying a new 5 MB file (random bytes: not compressible, not shared)."""
    raw = i.to_bytes(8, "big") + random.randbytes(PAYLOAD_BYTES - 8)
    data = base64.b64encode(raw).decode()
    block = DataBlock(source=Base64Source(media_type="application/pdf", data=data))
    output = ToolResultBlock(id=f"c{i}", name="fetch", output=[block])
    return Msg(role="tool", content=[output])


def _size(path: Path) -> int:
    """Bytes of a SQLite database and its WAL."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def measure_payloads(
    folder: Path, samples: int, server: PostgresServer | None
) -> dict[str, tuple[float, float, float]]:
    """Per way of storing: median seconds to offload a 5 MB tool result, median seconds to
    read its payload back, and the database's growth per payload (SQLite only, else 0)."""
    places: dict[str, tuple[SqlWorkspace, Path | None]] = {}
    for where in ("rows", "folder"):
        db = folder / f"payloads-{where}.db"
        payloads = folder / "blobs" if where == "folder" else None
        places[f"sqlite {where}"] = (SqlWorkspace(f"sqlite:///{db}", payloads=payloads), db)
        if server is not None:
            pg = SqlWorkspace(server.new_schema(), payloads=payloads and folder / "pg-blobs")
            places[f"pg {where}"] = (pg, None)
    found: dict[str, tuple[float, float, float]] = {}
    writes: dict[str, list[float]] = {name: [] for name in places}
    reads: dict[str, list[float]] = {name: [] for name in places}
    before: dict[str, int] = {}
    for name, (ws, db) in places.items():
        await ws.initialize()
        before[name] = _size(db) if db else 0
    for i in range(samples):
        msg = _tool_result(i)
        for name, (ws, _) in places.items():
            writes[name].append(await _timed(functools.partial(ws.offload_context, "s", [msg])))
            [stored] = (await ws.read_context("s"))[-1:]
            ref = next(r for r in _references(stored) if "/data/" in r)
            reads[name].append(await _timed(functools.partial(ws.read_reference, ref)))
    for name, (ws, db) in places.items():
        grown = (_size(db) - before[name]) / samples if db else 0.0
        found[name] = (statistics.median(writes[name]), statistics.median(reads[name]), grown)
        ws.close()
    return found


def _references(value: Any) -> list[str]:
    """Every string in a JSON value that names a data/ payload."""
    if isinstance(value, str):
        return [value] if "/data/" in value else []
    if isinstance(value, dict):
        return [r for v in value.values() for r in _references(v)]
    if isinstance(value, list):
        return [r for v in value for r in _references(v)]
    return []


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
            payload_samples = 5 if args.quick else 20
            found_payloads = asyncio.run(measure_payloads(Path(tmp), payload_samples, server))
            print(f"a tool result carrying 5 MB, {payload_samples} offloads:")
            for name, (write, read, grown) in found_payloads.items():
                growth = f"  database and WAL +{grown / 2**20:.2f} MiB each" if grown else ""
                print(
                    f"  {name:14} offload {write * 1000:8.1f} ms  read back "
                    f"{read * 1000:7.1f} ms{growth}"
                )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
