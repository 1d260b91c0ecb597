"""What does a model call cost the Google ADK door when the session has one new turn?

ADK rebuilds every request from the session's events (shallow copies of their contents and
parts) and sends it whole; `ContextOffloadPlugin.before_model_callback` turns its contents
into what the model sees. Measured over a `LocalWorkspace` (fsync on) with a 32,000-token
window and a `ScriptedModel` that writes summaries at once (so what is timed is ctxoffload's
own work), calling the plugin's callback as ADK calls it with a request built as ADK builds
it:

- from nothing: a new plugin given a request of N contents (user turns, function calls,
  function responses, replies; every 50th response 20 KB), which reads them, truncates the
  big responses, appends what a summary stands for to context.jsonl and summarises;
- the next call: the same plugin given the next request, which has one content more.

Printed: both times (median of the runs) and their ratio. Target: <= 0.02 (a call costs what
is new, not the history: issue 60).

Usage: python bench/bench_google_adk.py [--messages N] [--runs N]   (needs `.[google-adk]`)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench_projection import SUMMARY  # a script's own folder is on its path
from google.adk.models.llm_request import LlmRequest
from google.genai import types

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload.integrations.google_adk import ContextOffloadPlugin
from ctxoffload.model import ScriptedModel


def events(n: int) -> list[types.Content]:
    """The contents of a session's events, as ADK keeps them."""
    out: list[types.Content] = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            part = types.Part(text=f"request {i}: look at part {i}")
            out.append(types.Content(role="user", parts=[part]))
        elif kind == 1:
            call = types.FunctionCall(id=f"c{i}", name="grep", args={"pattern": f"p{i}"})
            out.append(types.Content(role="model", parts=[types.Part(function_call=call)]))
        elif kind == 2:
            size = 20_000 if i % 50 == 2 else 200
            output = "\n".join(f"line {j} of {i}" for j in range(size // 16))
            response = types.FunctionResponse(
                id=f"c{i - 1}", name="grep", response={"result": output}
            )
            out.append(types.Content(role="user", parts=[types.Part(function_response=response)]))
        else:
            part = types.Part(text=f"part {i} holds nothing unusual")
            out.append(types.Content(role="model", parts=[part]))
    return out


def request(contents: list[types.Content]) -> LlmRequest:
    """A request as ADK builds one: each content and part a shallow copy of the event's."""
    copies = []
    for content in contents:
        copy = content.model_copy()
        copy.parts = [part.model_copy() for part in content.parts or []]
        copies.append(copy)
    config = types.GenerateContentConfig(system_instruction="You debug builds.")
    return LlmRequest(model="gemini-2.5-flash", contents=copies, config=config)


async def one_run(root: Path, n: int, run: int) -> tuple[float, float]:
    plugin = ContextOffloadPlugin(
        LocalWorkspace(root / f"run-{run}"),
        config=ContextConfig(context_window=32_000),
        summary_model=ScriptedModel([], default=SUMMARY),
    )
    context: Any = SimpleNamespace(
        session=SimpleNamespace(id="session-1"), invocation_id="e-1", agent_name="ops"
    )
    kept = events(n)
    first = request(kept)
    gc.collect()  # a collection owed by what came before is no cost of the call
    start = time.perf_counter()
    await plugin.before_model_callback(callback_context=context, llm_request=first)
    cold = time.perf_counter() - start
    kept.append(types.Content(role="user", parts=[types.Part(text="and now?")]))
    second = request(kept)
    gc.collect()  # a collection owed by what came before is no cost of the call
    start = time.perf_counter()
    await plugin.before_model_callback(callback_context=context, llm_request=second)
    warm = time.perf_counter() - start
    assert len(second.contents) < len(kept), "the history was not compacted"
    return cold, warm


async def main(n: int, runs: int) -> None:
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        times = [await one_run(Path(tmp), n, run) for run in range(runs)]
    cold = statistics.median(t[0] for t in times)
    warm = statistics.median(t[1] for t in times)
    ratio = warm / cold
    print(f"Google ADK door: a session of {n:,} contents, median of {runs} runs")
    print(f"  from nothing                 {cold * 1000:9.1f} ms")
    print(f"  the next call (one new turn) {warm * 1000:9.1f} ms")
    verdict = "met" if ratio <= 0.02 else "MISSED"
    print(f"  ratio {ratio:.4f} (target <= 0.02): {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.messages, args.runs))
