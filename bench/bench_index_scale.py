"""How the artifact index's time grows with what leaves the context at once.

A compaction of a long session, or of a history handed over whole, may drop a hundred
thousand paths in one go. The index of what left must be built in time linear in it, and
well within `summary_timeout`, whatever shape the paths have. For each shape below, at
10,000, 50,000 and 100,000 paths, this script finds the artifacts of the messages
(`find_artifacts`, the scan) and builds the index (`ArtifactIndex.build`) within the budget of
a 200,000-token window (10,000 tokens, and as much again of the summary's spare room), and
prints the seconds each takes (wall and CPU; the fastest of `--repeat` builds) and the ratio
of each size's CPU time to the CPU time at 10,000: 5.0 and 10.0 are linear (CPU time: on a
machine shared with other work, wall time says more of the others than of the index). The
baseline, measured in the same run, is `sorted()` of the same paths (a pass that is n log n
in C).

Shapes (each message a tool result; message n on line n of context.jsonl):

- `listings`: 250 files a message under 10 folders of one package a message (400 listings
  of 250 files for 100,000: the shape that took 192 s before the index was linear);
- `one per message`: one path a message (100,000 messages);
- `deep trees`: 250 files a message at the leaves of a binary tree of folders 17 deep;
- `long names`: 250 files a message, each name about 180 characters;
- `short ids`: 250 codes a message such as `E1234`, each shorter than the runs `Substrings`
  keeps (ids rather than paths: the count of paths is of ids here).

    python bench/bench_index_scale.py
    python bench/bench_index_scale.py --shapes listings --sizes 10000 100000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from ctxoffload import Msg, get_token_counter
from ctxoffload.compression._index._artifact_index import ArtifactIndex
from ctxoffload.compression._index._artifacts import FoundArtifact, find_artifacts

EVENTS = "/ws/sessions/bench/events.jsonl"
BUDGET = 10_000  # the index's budget at a 200,000-token window
EXTRA = 10_000  # what the summary may leave of its own budget to it
PER_MESSAGE = 250


def listings(count: int) -> list[str]:
    return [f"pkg{n // PER_MESSAGE}/sub{n % 10}/module_{n % PER_MESSAGE}.py" for n in range(count)]


def one_per_message(count: int) -> list[str]:
    return [f"/srv/app/logs/run-{n}/out.log" for n in range(count)]


def deep_trees(count: int) -> list[str]:
    return [
        "/".join(f"d{depth}{(n >> depth) & 1}" for depth in range(17)) + f"/leaf{n}.py"
        for n in range(count)
    ]


def long_names(count: int) -> list[str]:
    word = "a_rather_long_component_of_a_generated_file_name_"
    return [f"src/generated/{word * 3}{n}.py" for n in range(count)]


def short_ids(count: int) -> list[str]:
    return [f"{chr(65 + n // 10_000 % 26)}{n % 10_000:04d}" for n in range(count)]


SHAPES: dict[str, tuple[Callable[[int], list[str]], int]] = {
    "listings": (listings, PER_MESSAGE),
    "one per message": (one_per_message, 1),
    "deep trees": (deep_trees, PER_MESSAGE),
    "long names": (long_names, PER_MESSAGE),
    "short ids": (short_ids, PER_MESSAGE),
}


def messages(paths: list[str], per: int) -> list[Msg]:
    return [
        Msg(role="user", content="\n".join(paths[start : start + per]))
        for start in range(0, len(paths), per)
    ]


def measure(paths: list[str], per: int, repeat: int = 1) -> dict[str, float]:
    counter = get_token_counter(exact=True)
    msgs = messages(paths, per)
    lines = {m.id: n for n, m in enumerate(msgs, start=1)}
    started = time.perf_counter()
    sorted(paths)
    baseline = time.perf_counter() - started
    cpu, wall = time.process_time(), time.perf_counter()
    found, calls = find_artifacts(msgs, lines)
    scan_cpu, scan_wall = time.process_time() - cpu, time.perf_counter() - wall
    build_cpu = build_wall = float("inf")
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        index = ArtifactIndex.build(
            found,
            calls,
            summary_text="",
            kept=[],
            counter=counter,
            budget=BUDGET,
            events_file=EVENTS,
            extra=EXTRA,
        )
        build_cpu = min(build_cpu, time.process_time() - cpu)
        build_wall = min(build_wall, time.perf_counter() - wall)
    named = len(found) - len(index.cut)
    tokens = counter.count_text(index.render(EVENTS))
    assert tokens <= index.budget
    assert_placed(index, found)
    return {
        "paths": len(found),
        "scan": scan_wall,
        "scan_cpu": scan_cpu,
        "build": build_wall,
        "build_cpu": build_cpu,
        "baseline": baseline,
        "named": named,
        "tokens": tokens,
    }


def assert_placed(index: ArtifactIndex, found: list[FoundArtifact]) -> None:
    placed = [*index.in_summary, *index.in_kept, *index.entries, *index.cut]
    assert len(placed) == len(found), (len(placed), len(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=list(SHAPES))
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 50_000, 100_000])
    parser.add_argument(
        "--repeat", type=int, default=3, help="builds of each index; the fastest is printed"
    )
    args = parser.parse_args()
    get_token_counter(exact=True).count_text("warm up")
    print(f"index budget {BUDGET:,} tokens (+{EXTRA:,} of the summary's room); seconds wall (CPU)")
    print(
        f"{'shape':16} {'paths':>8} {'scan s':>14} {'index s':>14} {'ratio':>6}"
        f" {'sort s':>7} {'x sort':>7} {'named':>7} {'tokens':>7}"
    )
    for shape in args.shapes:
        make, per = SHAPES[shape]
        first: float | None = None
        for size in args.sizes:
            result = measure(make(size), per, args.repeat)
            first = first or result["build_cpu"]
            print(
                f"{shape:16} {int(result['paths']):>8,}"
                f" {result['scan']:>6.2f} ({result['scan_cpu']:>5.2f})"
                f" {result['build']:>6.2f} ({result['build_cpu']:>5.2f})"
                f" {result['build_cpu'] / first:>6.1f} {result['baseline']:>7.3f}"
                f" {result['build'] / result['baseline']:>7.0f}"
                f" {int(result['named']):>7,} {int(result['tokens']):>7,}"
            )


if __name__ == "__main__":
    main()
