"""Summarisation, clearing old tool outputs, or both: what a session sends, and what it loses.

Replays every transcript of ../shared/corpus as an agent loop would see it: the context
grows message by message, and before each assistant message (a model call) the pipeline's
pre_llm managers run on it. Three pipelines, each at a 32k and a 128k window:

- summarisation: the default `Summarization` past `trigger_ratio` 0.8, keeping 0.1 of the
  window (extractive summaries: no model, so model time and quality are out of it);
- clearing: `ClearToolUses(keep=3, clear_at_least=5% of the window)` past half the window;
- clearing when cold: the same clearing past half the window only once the provider's prompt
  cache has expired (`Activation(idle_seconds_exceed=300)`: more than five minutes since the
  last model call, by the transcript's own times), and past 0.9 of the window whatever the
  cache (a second `ClearToolUses`);
- both: the clearing first, then the summarisation.

Per pipeline and window it prints, summed over the corpus:

- input tokens sent over the sessions, and that figure against sending the whole history
  at every call (the baseline, measured in the same run);
- compactions (summaries and clearings) and the calls still over the window;
- prefix reuse: the share of each request's tokens that repeats the previous request's
  leading messages unchanged (what a provider's prompt cache can serve), over all requests;
- cacheable: the same, counted only where the previous request was at most five minutes
  before (the cache still holds it): the share of input tokens a 5-minute cache serves;
- recall: of the messages and tool outputs that left the context, the share recovered byte
  for byte from a reference the final context names (context.jsonl rows, tool_result files,
  following a cleared output's placeholder in a row).

Token counts are the heuristic counter's (characters / 4), so the run takes seconds; the
ratios are what matter. Run: `python bench/bench_context_edits.py [--quick]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ctxoffload import (
    Activation,
    Compressor,
    ContextConfig,
    ContextPipeline,
    LocalWorkspace,
    Msg,
    get_token_counter,
)
from ctxoffload.cli._transcripts import load_transcript
from ctxoffload.compression import CLEARED_MARK, ClearToolUses, Summarization

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
WINDOWS = (32_000, 128_000)
CACHE_SECONDS = 300
"""A provider's prompt cache lifetime (Anthropic's and OpenAI's default: five minutes)."""
STORED = re.compile(r"stored in (\S+?);")


def pipelines(window: int) -> dict[str, ContextPipeline]:
    config = ContextConfig(context_window=window)
    clearing = ClearToolUses(
        keep=3, clear_at_least=window // 20, activation=Activation(ratio_exceed=0.5)
    )
    when_cold = ClearToolUses(
        keep=3,
        clear_at_least=window // 20,
        activation=Activation(ratio_exceed=0.5, idle_seconds_exceed=CACHE_SECONDS),
    )
    forced = ClearToolUses(
        keep=3, clear_at_least=window // 20, activation=Activation(ratio_exceed=0.9)
    )
    return {
        "summarisation": ContextPipeline(
            pre_llm=[Summarization.from_config(config)], config=config
        ),
        "clearing": ContextPipeline(pre_llm=[clearing], config=config),
        "clearing cold": ContextPipeline(pre_llm=[when_cold, forced], config=config),
        "both": ContextPipeline(
            pre_llm=[clearing, Summarization.from_config(config)], config=config
        ),
    }


@dataclass
class Totals:
    calls: int = 0
    sent: int = 0
    whole: int = 0
    prefix: int = 0
    cached: int = 0
    compactions: int = 0
    over_window: int = 0
    left: int = 0
    recovered: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


def _result_outputs(msg: Msg) -> dict[str, str]:
    return {b.id: b.output for b in msg.tool_results if isinstance(b.output, str)}


def _rows(path: Path) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            rows[row["id"]] = row
    return rows


def _output_back(text: str) -> str | None:
    """The output a cleared placeholder names, read from its file; `text` when not cleared."""
    if not text.startswith(CLEARED_MARK):
        return text
    found = STORED.search(text)
    if found is None:
        return None
    return Path(found.group(1)).read_text(encoding="utf-8")


def _text_back(text: str, whole: str) -> bool:
    """Whether `whole` is `text`, or is in a file a truncation notice in `text` names (a text
    over the reserve is stored whole and cut)."""
    if text == whole:
        return True
    files = re.findall(r"(/\S+?tool_result-\S+?\.txt)", text)
    return any(Path(f).is_file() and Path(f).read_text(encoding="utf-8") == whole for f in files)


