"""How ctxoffload's token counts compare with what the provider reported, per model family.

For every model call of the corpus's Claude Code and Codex transcripts (../shared/corpus; the
calls and their reported input are read by tests/corpus_usage.py), it counts the messages the
transcript shows were sent with ctxoffload's exact o200k_base counter (`get_token_counter`
for an OpenAI model) and prints, per model family, the ratio provider / ours: median, p95
and max, in two forms.

- `whole`: reported / (ours + host), for every call but each conversation's first. `host` is
  what the host sends that the transcript does not show (Claude Code's system prompt and
  tool schemas, Codex's instructions and tools), estimated as the conversation's first
  reported input minus our count of that first request's messages (so the first call's
  ratio is 1 by construction and is left out).
- `growth`: (reported - first reported) / (ours - our first count), for the calls whose
  messages grew by at least `--min-growth` of our tokens since the first: the ratio on the
  content alone, whatever the host's fixed part. What a host adds between calls and the
  transcript does not show (Claude Code's reminders and attached files, Codex's reasoning
  items sent back) raises it, so it is an upper estimate of the tokenizer's ratio: for
  gpt-5-codex, counted with its own encoding, it is the noise of that measure.

The Claude counter's ratio (`ctxoffload.tokens.CLAUDE_RATIO`) is the `growth` p95
of the claude family rounded up, printed last with the share of calls it covers.

    python bench/bench_calibration.py
    python bench/bench_calibration.py --min-growth 1000 --per-thread
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from ctxoffload import get_token_counter
from ctxoffload.tokens import CLAUDE_RATIO, family_of

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from corpus_usage import CORPUS, threads  # noqa: E402  (the tests' reader of the calls)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def _line(name: str, values: list[float]) -> str:
    if not values:
        return f"  {name:<7} no calls"
    return (
        f"  {name:<7} calls {len(values):>4}  median {statistics.median(values):.3f}  "
        f"p95 {_p95(values):.3f}  max {max(values):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--min-growth", type=int, default=2000)
    parser.add_argument("--per-thread", action="store_true", help="a line per conversation too")
    args = parser.parse_args()
    if not CORPUS.is_dir():
        sys.exit(f"no corpus at {CORPUS}")
    ours = get_token_counter("gpt-4o", exact=True)  # o200k_base, counted exactly
    whole: dict[str, list[float]] = defaultdict(list)
    growth: dict[str, list[float]] = defaultdict(list)
    for thread in threads():
        family = family_of(thread.model)
        first = thread.calls[0]
        first_ours = ours.count_messages(first.messages)
        host = first.reported - first_ours
        grew: list[float] = []
        for call in thread.calls[1:]:
            counted = ours.count_messages(call.messages)
            whole[family].append(call.reported / (counted + host))
            if counted - first_ours >= args.min_growth:
                grew.append((call.reported - first.reported) / (counted - first_ours))
        growth[family] += grew
        if args.per_thread:
            print(f"{thread.name} ({thread.model}): {len(thread.calls)} calls, host ~{host} tokens")
            print(_line("growth", grew))
    print(f"provider / ours (o200k_base, exact), corpus {CORPUS}")
    print(
        f"host = first reported input - our count of the first request; growth >= "
        f"{args.min_growth} tokens"
    )
    for family in sorted(whole):
        print(f"{family}:")
        print(_line("whole", whole[family]))
        print(_line("growth", growth[family]))
    claude = growth.get("claude", [])
    if claude:
        covered = sum(1 for ratio in claude if ratio <= CLAUDE_RATIO) / len(claude)
        print(
            f"CLAUDE_RATIO {CLAUDE_RATIO}: at or above the claude growth ratio of "
            f"{covered:.0%} of calls, above every whole ratio: "
            f"{all(r <= CLAUDE_RATIO for r in whole['claude'])}"
        )


if __name__ == "__main__":
    main()
