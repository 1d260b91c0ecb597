"""An Agent's compaction on request: `agent.compact` and the opt-in compact_context tool."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    ToolCallBlock,
    get_token_counter,
)
from ctxoffload.compression import is_summary_message
from helpers import SUMMARY, call, probe


def make_agent(tmp_path: Path, script: list[Any], **kwargs: Any) -> tuple[Agent, ScriptedModel]:
    summarizer = ScriptedModel(default=SUMMARY)
    agent = Agent(
        model=ScriptedModel(script),
        offloader=LocalWorkspace(tmp_path),
        tools=[probe],
        session_id="compact",
        # A large window: the trigger is never reached, only a compaction asked for runs.
        context_config=ContextConfig(context_window=100_000),
        counter=get_token_counter(exact=False),
        summary_model=summarizer,
        **kwargs,
    )
    return agent, summarizer


def probes(n: int) -> list[Any]:
    return [call(f"c{i}", "probe", i=i) for i in range(n)]


async def test_the_compact_tool_is_opt_in(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, ["x"])
    assert "compact_context" not in agent.tools
    agent, _ = make_agent(tmp_path, ["x"], include_compact_tool=True)
    assert "compact_context" in agent.tools


async def test_agent_compact_summarises_now_with_the_instructions(tmp_path: Path) -> None:
    agent, summarizer = make_agent(tmp_path, [*probes(12), "done"])
    await agent.reply("Probe.")
    assert agent.compressor.compressions == 0
    result = await agent.compact("Keep the probe numbers.")
    assert result.compressed and agent.compressor.compressions == 1
    assert any(is_summary_message(m) for m in agent.messages)
    assert "Keep the probe numbers." in "\n".join(m.text for m in summarizer.calls[-1])


async def test_the_compact_tool_called_twice_in_one_step_compacts_once(tmp_path: Path) -> None:
    twice = Msg(
        role="assistant",
        content=[
            ToolCallBlock(id="k1", name="compact_context", input={"instructions": "keep ids"}),
            ToolCallBlock(id="k2", name="compact_context", input={}),
        ],
    )
    agent, _ = make_agent(tmp_path, [*probes(12), twice, "done"], include_compact_tool=True)
    await agent.reply("Probe, then compact.")
    answers = {b.id: str(b.output) for m in agent.messages for b in m.tool_results}
    assert answers["k1"].startswith("Compacted:")
    assert "already compacted" in answers["k2"]
    assert agent.compressor.compressions == 1
    events = [e["kind"] for e in await agent.offloader.read_events("compact")]  # type: ignore[union-attr]
    assert events.count("compact") == 1


async def test_the_compact_tool_says_when_there_is_nothing_to_compact(tmp_path: Path) -> None:
    script = [call("k1", "compact_context"), "done"]
    agent, _ = make_agent(tmp_path, script, include_compact_tool=True)
    await agent.reply("Compact.")
    answer = next(str(b.output) for m in agent.messages for b in m.tool_results)
    assert answer.startswith("Nothing was compacted: nothing to compact")


async def test_a_compaction_asked_for_on_a_small_context_says_nothing_of_the_config(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A compaction asked for runs as if the context filled the window, so its "window" is
    # the context's own size: a preview the user chose fits the model's 100,000-token window
    # and must not be reported as too big for that assumed one.
    agent = Agent(
        model=ScriptedModel([*probes(6), "done"]),
        offloader=LocalWorkspace(tmp_path),
        tools=[probe],
        session_id="compact-chosen",
        context_config=ContextConfig(
            context_window=100_000, tool_result_limit=4_000, preview_tokens=1_000
        ),
        counter=get_token_counter(exact=False),
        summary_model=ScriptedModel(default=SUMMARY),
    )
    await agent.reply("Probe.")
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        result = await agent.compact()
    assert result.compressed
    said = [r.getMessage() for r in caplog.records if "does not fit the reserve" in r.getMessage()]
    assert said == []
