"""Benchmark the memory `ctxoffload show` and `ctxoffload ls` take on hostile workspaces.

Three workspaces are written straight to disk (the layout the workspaces write):

- one session whose events.jsonl and context.jsonl each hold one line of `--mb` MB (50);
- one session of `--messages` messages (100,000), each logged as a `message` event and as a
  context.jsonl line, with a model call every 10 messages;
- `--sessions` sessions (10,000) of a few small lines each.

Each command runs as its own process writing to /dev/null, and its peak resident memory is
read from `getrusage(RUSAGE_CHILDREN)` in a small parent that runs only it. The baselines,
measured in the same run: `python -c pass`, and `ctxoffload ls` on an empty workspace (the
interpreter with the command's imports). Printed: each peak, what it adds over the command's
baseline, and that growth divided by the largest line (the bound the reading commands keep:
docs/cli.md, "Memory").

Run: `python bench/bench_cli_bounds.py [--mb 50] [--messages 100000] [--sessions 10000]`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Runs argv[1:] with stdout to /dev/null; prints the child's peak RSS in KiB (Linux).
PEAK = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def peak_kib(*argv: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PEAK, *argv], capture_output=True, text=True, check=True
    )
    return int(done.stdout.strip())


def ctxoffload(*args: str) -> list[str]:
    return [sys.executable, "-m", "ctxoffload", *args]


def _session(workdir: Path, name: str) -> Path:
    folder = workdir / "sessions" / name
    folder.mkdir(parents=True)
    return folder


def big_line(workdir: Path, megabytes: int) -> int:
    """One session with one line of `megabytes` MB in each log; returns the longest line."""
    folder = _session(workdir, "big")
    text = ("ERROR disk quota exceeded on /mnt/exports " * (megabytes * 2**20 // 42))[
        : megabytes * 2**20
    ]
    message = {"id": "m1", "role": "tool", "content": text}
    event = json.dumps({"kind": "message", "time": "2026-11-23T10:00:00Z", "message": message})
    call = {"kind": "model_call", "time": "2026-11-23T10:00:01Z", "step": 1, "messages": ["m1"]}
    (folder / "events.jsonl").write_text(event + "\n" + json.dumps(call) + "\n")
    (folder / "context.jsonl").write_text(json.dumps(message) + "\n")
    return len(event)


def many_messages(workdir: Path, count: int) -> int:
    """One session of `count` messages; returns the longest line."""
    folder = _session(workdir, "long")
    longest = 0
    with open(folder / "events.jsonl", "w") as events, open(folder / "context.jsonl", "w") as ctx:
        for i in range(count):
            message = {"id": f"m{i}", "role": "user", "content": f"message {i}: " + "word " * 30}
            line = json.dumps(
                {"kind": "message", "time": "2026-11-23T10:00:00Z", "message": message}
            )
            events.write(line + "\n")
            ctx.write(json.dumps(message) + "\n")
            longest = max(longest, len(line))
            if i % 10 == 9:
                ids = [f"m{j}" for j in range(i - 9, i + 1)]
                call = {"kind": "model_call", "time": "x", "step": i // 10 + 1, "messages": ids}
                events.write(json.dumps(call) + "\n")
    return longest


def many_sessions(workdir: Path, count: int) -> int:
    """`count` small sessions; returns the longest line."""
    longest = 0
    for i in range(count):
        folder = _session(workdir, f"s{i:05d}")
        message = {"id": "m1", "role": "user", "content": f"session {i}"}
        line = json.dumps({"kind": "message", "time": "2026-11-23T10:00:00Z", "message": message})
        (folder / "events.jsonl").write_text(line + "\n")
        (folder / "context.jsonl").write_text(json.dumps(message) + "\n")
        longest = max(longest, len(line))
    return longest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        empty = root / "empty"
        (empty / "sessions").mkdir(parents=True)
        python = peak_kib(sys.executable, "-c", "pass")
        base = peak_kib(*ctxoffload("ls", "--workdir", str(empty)))
        print(
            f"baselines: python -c pass {python / 1024:.1f} MB, ctxoffload ls on an empty "
            f"workspace {base / 1024:.1f} MB ({base / python:.2f}x python)"
        )
        cases = [
            (
                "a 50 MB line" if args.mb == 50 else f"a {args.mb} MB line",
                "big",
                big_line,
                args.mb,
                [
                    ["show", "big"],
                    ["show", "big", "--step", "1"],
                    ["show", "big", "--json"],
                    ["ls"],
                ],
            ),
            (
                f"{args.messages:,} messages",
                "long",
                many_messages,
                args.messages,
                [["show", "long"], ["show", "long", "--step", "7"], ["ls"]],
            ),
            (f"{args.sessions:,} sessions", "many", many_sessions, args.sessions, [["ls"]]),
        ]
        print(
            f"{'workspace':<18} {'command':<22} {'peak':>9} {'over base':>10} "
            f"{'longest line':>13} {'on disk':>9} {'growth/line':>12} {'growth/disk':>12}"
        )
        for label, folder, make, size, commands in cases:
            workdir = root / folder
            longest = make(workdir, size)
            disk = sum(f.stat().st_size for f in workdir.rglob("*") if f.is_file())
            for command in commands:
                peak = peak_kib(*ctxoffload(*command, "--workdir", str(workdir)))
                growth = max(0, peak - base) * 1024
                print(
                    f"{label:<18} {' '.join(command):<22} {peak / 1024:>7.1f} MB "
                    f"{growth / 2**20:>7.1f} MB {longest:>10,} B {disk / 2**20:>6.1f} MB "
                    f"{growth / longest:>11.1f}x {growth / disk:>11.2f}x"
                )
            shutil.rmtree(workdir)  # the next workspace needs the disk


if __name__ == "__main__":
    main()
