"""What does the OpenAI Agents SDK's session cost a long conversation with big tool outputs,
a `WorkspaceSession` against the SDK's own `SQLiteSession` (measured in the same run)?

Each turn is what `Runner.run` asks of its session for a run with one tool call (agents 0.24:
`get_items()` at the start, then `add_items` with the user's message, with the call and its
output, and with the answer), the output 50 KB of log lines. The baseline is
`SQLiteSession` on a file in the same folder (WAL, the SDK's settings); ours is a
`WorkspaceSession` on a `LocalWorkspace` there (fsync on), with its defaults: each output over
`tool_result_limit` stored whole once in its file and kept as head and notice.

The two sessions go turn by turn, alternating which goes first, so that both meet the load
of the same moment (on a shared machine the load drifts over a run). Printed: each session's
total for the conversation and what one turn costs near turn 10 and near the last turn (the
median of 11 turns around each), in wall time and in this process's CPU time (which load
drifts less), the ratios (targets: total <= 1.5x SQLiteSession's, the last turn <= 2x turn
10, issue 56), and what each keeps on disk.

With `--keep-whole-outputs` the `WorkspaceSession` keeps each output whole in its items too
(`keep_whole_outputs=True`), as the SDK's sessions do.

Usage: python bench/bench_openai_session.py [--turns N] [--output-kb N] [--runs N]
       [--keep-whole-outputs]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload.integrations.openai_agents import WorkspaceSession


def output_text(turn: int, size: int) -> str:
    lines: list[str] = []
    total = 0
    while total < size:
        line = f"03:{len(lines) % 60:02d} INFO turn {turn} export batch {len(lines)} done\n"
        lines.append(line)
        total += len(line)
    return "".join(lines)


def turn_items(turn: int, size: int) -> list[list[dict[str, Any]]]:
    """The `add_items` calls of one run with one tool call, as the SDK makes them."""
    call_id = f"call_{turn}"
    return [
        [{"role": "user", "content": f"check export {turn}"}],
        [
            {
                "type": "function_call",
                "call_id": call_id,
                "name": "fetch_logs",
                "arguments": f'{{"job": "export-{turn}"}}',
            },
            {"type": "function_call_output", "call_id": call_id, "output": output_text(turn, size)},
        ],
        [
            {
                "role": "assistant",
                "type": "message",
                "content": [{"type": "output_text", "text": f"export {turn} finished"}],
            }
        ],
    ]


async def one_turn(session: Any, batches: list[list[dict[str, Any]]]) -> tuple[float, float]:
    """One run's calls on `session`: (wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    await session.get_items()
    for batch in batches:
        await session.add_items(batch)
    return time.perf_counter() - wall, time.process_time() - cpu


def near(times: list[float], turn: int) -> float:
    """The median of the 11 turns around `turn` (1-based), within the conversation."""
    lo = max(0, min(turn - 6, len(times) - 11))
    return statistics.median(times[lo : lo + 11])


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


async def main(turns: int, size: int, runs: int, keep_whole: bool) -> None:
    from agents import SQLiteSession

    names = ("SQLiteSession", "WorkspaceSession")
    figures: dict[str, dict[str, list[float]]] = {
        name: {"total": [], "early": [], "late": [], "cpu early": [], "cpu late": []}
        for name in names
    }
    kept: dict[str, int] = {}
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        for run in range(runs):
            root = Path(tmp) / f"run-{run}"
            root.mkdir()
            sessions: dict[str, Any] = {
                "SQLiteSession": SQLiteSession("bench", root / "sdk.db"),
                "WorkspaceSession": WorkspaceSession(
                    LocalWorkspace(root / "ws"),
                    "bench",
                    config=ContextConfig(),
                    **({"keep_whole_outputs": True} if keep_whole else {}),
                ),
            }
            wall: dict[str, list[float]] = {name: [] for name in names}
            cpu: dict[str, list[float]] = {name: [] for name in names}
            for turn in range(turns):
                batches = turn_items(turn, size)  # made before the clock starts
                # Turn by turn, alternating which goes first: both meet the machine's load
                # of the same moment.
                for name in names if turn % 2 == 0 else reversed(names):
                    spent, used = await one_turn(sessions[name], batches)
                    wall[name].append(spent)
                    cpu[name].append(used)
            sessions["SQLiteSession"].close()
            for name in names:
                figures[name]["total"].append(sum(wall[name]))
                figures[name]["early"].append(near(wall[name], 10))
                figures[name]["late"].append(near(wall[name], turns))
                figures[name]["cpu early"].append(near(cpu[name], 10))
                figures[name]["cpu late"].append(near(cpu[name], turns))
            kept["SQLiteSession"] = sum(
                os.path.getsize(p) for p in root.glob("sdk.db*") if p.is_file()
            )
            kept["WorkspaceSession"] = folder_bytes(root / "ws")
            # Where the items are: history.jsonl (state.json before issue 56).
            folder = root / "ws" / "sessions" / "bench"
            items_file = next(
                f for f in (folder / "history.jsonl", folder / "state.json") if f.exists()
            )
            kept[items_file.name] = items_file.stat().st_size

    def median(name: str, figure: str) -> float:
        return statistics.median(figures[name][figure])

    kept_as = "whole" if keep_whole else "as head and notice"
    print(
        f"{turns} turns, a {size // 1000} KB output each (WorkspaceSession keeps it {kept_as}), "
        f"median of {runs} run(s)"
    )
    late = f"turn {turns}"
    print(
        f"{'':18} {'total s':>8} {'turn 10 ms':>11} {late + ' ms':>12} "
        f"{'CPU turn 10 ms':>15} {'CPU ' + late + ' ms':>16}"
    )
    for name in names:
        print(
            f"{name:18} {median(name, 'total'):8.2f} {median(name, 'early') * 1000:11.2f} "
            f"{median(name, 'late') * 1000:12.2f} {median(name, 'cpu early') * 1000:15.2f} "
            f"{median(name, 'cpu late') * 1000:16.2f}"
        )
    ours, theirs = names[1], names[0]
    total_ratio = median(ours, "total") / median(theirs, "total")
    print(f"WorkspaceSession / SQLiteSession, total: {total_ratio:.2f}x (target <= 1.5)")
    for name in (ours, theirs):
        growth = median(name, "late") / median(name, "early")
        cpu_growth = median(name, "cpu late") / median(name, "cpu early")
        target = " (target <= 2)" if name == ours else ""
        print(f"{name}, {late} / turn 10: {growth:.2f}x{target}, CPU {cpu_growth:.2f}x")
    print(
        f"on disk: SQLiteSession {kept[theirs] / 1e6:.1f} MB; WorkspaceSession's folder "
        f"{kept[ours] / 1e6:.1f} MB, its items' "
        + ", ".join(f"{name} {size / 1e6:.2f} MB" for name, size in kept.items() if "." in name)
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--output-kb", type=int, default=50)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--keep-whole-outputs", action="store_true")
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.output_kb * 1000, args.runs, args.keep_whole_outputs))
