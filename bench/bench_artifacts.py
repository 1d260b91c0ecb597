"""How much of what leaves the context stays named in the next one: the artifact index.

Replays every conversation of ../shared/corpus (the same readers the tests use) through a
`Compressor` at windows of 8k, 16k and 32k tokens, with two summarisers: the extractive one,
and a scripted summary model that keeps no path, command or id at all (the worst case of a
real one). Right after each compaction it takes the artifacts (paths, URLs, commands, ids)
of the messages that left (the extractor of `compression/_artifacts.py`) and looks for each
in the context the model is sent next:

- `before`: in the context without its `<artifact_index>` (what the summary and the kept
  messages name: the context as it was before issue 25);
- `after`: in the whole context (the index included);
- `listed`: named, or counted on the index's last line and listed in events.jsonl.

It prints the shares, how many compactions the index's budget cut entries from, and the
summary message's size in tokens (the index included, and without it).

    python bench/bench_artifacts.py                 # every corpus file, three windows
    python bench/bench_artifacts.py --windows 16000 # one window
    python bench/bench_artifacts.py --index-share 0.25  # a smaller index
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ScriptedModel, get_token_counter
from ctxoffload.compression import Compressor
from ctxoffload.compression._artifacts import find_artifacts
from ctxoffload.text import message_lines

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
sys.path.insert(0, str(ROOT / "tests" / "compression"))
from corpus import conversations  # noqa: E402  (the tests' corpus readers)

FIELDS = (
    "task_overview",
    "current_state",
    "important_discoveries",
    "next_steps",
    "context_to_preserve",
)


@dataclass
class Tally:
    artifacts: int = 0
    before: int = 0
    after: int = 0
    listed: int = 0
    compactions: int = 0
    cut: int = 0
    summary_tokens: list[int] = field(default_factory=list)
    index_tokens: list[int] = field(default_factory=list)


def pathless() -> ScriptedModel:
    """A summary model whose every field is plain prose, with no artifact in it."""
    reply = {name: "The agent is working on the task and has made progress." for name in FIELDS}
    return ScriptedModel([], default=json.dumps(reply))


async def replay(
    path: Path, window: int, summariser: str, tally: Tally, share: float | None
) -> None:
    counter = get_token_counter(exact=True)
    config = ContextConfig(context_window=window)
    if share is not None:
        index = int(share * config.summary_budget_tokens(window))
        config = ContextConfig(context_window=window, artifact_index_tokens=index)
    for conversation in conversations(path)[:1]:
        with tempfile.TemporaryDirectory() as tmp:
            ws = LocalWorkspace(tmp)
            comp = Compressor(
                config,
                model=pathless() if summariser == "model" else None,
                offloader=ws,
                session_id="bench",
                counter=counter,
            )
            context: list[Msg] = []
            for msg in conversation:
                if msg.role == "assistant":
                    given = {m.id: m for m in context}
                    result = await comp.maybe_compress(context)
                    context = result.messages
                    if result.compressed:
                        await measure(ws, given, context, tally, counter)
                context.append(await comp.process_message(msg) if msg.role == "tool" else msg)


async def measure(
    ws: LocalWorkspace, given: dict[str, Msg], context: list[Msg], tally: Tally, counter: object
) -> None:
    live = {m.id for m in context}
    left = [m for i, m in given.items() if i not in live and not m.metadata.get("ctxoffload")]
    found, _ = find_artifacts(left)
    summary = next(m for m in context if (m.metadata.get("ctxoffload") or {}).get("kind"))
    # The context as text, the way the artifacts were found (`message_lines`), with and
    # without the index that follows the summary.
    body, _, rest = summary.text.partition("<artifact_index>")
    index = "<artifact_index>" + rest if rest else ""
    text = "\n".join("\n".join(message_lines(m)) for m in context)
    without = "\n".join("\n".join(message_lines(m)) for m in context if m is not summary)
    without += "\n" + body
    report = (await ws.read_events("bench"))[-1].get("artifacts") or {}
    tally.compactions += 1
    tally.cut += bool(report.get("cut"))
    tally.summary_tokens.append(counter.count_text(summary.text))  # type: ignore[attr-defined]
    tally.index_tokens.append(counter.count_text(index) if index else 0)  # type: ignore[attr-defined]
    listed = {e["value"] for e in await listed_values(ws)}
    for artifact in found:
        value = artifact.value.removesuffix(" […]")
        tally.artifacts += 1
        tally.before += value in without
        tally.after += value in text
        tally.listed += value in text or artifact.value in listed


async def listed_values(ws: LocalWorkspace) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for event in await ws.read_events("bench"):
        if event.get("kind") == "artifacts":
            out.extend(event.get("artifacts") or [])
    return out


def share(n: int, total: int) -> str:
    return f"{100 * n / total:5.1f}%" if total else "    -"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, nargs="+", default=[8_000, 16_000, 32_000])
    parser.add_argument(
        "--index-share",
        type=float,
        help="the index's budget as a share of the summary budget (default: the config's)",
    )
    args = parser.parse_args()
    files = sorted(p for p in CORPUS.glob("*") if p.name != "SOURCES.md")
    if not files:
        sys.exit(f"no corpus at {CORPUS}")
    budget = "the default" if args.index_share is None else f"{args.index_share:g} x summary budget"
    print(f"corpus: {len(files)} files in {CORPUS}; index budget: {budget}")
    print(
        "window  summariser  compactions  artifacts  named before  named after  named or listed"
        "  budget cut  summary tokens (index)"
    )
    for window in args.windows:
        for summariser in ("extractive", "model"):
            tally = Tally()
            for path in files:
                await replay(path, window, summariser, tally, args.index_share)
            mean = sum(tally.summary_tokens) / max(1, len(tally.summary_tokens))
            mean_index = sum(tally.index_tokens) / max(1, len(tally.index_tokens))
            before = share(tally.before, tally.artifacts)
            after = share(tally.after, tally.artifacts)
            listed = share(tally.listed, tally.artifacts)
            print(
                f"{window:6,}  {summariser:10}  {tally.compactions:11}  {tally.artifacts:9,}"
                f"  {before:>12}  {after:>11}  {listed:>15}"
                f"  {tally.cut:4} of {tally.compactions:<3}  {mean:8,.0f} ({mean_index:,.0f})"
            )


if __name__ == "__main__":
    asyncio.run(main())
