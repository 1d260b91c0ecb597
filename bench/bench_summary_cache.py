"""How much of a summary request a provider's prompt cache can serve.

Replays the first conversation of each corpus file (../shared/corpus) as an agent loop: before
each assistant message the `Compressor` runs, then the context is "sent" to the agent's model
(`Compressor.note_request`, as `Agent` does). The summary model is a scripted one that
records what it is asked. For every summary request, the share of its tokens that repeat the
previous model request's leading messages unchanged (what a provider's prompt cache holds),
two ways in the same run:

- `usual`: the summary model is another model, so the request is a new prompt (the
  compression prompt, then a transcript of the messages that leave);
- `cache-shaped`: the summary model is the agent's own, so the request is the previous
  request plus one instruction.

    python bench/bench_summary_cache.py
    python bench/bench_summary_cache.py --window 16000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ScriptedModel, get_token_counter
from ctxoffload.compression import Compressor

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
sys.path.insert(0, str(ROOT / "tests" / "compression"))
from corpus import conversations  # noqa: E402  (the tests' corpus readers)

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
REPLY = json.dumps(
    {
        k: "The agent is working on the task."
        for k in (
            "task_overview",
            "current_state",
            "important_discoveries",
            "next_steps",
            "context_to_preserve",
        )
    }
)


async def replay(path: Path, window: int, own: bool) -> tuple[int, int, int]:
    """(summary requests, their tokens, the tokens the previous request's prefix covers)."""
    counter = get_token_counter(exact=True)
    agent_model = ScriptedModel([], model_name="agent", context_window=window * 4, default=REPLY)
    summariser = (
        agent_model
        if own
        else ScriptedModel([], model_name="summaries", context_window=window * 4, default=REPLY)
    )
    requests = tokens = covered = 0
    for conversation in conversations(path)[:1]:
        with tempfile.TemporaryDirectory() as tmp:
            comp = Compressor(
                ContextConfig(context_window=window),
                model=summariser,
                offloader=LocalWorkspace(tmp),
                session_id="bench",
                counter=counter,
            )
            context: list[Msg] = []
            previous: list[Msg] = []
            for msg in conversation:
                if msg.role == "assistant":
                    before = len(summariser.calls)
                    context = (await comp.maybe_compress(context)).messages
                    for request in summariser.calls[before:]:
                        requests += 1
                        tokens += counter.count_messages(request)
                        shared = 0
                        for sent, asked in zip(previous, request, strict=False):
                            if sent != asked:
                                break
                            shared += 1
                        covered += counter.count_messages(request[:shared])
                    comp.note_request(context, TOOLS, agent_model)
                    previous = list(context)
                context.append(await comp.process_message(msg) if msg.role == "tool" else msg)
    return requests, tokens, covered


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=8_000)
    args = parser.parse_args()
    files = sorted(p for p in CORPUS.glob("*") if p.name != "SOURCES.md")
    if not files:
        sys.exit(f"no corpus at {CORPUS}")
    print(f"corpus: {len(files)} files; window {args.window:,} tokens")
    print("request       summary requests  tokens sent  served by the previous prefix")
    for label, own in (("usual", False), ("cache-shaped", True)):
        requests = tokens = covered = 0
        for path in files:
            r, t, c = await replay(path, args.window, own)
            requests, tokens, covered = requests + r, tokens + t, covered + c
        share = covered / tokens if tokens else 0.0
        print(f"{label:12}  {requests:16}  {tokens:11,}  {share:29.1%}")


if __name__ == "__main__":
    asyncio.run(main())
