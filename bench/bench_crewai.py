"""What does an LLM call cost the CrewAI door when the conversation has one new message?

CrewAI keeps an agent's conversation in its executor's `messages` (OpenAI-format dicts) and
sends the list on every LLM call; `ContextOffloadHooks.before_llm_call` turns it, in place,
into what the model sees, and the executor keeps that. Measured over a `LocalWorkspace`
(fsync on) with a `ScriptedModel` that writes summaries at once (so what is timed is
ctxoffload's own work), calling the hook as CrewAI calls it (a context holding the
executor's list), on a conversation of N messages (user turns, tool calls, tool results,
replies; one result in 25 is 20 KB):

- compacted (a 32,000-token window): from nothing, a new hooks object given the list, which
  reads it, truncates the big results, appends what a summary stands for to context.jsonl and
  summarises; then the next call, the list the executor kept plus one new message;
- kept whole (a window of 10 million tokens: nothing is summarised): from nothing, then the
  next call on the same 10,000 messages plus one, each of them read before.

Printed: the times (median of the runs) and each ratio. Target: <= 0.02 (a call costs what is
new, not the history: issue 60).

Usage: python bench/bench_crewai.py [--messages N] [--runs N]   (needs `.[crewai]`)
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from _history import SUMMARY

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload.integrations.crewai import ContextOffloadHooks
from ctxoffload.model import ScriptedModel


def conversation(n: int) -> list[dict[str, Any]]:
    """An executor's messages, as CrewAI keeps them."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are ops. You read logs."}]
    for i in range(n - 1):
        kind = i % 4
        if kind == 0:
            out.append({"role": "user", "content": f"request {i}: look at part {i}"})
        elif kind == 1:
            function = {"name": "grep", "arguments": f'{{"pattern": "p{i}"}}'}
            call = {"id": f"c{i}", "type": "function", "function": function}
            out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == 2:
            size = 20_000 if i % 50 == 2 else 200
            output = "\n".join(f"line {j} of {i}" for j in range(size // 16))
            out.append(
                {"role": "tool", "tool_call_id": f"c{i - 1}", "name": "grep", "content": output}
            )
        else:
            out.append({"role": "assistant", "content": f"part {i} holds nothing unusual"})
    return out


class _Agent:
    """The agent the hook's context names."""


def one_run(root: Path, n: int, run: int, window: int) -> tuple[float, float]:
    hooks = ContextOffloadHooks(
        LocalWorkspace(root / f"run-{run}-{window}"),
        config=ContextConfig(context_window=window),
        summary_model=ScriptedModel([], default=SUMMARY),
        session_id="bench",
    )
    messages = conversation(n)
    agent = _Agent()
    context: Any = SimpleNamespace(
        executor=SimpleNamespace(_openai_tools=[]),
        messages=messages,
        llm=SimpleNamespace(model="gpt-4o"),
        crew=None,
        agent=agent,
    )
    gc.collect()  # a collection owed by what came before is no cost of the call
    start = time.perf_counter()
    hooks.before_llm_call(context)
    cold = time.perf_counter() - start
    messages.append({"role": "user", "content": "and now?"})
    gc.collect()
    start = time.perf_counter()
    hooks.before_llm_call(context)
    warm = time.perf_counter() - start
    if window < 1_000_000:
        assert len(messages) < n, "the conversation was not compacted"
    else:
        assert len(messages) == n + 1, "a conversation under the window was changed"
    return cold, warm


def main(n: int, runs: int) -> None:
    print(f"CrewAI door: a conversation of {n:,} messages, median of {runs} runs")
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        for window, label in ((32_000, "compacted"), (10_000_000, "kept whole")):
            times = [one_run(Path(tmp), n, run, window) for run in range(runs)]
            cold = statistics.median(t[0] for t in times)
            warm = statistics.median(t[1] for t in times)
            ratio = warm / cold
            verdict = "met" if ratio <= 0.02 else "MISSED"
            print(f"  {label} (window {window:,} tokens)")
            print(f"    from nothing                    {cold * 1000:9.1f} ms")
            print(f"    the next call (one new message) {warm * 1000:9.1f} ms")
            print(f"    ratio {ratio:.4f} (target <= 0.02): {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    main(args.messages, args.runs)
