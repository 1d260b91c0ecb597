"""`ctxoffload show` says each pin, clearing and asked-for compaction as a sentence."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from ctxoffload import (
    Agent,
    Compressor,
    ContextConfig,
    ContextPipeline,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    get_token_counter,
)
from ctxoffload.cli import main
from ctxoffload.compression import ClearToolUses
from helpers import call


async def pinned_session(workdir: Path) -> str:
    agent = Agent(
        model=ScriptedModel(["PLAN: read the logs, then report."]),
        offloader=LocalWorkspace(workdir),
        session_id="pins",
        context_config=ContextConfig(context_window=4000),
        counter=get_token_counter(exact=False),
    )
    await agent.reply("Plan.")
    plan = agent.messages[-1]
    await agent.pin(plan.id)
    await agent.unpin(plan.id)
    return plan.id


async def test_show_says_each_pin_and_unpin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_id = await pinned_session(tmp_path)
    assert main(["--workdir", str(tmp_path), "show", "pins"]) == 0
    out = capsys.readouterr().out
    assert f"pinned message {plan_id} (assistant, by api): pins 0→" in out
    assert "of the 4,000-token window" in out
    assert f"unpinned message {plan_id} (assistant, by api): pins " in out


async def test_pins_are_logged_at_info(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ctxoffload"):
        plan_id = await pinned_session(tmp_path)
    assert any(f"pinned message {plan_id}" in r.getMessage() for r in caplog.records)
    assert any(f"unpinned message {plan_id}" in r.getMessage() for r in caplog.records)


async def test_show_says_each_clearing_of_tool_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def probe(i: int) -> str:
        """Probe.

        Args:
            i: which.
        """
        return f"probe {i}\n" + "x" * 800

    steps = [call(f"c{i}", "probe", i=i) for i in range(5)]
    agent = Agent(
        model=ScriptedModel([*steps, "done"]),
        offloader=LocalWorkspace(tmp_path),
        tools=[probe],
        session_id="clears",
        context_config=ContextPipeline(
            pre_llm=[ClearToolUses(keep=2)], config=ContextConfig(context_window=8000)
        ),
        counter=get_token_counter(exact=False),
    )
    await agent.reply("Probe.")
    assert main(["--workdir", str(tmp_path), "show", "clears"]) == 0
    out = capsys.readouterr().out
    assert "cleared 1 tool output (c0), " in out
    assert " tool_result-c0.txt" in out  # relative to the session's folder


async def test_show_says_a_compaction_the_agent_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def probe(i: int) -> str:
        """Probe.

        Args:
            i: which.
        """
        return f"probe {i}\n" + "word " * 100

    steps = [call(f"c{i}", "probe", i=i) for i in range(8)]
    agent = Agent(
        model=ScriptedModel([*steps, call("k", "compact_context", instructions="keep ids"), "ok"]),
        offloader=LocalWorkspace(tmp_path),
        tools=[probe],
        session_id="asked",
        context_config=ContextConfig(context_window=100_000),
        counter=get_token_counter(exact=False),
        include_compact_tool=True,
    )
    await agent.reply("Probe, then compact.")
    assert main(["--workdir", str(tmp_path), "show", "asked"]) == 0
    out = capsys.readouterr().out
    assert "compacted on the agent's request (compressed), " in out
    assert " context.jsonl lines 1-" in out
    assert "instructions: 'keep ids'" in out


async def test_show_marks_an_estimated_total_and_says_what_was_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A long history given whole: counted only until past the trigger, so the total before
    # the compression is an estimate, and show says so in words: what was not counted, never
    # a range whose second figure is a byte count (issue 83, item 5).
    history = [Msg(role="system", content="You answer questions.")]
    for i in range(200):
        history.append(Msg(role="user", content=f"Question {i}: " + "details " * 80))
        history.append(Msg(role="assistant", content=f"Answer {i}: " + "findings " * 80))
    compressor = Compressor(
        ContextConfig(context_window=8_000),
        offloader=LocalWorkspace(tmp_path),
        session_id="cold",
        counter=get_token_counter(exact=True),
    )
    result = await compressor.maybe_compress(history)
    assert result.compressed and not result.tokens_before_exact
    assert result.tokens_before_bounds is not None
    _, high = result.tokens_before_bounds
    assert main(["--workdir", str(tmp_path), "show", "cold"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if " compressed " in line)
    assert f"~{result.tokens_before:,}→{result.tokens_after:,} tokens" in line
    assert re.search(
        r"\(estimated: the [\d,]+ oldest messages sized by length, not counted\)", line
    )
    assert f"{high:,}" not in line and " to " not in line
