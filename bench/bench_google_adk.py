"""What does a model call cost the Google ADK door when the session has one new turn?

ADK rebuilds every request from the session's events (shallow copies of their contents and
parts) and sends it whole; `ContextOffloadPlugin.before_model_callback` turns its contents
into what the model sees. Measured over a `LocalWorkspace` (fsync on) with a 32,000-token
window and a `ScriptedModel` that writes summaries at once (so what is timed is ctxoffload's
own work), calling the plugin's callback as ADK calls it with a request built as ADK builds
it:

- from nothing: a new plugin given a request of N contents (user turns, function calls,
  function responses, replies; one response in 25 is 20 KB), which reads them, truncates the
  big responses, appends what a summary stands for to context.jsonl and summarises;
- the next call: the same plugin given the next request, which has one content more.

Printed: both times (median of the runs) and their ratio. Target: <= 0.02 (a call costs what
is new, not the history: issue 60).

Usage: python bench/bench_google_adk.py [--messages N] [--runs N]   (needs `.[google-adk]`)
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from _history import SUMMARY, arguments, history, median_times, report
from google.adk.models.llm_request import LlmRequest
from google.genai import types

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload.integrations.google_adk import ContextOffloadPlugin
from ctxoffload.model import ScriptedModel


class Contents:
    """The history as ADK keeps a session's events: their contents."""

    def request(self, text: str) -> types.Content:
        return types.Content(role="user", parts=[types.Part(text=text)])

    def call(self, call_id: str, i: int) -> types.Content:
        call = types.FunctionCall(id=call_id, name="grep", args={"pattern": f"p{i}"})
        return types.Content(role="model", parts=[types.Part(function_call=call)])

    def result(self, call_id: str, output: str) -> types.Content:
        response = types.FunctionResponse(id=call_id, name="grep", response={"result": output})
        return types.Content(role="user", parts=[types.Part(function_response=response)])

    def reply(self, text: str) -> types.Content:
        return types.Content(role="model", parts=[types.Part(text=text)])


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
    # An ADK session is its app, its user and its id (`conversation_of`).
    session = SimpleNamespace(app_name="bench", user_id="ana", id="session-1")
    context: Any = SimpleNamespace(session=session, invocation_id="e-1", agent_name="ops")
    kept = history(n, Contents())
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


def main(n: int, runs: int) -> None:
    cold, warm = median_times(one_run, n, runs)
    report(
        f"Google ADK door: a session of {n:,} contents, median of {runs} runs",
        [("from nothing", cold), ("the next call (one new turn)", warm)],
        warm / cold,
    )


if __name__ == "__main__":
    args = arguments(__doc__)
    main(args.messages, args.runs)
