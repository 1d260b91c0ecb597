"""A compaction asked for from outside (`ctxoffload compact`, `request_compaction`) of a
session a host projects (LangChain, pydantic-ai, the Agents SDK...): the Projector serves it
at the host's next model call and answers with a `compact` event naming the request."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import ContextConfig, LocalWorkspace, Msg
from ctxoffload.compression import Projector, is_summary_message
from ctxoffload.model import ScriptedModel
from ctxoffload.workspace import request_compaction
from helpers import summary_reply

# A window far above the history: no trigger fires by itself.
CONFIG = ContextConfig(context_window=100_000)


def history(turns: int) -> list[Msg]:
    out = [Msg(role="system", content="You fix builds.")]
    for i in range(turns):
        out.append(Msg(role="user", content=f"look at src/mod_{i}.py " * 20))
        out.append(Msg(role="assistant", content=f"src/mod_{i}.py looks fine " * 20))
    out.append(Msg(role="user", content="and now?"))
    return out


def events(workspace: LocalWorkspace, session: str) -> list[dict[str, Any]]:
    path = workspace.session_dir(session) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def kinds(workspace: LocalWorkspace, session: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in events(workspace, session) if e["kind"] == kind]


async def test_the_next_projection_serves_the_request_once_with_its_instructions(
    tmp_path: Path,
) -> None:
    workspace = LocalWorkspace(tmp_path)
    summariser = ScriptedModel([], default=summary_reply("kept"))
    projector = Projector(workspace, "host-1", config=CONFIG, model=summariser)
    messages = history(12)
    first = await projector.project(messages)
    assert not any(is_summary_message(m) for m in first)  # far below the trigger
    request = await request_compaction(workspace, "host-1", "keep the module names")
    sent = await projector.project(messages)
    assert any(is_summary_message(m) for m in sent)
    assert len(sent) < len(messages)
    assert sent[0].text == "You fix builds." and sent[-1].text == "and now?"
    # The instructions reached the summary model.
    assert "keep the module names" in "\n".join(m.text for m in summariser.calls[-1])
    [answer] = kinds(workspace, "host-1", "compact")
    assert answer["requests"] == [request] and answer["changed"] is True
    assert answer["instructions"] == "keep the module names"
    # What left is in context.jsonl, every message of it.
    kept = (workspace.session_dir("host-1") / "context.jsonl").read_text()
    for i in range(answer["messages"] // 2):
        assert f"src/mod_{i}.py" in kept
    # Served once: the next calls re-apply the decision and compact no more.
    again = await projector.project(messages)
    assert again == sent
    assert len(kinds(workspace, "host-1", "compact")) == 1
    assert len(kinds(workspace, "host-1", "projection")) == 1


async def test_a_restarted_host_serves_a_request_made_while_it_was_down(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path)
    messages = history(10)
    await Projector(workspace, "host-2", config=CONFIG).project(messages)
    request = await request_compaction(workspace, "host-2")
    restarted = Projector(workspace, "host-2", config=CONFIG)  # extractive summary
    sent = await restarted.project(messages)
    assert any(is_summary_message(m) for m in sent)
    [answer] = kinds(workspace, "host-2", "compact")
    assert answer["requests"] == [request]
    # A request answered is never served again, by this process or the next.
    await restarted.project(messages)
    await Projector(workspace, "host-2", config=CONFIG).project(messages)
    assert len(kinds(workspace, "host-2", "compact")) == 1


async def test_a_request_with_nothing_to_compact_is_answered_all_the_same(
    tmp_path: Path,
) -> None:
    workspace = LocalWorkspace(tmp_path)
    projector = Projector(workspace, "host-3", config=CONFIG)
    short = [Msg(role="user", content="hi")]
    await projector.project(short)
    request = await request_compaction(workspace, "host-3")
    assert await projector.project(short) == [short[0]]
    [answer] = kinds(workspace, "host-3", "compact")
    assert answer["requests"] == [request] and answer["changed"] is False
    assert answer["reason"].startswith("nothing to compact")


@pytest.mark.slow
async def test_the_command_leaves_a_projected_session_to_its_host(tmp_path: Path) -> None:
    # `ctxoffload compact` on a session a host projects: no state.json to compact in place,
    # so the request stays pending (exit 0: asked), and the host's next call serves it; the
    # command must not answer it with "nothing to compact" in the host's place.
    workspace = LocalWorkspace(tmp_path)
    projector = Projector(workspace, "host-4", config=CONFIG)
    messages = history(10)
    await projector.project(messages)
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "compact", "host-4", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "the host that projects it" in done.stdout and "next model call" in done.stdout
    assert kinds(workspace, "host-4", "compact") == []
    [asked] = kinds(workspace, "host-4", "compact_request")
    sent = await projector.project(messages)
    assert any(is_summary_message(m) for m in sent)
    [answer] = kinds(workspace, "host-4", "compact")
    assert answer["requests"] == [asked["request"]]
