"""An agent killed between compression steps and resumed: its summary names exactly the lines
of context.jsonl holding the messages it replaced."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from ctxoffload import Agent, ContextConfig, LocalWorkspace, ScriptedModel, get_token_counter
from ctxoffload.compression import is_summary_message
from helpers import SUMMARY

SpawnPython = Callable[..., "subprocess.Popen[str]"]

# An agent whose first compression is stopped for good between its steps: the older messages
# are in context.jsonl (persist), the summary model never answers (summarise), so neither
# the summary nor state.json is written. It prints "summarising" when it gets there.
KILLED_WHILE_SUMMARISING = """
import asyncio, sys
from ctxoffload import (
    Agent, ContextConfig, LocalWorkspace, ScriptedModel, ToolCallBlock, get_token_counter)

async def never_answer(messages):
    print("summarising", flush=True)
    await asyncio.Event().wait()

def fetch(page: int) -> str:
    \"\"\"Fetch a page.\"\"\"
    return "\\n".join(f"page {page} line {j} " + "x" * 40 for j in range(60))

script = []
for i in range(30):
    script += [
        ToolCallBlock(id=f"c{i}a", name="fetch", input={"page": i}),
        ToolCallBlock(id=f"c{i}b", name="fetch", input={"page": i + 100}),
        f"answer {i} " + "words " * 50,
    ]

async def main():
    agent = Agent(
        name="tester", system_prompt="You test things.", model=ScriptedModel(script),
        tools=[fetch], summary_model=ScriptedModel(default=never_answer),
        offloader=LocalWorkspace(sys.argv[1]), counter=get_token_counter(exact=False),
        context_config=ContextConfig(context_window=6000, tool_result_limit=300),
        session_id="run")
    for i in range(30):
        await agent.reply(f"question {i} " + "long words " * (400 if i % 3 == 0 else 20))

asyncio.run(main())
"""


def _covered(spans: list[list[int]]) -> set[int]:
    return {line for first, last in spans for line in range(first, last + 1)}


async def test_a_resumed_summary_names_the_lines_it_replaced(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    child = spawn_python(KILLED_WHILE_SUMMARISING, str(workdir))
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line == "summarising\n", child.communicate()[1]
    os.kill(child.pid, signal.SIGKILL)
    child.communicate()
    ws = LocalWorkspace(workdir)
    log = ws.context_path("run")
    logged = [json.loads(row) for row in log.read_bytes().splitlines()]
    assert logged, "the killed compression wrote nothing to context.jsonl"
    saved = await ws.read_state("run")
    assert saved is not None
    before = {m["id"] for m in saved["messages"] if m["role"] != "system"}

    # Resumed with a smaller window for this check: the split differs from the killed one,
    # so some messages it wrote stay in the context and others leave.
    resumed = Agent(
        name="tester",
        system_prompt="You test things.",
        model=ScriptedModel([]),
        summary_model=ScriptedModel(default=SUMMARY),
        offloader=ws,
        counter=get_token_counter(exact=False),
        context_config=ContextConfig(context_window=6000, tool_result_limit=300),
        session_id="run",
    )
    result = await resumed.compress_context(
        ContextConfig(context_window=3000, tool_result_limit=300)
    )
    assert result.compressed
    left = before - {m.id for m in result.messages}
    logged = [json.loads(row) for row in log.read_bytes().splitlines()]
    replaced = {number for number, row in enumerate(logged, 1) if row.get("id") in left}
    [summary] = [m for m in result.messages if is_summary_message(m)]
    spans = summary.metadata["ctxoffload"]["spans"]
    assert _covered(spans) == replaced, (spans, sorted(replaced))
