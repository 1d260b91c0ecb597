"""`ctxoffload eval --strategies` on the corpus, against the tests' deterministic reader.

Each transcript of ../shared/corpus is replayed (`ctxoffload replay`, the default config:
extractive summaries, a 32,000-token window) into a temporary workspace, then evaluated
under the three strategies (`summary` as recorded, `clearing`, `window`) by the reader of
tests/eval/reader.py served on 127.0.0.1: it answers only from the messages it is sent and
reads once when a notice names a file. Prints, per transcript and in all, the probes
answered with no tools and with one read, and the tokens spent, per strategy.

Run: `python bench/bench_eval.py`.
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
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

STRATEGIES = ("summary", "clearing", "window")


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        code = main(list(argv))
    return code, out.getvalue()


def evaluate(transcript: Path, server: OpenAIServer) -> dict[str, Any] | None:
    """The `--strategies` JSON report of one transcript, or None when it made no probe."""
    with tempfile.TemporaryDirectory() as folder:
        workdir = str(Path(folder) / "ws")
        code, _ = _run("--workdir", workdir, "replay", str(transcript), "--session", "t")
        if code != 0:
            return None
        sessions = sorted(p.name for p in (Path(workdir) / "sessions").iterdir())
        totals: dict[str, dict[str, int]] = {}
        for session in sessions:
            code, out = _run(
                "--workdir", workdir, "eval", session, "--model", f"{server.base_url}/reader",
                "--strategies", "--json", "--max-calls", "1000",
            )  # fmt: skip
            if code != 0:
                return None
            for report in json.loads(out)["strategies"]:
                for row in report["total"]:
                    into = totals.setdefault(report["strategy"], {})
                    for key, value in row.items():
                        if key != "group":
                            into[key] = into.get(key, 0) + value
        return totals or None


def main_report() -> None:
    if not CORPUS.is_dir():
        print(f"no corpus at {CORPUS}")
        return
    grand: dict[str, dict[str, int]] = {}
    head = ("transcript", "strategy", "asked", "no tools", "one read", "tokens")
    print(f"{head[0]:<58} {head[1]:<9} {head[2]:>5} {head[3]:>8} {head[4]:>8} {head[5]:>10}")
    with OpenAIServer() as server:
        server.responder = answer_as_reader
        for transcript in sorted(CORPUS.iterdir()):
            if transcript.suffix not in (".json", ".jsonl"):
                continue
            totals = evaluate(transcript, server)
            if totals is None:
                print(f"{transcript.name:<58} (no compaction, or no probe)")
                continue
            for strategy in STRATEGIES:
                row = totals[strategy]
                tokens = row["tokens_no_tools"] + row["tokens_one_read"]
                print(
                    f"{transcript.name[:58]:<58} {strategy:<9} {row['asked']:>5} "
                    f"{row['no_tools']:>8} {row['one_read']:>8} {tokens:>10,}",
                    flush=True,
                )
                into = grand.setdefault(strategy, {})
                for key, value in row.items():
                    into[key] = into.get(key, 0) + value
    for strategy in STRATEGIES:
        row = grand.get(strategy)
        if row:
            tokens = row["tokens_no_tools"] + row["tokens_one_read"]
            print(
                f"{'all':<58} {strategy:<9} {row['asked']:>5} {row['no_tools']:>8} "
                f"{row['one_read']:>8} {tokens:>10,}"
            )


if __name__ == "__main__":
    main_report()
