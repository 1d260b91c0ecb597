"""An Agent on ObjectStoreWorkspace: truncation, compressions, retrieval, and an outage."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ContextConfig,
    Msg,
    ObjectStoreWorkspace,
    ScriptedModel,
    ToolCallBlock,
    get_token_counter,
)
from ctxoffload.readback import retrieve_offloaded_content
from helpers import SUMMARY
from s3_server import S3Server


def call(call_id: str, name: str, **args: Any) -> Msg:
    return Msg(role="assistant", content=[ToolCallBlock(id=call_id, name=name, input=args)])


def big_log(log: str) -> str:
    lines = [f"{i:05d} INFO request served in {i % 97} ms" for i in range(3000)]
    return "\n".join(lines) + f"\nFACT {log} answer={log.upper()}-7"


def fetch_log(log: str) -> str:
    """Fetch a log file.

    Args:
        log: which log.
    """
    return big_log(log)


def make_agent(model: ScriptedModel, ws: ObjectStoreWorkspace, **kwargs: Any) -> Agent:
    return Agent(
        name="tester",
        system_prompt="You read logs.",
        model=model,
        offloader=ws,
        tools=kwargs.pop("tools", [fetch_log]),
        context_config=ContextConfig(context_window=4000, tool_result_limit=300),
        counter=get_token_counter(exact=False),
        summary_model=ScriptedModel(default=SUMMARY),
        **kwargs,
    )


@pytest.mark.slow
async def test_agent_answer_is_recovered_after_truncation_and_two_compressions(
    s3: S3Server,
) -> None:
    url = f"s3://{s3.new_bucket()}/agents"
    ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    steps: list[Any] = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(30)]
    model = ScriptedModel([*steps, "done"])
    agent = make_agent(model, ws)
    await agent.reply("The ticket code is ZEBRA-4242. Read the logs n0 to n29.")

    assert sum(step.truncated for step in agent.steps) == 30
    assert agent.compressor.compressions >= 2
    # The truncation notice in the context named the s3:// object holding the whole result.
    files = await ws.list_files(agent.session_id)
    assert len(files) == 30 and all(f.startswith(f"{url}/sessions/") for f in files)
    first_result = next(f for f in files if f.endswith("tool_result-c0.txt"))
    shown = await retrieve_offloaded_content(ws, first_result, pattern=r"^FACT ")
    assert "FACT n0 answer=N0-7" in shown and "  3001" in shown

    # The first result's truncated head left the context in a compression: the context log
    # has it, with the notice naming the object that holds the whole result.
    events = await ws.read_events(agent.session_id)
    assert len([e for e in events if e["kind"] == "compression"]) >= 2
    context_ref = ws.context_path(agent.session_id)
    found = await retrieve_offloaded_content(ws, context_ref, pattern=r"tool_result-c0\.txt")
    assert "matching line" in found
    named = re.search(r"s3://[^\s'\"\\]+tool_result-c0\.txt", found)
    assert named is not None and named.group(0) == first_result
    answer = await retrieve_offloaded_content(ws, named.group(0), pattern=r"answer=")
    assert "FACT n0 answer=N0-7" in answer
    rows = await ws.read_context(agent.session_id)
    line = int(found.split("\n")[1].lstrip(">").split("\t")[0])
    assert "tool_result-c0.txt" in str(rows[line - 1])


@pytest.mark.slow
async def test_store_outage_mid_run_drops_nothing_from_the_context() -> None:
    """The store goes down after three tool results: the rest of the run keeps everything.

    The workspace's deadline is 0.25 s (it was 1 s): every store call after the outage
    retries until the deadline and fails, about 25 of them, so the deadline sets this test's
    time, while what is asserted only depends on those calls failing. Before the outage the
    slowest call takes about 25 ms, ten times less than the deadline.
    """
    server = S3Server()
    server.start()
    try:
        url = f"s3://{server.new_bucket()}/agents"
        ws = ObjectStoreWorkspace(url, **server.workspace_kwargs(), deadline=0.25)
        calls = {"n": 0}

        def fetch_log(log: str) -> str:
            """Fetch a log file.

            Args:
                log: which log.
            """
            calls["n"] += 1
            if calls["n"] == 4:
                server.stop()
            return big_log(log)

        steps: list[Any] = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(6)]
        model = ScriptedModel([*steps, "done"])
        agent = make_agent(model, ws, tools=[fetch_log])
        await agent.reply("Read the logs n0 to n5.")
    finally:
        server.stop()

    # Results 0-2 were offloaded before the outage; 3-5 could not be, so they stayed whole.
    context = "\n".join(str(m.model_dump()) for m in agent.messages)
    for i in range(3, 6):
        assert f"FACT n{i} answer=N{i}-7" in context
    assert sum(step.truncated for step in agent.steps) == 3
    # No compression could persist the older messages, so none was dropped.
    assert agent.compressor.compressions == 0
    assert any("Read the logs n0 to n5." in str(m.model_dump()) for m in agent.messages)


@pytest.mark.slow
async def test_a_pin_survives_a_resume_from_the_bucket(s3: S3Server) -> None:
    url = f"s3://{s3.new_bucket()}/agents"
    ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    agent = make_agent(ScriptedModel(["PLAN: read n0 to n9."]), ws, session_id="pinned")
    await agent.reply("Plan first.")
    plan = agent.messages[-1]
    await agent.pin(plan.id)
    await agent.aclose()

    steps: list[Any] = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(10)]
    resumed = make_agent(
        ScriptedModel([*steps, "done"]),
        ObjectStoreWorkspace(url, **s3.workspace_kwargs()),
        session_id="pinned",
    )
    await resumed.reply("Read them.")
    assert resumed.compressor.compressions >= 1
    assert [m.id for m in resumed.pinned] == [plan.id]
    assert resumed.pinned[0].text == plan.text
