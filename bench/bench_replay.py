"""Benchmark `ctxoffload replay` on the largest corpus transcript, with exact token counts.

Prints the replay's throughput in MB/s of message text next to the bare tokenizer's
(tiktoken o200k_base, `encode_ordinary`) on the same text, in the same run. The replay
counts every message, truncates, compresses with extractive summaries, writes the session,
and checks that nothing is lost; the tokenizer alone only encodes each message once.

Target: replay >= 0.6 x the bare tokenizer. Run: `python bench/bench_replay.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import tempfile
import time
from pathlib import Path

from ctxoffload import ContextConfig, LocalWorkspace
from ctxoffload.cli import main
from ctxoffload.cli._cmd_replay import replay_run
from ctxoffload.cli._transcripts import load_transcript
from ctxoffload.compression import rendered_text
from ctxoffload.tokens import TiktokenCounter, load_encoding

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
RUNS = 3
WINDOW = 16_000


def message_texts(messages: list) -> list[str]:  # type: ignore[type-arg]
    """The text of every message and block, as a counter tokenizes it."""
    texts = []
    for msg in messages:
        texts.append(msg.text)
        for call in msg.tool_calls:
            texts.append(json.dumps(call.input))
        for result in msg.tool_results:
            texts.append(rendered_text(result.output))
    return texts


def run() -> None:
    files = [p for p in CORPUS.glob("*") if p.name != "SOURCES.md"] if CORPUS.is_dir() else []
    if not files:
        raise SystemExit(f"the transcript corpus {CORPUS} is not there")
    largest = max(files, key=lambda p: p.stat().st_size)
    fmt, runs = load_transcript(largest)
    messages = [m for r in runs for m in r.messages]
    texts = message_texts(messages)
    megabytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / 2**20
    encoding, _ = load_encoding("o200k_base")

    # The tokenizer warm: one untimed pass over the text first. The replay gets a fresh
    # counter each run (its own cache of long texts empty), so each byte is encoded there
    # at least once too, as in a real session.
    for text in texts:
        encoding.encode_ordinary(text)
    tokenizer = []
    for _ in range(RUNS):
        start = time.perf_counter()
        for text in texts:
            encoding.encode_ordinary(text)
        tokenizer.append(time.perf_counter() - start)

    replay = []
    command = []
    config = ContextConfig(context_window=WINDOW)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(RUNS):
            # fsync on, as an agent's workspace runs (`ctxoffload replay` itself turns it off).
            ws = LocalWorkspace(Path(tmp) / "ws", fsync=True)
            counter = TiktokenCounter()

            async def once(
                session: str, ws: LocalWorkspace = ws, counter: TiktokenCounter = counter
            ) -> None:
                for one in runs:
                    await replay_run(
                        one.messages,
                        config,
                        ws,
                        session,
                        run_name=one.name,
                        config_name="default",
                        counter=counter,
                    )

            start = time.perf_counter()
            asyncio.run(once(f"r{i}"))
            replay.append(time.perf_counter() - start)
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                code = main(
                    [
                        "replay",
                        str(largest),
                        "--window",
                        str(WINDOW),
                        "--workdir",
                        str(Path(tmp) / "ws"),
                        "--session",
                        f"cmd{i}",
                    ]
                )
            command.append(time.perf_counter() - start)
            assert code == 0

    bare = megabytes / min(tokenizer)
    print(
        f"transcript: {largest.name} ({fmt}), {largest.stat().st_size / 2**20:.1f} MB file, "
        f"{megabytes:.2f} MB of message text, {len(messages)} messages; best of {RUNS}"
    )
    print(f"bare tokenizer (o200k_base encode_ordinary): {bare:6.2f} MB/s")
    for name, times in (
        ("replay (compressor + workspace, fsync on)", replay),
        ("`ctxoffload replay` in-process (parse too)", command),
    ):
        speed = megabytes / min(times)
        print(f"{name:<44} {speed:6.2f} MB/s  {speed / bare:.2f}x the tokenizer")


if __name__ == "__main__":
    run()
