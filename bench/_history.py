"""The long history the per-call benchmarks share, and how they time and report it.

`bench_projection.py`, `bench_google_adk.py`, `bench_llama_index.py` and
`bench_smolagents_step.py` each ask one question: what does a call cost a door when the
history it is given has one new message, against the same door given the whole history from
nothing? They build the same history (requests, tool calls, tool results, replies in turn;
one result in 25 is 20 KB, so it is offloaded), each in its host's own types, time the two
calls over a number of runs, and print the medians and their ratio against one target.

Imported by those scripts as `_history` (a script's own folder is on its path).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

SUMMARY = {
    "task_overview": "debug the build",
    "current_state": "reading logs",
    "important_discoveries": "row 7 fails",
    "next_steps": "fix row 7",
    "context_to_preserve": "paths named above",
}
"""What the `ScriptedModel` answers for every summary (a summary written at once)."""

TARGET = 0.02
"""The ratio a call with one new message may cost of the call from nothing."""

_T_co = TypeVar("_T_co", covariant=True)


class Messages(Protocol[_T_co]):
    """How a host spells the four kinds of message of the history."""

    def request(self, text: str) -> _T_co:
        """A user's request."""

    def call(self, call_id: str, i: int) -> _T_co:
        """The model's call of the `grep` tool (`i` is the message's place)."""

    def result(self, call_id: str, output: str) -> _T_co:
        """The `grep` tool's result for the call `call_id`."""

    def reply(self, text: str) -> _T_co:
        """The model's reply in words."""


def tool_output(i: int, *, big: bool) -> str:
    """The text of a tool result: about 20 KB when `big`, else about 200 bytes."""
    size = 20_000 if big else 200
    return "\n".join(f"line {j} of {i}" for j in range(size // 16))


def history(n: int, messages: Messages[_T_co]) -> list[_T_co]:
    """`n` messages: a request, a call, its result and a reply, in turn; a result at a place
    `i` with `i % 50 == 2` is big (2, 102, 202, ...: one result in 25)."""
    out: list[_T_co] = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append(messages.request(f"request {i}: look at part {i}"))
        elif kind == 1:
            out.append(messages.call(f"c{i}", i))
        elif kind == 2:
            out.append(messages.result(f"c{i - 1}", tool_output(i, big=i % 50 == 2)))
        else:
            out.append(messages.reply(f"part {i} holds nothing unusual"))
    return out


def median_times(one_run: Callable[[Path, int, int], Any], n: int, runs: int) -> list[float]:
    """The median of each time `one_run(folder, n, run)` returns (a tuple of seconds) over
    `runs` runs, in one temporary folder under the current one; a coroutine function's runs
    all in one event loop."""
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        if asyncio.iscoroutinefunction(one_run):

            async def every() -> list[Sequence[float]]:
                return [await one_run(Path(tmp), n, run) for run in range(runs)]

            times = asyncio.run(every())
        else:
            times = [one_run(Path(tmp), n, run) for run in range(runs)]
    return [statistics.median(column) for column in zip(*times, strict=True)]


def report(title: str, rows: Sequence[tuple[str, float]], ratio: float, width: int = 29) -> None:
    """Print `title`, each (label, seconds) row in milliseconds, and `ratio` against the
    target."""
    print(title)
    for label, seconds in rows:
        print(f"  {label:<{width}}{seconds * 1000:9.1f} ms")
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(f"  ratio {ratio:.4f} (target <= {TARGET}): {verdict}")


def arguments(doc: str | None) -> argparse.Namespace:
    """The command line of a per-call benchmark: `--messages N` (10,000) and `--runs N` (3)."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    return parser.parse_args()
