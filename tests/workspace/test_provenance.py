"""Provenance: every event, and through its batch's `context` event every context.jsonl line,
names the agent (and session, and process) that wrote it; `show` and `grep` can print it."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import Agent, ContextConfig, LocalWorkspace, Msg, ScriptedModel
from ctxoffload._disk.writer import line_writers
from ctxoffload.cli import main
from ctxoffload.workspace import writing_as
from helpers import call


def fetch_log(log: str) -> str:
    """Fetch a log.

    Args:
        log: which log.
    """
    return "\n".join(f"{log} line {i} " + "words " * 10 for i in range(300))


async def two_agents(ws: LocalWorkspace) -> None:
    """Two agents, each in its own session, compressing often; and one write by the
    workspace alone in a third."""
    for name in ("alpha", "beta"):
        script: list[Any] = [call(f"{name}{i}", "fetch_log", log=f"{name}{i}") for i in range(14)]
        agent = Agent(
            name=name,
            model=ScriptedModel([*script, "done"], context_window=2_500),
            tools=[fetch_log],
            offloader=ws,
            session_id=f"s-{name}",
            context_config=ContextConfig(tool_result_limit=150),
        )
        async with agent:
            await agent.reply(f"{name}: read the logs")
    await ws.offload_context("loose", [Msg(role="user", content="written by a script")])


def events(ws: LocalWorkspace, session: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in ws.events_path(session).read_text().splitlines()]


def test_every_event_and_every_context_line_names_its_writer(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    asyncio.run(two_agents(ws))
    for name in ("alpha", "beta"):
        record = events(ws, f"s-{name}")
        kinds = {e["kind"] for e in record}
        assert {"session_start", "model_call", "tool_call", "truncation", "compression"} <= kinds
        assert {"context", "tool_result", "summary", "message"} <= kinds
        for event in record:
            assert event["writer"] == {"agent": name, "session": f"s-{name}", "pid": os.getpid()}
        lines = ws.context_path(f"s-{name}").read_text().splitlines()
        writers = line_writers(record)
        assert sorted(writers) == list(range(1, len(lines) + 1))
        assert {w["agent"] for w in writers.values()} == {name}
    loose = events(ws, "loose")
    assert loose[0]["writer"] == {"agent": None, "session": "loose", "pid": os.getpid()}


async def test_concurrent_agents_in_one_process_stamp_their_own_names(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")

    async def write(name: str) -> None:
        with writing_as(name, "shared"):
            for i in range(20):
                await ws.offload_context("shared", [Msg(role="user", content=f"{name} {i}")])
                await asyncio.sleep(0)

    await asyncio.gather(*(write(n) for n in ("a", "b", "c")))
    lines = [json.loads(x) for x in ws.context_path("shared").read_text().splitlines()]
    writers = line_writers(events(ws, "shared"))
    for number, line in enumerate(lines, start=1):
        assert line["content"].split()[0] == writers[number]["agent"]


def test_show_and_grep_print_the_writer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    asyncio.run(two_agents(ws))
    workdir = str(tmp_path / "ws")
    assert main(["show", "s-alpha", "--writers", "--workdir", workdir]) == 0
    out = capsys.readouterr().out.splitlines()
    stamp = f" · by alpha (session s-alpha, pid {os.getpid()})"
    stamped = [line for line in out if " · by " in line]
    # One stamp per event printed (on its first line): the 15 model calls among them.
    assert len(stamped) > 15 and all(line.endswith(stamp) for line in stamped)
    assert sum("· model call ·" in line for line in stamped) == 15
    assert main(["grep", "line 299 ", "--writers", "--workdir", workdir]) == 0
    hits = capsys.readouterr().out.splitlines()
    assert hits
    for hit in hits:
        agent = "alpha" if "/s-alpha/" in hit else "beta"
        assert f":[{agent}] " in hit
    assert main(["grep", "alpha0 line 0 ", "--writers", "--json", "--workdir", workdir]) == 0
    found = json.loads(capsys.readouterr().out)
    files = {os.path.basename(h["file"]) for h in found}
    assert files == {"context.jsonl", "tool_result-alpha0.txt"}  # a line of each kind
    assert all(h["writer"]["agent"] == "alpha" for h in found)
    assert main(["grep", "written by a script", "--writers", "--workdir", workdir]) == 0
    assert ":[workspace] " in capsys.readouterr().out
