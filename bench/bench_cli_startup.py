"""Benchmark what `ctxoffload grep` costs around its search: start-up and exit.

A workspace holds two sessions: one with a one-line tool result (a search ripgrep runs, as in
bench/bench_cli_grep.py) and one whose context.jsonl holds one message (decoded through
`ctxoffload.text`). Each is searched by `ctxoffload grep` as a user runs it (the script
installed beside this Python, and `python -m ctxoffload`), against GNU `grep -n` on the
one-line file and `python -c pass`, measured in the same run: every command a separate
process writing to a pipe, their runs alternated (a burst of load on a shared machine falls
on all of them), best and median of `--runs`. What a search of a few matches in 100 MB costs
over GNU grep is mostly this: ripgrep searches 100 MB in about 25 ms.

Printed for each: the wall time (best, median), the best CPU time (user and system, the
children's included: ripgrep's), and the best wall time over `python -c pass`'s.
Run: `python bench/bench_cli_startup.py [--runs 30]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ctxoffload import LocalWorkspace, Msg, ToolResultBlock

RUNS = 30

# An installed package has its bytecode cached; an editable install under
# PYTHONDONTWRITEBYTECODE would recompile every module at each start (bench_cli_grep.py).
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def ctxoffload_command() -> list[str]:
    """What a user types: the `ctxoffload` script installed beside this Python, else -m."""
    script = shutil.which("ctxoffload", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "ctxoffload"]


def make_workspace(workdir: Path) -> str:
    """The two sessions (see the module); the tool result's path."""
    ws = LocalWorkspace(workdir, fsync=False)
    path = asyncio.run(
        ws.offload_tool_result(
            "logs", ToolResultBlock(id="call_1", name="logs", output="ERROR disk full\n")
        )
    )
    asyncio.run(ws.offload_context("chat", msgs=[Msg(role="user", content="ERROR disk full")]))
    return path


def timed(commands: dict[str, list[str]], runs: int) -> dict[str, tuple[float, float, float]]:
    """Each command's best and median wall time and best CPU time of `runs` runs, the
    commands run in turn (each once first, untimed: the page cache and the bytecode)."""
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():
        subprocess.run(command, stdout=subprocess.PIPE, env=CHILD_ENV, check=False)
    for _ in range(runs):
        for name, command in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(command, stdout=subprocess.PIPE, env=CHILD_ENV, check=False)
            walls[name].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    result = {}
    for name in commands:
        ordered = sorted(walls[name])
        result[name] = (ordered[0], ordered[len(ordered) // 2], min(cpus[name]))
    return result


def run(runs: int = RUNS) -> dict[str, tuple[float, float, float]]:
    """Time the commands (see the module) and print a line for each; their times."""
    gnu = shutil.which("grep")
    if gnu is None:
        sys.exit("GNU grep is not on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp) / "ws"
        path = make_workspace(workdir)
        ours = ctxoffload_command()
        where = ["--workdir", str(workdir)]
        commands = {
            "grep -n (one line)": [gnu, "-n", "ERROR", path],
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import ctxoffload.cli'": [sys.executable, "-c", "import ctxoffload.cli"],
            "ctxoffload grep, tool result": [*ours, "grep", "ERROR", "logs", *where],
            "ctxoffload grep, context.jsonl": [*ours, "grep", "ERROR", "chat", *where],
            "ctxoffload grep, both sessions": [*ours, "grep", "ERROR", *where],
            "python -m ctxoffload grep, tool result": [
                *[sys.executable, "-m", "ctxoffload"],
                *["grep", "ERROR", "logs", *where],
            ],
        }
        for name, command in commands.items():
            done = subprocess.run(command, capture_output=True, env=CHILD_ENV, check=False)
            if done.returncode != 0:
                sys.exit(f"{name}: exit {done.returncode}: {done.stderr.decode()}")
        times = timed(commands, runs)
    bare = times["python -c pass"][0]
    print(f"start-up and exit, {runs} runs each alternated; command: {' '.join(ours)}")
    print(f"{'':<40} {'best':>8} {'median':>8} {'cpu':>8} {'over pass':>10}")
    for name, (best, median, cpu) in times.items():
        print(
            f"{name:<40} {best * 1000:>6.1f}ms {median * 1000:>6.1f}ms {cpu * 1000:>6.1f}ms "
            f"{(best - bare) * 1000:>+8.1f}ms"
        )
    return times


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=RUNS, help="runs of each command")
    run(parser.parse_args().runs)
