"""A long history seen for the first time (resumed, or handed over whole) is counted only as
far as decides.

A fresh counter counts the newest messages, each once, until their total passes the trigger:
the decision and every message that stays are exact, the messages that leave are not
tokenized whole, and `tokens_before` is then an estimate whose bounds hold the exact count.
Below the trigger, or forced there, everything is counted: the totals are the one-by-one
totals. (Counting on threads was tried and removed: tiktoken gained nothing on threads
here, see bench/bench_compression.py.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ctxoffload.compression import Compressor
from ctxoffload.tokens import TiktokenCounter
from helpers import SUMMARY, tokenized_ids


def history(n: int) -> list[Msg]:
    """A system prompt, a request, then n tool turns with results of varied length."""
    msgs = [
        Msg(role="system", content="You run shell commands."),
        Msg(role="user", content="Find why the build fails."),
    ]
    for i in range(n):
        msgs.append(
            Msg(
                role="assistant",
                content=[
                    TextBlock(text=f"Step {i}: looking at module_{i}."),
                    ToolCallBlock(id=f"c{i}", name="bash", input={"cmd": f"cat module_{i}.py"}),
                ],
            )
        )
        output = "\n".join(f"{i}.{j}: value = compute({j}, {i * j})" for j in range(5 + i % 40))
        msgs.append(
            Msg(role="tool", content=[ToolResultBlock(id=f"c{i}", name="bash", output=output)])
        )
    return msgs


async def run(
    workdir: Path, msgs: list[Msg], monkeypatch: pytest.MonkeyPatch, **kw: Any
) -> tuple[Any, list[str], bytes]:
    counter = TiktokenCounter()  # fresh: nothing counted before
    counted = tokenized_ids(counter, monkeypatch)
    compressor = Compressor(
        ContextConfig(context_window=kw.pop("window", 20_000)),
        model=ScriptedModel(default=SUMMARY),
        offloader=LocalWorkspace(workdir, fsync=False),
        session_id="s",
        counter=counter,
    )
    result = await compressor.maybe_compress(msgs, **kw)
    log = workdir / "sessions" / "s" / "context.jsonl"
    return result, counted, log.read_bytes() if log.exists() else b""


async def test_a_cold_compression_counts_the_newest_messages_until_past_the_trigger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    msgs = history(600)
    result, counted, log = await run(tmp_path / "a", msgs, monkeypatch)
    assert result.compressed
    exact = TiktokenCounter().count_messages(msgs)
    assert exact > 10 * 20_000  # far more than the trigger: most of it leaves
    # Each message tokenized at most once, and only the newest ones, a run from the end of
    # the history whose total passes the trigger only with its oldest message, and those that
    # stay in the context (the system prompt, the latest request).
    ids = {m.id for m in msgs}
    of_history = set(c for c in counted if c in ids)  # (not the new summary message)
    assert len(of_history) == len([c for c in counted if c in ids])
    run_from = len(msgs)
    while run_from > 0 and msgs[run_from - 1].id in of_history:
        run_from -= 1
    newest = msgs[run_from:]
    stay = {m.id for m in result.messages}
    assert all(m.id in stay for m in msgs[:run_from] if m.id in of_history)
    costs = [TiktokenCounter().count_message(m) for m in newest]
    trigger = 0.8 * 20_000
    assert sum(costs) > trigger - 200 and sum(costs[1:]) <= trigger
    assert len(newest) < len(msgs) / 10
    # The total is an estimate, said to be one, whose bounds hold the exact count.
    assert not result.tokens_before_exact and result.tokens_before_bounds is not None
    low, high = result.tokens_before_bounds
    assert low <= exact <= high and low <= result.tokens_before <= high
    assert abs(result.tokens_before - exact) < 0.25 * exact
    assert result.tokens_after == TiktokenCounter().count_messages(result.messages)
    assert log.count(b"\n") == result.compressed_messages
    record = tmp_path / "a" / "sessions" / "s" / "events.jsonl"
    events = [json.loads(line) for line in record.read_text().splitlines()]
    compression = next(e for e in events if e["kind"] == "compression")
    assert compression["tokens_before"] == result.tokens_before
    assert compression["tokens_before_exact"] is False
    assert compression["tokens_before_range"] == [low, high]


async def test_forced_and_below_the_trigger_give_the_one_by_one_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    msgs = history(300)
    total = TiktokenCounter().count_messages(msgs)
    below, _, log = await run(tmp_path / "a", msgs, monkeypatch, window=10 * total)
    assert not below.compressed and below.tokens_before == below.tokens_after == total
    assert log == b""  # below the trigger nothing is written
    # Below the trigger of a window 1.5x the history, but over its reserve: forced, it compresses.
    window = int(1.5 * total)
    forced, _, log = await run(tmp_path / "b", msgs, monkeypatch, window=window, force=True)
    assert forced.compressed and forced.tokens_before == total
    assert log.count(b"\n") == forced.compressed_messages


async def test_when_storing_fails_nothing_is_lost_and_the_count_holds_its_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file where the workspace folder should be: the offload fails; the context must come
    # back whole, with the estimate and the bounds of its count.
    workdir = tmp_path / "ws"
    workdir.write_text("a file where the workspace directory should be")
    msgs = history(600)
    result, _, _ = await run(workdir, msgs, monkeypatch)
    assert not result.compressed and result.reason.startswith("offload failed")
    assert result.messages == msgs
    exact = TiktokenCounter().count_messages(msgs)
    assert result.tokens_before_bounds is not None
    low, high = result.tokens_before_bounds
    assert not result.tokens_before_exact and low <= exact <= high
