"""The Agent beside its provider's own compaction: what the provider's item replaces is kept
in context.jsonl, an event names it, and the artifact index follows the item."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ctxoffload import Agent, ContextConfig, LocalWorkspace, Msg, ScriptedModel, ToolCallBlock
from ctxoffload.formats import to_anthropic, to_msgs
from ctxoffload.formats.provider_compaction import compaction_item
from provider_shapes import ANTHROPIC_RESPONSE, ANTHROPIC_TOOL_RESPONSE, anthropic_message

CONFIG = ContextConfig(context_window=128_000)


def run_export(script: str) -> str:
    """Run an export script.

    Args:
        script: the script's path.
    """
    return f"{script}: column orders.region missing (ERR-4711)"


def bash(command: str) -> str:
    """Run a shell command.

    Args:
        command: the command.
    """
    return f"$ {command}\n region | text"


def _reply(response: dict[str, Any]) -> Msg:
    """The assistant message an Anthropic adapter makes of a response."""
    return to_msgs([anthropic_message(response)])[0]


def _agent(ws: LocalWorkspace, script: list[Any], session: str = "s") -> Agent:
    return Agent(
        model=ScriptedModel(script),
        system_prompt="You debug exports.",
        tools=[run_export, bash],
        offloader=ws,
        session_id=session,
        context_config=CONFIG,
    )


def _events(ws: LocalWorkspace, session: str, kind: str) -> list[dict[str, Any]]:
    path = ws.session_dir(session) / "events.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [row for row in rows if row["kind"] == kind]


def _lines(ws: LocalWorkspace, session: str) -> list[str]:
    path: Path = ws.session_dir(session) / "context.jsonl"
    return path.read_text().splitlines() if path.exists() else []


async def test_what_the_item_replaces_is_in_context_jsonl_and_the_index_follows_the_item(
    local_ws: LocalWorkspace,
) -> None:
    call = ToolCallBlock(
        id="c1", name="run_export", input={"script": "/opt/jobs/export_nightly.sh"}
    )
    model_script = [call, "It fails on orders.region.", _reply(ANTHROPIC_RESPONSE), "Done."]
    agent = _agent(local_ws, model_script)
    await agent.reply("Why does the nightly export fail?")
    await agent.reply("Write the migration.")
    replaced = agent.model.calls[2][1:]  # type: ignore[attr-defined]  # what the provider compacted

    # Every replaced message, byte for byte, in order, appended before it left.
    lines = _lines(local_ws, "s")
    assert lines == [m.model_dump_json() for m in replaced]
    (event,) = _events(local_ws, "s", "provider_compaction")
    assert event["provider"] == "anthropic" and event["messages"] == len(replaced) == 5
    assert event["lines"] == [1, 5] and event["reference"].endswith("/sessions/s/context.jsonl")
    assert event["recoverable"]["verified"] == 5

    # The context goes on from the item; the note, right after it, names the file, its lines
    # and what left that the provider's summary does not name.
    system, holder, note = agent.messages[:3]
    assert system.role == "system" and compaction_item(holder) is not None
    assert note.role == "user" and note.metadata["ctxoffload"]["kind"] == "provider_compaction"
    assert f"{event['reference']} (lines 1-5)" in note.text
    assert "/opt/jobs/export_nightly.sh" in note.text and "ERR-4711" in note.text
    assert event["note"]["content"] == note.text
    assert not any(m.id == replaced[0].id for m in agent.messages)

    # The next request sends the provider's block back unchanged, the note after it.
    agent.model.add("ok")  # type: ignore[attr-defined]
    await agent.reply("Thanks.")
    sent = agent.model.calls[-1]  # type: ignore[attr-defined]
    system_text, wire = to_anthropic(sent)
    assert system_text == "You debug exports."
    assert wire[0] == anthropic_message(ANTHROPIC_RESPONSE)
    assert wire[1]["content"] == note.text
    # Later replies append nothing and record no second compaction.
    assert _lines(local_ws, "s") == lines
    assert len(_events(local_ws, "s", "provider_compaction")) == 1


async def test_a_resumed_agent_keeps_the_context_after_the_item_and_appends_nothing(
    local_ws: LocalWorkspace, workdir: Path
) -> None:
    agent = _agent(local_ws, ["first", _reply(ANTHROPIC_RESPONSE)])
    await agent.reply("one")
    await agent.reply("two")
    await agent.aclose()
    before = _lines(local_ws, "s")
    context = [m.model_dump_json() for m in agent.messages[1:]]  # the system prompt is made anew

    again = _agent(LocalWorkspace(workdir), ["three"])
    await again.reply("three?")
    await again.aclose()
    assert [m.model_dump_json() for m in again.messages[1 : len(context) + 1]] == context
    assert _lines(local_ws, "s") == before
    assert len(_events(local_ws, "s", "provider_compaction")) == 1


async def test_the_note_follows_the_tool_results_of_the_turn_holding_the_item(
    local_ws: LocalWorkspace,
) -> None:
    agent = _agent(local_ws, ["first", _reply(ANTHROPIC_TOOL_RESPONSE), "done"])
    await agent.reply("one")
    await agent.reply("two")
    sent = agent.model.calls[-1]  # type: ignore[attr-defined]
    _, wire = to_anthropic(sent)
    # The tool_use's result comes right after it: the note never stands between them.
    assert wire[0] == anthropic_message(ANTHROPIC_TOOL_RESPONSE)
    assert wire[1]["content"][0]["type"] == "tool_result"
    assert wire[1]["content"][0]["tool_use_id"] == "toolu_01A09q90qw90lq917835lq9"
    assert wire[2]["role"] == "user" and "compacted this conversation" in wire[2]["content"]
    assert len(_lines(local_ws, "s")) == 3  # the request, the answer, the second request


async def test_when_the_messages_cannot_be_stored_nothing_leaves_the_context(
    local_ws: LocalWorkspace, tmp_path: Path
) -> None:
    agent = _agent(local_ws, ["first", _reply(ANTHROPIC_RESPONSE)])
    await agent.reply("one")
    # A link planted where context.jsonl goes: the workspace refuses to follow it.
    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    os.symlink(outside, local_ws.session_dir("s") / "context.jsonl")
    await agent.reply("two")
    assert [m.role for m in agent.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert compaction_item(agent.messages[-1]) is not None
    assert outside.read_text() == ""
    assert _events(local_ws, "s", "provider_compaction") == []


async def test_a_second_provider_compaction_keeps_what_came_after_the_first(
    local_ws: LocalWorkspace,
) -> None:
    second = {
        **ANTHROPIC_RESPONSE,
        "content": [
            {"type": "compaction", "content": "Second summary."},
            {"type": "text", "text": "ok"},
        ],
    }
    call = ToolCallBlock(id="c9", name="bash", input={"command": "psql -c 'select 1' warehouse"})
    agent = _agent(local_ws, ["first", _reply(ANTHROPIC_RESPONSE), call, "x", _reply(second)])
    await agent.reply("one")
    await agent.reply("two")
    await agent.reply("three")
    await agent.reply("four")
    first, latest = _events(local_ws, "s", "provider_compaction")
    assert first["lines"] == [1, 3]
    # The first item, the work after it (not the first note: ctxoffload's own) and the request.
    assert latest["lines"] == [4, 9] and latest["messages"] == 6
    stored = [json.loads(line) for line in _lines(local_ws, "s")[3:]]
    assert stored[0]["metadata"]["anthropic"]["unknown"][0][1]["type"] == "compaction"
    assert all(row["metadata"].get("ctxoffload") is None for row in stored)
    assert "psql -c 'select 1' warehouse" in agent.messages[2].text
