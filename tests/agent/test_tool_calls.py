"""A step of more tool calls than run at once (`CONCURRENT_CALLS`): the order, content and
records of its results, and how many run at a time."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import Agent, ContextConfig, LocalWorkspace, Msg, ScriptedModel, ToolCallBlock
from ctxoffload.agent import _tool_calls
from ctxoffload.agent._tool_calls import CONCURRENT_CALLS, run_each

MANY = CONCURRENT_CALLS + 200


async def test_items_past_the_bound_run_as_earlier_ones_end_and_keep_their_order() -> None:
    running = most = 0

    async def double(n: int) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        for _ in range(1 + n % 3):
            await asyncio.sleep(0)  # (items end out of order)
        running -= 1
        return 2 * n

    assert await run_each(double, range(MANY)) == [2 * n for n in range(MANY)]
    assert most == CONCURRENT_CALLS


async def test_after_an_item_raises_no_other_starts_and_the_error_is_raised() -> None:
    started: list[int] = []

    async def fail_at_five(n: int) -> int:
        started.append(n)
        await asyncio.sleep(0)
        if n == 5:
            raise ValueError("five")
        return n

    with pytest.raises(ValueError, match="five"):
        await run_each(fail_at_five, range(MANY))
    assert len(started) < MANY  # the ones queued behind it never ran
    assert 5 in started


def calls_of(count: int) -> Msg:
    kinds = ("hello", "shout", "wait", "explode")
    return Msg(
        role="assistant",
        content=[
            ToolCallBlock(id=f"c{i}", name=kinds[i % 4], input={"name": f"n{i}"})
            for i in range(count)
        ],
    )


async def hello(name: str) -> str:
    """Greet (async, ends at once)."""
    return f"hello {name}"


def shout(name: str) -> str:
    """Shout (sync: runs in a thread)."""
    return name.upper()


async def wait(name: str) -> str:
    """Greet after a pause (async, waits)."""
    await asyncio.sleep(0.001)
    return f"waited {name}"


def explode(name: str) -> str:
    """Raise."""
    raise RuntimeError(f"no {name}")


@pytest.mark.parametrize("bound", [CONCURRENT_CALLS, 7])
async def test_a_step_of_mixed_tools_keeps_each_result_and_record_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bound: int
) -> None:
    # The default bound (MANY calls are over it) and a small one (several rounds of tasks).
    monkeypatch.setattr(_tool_calls, "CONCURRENT_CALLS", bound)
    workspace = LocalWorkspace(tmp_path / "ws")
    agent = Agent(
        name="many",
        model=ScriptedModel([calls_of(MANY), "done"], context_window=10_000_000),
        tools=[hello, shout, wait, explode],
        offloader=workspace,
        session_id="many",
        context_config=ContextConfig(context_window=10_000_000),
    )
    try:
        await agent.reply("go")
    finally:
        await agent.aclose()
    (results,) = [m for m in agent.messages if m.role == "tool"]
    expected: list[tuple[str, str, bool]] = []
    for i in range(MANY):
        name = f"n{i}"
        output: Any = [f"hello {name}", name.upper(), f"waited {name}", None][i % 4]
        expected.append((f"c{i}", output, i % 4 == 3))
    got = [(b.id, None if b.is_error else b.output, b.is_error) for b in results.tool_results]
    assert got == expected
    failed = [b.output for b in results.tool_results if b.is_error]
    assert failed[0] == "Error: RuntimeError: no n3"
    events = await workspace.read_events("many")
    calls = [e for e in events if e["kind"] == "tool_call"]
    assert sorted(e["tool_id"] for e in calls) == sorted(f"c{i}" for i in range(MANY))
    assert all((e["outcome"] == "error") == (e["name"] == "explode") for e in calls)
    assert {e["error"]["type"] for e in calls if e["name"] == "explode"} == {"RuntimeError"}
    # Every call's event before the tool message, which holds the results in call order.
    kinds = [e["kind"] for e in events]
    last_call = max(i for i, kind in enumerate(kinds) if kind == "tool_call")
    (message,) = [
        i for i, e in enumerate(events) if e["kind"] == "message" and e["message"]["role"] == "tool"
    ]
    assert last_call < message
    assert [b["id"] for b in events[message]["message"]["content"]] == [
        f"c{i}" for i in range(MANY)
    ]
