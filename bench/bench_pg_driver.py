"""Which PostgreSQL driver for `SqlWorkspace`: psycopg 3 or asyncpg?

On one real server (started here as the tests start theirs: tests/pg_server.py), in one run
and interleaved so that noise hits all alike, each of:

- psycopg 3, synchronous, called from a worker thread (`asyncio.to_thread`, one hop per
  operation: how the SQLite store runs);
- psycopg 3's asyncio API (`AsyncConnection`);
- asyncpg;

does what the store does, as the store would spell it:

- a batch append of 20 messages: one transaction taking the session's advisory lock,
  reading the next line number, inserting the 20 rows (`executemany`), updating the
  session's row;
- a lease take then release: a transaction taking the lock, reading the lease row, writing
  it (upsert on the server's clock); then a DELETE;
- the baseline: a raw INSERT of the same 20 rows in one transaction, nothing else.

Prints the median latency of each, and the ratio to that driver's raw INSERT.

Usage: python bench/bench_pg_driver.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from pg_server import PostgresServer  # noqa: E402  (the tests' server)

BATCH = 20
LINE = b'{"role":"assistant","content":"' + b"observations and reasoning " * 20 + b'"}\n'
NOW = "extract(epoch from clock_timestamp())::float8"
TABLES = (
    "CREATE TABLE sessions (id TEXT PRIMARY KEY, created DOUBLE PRECISION NOT NULL, "
    "updated DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE lines (session TEXT NOT NULL, log TEXT NOT NULL, line INTEGER NOT NULL, "
    "body BYTEA NOT NULL, PRIMARY KEY (session, log, line))",
    "CREATE TABLE leases (session TEXT PRIMARY KEY, holder TEXT NOT NULL, token TEXT NOT NULL, "
    "expires DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE raw (session TEXT NOT NULL, log TEXT NOT NULL, line INTEGER NOT NULL, "
    "body BYTEA NOT NULL, PRIMARY KEY (session, log, line))",
)


def statements(mark: Callable[[int], str]) -> dict[str, str]:
    """The store's statements with a driver's placeholders (`mark(1)`: `%s` or `$1`)."""
    m = mark
    return {
        "lock": f"SELECT pg_advisory_xact_lock(hashtextextended({m(1)}, 0))",
        "next": "SELECT coalesce(max(line), 0) + 1 FROM lines "
        f"WHERE session = {m(1)} AND log = {m(2)}",
        "insert": f"INSERT INTO lines VALUES ({m(1)}, {m(2)}, {m(3)}, {m(4)})",
        "touch": f"INSERT INTO sessions VALUES ({m(1)}, {NOW}, {NOW}) ON CONFLICT (id) "
        "DO UPDATE SET updated = excluded.updated",
        "lease": f"SELECT holder, expires, {NOW} FROM leases WHERE session = {m(1)}",
        "take": f"INSERT INTO leases VALUES ({m(1)}, {m(2)}, {m(3)}, {NOW} + {m(4)}) "
        "ON CONFLICT (session) DO UPDATE SET holder = excluded.holder, "
        "token = excluded.token, expires = excluded.expires",
        "release": f"DELETE FROM leases WHERE session = {m(1)} AND token = {m(2)}",
        "raw": f"INSERT INTO raw VALUES ({m(1)}, {m(2)}, {m(3)}, {m(4)})",
    }


class PsycopgThread:
    """psycopg 3, synchronous, in a worker thread."""

    name = "psycopg 3 (sync, thread)"

    def __init__(self, url: str, session: str) -> None:
        import psycopg

        self.db = psycopg.connect(url, autocommit=True)
        self.sql = statements(lambda n: "%s")
        self.session = session
        self.raw_next = 1

    def _append(self) -> None:
        s, sql = self.session, self.sql
        with self.db.transaction():
            self.db.execute(sql["lock"], (s,))  # type: ignore[arg-type]
            first = self.db.execute(sql["next"], (s, "context.jsonl")).fetchone()[0]  # type: ignore
            self.db.cursor().executemany(
                sql["insert"],  # type: ignore[arg-type]
                [(s, "context.jsonl", first + i, LINE) for i in range(BATCH)],
            )
            self.db.execute(sql["touch"], (s,))  # type: ignore[arg-type]

    def _lease(self) -> None:
        s, sql = self.session, self.sql
        with self.db.transaction():
            self.db.execute(sql["lock"], (s,))  # type: ignore[arg-type]
            self.db.execute(sql["lease"], (s,)).fetchone()  # type: ignore[arg-type]
            self.db.execute(sql["take"], (s, "{}", "tok", 60.0))  # type: ignore[arg-type]
        self.db.execute(sql["release"], (s, "tok"))  # type: ignore[arg-type]

    def _raw(self) -> None:
        first, self.raw_next = self.raw_next, self.raw_next + BATCH
        with self.db.transaction():
            self.db.cursor().executemany(
                self.sql["raw"],  # type: ignore[arg-type]
                [(self.session, "context.jsonl", first + i, LINE) for i in range(BATCH)],
            )

    async def append(self) -> None:
        await asyncio.to_thread(self._append)

    async def lease(self) -> None:
        await asyncio.to_thread(self._lease)

    async def raw(self) -> None:
        await asyncio.to_thread(self._raw)

    async def close(self) -> None:
        self.db.close()


class PsycopgAsync:
    """psycopg 3's asyncio API."""

    name = "psycopg 3 (async)"

    def __init__(self, db: Any, session: str) -> None:
        self.db = db
        self.sql = statements(lambda n: "%s")
        self.session = session
        self.raw_next = 1

    @classmethod
    async def open(cls, url: str, session: str) -> PsycopgAsync:
        import psycopg

        return cls(await psycopg.AsyncConnection.connect(url, autocommit=True), session)

    async def append(self) -> None:
        s, sql = self.session, self.sql
        async with self.db.transaction():
            await self.db.execute(sql["lock"], (s,))
            cursor = await self.db.execute(sql["next"], (s, "context.jsonl"))
            first = (await cursor.fetchone())[0]
            await self.db.cursor().executemany(
                sql["insert"], [(s, "context.jsonl", first + i, LINE) for i in range(BATCH)]
            )
            await self.db.execute(sql["touch"], (s,))

    async def lease(self) -> None:
        s, sql = self.session, self.sql
        async with self.db.transaction():
            await self.db.execute(sql["lock"], (s,))
            await (await self.db.execute(sql["lease"], (s,))).fetchone()
            await self.db.execute(sql["take"], (s, "{}", "tok", 60.0))
        await self.db.execute(sql["release"], (s, "tok"))

    async def raw(self) -> None:
        first, self.raw_next = self.raw_next, self.raw_next + BATCH
        async with self.db.transaction():
            await self.db.cursor().executemany(
                self.sql["raw"],
                [(self.session, "context.jsonl", first + i, LINE) for i in range(BATCH)],
            )

    async def close(self) -> None:
        await self.db.close()