def recall(original: list[Msg], final: list[Msg], session_dir: Path) -> tuple[int, int]:
    """(what left the context, what of it came back byte for byte from a named reference)."""
    in_context = {m.id: m for m in final}
    named = "\n".join(m.text for m in final) + "\n".join(
        str(b.output) for m in final for b in m.tool_results
    )
    log = session_dir / "context.jsonl"
    rows = _rows(log) if str(log) in named else {}
    left = recovered = 0
    for msg in original:
        here = in_context.get(msg.id)
        outputs = _result_outputs(msg)
        if here is not None and here.text == msg.text and not outputs:
            continue
        if here is not None and outputs:
            # Still in the context: only the outputs cleared have left.
            for block_id, whole in outputs.items():
                now = _result_outputs(here).get(block_id, whole)
                if now != whole:
                    left += 1
                    recovered += _output_back(now) == whole
            continue
        left += 1
        if here is not None:  # still in the context, its text cut
            recovered += _text_back(here.text, msg.text)
            continue
        row = rows.get(msg.id)
        if row is None:
            continue
        content = row.get("content")
        if isinstance(content, str):
            recovered += _text_back(content, msg.text)
            continue
        texts_ok = all(
            b.get("text") == t.text
            for b, t in zip(
                [b for b in content if b.get("type") == "text"],
                [b for b in msg.blocks if b.type == "text"],
                strict=False,
            )
        )
        stored = {
            b["id"]: b["output"]
            for b in content
            if b.get("type") == "tool_result" and isinstance(b.get("output"), str)
        }
        outputs_ok = all(_output_back(stored.get(i, "")) == whole for i, whole in outputs.items())
        recovered += texts_ok and outputs_ok
    return left, recovered


async def replay(
    conversation: list[Msg], pipeline: ContextPipeline, ws: LocalWorkspace, session: str
) -> Totals:
    totals = Totals()
    counter = get_token_counter(exact=False)
    compressor = Compressor(pipeline.config, offloader=ws, session_id=session, counter=counter)
    run = pipeline.bind(compressor)
    window = compressor.window()
    context: list[Msg] = []
    previous: list[Msg] = []
    # The transcript's clock: a request is made when the last message before it was written.
    now = [0.0]
    run.clock = lambda: now[0]
    last_call: float | None = None
    started = time.perf_counter()
    for index, msg in enumerate(conversation):
        if msg.role == "assistant" and index > 0:
            now[0] = datetime.fromisoformat(context[-1].timestamp).timestamp()
            result = await run.pre_llm(context)
            context = result.messages
            sent = result.tokens_after
            totals.calls += 1
            totals.sent += sent
            totals.whole += compressor.count(conversation[:index])
            totals.over_window += sent > window
            same = 0
            for a, b in zip(previous, context, strict=False):
                if a is not b:
                    break
                same += compressor.tracker.count_message(a)
            totals.prefix += same
            if last_call is not None and now[0] - last_call <= CACHE_SECONDS:
                totals.cached += same
            last_call = now[0]
            previous = list(context)
        context.append(msg)
    totals.seconds = time.perf_counter() - started
    kinds = [e["kind"] for e in await ws.read_events(session)]
    totals.compactions = kinds.count("compression") + kinds.count("clear_tool_uses")
    totals.left, totals.recovered = recall(conversation, context, ws.workdir / "sessions" / session)
    return totals


def add(into: Totals, one: Totals) -> None:
    for name in (
        "calls",
        "sent",
        "whole",
        "prefix",
        "cached",
        "compactions",
        "over_window",
        "left",
    ):
        setattr(into, name, getattr(into, name) + getattr(one, name))
    into.recovered += one.recovered
    into.seconds += one.seconds


def conversations(quick: bool) -> list[tuple[str, list[Msg]]]:
    files = sorted(p for p in CORPUS.glob("*") if p.name != "SOURCES.md") if CORPUS.is_dir() else []
    if not files:
        raise SystemExit(f"the transcript corpus {CORPUS} is not there")
    found: list[tuple[str, list[Msg]]] = []
    for path in files[:3] if quick else files:
        _, runs = load_transcript(path)
        found += [(f"{path.name}:{r.name}", r.messages) for r in runs if r.messages]
    return found


async def main(quick: bool) -> None:
    convos = conversations(quick)
    print(f"{len(convos)} conversations from {CORPUS}")
    with tempfile.TemporaryDirectory() as tmp:
        ws = LocalWorkspace(Path(tmp) / "ws", fsync=False)
        for window in WINDOWS:
            print(f"\nwindow {window:,} tokens")
            print(
                f"{'pipeline':<14}{'calls':>7}{'input tokens sent':>19}{'vs whole':>10}"
                f"{'compactions':>13}{'over window':>13}{'prefix reuse':>14}{'cacheable':>11}"
                f"{'recall':>16}"
            )
            for name, pipeline in pipelines(window).items():
                totals = Totals()
                for n, (_, messages) in enumerate(convos):
                    one = await replay(
                        messages, pipeline, ws, f"w{window}-{name.replace(' ', '-')}-{n}"
                    )
                    add(totals, one)
                share = totals.sent / totals.whole if totals.whole else 1.0
                reuse = totals.prefix / totals.sent if totals.sent else 0.0
                cacheable = totals.cached / totals.sent if totals.sent else 0.0
                recalled = f"{totals.recovered}/{totals.left}"
                print(
                    f"{name:<14}{totals.calls:>7,}{totals.sent:>19,}{share:>10.2f}"
                    f"{totals.compactions:>13,}{totals.over_window:>13,}{reuse:>14.0%}"
                    f"{cacheable:>11.0%}{recalled:>16}"
                )
            print(f"{'(whole history)':<14}{totals.calls:>7,}{totals.whole:>19,}{1.0:>10.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="the first three files only")
    asyncio.run(main(parser.parse_args().quick))
