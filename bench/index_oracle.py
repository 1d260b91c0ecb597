"""Whether the artifact index renders byte for byte what another version of the code rendered
for the same inputs: the check that a change meant only to make the index faster changed
nothing it writes.

`record` runs the corpus replay of `bench_index_share` (every conversation of
../shared/corpus through a `Compressor` at windows of 8,000 and 32,000 tokens) and the
index's own tests, catches every `ArtifactIndex.build` they make, and stores each one's
inputs with what it built: its rendered text, where each artifact went, what it folded and
its report. `compare` builds each stored input again with the code imported now and says
which differ, and how many artifacts those name then and now (for a change that may
differ). Run `record` with the old code (a checkout of it first on PYTHONPATH), then
`compare` with the new:

    git archive main src | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/src python bench/index_oracle.py record /tmp/index.pickle
    python bench/index_oracle.py compare /tmp/index.pickle

`time` builds the stored inputs of the corpus replay again (`--cases`: the first that many,
which `record` stores first), three times, and prints the CPU time of the fastest round: run
it with the old code and the new one, one after the other, for their times on the same
inputs in the same state of the machine.

The search's clock is replaced by one without a deadline (its steps kept), so that what is
built depends on the inputs alone, not on how busy the machine is.
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ctxoffload
from ctxoffload._tokens.counters import HeuristicCounter, TiktokenCounter
from ctxoffload.compression._index._artifact_index import ArtifactIndex
from ctxoffload.compression._index._search import IndexClock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
TESTS = [
    "tests/compression/test_artifact_index.py",
    "tests/compression/test_artifact_groups.py",
    "tests/compression/test_artifacts.py",
    "tests/compression/test_index_search.py",
    "tests/compression/test_corpus_replay.py",
]


def _counter_spec(counter: Any) -> tuple[str, ...] | None:
    """How to make `counter` again (None: a counter of a test's own, not recorded)."""
    if type(counter) is TiktokenCounter:
        return ("tiktoken", counter.name, "fast" if counter._fast is not None else "slow")
    if type(counter) is HeuristicCounter:
        return ("heuristic",)
    return None


def _counter(spec: tuple[str, ...]) -> Any:
    if spec[0] == "heuristic":
        return HeuristicCounter()
    return TiktokenCounter(spec[1], fast=spec[2] == "fast")


def outcome(index: ArtifactIndex, events_file: str | None) -> dict[str, Any]:
    """What an index built: its text, where each artifact went, what it folded."""
    return {
        "text": index.render(events_file),
        "listing": [(f["kind"], f["value"], f["status"]) for f in index.listing()],
        "folded": sorted(index.folded),
        "report": index.report(),
        "carried": [(f.kind, f.value) for f in index.carried],
        "show_calls": index.show_calls,
    }


def _build(
    args: tuple[Any, ...], kwargs: dict[str, Any], counter: Any, steps: int | None
) -> ArtifactIndex:
    return ArtifactIndex.build(*args, counter=counter, clock=IndexClock(steps=steps), **kwargs)


@contextmanager
def recording(into: list[dict[str, Any]]) -> Iterator[None]:
    """Catch every `ArtifactIndex.build` while installed: its inputs and what it built."""
    original = ArtifactIndex.__dict__["build"]

    def caught(cls: type[ArtifactIndex], *args: Any, **kwargs: Any) -> ArtifactIndex:
        counter = kwargs.pop("counter")
        clock = kwargs.pop("clock", None)
        steps = clock.steps if clock is not None else None
        spec = _counter_spec(counter)
        kwargs["kept"] = list(kwargs["kept"])
        if spec is None:
            return original.__func__(cls, *args, counter=counter, clock=clock, **kwargs)
        index = original.__func__(
            cls, *args, counter=counter, clock=IndexClock(steps=steps), **kwargs
        )
        try:
            inputs = pickle.dumps((args, kwargs))
        except Exception:  # a test's own artifact type: not recorded
            return index
        events = kwargs.get("events_file")
        into.append(
            {"inputs": inputs, "counter": spec, "steps": steps, "out": outcome(index, events)}
        )
        return index

    ArtifactIndex.build = classmethod(caught)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        ArtifactIndex.build = original  # type: ignore[method-assign]


def record(out: Path, windows: list[int], tests: bool) -> None:
    import bench_index_share

    cases: list[dict[str, Any]] = []
    with recording(cases):
        with tempfile.TemporaryDirectory() as tmp:
            for window in windows:
                asyncio.run(bench_index_share.replay(window, Path(tmp) / str(window)))
        replayed = len(cases)
        if tests:
            import pytest

            pytest.main(["-q", "-p", "no:cacheprovider", "-n", "0", *TESTS])
    out.write_bytes(pickle.dumps(cases))
    print(f"recorded {len(cases)} indexes ({replayed} of the replay) with {ctxoffload.__file__}")


def compare(path: Path) -> int:
    cases = pickle.loads(path.read_bytes())
    counters: dict[tuple[str, ...], Any] = {}
    differ = 0
    # Of the indexes that differ, what each named then and now: a change meant to name as
    # much with less work is judged by these (an artifact the index holds whole or folded,
    # or names by the summary or the kept messages, against one only listed as cut).
    named = {"then": 0, "now": 0}
    for number, case in enumerate(cases):
        args, kwargs = pickle.loads(case["inputs"])
        spec = tuple(case["counter"])
        counter = counters.get(spec) or counters.setdefault(spec, _counter(spec))
        index = _build(args, kwargs, counter, case["steps"])
        now = outcome(index, kwargs.get("events_file"))
        if now != case["out"]:
            differ += 1
            keys = [k for k in now if now[k] != case["out"][k]]
            then_named, now_named = _named(case["out"]), _named(now)
            named["then"] += then_named
            named["now"] += now_named
            differs = ", ".join(keys)
            print(f"case {number}: differs in {differs} (named {then_named} -> {now_named})")
    texts = sum(len(c["out"]["text"]) for c in cases)
    print(
        f"{len(cases)} indexes ({texts:,} characters) compared with {ctxoffload.__file__}:"
        f" {differ} differ"
        + (f"; those name {named['then']:,} artifacts then, {named['now']:,} now" if differ else "")
    )
    return 1 if differ else 0


def _named(out: dict[str, Any]) -> int:
    """How many artifacts an index's outcome names (any status but `cut`)."""
    return sum(status != "cut" for _, _, status in out["listing"])


def time_builds(path: Path, cases: int) -> None:
    stored = pickle.loads(path.read_bytes())[:cases]
    loaded = [(pickle.loads(c["inputs"]), tuple(c["counter"]), c["steps"]) for c in stored]
    counters = {spec: _counter(spec) for _, spec, _ in loaded}
    rounds = []
    for _ in range(4):  # (the first warms the counters up, and is not kept)
        start = time.process_time()
        for (args, kwargs), spec, steps in loaded:
            _build(args, kwargs, counters[spec], steps)
        rounds.append(time.process_time() - start)
    best = min(rounds[1:])
    print(
        f"{len(loaded)} indexes built in {best:.3f} s of CPU"
        f" ({best / len(loaded) * 1e3:.2f} ms an index, fastest of 3) with {ctxoffload.__file__}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["record", "compare", "time"])
    parser.add_argument("file", type=Path)
    parser.add_argument("--windows", nargs="+", type=int, default=[8_000, 32_000])
    parser.add_argument("--no-tests", action="store_true", help="the corpus replay alone")
    parser.add_argument("--cases", type=int, default=104, help="how many `time` builds")
    args = parser.parse_args()
    if args.mode == "record":
        record(args.file, args.windows, not args.no_tests)
    elif args.mode == "time":
        time_builds(args.file, args.cases)
    else:
        raise SystemExit(compare(args.file))


if __name__ == "__main__":
    main()
