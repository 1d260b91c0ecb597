"""What does an `Agent` step cost around its tool calls when the model asks for very many?

One `Agent.reply` over a `LocalWorkspace` (fsync on, a lease held, the whole session record
written) whose scripted model asks, in its first reply, for N calls of one tool that returns
"ok", then answers. Against it, in the same run: the same tool called N times in a plain
loop (`await tool(...)`), which is what the calls would cost with no agent around them. The
agent's runs and the loop's alternate.

Printed: the step's time (best of `--runs`), the loop's, and the difference per call (what
the agent pays for each call: its result through the context managers, its `tool_call`
event, its line in the tool message). Target (issue 84): N = 100,000 within 60 s.

Usage: python bench/bench_tool_calls.py [--calls 10000] [--runs 3] [--large]
(--large: N = 100,000, one run)
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

from ctxoffload import Agent, ContextConfig, LocalWorkspace, ScriptedModel, ToolCallBlock


async def ok(name: str) -> str:
    """Say ok (the tool)."""
    return "ok"


async def plain_loop(calls: int) -> float:
    started = time.perf_counter()
    for index in range(calls):
        await ok(f"n{index}")
    return time.perf_counter() - started


async def agent_step(calls: int, where: Path) -> float:
    asks = [ToolCallBlock(id=f"c{i}", name="ok", input={"name": f"n{i}"}) for i in range(calls)]
    model = ScriptedModel([asks, "done"], context_window=10_000_000)
    agent = Agent(
        name="bench",
        system_prompt="You call tools.",
        model=model,
        tools=[ok],
        offloader=LocalWorkspace(where),
        session_id="many-calls",
        context_config=ContextConfig(context_window=10_000_000),
    )
    started = time.perf_counter()
    try:
        await agent.reply("call ok for every name")
    finally:
        await agent.aclose()
    return time.perf_counter() - started


async def main(calls: int, runs: int) -> None:
    steps: list[float] = []
    loops: list[float] = []
    for run in range(runs):
        where = Path(tempfile.mkdtemp(prefix="bench-tool-calls-"))
        try:
            steps.append(await agent_step(calls, where))
        finally:
            shutil.rmtree(where, ignore_errors=True)
        loops.append(await plain_loop(calls))
        print(f"run {run + 1}: step {steps[-1]:.2f} s, plain loop {loops[-1] * 1000:.1f} ms")
    step, loop = min(steps), min(loops)
    print(f"{calls:,} tool calls in one step: {step:.2f} s (best of {runs})")
    print(f"the same tool in a plain loop: {loop * 1000:.1f} ms")
    print(
        f"per call: {step / calls * 1e6:.0f} us against {loop / calls * 1e6:.2f} us "
        f"({(step - loop) / calls * 1e6:.0f} us of bookkeeping a call; "
        f"{step / loop:.0f}x the loop)"
    )
    if calls >= 100_000:
        print(f"target: within 60 s at 100,000 calls ({'met' if step <= 60 else 'missed'})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--large", action="store_true", help="100,000 calls, one run")
    options = parser.parse_args()
    if options.large:
        options.calls, options.runs = 100_000, 1
    asyncio.run(main(options.calls, options.runs))
