"""`ctxoffload eval TRANSCRIPT --strategies` on the corpus, against the tests' deterministic
reader.

Each transcript of ../shared/corpus is evaluated in one command: `ctxoffload eval` replays it
(the default config, a 32,000-token window) into a temporary workspace, once with the
extractive summaries and once with summaries the model writes, and asks the same kind of
probes under the five strategies a user can choose (`written`, `extractive`, `clearing`,
`window`, `langchain`) of the reader of tests/eval/reader.py, served on 127.0.0.1: it answers
only from the messages it is sent, reads once when a notice names a file, and, asked for a
summary, keeps the first and the last thing it was shown. Prints, per transcript and in all,
the probes asked, answered with no tools, with one read, and the tokens each strategy spent;
then the share answered with one read by what keeps the outputs readable against what drops
them (the baseline, measured in the same run).

Run: `python bench/bench_eval.py [--max-calls N]` (every transcript of the corpus).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "eval"))

from reader import answer_as_reader  # noqa: E402

from ctxoffload.cli import main  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402

STRATEGIES = ("written", "extractive", "clearing", "window", "langchain")
KEEPING = ("written", "extractive", "clearing")
DROPPING = ("window", "langchain")


def evaluate(transcript: Path, server: OpenAIServer, max_calls: int) -> dict[str, Any] | None:
    """The totals per strategy of `ctxoffload eval TRANSCRIPT --strategies`, or None when
    it could not be replayed or made no probe."""
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        code = main(
            [
                "eval", str(transcript), "--model", f"{server.base_url}/reader",
                "--strategies", "--json", "--max-calls", str(max_calls),
            ]
        )  # fmt: skip
    if code != 0:
        return None
    report = json.loads(out.getvalue())
    totals = {s["strategy"]: s["total"][0] for s in report["strategies"]}
    return totals if any(t["asked"] for t in totals.values()) else None


def _share(count: int, asked: int) -> str:
    return f"{100 * count / asked:.0f}%" if asked else "-"


def main_report() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-calls", type=int, default=3000)
    args = parser.parse_args()
    if not CORPUS.is_dir():
        print(f"no corpus at {CORPUS}")
        return
    grand: dict[str, dict[str, int]] = {}
    head = ("transcript", "strategy", "asked", "no tools", "one read", "tokens")
    print(f"{head[0]:<46} {head[1]:<10} {head[2]:>5} {head[3]:>8} {head[4]:>8} {head[5]:>10}")
    with OpenAIServer() as server:
        server.responder = answer_as_reader
        for transcript in sorted(CORPUS.iterdir()):
            if transcript.suffix not in (".json", ".jsonl"):
                continue
            totals = evaluate(transcript, server, args.max_calls)
            if totals is None:
                print(f"{transcript.name[:46]:<46} (no compaction, or no probe)")
                continue
            for strategy in STRATEGIES:
                row = totals[strategy]
                print(
                    f"{transcript.name[:46]:<46} {strategy:<10} {row['asked']:>5} "
                    f"{row['no_tools']:>8} {row['one_read']:>8} {row['tokens']:>10,}",
                    flush=True,
                )
                into = grand.setdefault(strategy, {})
                for key, value in row.items():
                    if key != "group":
                        into[key] = into.get(key, 0) + value
    for strategy in STRATEGIES:
        row = grand.get(strategy)
        if row:
            print(
                f"{'all':<46} {strategy:<10} {row['asked']:>5} {row['no_tools']:>8} "
                f"{row['one_read']:>8} {row['tokens']:>10,}"
            )

    def share(names: tuple[str, ...]) -> float:
        asked = sum(grand[n]["asked"] for n in names if n in grand)
        return sum(grand[n]["one_read"] for n in names if n in grand) / asked if asked else 0.0

    print()
    for strategy in STRATEGIES:
        row = grand.get(strategy, {"asked": 0, "no_tools": 0, "one_read": 0})
        print(
            f"{strategy:<10} answered with no tools {_share(row['no_tools'], row['asked']):>4}, "
            f"with one read {_share(row['one_read'], row['asked']):>4}"
        )
    keeping, dropping = share(KEEPING), share(DROPPING)
    ratio = f"{keeping / dropping:.1f}x" if dropping else "inf"
    print(
        f"with one read: keeping the outputs readable {100 * keeping:.0f}%, dropping them "
        f"(the baseline) {100 * dropping:.0f}%: {ratio}"
    )


if __name__ == "__main__":
    main_report()
