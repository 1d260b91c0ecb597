"""The step at the trigger, with and without background compaction.

An agent loop over a `Compressor` (4,000-token window): each step adds a question and an
answer and "calls the model", which takes `--model-seconds` (1.5 s). The summary model answers
in `--summary-seconds` (3 s, as a large summary request may). Measured in the same run, for
each setting: the time the compressor takes on the step that reaches the trigger (what the
agent waits before its model call), and the whole run.

    python bench/bench_background.py
    python bench/bench_background.py --summary-seconds 1 --model-seconds 0.2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Sequence

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ScriptedModel, get_token_counter
from ctxoffload.compression import Compressor

WORDS = " ".join(f"word{j}" for j in range(60))
FIELDS = ("task_overview", "current_state", "important_discoveries", "next_steps")


async def run(
    background: bool, summary_seconds: float, model_seconds: float
) -> tuple[float, float]:
    """(seconds the trigger step waited for the compressor, seconds of the whole run)."""

    async def slow_summary(messages: Sequence[Msg]) -> str:
        await asyncio.sleep(summary_seconds)
        return json.dumps({k: f"summary {k}" for k in FIELDS} | {"context_to_preserve": "-"})

    summariser = ScriptedModel([], default=slow_summary, model_name="summaries")
    with tempfile.TemporaryDirectory() as tmp:
        comp = Compressor(
            ContextConfig(
                context_window=4000, background_compaction=background, background_lead=0.25
            ),
            model=summariser,
            offloader=LocalWorkspace(tmp),
            session_id="bench",
            counter=get_token_counter(exact=True),
        )
        context = [Msg(role="system", content="You are an agent.")]
        begun = time.perf_counter()
        waited = 0.0
        for i in range(200):
            context += [Msg(role="user", content=f"question {i}: {WORDS}")]
            started = time.perf_counter()
            result = await comp.maybe_compress(context)
            took = time.perf_counter() - started
            context = result.messages
            if result.compressed:
                waited = took
                break
            await asyncio.sleep(model_seconds)  # the agent's model call
            context += [Msg(role="assistant", content=f"answer {i}: {WORDS}")]
        await comp.aclose()
        return waited, time.perf_counter() - begun


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summary-seconds", type=float, default=3.0)
    parser.add_argument("--model-seconds", type=float, default=1.5)
    args = parser.parse_args()
    print(
        f"summary model: {args.summary_seconds:g} s a summary; agent's model: "
        f"{args.model_seconds:g} s a step"
    )
    print("background  step at the trigger waited  whole run")
    results = {}
    for background in (False, True):
        waited, whole = await run(background, args.summary_seconds, args.model_seconds)
        results[background] = waited
        print(f"{'on' if background else 'off':10}  {waited:24.3f} s  {whole:7.2f} s")
    off, on = results[False], results[True]
    print(f"the trigger step waits {on / off:.3f}x as long with background compaction")


if __name__ == "__main__":
    asyncio.run(main())
