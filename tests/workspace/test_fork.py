"""Forks: a new session from exactly what the model was sent at a step of another, by the
workspace's call and by `ctxoffload fork`, continued by an Agent."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ConfigError,
    ContextConfig,
    InMemoryWorkspace,
    LocalWorkspace,
    ScriptedModel,
)
from helpers import call

PROMPT = "You investigate failures."


def fetch_log(log: str) -> str:
    """Fetch a log.

    Args:
        log: which log.
    """
    return "\n".join(f"{log} line {i} " + "words " * 6 for i in range(600))


def agent(ws: Any, script: list[Any], session: str) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script, context_window=16_000)
    return (
        Agent(
            name="analyst",
            system_prompt=PROMPT,
            model=model,
            tools=[fetch_log],
            offloader=ws,
            session_id=session,
            context_config=ContextConfig(tool_result_limit=300),
        ),
        model,
    )


async def three_steps(ws: Any) -> None:
    first, _ = agent(
        ws, [call("c1", "fetch_log", log="a"), call("c2", "fetch_log", log="b"), "done"], "orig"
    )
    async with first:
        await first.reply("Look at logs a and b")


def plain(messages: list[Any]) -> list[dict[str, Any]]:
    """Messages as role, id and content, whatever their form."""
    out = []
    for m in messages:
        d = m if isinstance(m, dict) else m.model_dump(mode="json")
        out.append({"role": d["role"], "id": d["id"], "content": d["content"]})
    return out


def test_a_fork_at_step_n_starts_from_what_show_prints_for_it(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    asyncio.run(three_steps(ws))
    cli = [sys.executable, "-m", "ctxoffload", "--workdir", str(tmp_path / "ws")]
    shown = subprocess.run(
        [*cli, "show", "orig", "--step", "2", "--json"], capture_output=True, text=True, check=True
    )
    at_step_2 = json.loads(shown.stdout)["messages"]
    forked = subprocess.run(
        [*cli, "fork", "orig", "--step", "2", "--as", "retry"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "forked orig at step 2 as retry: 4 messages" in forked.stdout

    async def go_on() -> list[Any]:
        again, model = agent(LocalWorkspace(tmp_path / "ws"), ["another ending"], "retry")
        async with again:
            await again.reply("Try another way")
        return model.calls[0]

    sent = asyncio.run(go_on())
    # Its first request is the step's messages, then the new request. The system prompt is
    # the new agent's (the same text here; a resumed agent always brings its own).
    assert at_step_2[0]["role"] == "system" and sent[0].text == at_step_2[0]["content"]
    assert plain(sent[1:-1]) == plain(at_step_2[1:])
    assert len(at_step_2) == 4
    assert sent[-1].text == "Try another way"
    # Nothing was copied: the fork's messages point at the origin's files.
    assert not list((tmp_path / "ws/sessions/retry").glob("tool_result-*"))
    assert str(ws.session_dir("orig") / "tool_result-c1.txt") in json.dumps(at_step_2)
    record = [
        json.loads(x)
        for x in (tmp_path / "ws/sessions/retry/events.jsonl").read_text().split("\n")
        if x
    ]
    assert record[0]["kind"] == "fork" and record[0]["origin"] == {"session": "orig", "step": 2}
    listed = subprocess.run([*cli, "ls", "--json"], capture_output=True, text=True, check=True)
    assert {r["session"]: r["forked_from"] for r in json.loads(listed.stdout)}["retry"] == "orig"


async def test_a_fork_from_the_saved_state_and_in_memory() -> None:
    ws = InMemoryWorkspace()
    await three_steps(ws)
    event = await ws.fork_session("orig", "copy")
    assert event["origin"] == {"session": "orig", "step": 3}
    state = await ws.read_state("copy")
    saved = await ws.read_state("orig")
    assert state is not None and saved is not None
    assert state["messages"] == saved["messages"]
    assert state["forked_from"] == {"session": "orig", "step": 3}


async def test_a_fork_that_cannot_be_made_writes_nothing(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    await three_steps(ws)
    with pytest.raises(LookupError, match=r"no model call at step 9 \(steps 1-3 are recorded"):
        await ws.fork_session("orig", "new", step=9)
    with pytest.raises(ConfigError, match="not 'orig' itself"):
        await ws.fork_session("orig", "orig", step=1)
    with pytest.raises(ConfigError, match="is not a step number"):
        await ws.fork_session("orig", "new", step=0)
    with pytest.raises(ConfigError, match="no saved state"):
        await ws.fork_session("missing", "new")
    assert sorted(p.name for p in (tmp_path / "ws/sessions").iterdir()) == ["orig"]
    await ws.fork_session("orig", "new", step=1)
    with pytest.raises(ConfigError, match="'new' already exists"):
        await ws.fork_session("orig", "new", step=2)


def test_fork_on_the_command_line_refuses_bad_input(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    asyncio.run(three_steps(ws))
    cli = [sys.executable, "-m", "ctxoffload", "--workdir", str(tmp_path / "ws"), "fork"]
    for args, said in [
        (["orig", "--as", "../x"], "is not a plain name"),
        (["nope", "--as", "x"], "nope"),
        (["orig", "--step", "7", "--as", "x"], "steps 1-3 are recorded"),
    ]:
        run = subprocess.run([*cli, *args], capture_output=True, text=True)
        assert run.returncode == 2 and said in run.stderr, run.stderr
    assert sorted(p.name for p in (tmp_path / "ws/sessions").iterdir()) == ["orig"]
