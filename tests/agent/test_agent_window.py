"""A request still over the window once the context managers ran is said (an event and a
WARNING line naming the sizes) or refused; a window too small for any compaction is refused
when the agent is built."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ConfigError,
    ContextConfig,
    ContextOverflowError,
    LocalWorkspace,
    ScriptedModel,
    get_token_counter,
)
from ctxoffload.cli import main
from helpers import SUMMARY, call


def fetch(n: int) -> str:
    """Fetch a page of the request log.

    Args:
        n: the page.
    """
    return "\n".join(f"{i:05d} INFO request {n} served in {i % 97} ms" for i in range(300))


def tight_agent(tmp_path: Path, model: ScriptedModel, **config: Any) -> Agent:
    """The agent of the report: a 300-token window, 50-token previews, and the read-back
    tools' schemas alone take more than the window."""
    return Agent(
        name="tight",
        system_prompt="You test things.",
        model=model,
        offloader=LocalWorkspace(tmp_path / "ws"),
        session_id="tight",
        tools=[fetch],
        context_config=ContextConfig(context_window=300, tool_result_limit=50, **config),
        summary_model=ScriptedModel(default=SUMMARY),
        counter=get_token_counter(exact=True),
    )


async def test_a_request_over_the_window_is_said_with_its_sizes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel([call("c1", "fetch", n=1), "done"])
    agent = tight_agent(tmp_path, model)
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        assert (await agent.reply("go")).text == "done"
    events = await LocalWorkspace(tmp_path / "ws").read_events("tight")
    over = [e for e in events if e["kind"] == "over_window"]
    assert len(over) == len(model.calls) == 2  # every request sent over the window
    first = over[0]
    assert first["window"] == 300 and first["tokens"] == agent.steps[0].context_tokens > 300
    assert first["action"] == "sent"
    parts = ("system_tokens", "tools_tokens", "summary_tokens", "pinned_tokens")
    assert sum(first[p] for p in parts) + first["messages_tokens"] == first["tokens"]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        f"takes {first['tokens']} tokens, over the 300-token window" in line
        and f"tool schemas {first['tools_tokens']}" in line
        and line.endswith("sent anyway")
        for line in warned
    ), warned


async def test_over_window_refuse_sends_nothing_and_keeps_the_context(tmp_path: Path) -> None:
    model = ScriptedModel(["never sent"])
    agent = tight_agent(tmp_path, model, over_window="refuse")
    with pytest.raises(ContextOverflowError, match="over the 300-token window") as refused:
        await agent.reply("go")
    assert model.calls == [] and agent.steps == []
    assert refused.value.messages == agent.messages
    assert [m.role for m in agent.messages] == ["system", "user"]
    events = await LocalWorkspace(tmp_path / "ws").read_events("tight")
    assert [e["action"] for e in events if e["kind"] == "over_window"] == ["refused"]


async def test_show_says_the_request_over_the_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await tight_agent(tmp_path, ScriptedModel(["done"])).reply("go")
    capsys.readouterr()
    assert main(["show", "tight", "--workdir", str(tmp_path / "ws")]) == 0
    shown = capsys.readouterr().out
    assert "over the 300-token window, after the context managers ran" in shown, shown


async def test_a_request_that_fits_says_nothing(tmp_path: Path) -> None:
    agent = Agent(
        model=ScriptedModel([call("c1", "fetch", n=1), "done"]),
        offloader=LocalWorkspace(tmp_path / "ws"),
        session_id="roomy",
        tools=[fetch],
        context_config=ContextConfig(context_window=8_000, tool_result_limit=500),
    )
    await agent.reply("go")
    events = await LocalWorkspace(tmp_path / "ws").read_events("roomy")
    assert not [e for e in events if e["kind"] == "over_window"]


def test_a_model_window_too_small_for_a_compaction_is_refused_when_the_agent_is_built(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match="the context window 100 cannot hold"):
        Agent(
            model=ScriptedModel(["hi"], context_window=100),
            offloader=LocalWorkspace(tmp_path / "ws"),
        )
