"""How long the README's test command takes, and where the time goes.

Runs `python -m pytest -q` (the README's second command, its install step left out) from the
repository root as a contributor runs it, with pytest's `--durations=20`, and prints: the
wall time against the budget the README states (5 minutes on 2 cores), the CPU time of the
run (user and system, every worker and child process included, as the kernel counts it), the
load average before and after (a figure taken on a busy machine says so), the counts pytest
reports, and the 20 slowest test phases. docs/benchmarks.md keeps the figure per stop.

A wall-clock limit in a test would fail on a busy machine, so the budget lives here, printed
as a ratio, and in the docs, never in an assertion.

Run: `python bench/bench_suite.py [pytest arguments...]`, e.g. `python bench/bench_suite.py
tests/cli` for one folder, or with `-m slow` for the tests CI adds (bench/bench_suite.py
passes its arguments to pytest after its own).
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

BUDGET = 300.0
"""The README's test command on 2 cores, in seconds (issue 80)."""

ROOT = Path(__file__).resolve().parent.parent


def main(arguments: list[str]) -> int:
    before = os.getloadavg()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=20"]
    done = subprocess.run(
        [*command, *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = after.ru_utime - used.ru_utime, after.ru_stime - used.ru_stime
    lines = done.stdout.splitlines()
    summary = next((line for line in reversed(lines) if re.search(r" in [\d.]+s", line)), "")
    slowest = [line for line in lines if re.match(r"\s*[\d.]+s (setup|call|teardown) ", line)]
    print(f"command   python -m pytest -q {' '.join(arguments)}".rstrip())
    print(
        f"cores     {os.cpu_count()}; load average before {before[0]:.1f}, after "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(f"wall      {wall:,.1f} s = {wall / BUDGET:.2f}x the budget of {BUDGET:.0f} s")
    print(
        f"cpu       {user + system:,.1f} s ({user:,.1f} user, {system:,.1f} system): "
        f"{(user + system) / wall:.2f} cores busy on average"
    )
    print(f"pytest    {summary.strip('= ')}")
    print("slowest")
    for line in slowest[:20]:
        print(f"  {line.strip()}")
    if done.returncode not in (0, 5):
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
