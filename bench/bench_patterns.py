"""Regex engines for model-supplied patterns: speed on a big file, and safety.

Compares Python `re`, `regex` (with its `timeout`) and RE2 (google-re2): the time to search
every line of a generated log, the time for `(a+)+$` on 40 `a` and a `b`, and how often a
heartbeat thread ticks (every 10 ms) while each engine matches a long line, i.e. whether it
releases the GIL. The same log is written to a file and searched there too, by ctxoffload's
one search engine (`_search.engine.search_lines`: RE2 over pieces of a megabyte, the lines
judged one by one only where the pattern or its literal lands, as the agent's Grep runs it)
and by GNU `grep -n` writing to a pipe; every time is printed with its ratio against that
`grep -n`, measured in the same run on the same file (best of three).

Run: python bench/bench_patterns.py [megabytes]   (default 100)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import re2  # type: ignore[import-untyped]
import regex  # type: ignore[import-untyped]


def search_lines(compiled: object, lines: list[str]) -> tuple[float, int]:
    search = compiled.search  # type: ignore[attr-defined]
    start = time.perf_counter()
    found = sum(1 for line in lines if search(line) is not None)
    return time.perf_counter() - start, found


def grep_n(pattern: str, path: str) -> tuple[float, int]:
    """GNU `grep -n` of `path` writing to a pipe: its best time of three, its matches."""
    gnu = shutil.which("grep")
    if gnu is None:
        sys.exit("GNU grep is not on PATH")
    best, found = float("inf"), 0
    for _ in range(3):
        start = time.perf_counter()
        done = subprocess.run([gnu, "-n", pattern, path], capture_output=True, check=False)
        best = min(best, time.perf_counter() - start)
        found = done.stdout.count(b"\n")
    return best, found


def search_file(pattern: str, path: str) -> tuple[float, int]:
    """ctxoffload's one search engine over the file: its best time of three, its matches."""
    from ctxoffload._search.engine import search_lines as engine_lines
    from ctxoffload._search.matcher import compile_matcher

    matcher = compile_matcher(pattern)
    best, found = float("inf"), 0
    for _ in range(3):
        start = time.perf_counter()
        with open(path, "rb", buffering=0) as file:
            found = sum(1 for _ in engine_lines(file, matcher))
        best = min(best, time.perf_counter() - start)
    return best, found


def heartbeat_ticks(work: object) -> tuple[float, int]:
    ticks = 0
    stop = threading.Event()

    def beat() -> None:
        nonlocal ticks
        while not stop.wait(0.01):
            ticks += 1

    thread = threading.Thread(target=beat)
    thread.start()
    start = time.perf_counter()
    work()  # type: ignore[operator]
    elapsed = time.perf_counter() - start
    stop.set()
    thread.join()
    return elapsed, ticks


def main() -> None:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    line = "2026-11-22 12:00:00 INFO worker-7 handled request id=12345 in 3 ms status=ok"
    lines = [line] * (megabytes * 1_000_000 // (len(line) + 1))
    lines[len(lines) // 2] = "2026-11-22 12:00:00 ERROR worker-3 Traceback: KeyError 'x'"
    pattern = r"ERROR.*KeyError"
    options = re2.Options()
    options.log_errors = False
    engines = {
        "re": re.compile(pattern),
        "regex": regex.compile(pattern),
        "re2": re2.compile(pattern, options),
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "log.txt")
        with open(path, "w") as file:
            file.write("\n".join(lines) + "\n")
        gnu, gnu_found = grep_n(pattern, path)
        engine, engine_found = search_file(pattern, path)
    print(f"search {megabytes} MB ({len(lines):,} lines) for {pattern!r}:")
    print(f"  grep -n          {gnu:6.2f} s  (1.00x grep -n)  matches={gnu_found}")
    print(
        f"  search_lines     {engine:6.2f} s  ({engine / gnu:.2f}x grep -n)  "
        f"matches={engine_found}  (the one engine, in pieces of the file)"
    )
    print("line by line, the lines already in memory:")
    for name, compiled in engines.items():
        elapsed, found = search_lines(compiled, lines)
        print(f"  {name:6} {elapsed:6.2f} s  ({elapsed / gnu:.2f}x grep -n)  matches={found}")

    evil = "a" * 40 + "b"
    print("'(a+)+$' on 40 'a' + 'b':")
    print("  re     not run: 2**40 steps (hours); 24 'a' already take seconds")
    start = time.perf_counter()
    try:
        regex.search(r"(a+)+$", evil, timeout=1.0)
        print(f"  regex  finished in {time.perf_counter() - start:.3f} s")
    except TimeoutError:
        print(f"  regex  stopped by its timeout after {time.perf_counter() - start:.2f} s")
    start = time.perf_counter()
    re2.compile(r"(a+)+$", options).search(evil)
    print(f"  re2    {time.perf_counter() - start:.6f} s")

    # Long enough for the match to take a measurable time: does another thread keep
    # running while RE2 matches (is the GIL released)?
    long_line = "x" * 50_000_000
    print("heartbeat (10 ms) in another thread while RE2 matches '(x+x+)+y' on 50 MB of x:")
    print("  re, regex  not run: exponential on this pattern")
    compiled = re2.compile("(x+x+)+y", options)
    elapsed, ticks = heartbeat_ticks(lambda: compiled.search(long_line))
    print(f"  re2    {elapsed:6.2f} s, {ticks} ticks of {int(elapsed / 0.01)} possible")


if __name__ == "__main__":
    main()
