"""Benchmark token counting: the incremental pre-model check and counting throughput.

Prints, each against a baseline measured in the same run:

(a) the pre-model check on a 2,000-message context after one new message, with
    `ContextTokenTracker`, against a full recount of the whole context (target ratio <= 0.02);
(b) exact (tiktoken, o200k_base) and heuristic counting throughput in MB/s of UTF-8 text.

The context is built from a real agent trajectory in ../shared/corpus when it is there,
and from generated text otherwise. Run: `python bench/bench_tokens.py`.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from ctxoffload import ContextTokenTracker, Msg, get_token_counter
from ctxoffload.tokens import HeuristicCounter, TiktokenCounter

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
TRAJECTORY = CORPUS / "minisweagent-django__django-15629.traj.json"
CONTEXT_MESSAGES = 2000
THROUGHPUT_BYTES = 4_000_000

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a bash command in the repository and return its output.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]


def _source_messages() -> tuple[list[tuple[str, str]], str]:
    """(role, text) pairs from the corpus trajectory, or generated ones when it is absent."""
    if TRAJECTORY.is_file():
        data = json.loads(TRAJECTORY.read_text(encoding="utf-8"))
        pairs = [
            (m["role"], m["content"])
            for m in data["messages"]
            if m["role"] in ("user", "assistant") and isinstance(m["content"], str)
        ]
        return pairs, f"corpus: {TRAJECTORY.name}"
    rng = random.Random(0)
    words = ["the", "of", "and", "to", "in", "is", "for", "file", "error", "def", "return"]
    pairs = []
    for i in range(100):
        n = rng.randint(20, 600)
        text = " ".join(rng.choice(words) for _ in range(n)) + f"\nline {i}: value={rng.random()}"
        pairs.append(("user" if i % 2 else "assistant", text))
    return pairs, "generated text (corpus not found)"


def _context(pairs: list[tuple[str, str]], n: int) -> list[Msg]:
    # Distinct Msg objects (fresh ids) cycling through the trajectory, like a long session.
    return [Msg(role=pairs[i % len(pairs)][0], content=pairs[i % len(pairs)][1]) for i in range(n)]  # type: ignore[arg-type]


def _best_of(repeats: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_pre_model_check(counter: TiktokenCounter, pairs: list[tuple[str, str]]) -> None:
    system = Msg(role="system", content="You are a helpful assistant that can run bash commands.")
    messages = _context(pairs, CONTEXT_MESSAGES)
    chars = sum(len(m.content) for m in messages if isinstance(m.content, str))

    def full_recount() -> int:
        return counter.count_messages([system, *messages]) + counter.count_tools(TOOLS)

    full = _best_of(3, full_recount)
    tokens = full_recount()

    tracker = ContextTokenTracker(counter)
    assert tracker.count(system, None, messages, TOOLS) == tokens
    incremental = []
    anchored = []
    new_messages = _context(pairs, 40)
    for i, new in enumerate(new_messages):
        messages.append(new)
        if i == len(new_messages) // 2:
            # From here on, as after a model call that reported its usage.
            tracker.anchor(tokens, [system, *messages[:-1]])
        start = time.perf_counter()
        tracker.count(system, None, messages, TOOLS)
        elapsed = time.perf_counter() - start
        (anchored if tracker.is_anchored else incremental).append(elapsed)
    step = statistics.median(incremental)
    step_anchored = statistics.median(anchored)
    new_chars = statistics.median(
        len(m.content) for m in new_messages if isinstance(m.content, str)
    )

    print(
        f"(a) pre-model check, {CONTEXT_MESSAGES:,} messages, {chars / 1e6:.1f} M chars, "
        f"{tokens:,} tokens ({counter.name}):"
    )
    print(f"    full recount                  {full * 1e3:9.2f} ms  (baseline)")
    print(
        f"    tracker, 1 new message        {step * 1e3:9.2f} ms  ratio {step / full:.4f}"
        f"  (target <= 0.02; median new message {new_chars:,.0f} chars)"
    )
    print(
        f"    tracker, anchored, 1 new      {step_anchored * 1e3:9.2f} ms  "
        f"ratio {step_anchored / full:.4f}"
    )


def bench_throughput(exact: TiktokenCounter, pairs: list[tuple[str, str]]) -> None:
    texts: list[str] = []
    size = 0
    while size < THROUGHPUT_BYTES:
        for _, text in pairs:
            texts.append(text)
            size += len(text.encode("utf-8"))
    messages = [Msg(role="user", content=t) for t in texts]
    heuristic = HeuristicCounter()
    megabytes = size / 1e6

    def rate(run: Callable[[], object]) -> float:
        return megabytes / _best_of(3, run)

    joined = "\n".join(texts)
    rates = {
        "exact count_text, per message": rate(lambda: [exact.count_text(t) for t in texts]),
        "exact count_text, one string": rate(lambda: exact.count_text(joined)),
        "exact count_message": rate(lambda: [exact.count_message(m) for m in messages]),
        "heuristic count_message": rate(lambda: [heuristic.count_message(m) for m in messages]),
    }
    print(
        f"(b) counting throughput on {megabytes:.1f} MB of agent-trajectory text "
        f"({len(texts):,} messages):"
    )
    for label, value in rates.items():
        print(f"    {label:<32} {value:9.1f} MB/s")


def main() -> None:
    pairs, source = _source_messages()
    start = time.perf_counter()
    counter = get_token_counter("gpt-4o", exact=True)
    load = time.perf_counter() - start
    assert isinstance(counter, TiktokenCounter)
    print(f"source: {source}")
    print(f"encoding {counter.name} loaded offline in {load * 1e3:.0f} ms from {counter.source}")
    bench_pre_model_check(counter, pairs)
    bench_throughput(counter, pairs)


if __name__ == "__main__":
    main()
