"""What do `ctxoffload ls` and `ctxoffload show` cost on 10,000 sessions: a folder against
a SQLite database (`--workdir sqlite:///...`), in the same run?

Both workspaces get the same 10,000 small sessions (a tool result, a batch of three
messages, their two events: a few lines each). Then each command runs in this process
(`ctxoffload.cli.main`, output to /dev/null), alternating folder and database, and the
median of the runs is printed with the ratio database / folder. On a database `ls` reads
its rows (`SqlWorkspace.session_facts`: a few queries over all sessions, and one indexed
read of each session's events) and writes no copy; `show` reads through a temporary copy in
the on-disk layout (`download`) of the one session it shows. Temporary files, the two
workspaces included, go where TMPDIR says (/dev/shm, or a folder on disk).

Usage: python bench/bench_sessions.py [--sessions N] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxoffload import LocalWorkspace, Msg, SqlWorkspace, ToolResultBlock
from ctxoffload.cli import main


async def fill(ws: Any, sessions: int) -> None:
    for n in range(sessions):
        session = f"s{n:05d}"
        await ws.offload_tool_result(
            session, ToolResultBlock(id="c1", name="fetch", output=f"result {n}\nline two\n")
        )
        await ws.offload_context(
            session,
            [
                Msg(role="user", content=f"task {n}"),
                Msg(role="assistant", content="done"),
                Msg(role="user", content="thanks"),
            ],
        )


def timed(*args: str) -> float:
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        start = time.perf_counter()
        code = main(list(args))
        elapsed = time.perf_counter() - start
    assert code == 0, (args, code)
    return elapsed


def run() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = str(Path(tmp) / "ws")
        url = f"sqlite:///{Path(tmp) / 'agents.db'}"
        start = time.perf_counter()
        asyncio.run(fill(LocalWorkspace(folder, fsync=False), args.sessions))
        made_disk = time.perf_counter() - start
        start = time.perf_counter()
        database = SqlWorkspace(url)
        asyncio.run(fill(database, args.sessions))
        database.close()
        made_sql = time.perf_counter() - start
        print(
            f"{args.sessions:,} sessions written: folder {made_disk:.1f} s (fsync off), "
            f"database {made_sql:.1f} s (each write a transaction, synchronous=FULL)"
        )
        middle = f"s{args.sessions // 2:05d}"
        commands = {"ls": ["ls"], f"show {middle}": ["show", middle]}
        print(f"{'command':<14}{'folder':>11}{'database':>11}{'ratio':>8}")
        for name, command in commands.items():
            disk: list[float] = []
            sql: list[float] = []
            for _ in range(args.runs):
                disk.append(timed(*command, "--workdir", folder))
                sql.append(timed(*command, "--workdir", url))
            d, s = statistics.median(disk), statistics.median(sql)
            print(f"{name:<14}{d * 1000:>9.0f}ms{s * 1000:>9.0f}ms{s / d:>7.2f}x")


if __name__ == "__main__":
    run()
