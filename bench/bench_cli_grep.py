"""Benchmark `ctxoffload grep` on a 100 MB offloaded file against GNU `grep -n`.

A log of about 100 MB is offloaded as one tool result into a fresh workspace; each pattern
is then searched with `grep -n PATTERN FILE` and with `ctxoffload grep PATTERN SESSION`,
both as separate processes writing to a pipe, the runs of the two alternated (so a burst of
load on a shared machine falls on both), best of several runs; `ctxoffload` is the script
installed beside this Python, as a user runs it (`python -m ctxoffload` when there is none).
The cases: a literal, a regex, `-i` and `-F`, each with few matching lines (5 to 31) and
with many (3,049 to 1.2 M). Each case's ratio is printed against `grep -n` measured in the
same run on the same file. `grep -Hn` is timed too: it prints the file's path on each line as
`ctxoffload grep` does (`grep -n` on one file prints none), so its column compares the same
output. The in-process time of the search alone (`main([...])`, no interpreter start-up and
no `import ctxoffload`) is printed too, because start-up is a fixed cost that dominates on
small inputs; and that fixed cost itself, `ctxoffload grep` of a one-line workspace against
`grep -n` and `python -c pass` (bench/bench_cli_startup.py, run from here).

Target: ctxoffload grep <= 1.0x GNU `grep -n` in every case. Run:
`python bench/bench_cli_grep.py [--mb 100] [--runs 5] [--context-mb 0]`.

The agent's Grep tool (`FileToolbox.grep`) runs the same patterns on the same file, in this
process, against the same GNU grep times: it stops at 50 matches, so what is timed is how
long it takes to answer.

Then a context.jsonl of about `--context-mb` MB (messages with tool calls and results) is
searched the same way, for a string inside a tool call's argument, by `ctxoffload grep`, the
agent's Grep and the retrieval tool. They decode every line (`text.matching_lines`, the rule
all three apply) and search each message's whole text once, where GNU grep reads the stored
JSON, so they do not do the same work: the figures are printed, with no target, to follow
what decoding costs. Last, the retrieval tool reads 50 lines from the middle of that log by
`line_range`, against `sed -n` printing them and against reading the whole log, which it
needs to count the lines (it decodes only those it shows).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import bench_cli_startup  # beside this script

from ctxoffload import LocalWorkspace, Msg, ToolCallBlock, ToolResultBlock
from ctxoffload.cli import main

PATTERNS = [
    ("literal", ["ERROR"], ["ERROR"]),
    ("regex", [r"order_id=ORD-5[0-9]{4} "], ["-E", r"order_id=ORD-5[0-9]{4} "]),
    ("ignore case", ["-i", "disk QUOTA"], ["-i", "disk QUOTA"]),
    ("fixed string", ["-F", "ORD-12345 rows="], ["-F", "ORD-12345 rows="]),
    # Many matching lines: the cost of each match (its line number, its line) shows here.
    ("-F, thousands", ["-F", "rows=7 "], ["-F", "rows=7 "]),
    ("regex, many", [r"rows=3[0-9]{2} "], ["-E", r"rows=3[0-9]{2} "]),
    ("literal, most", ["INFO"], ["INFO"]),
    ("-i, most", ["-i", "info export"], ["-i", "info export"]),
]
RUNS = 5
STARTUP_RUNS = 20  # the start-up's runs: a few ms apart, they need more than the searches
TARGET = 1.0


def make_log(megabytes: int) -> str:
    rng = random.Random(7)
    lines = []
    size = 0
    i = 0
    while size < megabytes * 2**20:
        if i % 40_000 == 17:
            line = (
                f"2026-11-20T03:{i % 60:02d}:00.118Z ERROR export-worker-7 "
                f"order_id=ORD-{rng.randrange(10_000, 99_999)} failed: disk quota exceeded"
            )
        else:
            line = (
                f"2026-11-20T03:{i % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z INFO "
                f"export-worker-{i % 8} exported ORD-{rng.randrange(10_000, 99_999)} "
                f"rows={rng.randrange(1, 400)} bytes={rng.randrange(10**4, 10**6)}"
            )
        lines.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(lines)


# An installed package has its bytecode cached; an editable install under
# PYTHONDONTWRITEBYTECODE (set on some CI machines) recompiles every module at each start, which
# would measure the compiler rather than the command. The first of the runs warms the cache.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def best(command: list[str]) -> tuple[float, int]:
    """The best time of `RUNS` runs of `command` writing to a pipe, and its lines."""
    ((took, _, lines),) = alternated([command])
    return took, lines


def alternated(commands: list[list[str]]) -> list[tuple[float, float, int]]:
    """Each command's best wall time and best CPU time (user and system, its children's
    included: ripgrep's for `ctxoffload grep`) of `RUNS` runs writing to a pipe, and the lines
    it printed; the commands run in turn, each once first, to warm the page cache and the
    bytecode, and to count its lines."""
    lines = [_printed(command, count=True) for command in commands]
    walls: list[list[float]] = [[] for _ in commands]
    cpus: list[list[float]] = [[] for _ in commands]
    for _ in range(RUNS):
        for i, command in enumerate(commands):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            _printed(command, count=False)
            walls[i].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus[i].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return [(min(w), min(c), n) for w, c, n in zip(walls, cpus, lines, strict=True)]


_BUFFER = bytearray(1 << 20)


def _printed(command: list[str], *, count: bool) -> int:
    """Run `command` into a pipe read into one buffer, as `> /dev/null` through a pipe would;
    the lines it printed when `count`. Timed runs do not count: counting the newlines of
    a block costs this process more for a longer output (a path on each line), and that cost
    would be charged to the command."""
    lines = 0
    with subprocess.Popen(command, stdout=subprocess.PIPE, env=CHILD_ENV) as process:
        assert process.stdout is not None
        while read := process.stdout.readinto(_BUFFER):
            if count:
                lines += _BUFFER.count(b"\n", 0, read)
    return lines


def in_process(args: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        sink = io.TextIOWrapper(io.BytesIO())
        start = time.perf_counter()
        with contextlib.redirect_stdout(sink):
            main(args)
        times.append(time.perf_counter() - start)
    return min(times)


def make_messages(megabytes: int) -> list[Msg]:
    """Assistant tool calls and their results, about `megabytes` MB as JSON lines."""
    rng = random.Random(11)
    msgs: list[Msg] = []
    size = 0
    i = 0
    while size < megabytes * 2**20:
        code = f'rows = export(batch={i})\nprint("exported", len(rows))'
        if i % 2_000 == 999:
            code = f'check(batch={i})\nprint("FAILURE: disk quota at order ORD-{i}")'
        call = ToolCallBlock(id=f"call_{i}", name="python", input={"code": code})
        output = "\n".join(
            f"ORD-{rng.randrange(10_000, 99_999)} rows={rng.randrange(1, 400)} ok" for _ in range(8)
        )
        msgs.append(Msg(role="assistant", content=[call]))
        msgs.append(Msg(role="tool", content=[ToolResultBlock(id=f"call_{i}", output=output)]))
        size += 700
        i += 1
    return msgs


def run_context(megabytes: int, tmp: str) -> None:
    workdir = Path(tmp) / "ctx"
    ws = LocalWorkspace(workdir, fsync=False)
    path = asyncio.run(ws.offload_context("ctx", msgs=make_messages(megabytes)))
    size = os.path.getsize(path)
    gnu = shutil.which("grep") or "grep"
    # Inside a tool call's argument, and spelled alike in the stored JSON.
    ours = theirs = ["-F", "FAILURE: disk quota"]
    base, lines = best([gnu, "-n", *theirs, path])
    mine, my_lines = best([*_ctxoffload_command(), "grep", *ours, "ctx", "--workdir", str(workdir)])
    search = in_process(["grep", *ours, "ctx", "--workdir", str(workdir)])
    assert my_lines == lines, (my_lines, lines)
    print(
        f"context.jsonl: {size / 2**20:.0f} MB, {lines} matching messages: grep -n {base:.3f}s "
        f"(stored JSON), ctxoffload grep {mine:.3f}s (decoded, {mine / base:.1f}x), "
        f"search only {search:.3f}s"
    )
    # What an agent waits for on the same log: its Grep tool, and the retrieval tool (every
    # match shown, up to its caps), in this process.
    from ctxoffload.readback import FileToolbox, escape, retrieve_offloaded_content

    toolbox = FileToolbox([workdir], grep_timeout=None)
    relative = str(Path(path).relative_to(workdir))
    pattern = escape(ours[-1])
    grep_tool = _best_call(lambda: toolbox.grep(pattern, relative))
    retrieval = _best_call(lambda: asyncio.run(retrieve_offloaded_content(ws, path, pattern)))
    print(
        f"  the agent's Grep {grep_tool:.3f}s ({grep_tool / base:.1f}x), the retrieval tool "
        f"{retrieval:.3f}s ({retrieval / base:.1f}x)"
    )
    # A page from the middle of the log, by line range: against `sed -n` printing the same
    # lines (which stops reading there), and the read of the whole log the retrieval needs.
    total = _count_lines(path)
    first = total // 2
    sed = best(["sed", "-n", f"{first},{first + 49}p;{first + 50}q", path])[0]
    page = _best_call(
        lambda: asyncio.run(retrieve_offloaded_content(ws, path, line_range=(first, first + 49)))
    )

    async def read_whole() -> int:
        return len(await ws.read_reference(path))

    whole = _best_call(lambda: asyncio.run(read_whole()))
    print(
        f"  50 lines from line {first:,} by the retrieval tool: {page:.3f}s ({page / sed:.1f}x "
        f"sed -n {sed:.3f}s); reading the whole log alone {whole:.3f}s"
    )


def _count_lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def _best_call(call: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def run(megabytes: int, context_megabytes: int = 10) -> None:
    gnu = shutil.which("grep")
    if gnu is None:
        sys.exit("GNU grep is not on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp) / "ws"
        ws = LocalWorkspace(workdir, fsync=False)
        text = make_log(megabytes)
        path = asyncio.run(
            ws.offload_tool_result("bench", ToolResultBlock(id="call_1", name="logs", output=text))
        )
        size = os.path.getsize(path)
        del text
        engine = "re2" if _has_re2() else "re"
        rg = _ripgrep()
        print(
            f"file: {size / 2**20:.0f} MB, {RUNS} runs each alternated, best time; "
            f"matcher: {engine}; ripgrep: {rg or 'none'}"
        )
        print(f"command: {' '.join(_ctxoffload_command())} grep ... (target <= {TARGET}x grep -n)")
        print(
            f"{'pattern':<13} {'lines':>7} | wall: {'grep -n':>7} {'-Hn':>6} {'ours':>6} "
            f"{'ratio':>6} {'vs -Hn':>6} | cpu: {'grep -n':>7} {'ours':>6} {'ratio':>6} | "
            f"{'search only':>11} {'ratio':>6}"
        )
        baselines: dict[str, float] = {}
        missed = []
        for name, ours, theirs in PATTERNS:
            command = [*_ctxoffload_command(), "grep", *ours, "bench", "--workdir", str(workdir)]
            (base, base_cpu, lines), (named, _, _), (mine, my_cpu, my_lines) = alternated(
                [[gnu, "-n", *theirs, path], [gnu, "-Hn", *theirs, path], command]
            )
            baselines[name] = base
            search = in_process(["grep", *ours, "bench", "--workdir", str(workdir)])
            assert my_lines == lines, (name, my_lines, lines)
            if mine / base > TARGET:
                missed.append(name)
            print(
                f"{name:<13} {lines:>7} | wall: {base:>6.3f}s {named:>5.3f}s {mine:>5.3f}s "
                f"{mine / base:>5.2f}x {mine / named:>5.2f}x | cpu: {base_cpu:>6.3f}s "
                f"{my_cpu:>5.3f}s {my_cpu / base_cpu:>5.2f}x | "
                f"{search:>10.3f}s {search / base:>5.2f}x"
            )
        print(f"wall time over {TARGET}x grep -n: {', '.join(missed) or 'none'}")
        agent_grep(workdir, Path(path), baselines)
        # What each search above pays around ripgrep's: bench_cli_startup.py, on one line.
        bench_cli_startup.run(max(RUNS, STARTUP_RUNS))
        if context_megabytes:
            run_context(context_megabytes, tmp)


def agent_grep(workdir: Path, path: Path, baselines: dict[str, float]) -> None:
    """The agent's Grep tool (`FileToolbox.grep`, 50 matches at most) on the same file and
    patterns, in this process, against the same GNU grep times: the time to its answer."""
    from ctxoffload.readback import FileToolbox, escape

    toolbox = FileToolbox([workdir], grep_timeout=None)
    relative = str(path.relative_to(workdir))
    print(f"{'the agent Grep':<13} {'shown':>6} {'grep -n':>9} {'Grep tool':>16} {'ratio':>6}")
    for name, ours, _ in PATTERNS:
        pattern = ours[-1]
        if "-F" in ours:
            pattern = escape(pattern)
        if "-i" in ours:
            pattern = "(?i)" + pattern
        times = []
        answer = ""
        for _ in range(RUNS):
            start = time.perf_counter()
            answer = str(toolbox.grep(pattern, relative))
            times.append(time.perf_counter() - start)
        shown = sum(1 for line in answer.splitlines() if line.startswith(f"{relative}:"))
        took, base = min(times), baselines[name]
        print(f"{name:<13} {shown:>6} {base:>8.3f}s {took:>15.3f}s {took / base:>5.2f}x")


def _ctxoffload_command() -> list[str]:
    """What a user types: the `ctxoffload` script installed beside this Python, else -m."""
    script = shutil.which("ctxoffload", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "ctxoffload"]


def _ripgrep() -> str | None:
    """The ripgrep `ctxoffload grep` runs, if any (the `fast` extra)."""
    from ctxoffload.cli._grep_ripgrep import ripgrep_path

    return ripgrep_path()


def _has_re2() -> bool:
    try:
        import re2  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=100, help="size of the offloaded file in MB")
    parser.add_argument(
        "--context-mb", type=int, default=10, help="size of the context.jsonl in MB (0: none)"
    )
    parser.add_argument("--runs", type=int, default=RUNS, help="runs of each command")
    options = parser.parse_args()
    RUNS = options.runs
    run(options.mb, options.context_mb)