class Asyncpg:
    """asyncpg."""

    name = "asyncpg"

    def __init__(self, db: Any, session: str) -> None:
        self.db = db
        self.sql = statements(lambda n: f"${n}")
        self.session = session
        self.raw_next = 1

    @classmethod
    async def open(cls, url: str, session: str) -> Asyncpg:
        import asyncpg

        # asyncpg does not read libpq's `host=` query for a socket folder the same way:
        # pass it explicitly.
        host = url.split("host=", 1)[1]
        return cls(await asyncpg.connect(user="postgres", database="postgres", host=host), session)

    async def append(self) -> None:
        s, sql = self.session, self.sql
        async with self.db.transaction():
            await self.db.execute(sql["lock"], s)
            first = await self.db.fetchval(sql["next"], s, "context.jsonl")
            await self.db.executemany(
                sql["insert"], [(s, "context.jsonl", first + i, LINE) for i in range(BATCH)]
            )
            await self.db.execute(sql["touch"], s)

    async def lease(self) -> None:
        s, sql = self.session, self.sql
        async with self.db.transaction():
            await self.db.execute(sql["lock"], s)
            await self.db.fetchrow(sql["lease"], s)
            await self.db.execute(sql["take"], s, "{}", "tok", 60.0)
        await self.db.execute(sql["release"], s, "tok")

    async def raw(self) -> None:
        first, self.raw_next = self.raw_next, self.raw_next + BATCH
        async with self.db.transaction():
            await self.db.executemany(
                self.sql["raw"],
                [(self.session, "context.jsonl", first + i, LINE) for i in range(BATCH)],
            )

    async def close(self) -> None:
        await self.db.close()


async def _timed(step: Callable[[], Awaitable[None]]) -> float:
    start = time.perf_counter()
    await step()
    return time.perf_counter() - start


async def measure(url: str, samples: int) -> dict[str, dict[str, float]]:
    """Median seconds per operation, per driver."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        for statement in TABLES:
            db.execute(statement)  # type: ignore[arg-type]
    drivers: list[Any] = [
        PsycopgThread(url, "thread"),
        await PsycopgAsync.open(url, "async"),
        await Asyncpg.open(url, "asyncpg"),
    ]
    times: dict[str, dict[str, list[float]]] = {
        d.name: {"append": [], "lease": [], "raw": []} for d in drivers
    }
    for i in range(samples + 10):  # the first 10 warm up (prepared statements)
        for driver in drivers:
            for op in ("append", "lease", "raw"):
                took = await _timed(getattr(driver, op))
                if i >= 10:
                    times[driver.name][op].append(took)
    for driver in drivers:
        await driver.close()
    return {
        name: {op: statistics.median(values) for op, values in ops.items()}
        for name, ops in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    samples = 50 if args.quick else 300
    server = PostgresServer.start()
    try:
        found = asyncio.run(measure(server.url, samples))
    finally:
        server.stop()
    print(f"PostgreSQL on a unix socket, {samples} samples each, medians:")
    for name, ops in found.items():
        raw = ops["raw"]
        print(f"  {name}")
        print(f"    raw INSERT of {BATCH} rows   {raw * 1000:7.3f} ms")
        print(
            f"    batch append of {BATCH}     {ops['append'] * 1000:7.3f} ms  "
            f"x{ops['append'] / raw:.2f} of raw  {BATCH / ops['append']:8.0f} msgs/s"
        )
        print(f"    lease take + release   {ops['lease'] * 1000:7.3f} ms")


if __name__ == "__main__":
    main()
