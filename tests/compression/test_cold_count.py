"""A long history seen for the first time (resumed, or handed over whole) is counted exactly.

A fresh counter counts every message once; the totals `maybe_compress` reports must be the
one-by-one totals, whether it compresses, is forced, stays below the trigger or cannot store
the older messages. (Counting on threads was tried and removed: tiktoken gained nothing on
threads here, see bench/bench_compression.py.)
"""

from __future__ import annotations

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
from helpers import SUMMARY


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
    counted: list[str] = []
    count_message = counter.count_message

    def spy(msg: Msg) -> int:
        counted.append(msg.id)
        return count_message(msg)

    monkeypatch.setattr(counter, "count_message", spy)
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


async def test_a_cold_compression_reports_the_one_by_one_totals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    msgs = history(600)
    result, counted, log = await run(tmp_path / "a", msgs, monkeypatch)
    assert result.compressed
    assert result.tokens_before == TiktokenCounter().count_messages(msgs)
    assert result.tokens_after == TiktokenCounter().count_messages(result.messages)
    # Each message of the context was tokenized once, however often it was looked at.
    assert sorted(counted[: len(msgs)]) == sorted(m.id for m in msgs)
    assert len(set(counted[: len(msgs)])) == len(msgs)
    assert log.count(b"\n") == result.compressed_messages


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


async def test_when_storing_fails_nothing_is_lost_and_the_count_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file where the workspace folder should be: the offload fails; the context must come
    # back whole, with the full count.
    workdir = tmp_path / "ws"
    workdir.write_text("a file where the workspace directory should be")
    msgs = history(600)
    result, _, _ = await run(workdir, msgs, monkeypatch)
    assert not result.compressed and result.reason.startswith("offload failed")
    assert result.messages == msgs
    assert result.tokens_before == TiktokenCounter().count_messages(msgs)
