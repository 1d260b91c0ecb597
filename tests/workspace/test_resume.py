"""An Agent resumed from a state.json older than its last compression writes nothing twice."""

from __future__ import annotations

import json
from pathlib import Path

from ctxoffload import Agent, ContextConfig, LocalWorkspace, ScriptedModel, get_token_counter
from helpers import SUMMARY


def _agent(ws: LocalWorkspace, replies: list[str], window: int) -> Agent:
    return Agent(
        name="tester",
        system_prompt="You test things.",
        model=ScriptedModel(replies),
        summary_model=ScriptedModel([json.dumps(SUMMARY)] * 4),
        offloader=ws,
        counter=get_token_counter(exact=False),
        context_config=ContextConfig(context_window=window, tool_result_limit=300),
        session_id="run",
    )


async def test_agent_resumed_from_a_stale_state_compresses_without_duplicating(
    workdir: Path,
) -> None:
    ws = LocalWorkspace(workdir)
    talker = _agent(ws, [f"answer {i} " + "words " * 100 for i in range(6)], window=100_000)
    for i in range(6):
        await talker.reply(f"question {i} " + "words " * 100)
    state_before = ws.state_path("run").read_bytes()
    await talker.aclose()

    # Compress, then put back the state.json from before: what a kill -9 between the
    # offload and the state write leaves on disk.
    first = _agent(ws, [], window=1500)
    assert (await first.compress_context()).compressed
    logged = [m["id"] for m in await ws.read_context("run")]
    assert logged
    ws.state_path("run").write_bytes(state_before)
    await first.aclose()  # as its death would: the lease is free

    resumed = _agent(ws, [], window=1500)
    assert (await resumed.compress_context()).compressed
    assert [m["id"] for m in await ws.read_context("run")] == logged
