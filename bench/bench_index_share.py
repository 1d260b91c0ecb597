"""How much of a compaction's time the artifact index takes, in an agent's loop.

Replays every conversation of ../shared/corpus (the tests' corpus readers) through a
`Compressor` at windows of 8,000 and 32,000 tokens, one message at a time as an agent's loop
adds them, with a scripted summary model that answers at once (so model time is left out),
into a `LocalWorkspace`. It adds up the CPU time of every compression that compacted and of
every `ArtifactIndex.build` within them (on the event loop's thread, where it runs), and
prints the index's share of the compactions' time: target (issue 57) at most a fifth. The
baseline is the compactions themselves, measured in the same run.

CPU time, not wall time: on a machine shared with other work, wall time stretches what
computes more than what waits on the disk.

`--search-steps N` caps each index's search for the layout that names the most at N
indexes rendered and counted (its `IndexClock`, as a compaction's `summary_timeout` caps it in
time): 0 keeps only what every index does before it searches (the entries whole, filled to
the budget counted exactly, the fit), the floor of the index's time with its budget counted
exactly; the naming that costs is `bench/bench_artifacts.py`'s `filled` against `read`.

    python bench/bench_index_share.py
    python bench/bench_index_share.py --windows 8000
    python bench/bench_index_share.py --search-steps 0
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ScriptedModel
from ctxoffload.compression import Compressor, _compaction
from ctxoffload.compression._index._artifact_index import ArtifactIndex

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
sys.path.insert(0, str(ROOT / "tests" / "compression"))
from corpus import conversations  # noqa: E402  (the tests' corpus readers)

SUMMARY = {
    "task_overview": "the task",
    "current_state": "where it stands",
    "important_discoveries": "what was found",
    "next_steps": "what comes next",
    "context_to_preserve": "what to keep",
}


class IndexTimer:
    """Adds up the CPU time and the calls of `ArtifactIndex.build` while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.builds = 0

    def __enter__(self) -> IndexTimer:
        build = self._build = ArtifactIndex.__dict__["build"]
        timer = self

        def timed(cls: type[ArtifactIndex], *args: Any, **kwargs: Any) -> ArtifactIndex:
            start = time.thread_time()
            try:
                return build.__func__(cls, *args, **kwargs)
            finally:
                timer.seconds += time.thread_time() - start
                timer.builds += 1

        ArtifactIndex.build = classmethod(timed)  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        ArtifactIndex.build = self._build  # type: ignore[method-assign]


async def replay(window: int, workdir: Path) -> tuple[int, float, IndexTimer]:
    """Every corpus conversation through a compressor at `window`: the compactions, their
    CPU seconds, and the index's."""
    workspace = LocalWorkspace(workdir)
    compactions, seconds = 0, 0.0
    with IndexTimer() as index:
        files = sorted(p for p in CORPUS.iterdir() if p.name != "SOURCES.md")
        for number, conversation in enumerate(c for p in files for c in conversations(p)):
            compressor = Compressor(
                ContextConfig(context_window=window),
                model=ScriptedModel([], default=SUMMARY),
                offloader=workspace,
                session_id=f"s{window}-{number}",
            )
            context = [Msg(role="system", content="You are a coding agent.")]
            for message in conversation:
                context.append(message)
                start = time.process_time()
                result = await compressor.maybe_compress(context)
                if result.compressed:
                    seconds += time.process_time() - start
                    compactions += 1
                context = list(result.messages)
    return compactions, seconds, index


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", nargs="+", type=int, default=[8_000, 32_000])
    parser.add_argument("--search-steps", type=int, default=None, metavar="N")
    args = parser.parse_args()
    if args.search_steps is not None:
        steps = args.search_steps
        clock_of = _compaction._index_clock

        def capped(deadline: float, cfg: ContextConfig) -> Any:
            clock = clock_of(deadline, cfg)
            clock.steps = steps
            return clock

        _compaction._index_clock = capped
        print(f"(each index's search capped at {steps} renders)")
    if not CORPUS.is_dir():
        raise SystemExit(f"the transcript corpus {CORPUS} is not there")
    header = ("window", 8), ("compactions", 12), ("CPU s", 7), ("index s", 8), ("share", 6)
    print(" ".join(f"{name:>{width}}" for name, width in header), f"{'ms/index':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for window in args.windows:
            compactions, seconds, index = await replay(window, Path(tmp) / str(window))
            share = index.seconds / seconds if seconds else 0.0
            per = index.seconds / index.builds * 1e3 if index.builds else 0.0
            print(
                f"{window:>8,} {compactions:>12} {seconds:>7.2f} {index.seconds:>8.2f}"
                f" {share:>6.0%} {per:>9.1f}"
            )


if __name__ == "__main__":
    asyncio.run(main())
