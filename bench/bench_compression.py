"""What does one compression of a 10,000-message context cost over just saving the messages?

Measures one `Compressor.maybe_compress` of 10,000 realistic agent messages (assistant
thoughts with a bash tool call, and the tool results, from a real mini-swe-agent trajectory
in ../shared/corpus when it is there) into a `LocalWorkspace` (fsync on), with a
`ScriptedModel` writing the summaries: it answers instantly, so model time is excluded and
what is measured is ctxoffload's own work: counting what decides, the split, serialising
and appending the older messages to context.jsonl, reading them back, the artifacts of what
leaves, building the summary requests, and rendering the summary and its artifact index.

Baseline, measured in the same run: `json.dumps` of the same messages and one write of the
lines to a file followed by `fsync`, the least any "save the history, then drop it" needs.

Two compression timings are printed (targets, issue 57: cold <= 3x, warm <= 2.5x):

- cold: a compressor that has never seen the messages (a resumed session, a history handed
  over whole). It counts the newest messages until they pass the trigger and estimates the
  rest (`tokens_before` is then an estimate with bounds), and scans every message that
  leaves for the artifact index;
- warm: the compressor counted the messages before, as in an agent's loop that checks the
  context before each model call; counting a message also scans it for the artifact index,
  so a compaction looks both up.

Each compression line also gives the share of its CPU time the artifact index took
(`ArtifactIndex.build`; target, issue 57: at most a fifth). CPU time, not wall time: on a
machine shared with other work, wall time stretches what computes more than what waits on
the disk.

A third line is the bare tokenizer (rs-bpe, or tiktoken without the fast extra) on every
message's texts: what a cold compression cost when it counted every message. A fourth is the
artifact scan alone (`scan_messages`) on every message: the part of a cold
compression that a warm one has already done, one message at a time, as it counted them.

`--latency MS` makes the summary model take MS milliseconds to answer each request, as a
real one does: the artifacts of what leaves are then found in a worker thread while the
model is waited for, and do not add to the time.

Usage: python bench/bench_compression.py [--quick] [--latency MS]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxoffload import (
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    Summary,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import Compressor
from ctxoffload.compression._index._artifact_index import ArtifactIndex
from ctxoffload.compression._index._artifacts import scan_messages
from ctxoffload.tokens import TiktokenCounter

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
TRAJECTORIES = [
    CORPUS / "minisweagent-django__django-15629.traj.json",
    CORPUS / "minisweagent-pylint-dev__pylint-6528.traj.json",
    CORPUS / "minisweagent-sphinx-doc__sphinx-9258.traj.json",
]
WINDOW = 200_000
SUMMARY = {name: f"{name}: what the compressed messages said" for name in Summary.model_fields}
_COMMAND = re.compile(r"```bash\n(.*?)\n```", re.DOTALL)


def _steps() -> tuple[list[tuple[str, str]], str]:
    """(assistant text, observation) pairs from the corpus, or generated ones without it."""
    steps: list[tuple[str, str]] = []
    for path in TRAJECTORIES:
        if not path.is_file():
            continue
        messages = json.loads(path.read_text(encoding="utf-8"))["messages"]
        for reply, observation in zip(messages[2::2], messages[3::2], strict=False):
            if reply["role"] == "assistant" and observation["role"] == "user":
                steps.append((reply["content"], observation["content"]))
    if steps:
        return steps, "corpus: " + ", ".join(p.name for p in TRAJECTORIES if p.is_file())
    rng = random.Random(0)
    words = ["the", "file", "error", "def", "return", "src/app.py:42", "assert", "None"]
    for i in range(200):
        thought = " ".join(rng.choice(words) for _ in range(rng.randint(20, 120)))
        output = "\n".join(
            " ".join(rng.choice(words) for _ in range(12)) for _ in range(rng.randint(1, 80))
        )
        steps.append((f"{thought}\n```bash\ngrep -n x{i} src/\n```", output))
    return steps, "generated text (corpus not found)"


def _messages(n: int, steps: list[tuple[str, str]]) -> list[Msg]:
    """n messages: a task, then assistant tool calls and their results, cycling the steps."""
    msgs = [Msg(role="user", content="Fix the issue described below.\n" + steps[0][1][:4000])]
    i = 0
    while len(msgs) < n:
        text, observation = steps[i % len(steps)]
        found = _COMMAND.search(text)
        command = found.group(1) if found else "ls"
        call_id = f"call_{i}"
        msgs.append(
            Msg(
                role="assistant",
                content=[
                    TextBlock(text=_COMMAND.sub("", text).strip() or "Running a command."),
                    ToolCallBlock(id=call_id, name="bash", input={"command": command}),
                ],
            )
        )
        msgs.append(
            # Each result its own text, as in a real history: the counter remembers the counts
            # of long texts, and a history that repeats the same strings would flatter it.
            Msg(
                role="tool",
                content=[
                    ToolResultBlock(id=call_id, name="bash", output=f"{observation}\n[{call_id}]")
                ],
            )
        )
        i += 1
    return msgs[:n]


def _texts(messages: list[Msg]) -> list[str]:
    texts: list[str] = []
    for msg in messages:
        if isinstance(msg.content, str):
            texts.append(msg.content)
            continue
        for block in msg.content:
            if isinstance(block, TextBlock):
                texts.append(block.text)
            elif isinstance(block, ToolCallBlock):
                texts.append(json.dumps(block.input, ensure_ascii=False))
            elif isinstance(block, ToolResultBlock) and isinstance(block.output, str):
                texts.append(block.output)
    return texts


def _tokenizer_alone(texts: list[str]) -> float:
    count = TiktokenCounter()._count  # rs-bpe with the fast extra, else tiktoken
    start = time.perf_counter()
    for text in texts:
        count(text)
    return time.perf_counter() - start


def _scan_alone(messages: list[Msg]) -> float:
    start = time.perf_counter()
    scan_messages(messages)
    return time.perf_counter() - start


def _baseline(path: Path, messages: list[Msg]) -> float:
    start = time.perf_counter()
    payload = "".join(json.dumps(m.model_dump(mode="json")) + "\n" for m in messages).encode()
    with open(path, "xb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - start


class _IndexTimer:
    """Adds up the CPU time `ArtifactIndex.build` takes while it is installed (`with`)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __enter__(self) -> _IndexTimer:
        build = self._build = ArtifactIndex.__dict__["build"]
        timer = self

        def timed(cls: type[ArtifactIndex], *args: Any, **kwargs: Any) -> ArtifactIndex:
            start = time.thread_time()  # (it runs on the event loop's thread)
            try:
                return build.__func__(cls, *args, **kwargs)
            finally:
                timer.seconds += time.thread_time() - start

        ArtifactIndex.build = classmethod(timed)  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        ArtifactIndex.build = self._build  # type: ignore[method-assign]


