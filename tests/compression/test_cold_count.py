"""A long history seen for the first time is counted on threads while it is stored.

`Compressor.maybe_compress` counts the newest messages until they alone are over the
trigger, then counts the older ones on threads while the split is made and they are
offloaded. Everything it returns and writes must be what counting one by one gives.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    Summary,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ctxoffload.compression import Compressor
from ctxoffload.tokens import TiktokenCounter

SUMMARY = {name: f"{name}: what happened" for name in Summary.model_fields}


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
    workdir: Path, msgs: list[Msg], cores: int, monkeypatch: pytest.MonkeyPatch, **kw: Any
) -> tuple[Any, set[str], bytes]:
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    counter = TiktokenCounter()  # fresh: nothing counted before
    threads: set[str] = set()
    count_message = counter.count_message

    def spy(msg: Msg) -> int:
        threads.add(threading.current_thread().name)
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
    return result, threads, log.read_bytes() if log.exists() else b""


def same(a: Any, b: Any) -> None:
    assert (a.compressed, a.reason, a.tokens_before, a.tokens_after) == (
        b.compressed,
        b.reason,
        b.tokens_before,
        b.tokens_after,
    )
    assert a.line_span == b.line_span and a.compressed_messages == b.compressed_messages
    # The summaries name each run's own folder; everything else is equal.
    texts = [[m.model_dump_json(exclude={"id", "timestamp"}) for m in r.messages] for r in (a, b)]
    assert [t.replace(str(a.reference), "REF") for t in texts[0]] == [
        t.replace(str(b.reference), "REF") for t in texts[1]
    ]


async def test_a_cold_compression_on_threads_equals_the_one_by_one_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    msgs = history(600)
    threaded, names, log = await run(tmp_path / "a", msgs, 2, monkeypatch)
    serial, serial_names, serial_log = await run(tmp_path / "b", msgs, 1, monkeypatch)
    assert threaded.compressed
    same(threaded, serial)
    assert [json.loads(x)["id"] for x in log.splitlines()] == [
        json.loads(x)["id"] for x in serial_log.splitlines()
    ]
    assert any(n.startswith("ctxoffload-count") for n in names)  # the threads did count
    assert not any(n.startswith("ctxoffload-count") for n in serial_names)
    total = TiktokenCounter().count_messages(msgs)
    assert threaded.tokens_before == total


async def test_forced_and_below_the_trigger_give_the_one_by_one_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    msgs = history(300)
    total = TiktokenCounter().count_messages(msgs)
    # Below the trigger: the newest-first count reaches the oldest message, nothing is
    # handed to threads, nothing is written.
    below, names, log = await run(tmp_path / "a", msgs, 2, monkeypatch, window=10 * total)
    assert not below.compressed and below.tokens_before == below.tokens_after == total
    assert log == b"" and not any(n.startswith("ctxoffload-count") for n in names)
    forced, names, _ = await run(
        tmp_path / "b", msgs, 2, monkeypatch, window=10 * total, force=True
    )
    serial, _, _ = await run(tmp_path / "c", msgs, 1, monkeypatch, window=10 * total, force=True)
    same(forced, serial)
    assert forced.tokens_before == total
    assert any(n.startswith("ctxoffload-count") for n in names)


async def test_when_storing_fails_the_threads_are_waited_for_and_nothing_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file where the workspace folder should be: the offload fails; the context must come
    # back whole, with the full count, while the threads were counting.
    workdir = tmp_path / "ws"
    workdir.write_text("a file where the workspace directory should be")
    msgs = history(600)
    result, names, _ = await run(workdir, msgs, 2, monkeypatch)
    assert not result.compressed and result.reason.startswith("offload failed")
    assert result.messages == msgs
    assert result.tokens_before == TiktokenCounter().count_messages(msgs)
    assert any(n.startswith("ctxoffload-count") for n in names)