class _Answering(ScriptedModel):
    """A `ScriptedModel` that takes `latency` seconds to answer, as a model on a network does."""

    latency = 0.0

    async def generate(self, messages: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(self.latency)
        return await super().generate(messages, **kwargs)


async def _compress(
    workdir: Path, system: Msg, messages: list[Msg], warm: bool
) -> tuple[float, float, str]:
    """The seconds one compression takes, the share of its CPU time the index took, and
    what it did."""
    compressor = Compressor(
        ContextConfig(context_window=WINDOW),
        model=_Answering(default=SUMMARY),
        offloader=LocalWorkspace(workdir),
        session_id="bench",
        counter=TiktokenCounter(),  # fresh: nothing counted before this compression
    )
    context = [system, *messages]
    if warm:
        compressor.count(context)
    with _IndexTimer() as index:
        start, cpu = time.perf_counter(), time.process_time()
        result = await compressor.maybe_compress(context)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert result.compressed and result.line_span is not None
    calls = len(compressor.model.calls) if isinstance(compressor.model, ScriptedModel) else 0
    before = f"{result.tokens_before:,}"
    if result.tokens_before_bounds is not None:
        low, high = result.tokens_before_bounds
        before = f"~{before} (estimated, {low:,} to {high:,})"
    detail = (
        f"{result.compressed_messages:,} messages to lines {result.line_span[0]}-"
        f"{result.line_span[1]}, {before} -> {result.tokens_after:,} tokens, "
        f"{calls} summary calls"
    )
    return elapsed, index.seconds / cpu if cpu else 0.0, detail


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 messages, one repeat")
    parser.add_argument(
        "--latency", type=float, default=0.0, metavar="MS", help="summary model latency, ms"
    )
    args = parser.parse_args()
    _Answering.latency = args.latency / 1000
    count, repeats = (1_000, 1) if args.quick else (10_000, 5)

    steps, source = _steps()
    system = Msg(role="system", content="You are a helpful assistant that can run bash commands.")
    messages = _messages(count, steps)
    size = sum(len(m.model_dump_json()) for m in messages)
    get_token_counter(exact=True)  # load the encoding before any timing
    print(f"source: {source}")
    print(f"{count:,} messages, {size / 1e6:.1f} MB as JSON; window {WINDOW:,} tokens")

    with tempfile.TemporaryDirectory(dir=".") as tmp:
        root = Path(tmp)
        baseline, cold, warm, tokenizer, scan = [], [], [], [], []
        index_share: dict[str, list[float]] = {"cold": [], "warm": []}
        detail = ""
        texts = _texts(messages)
        for r in range(repeats):
            baseline.append(_baseline(root / f"baseline-{r}.jsonl", messages))
            tokenizer.append(_tokenizer_alone(texts))
            scan.append(_scan_alone(messages))
            elapsed, index, detail = await _compress(
                root / f"cold-{r}", system, messages, warm=False
            )
            cold.append(elapsed)
            index_share["cold"].append(index)
            elapsed, index, _ = await _compress(root / f"warm-{r}", system, messages, warm=True)
            warm.append(elapsed)
            index_share["warm"].append(index)
    base = min(baseline)
    print(f"compression: {detail}")
    if args.latency:
        print(f"  (the summary model answers each request in {args.latency:g} ms)")
    print(f"  json.dumps + write + fsync   {base * 1e3:9.1f} ms  (baseline)")
    for label, times, shares in (
        ("cold (never seen before)", cold, index_share["cold"]),
        ("warm (counted before)", warm, index_share["warm"]),
    ):
        best = min(times)
        share = sorted(shares)[len(shares) // 2]
        print(
            f"  compress, {label:<27} {best * 1e3:9.1f} ms  {count / best:11,.0f} messages/s  "
            f"ratio {best / base:.1f}  (artifact index: {share:.0%} of its CPU time, median)"
        )
    best = min(tokenizer)
    print(
        f"  the bare tokenizer on the same texts   {best * 1e3:9.1f} ms  "
        f"{count / best:11,.0f} messages/s  ratio {best / base:.1f} (counting every message)"
    )
    best = min(scan)
    print(
        f"  the artifact scan alone                {best * 1e3:9.1f} ms  "
        f"{count / best:11,.0f} messages/s  ratio {best / base:.1f} (every message, one thread)"
    )


if __name__ == "__main__":
    asyncio.run(main())
