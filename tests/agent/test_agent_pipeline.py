"""The Agent with a ContextPipeline: proactive managers, the reactive run after an overflow,
and an InMemoryWorkspace that evicts what the agent stopped using."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Activation,
    Agent,
    ContextConfig,
    ContextOverflowError,
    ContextPipeline,
    InMemoryWorkspace,
    InvalidReference,
    LocalWorkspace,
    ScriptedModel,
    get_token_counter,
)
from ctxoffload.compression import Null, SlidingWindow, ToolOutputOffload
from ctxoffload.compression._notes import is_window_note
from helpers import call


def fetch(page: int) -> str:
    """Fetch one page of the report.

    Args:
        page: the page number.
    """
    return "\n".join(f"page {page} row {i}: value {i * 13}" for i in range(300)) + f"\nEND-{page}"


def agent_with(model: ScriptedModel, offloader: Any, pipeline: ContextPipeline) -> Agent:
    return Agent(
        name="tester",
        system_prompt="You read reports.",
        model=model,
        tools=[fetch],
        offloader=offloader,
        context_config=pipeline,
        session_id="s1",
        counter=get_token_counter(exact=False),
    )


async def test_an_agent_runs_a_pipeline_loaded_from_json(tmp_path: Path) -> None:
    template = {
        "name": "tool-heavy",
        "hooks": {
            "post_tool": [
                {"type": "ToolOutputOffload", "config": {"max_tokens": 400, "preview_tokens": 80}}
            ],
            "pre_llm": [
                {
                    "type": "SlidingWindow",
                    "config": {"max_messages": 4, "activation": {"message_count_exceed": 6}},
                }
            ],
        },
    }
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(template), encoding="utf-8")
    pipeline = ContextPipeline.from_json_file(path, config=ContextConfig(context_window=20_000))
    ws = LocalWorkspace(tmp_path / "ws")
    model = ScriptedModel([*(call(f"c{i}", "fetch", page=i) for i in range(5)), "done"])
    agent = agent_with(model, ws, pipeline)
    assert (await agent.reply("read pages 0-4")).text == "done"

    last = model.calls[-1]
    note = next(m for m in last if is_window_note(m))
    assert str(ws.context_path("s1")) in note.text
    assert "retrieve_offloaded_content" in note.text  # the tool the agent really has
    results = [r for m in last for r in m.tool_results]
    assert results and all(str(r.output).startswith("[Offloaded: 1 block") for r in results)
    assert "retrieve_offloaded_content" in str(results[-1].output)
    # everything the window moved out is in context.jsonl, in order
    rows = await ws.read_context("s1")
    live = [m for m in agent.messages if m.role != "system" and not is_window_note(m)]
    assert not {r["id"] for r in rows} & {m.id for m in live}
    assert len(rows) + len(live) == 12  # the request, 5 calls, 5 results, the answer
    assert [r["role"] for r in rows][:2] == ["assistant", "tool"]
    for i in range(5):
        assert (
            (ws.workdir / "sessions/s1" / f"tool_result-c{i}.txt").read_text().endswith(f"END-{i}")
        )


async def test_an_overflow_runs_the_managers_regardless_of_their_rules_and_retries(
    local_ws: LocalWorkspace,
) -> None:
    pipeline = ContextPipeline(
        pre_llm=[SlidingWindow(max_messages=2, per_turn=False)],
        config=ContextConfig(context_window=100_000),
    )
    steps: list[Any] = [call(f"c{i}", "fetch", page=i) for i in range(4)]
    model = ScriptedModel([*steps, ContextOverflowError("prompt is too long"), "recovered"])
    agent = agent_with(model, local_ws, pipeline)
    assert (await agent.reply("go")).text == "recovered"
    before, after = model.calls[-2], model.calls[-1]
    assert not any(is_window_note(m) for m in before)  # per_turn=False: not proactively
    assert any(is_window_note(m) for m in after)
    assert len(after) < len(before)


async def test_a_second_overflow_says_what_was_tried(local_ws: LocalWorkspace) -> None:
    pipeline = ContextPipeline(
        pre_llm=[SlidingWindow(max_messages=2, activation=Activation(tokens_exceed=10**9))],
        config=ContextConfig(context_window=100_000),
    )
    steps: list[Any] = [call(f"c{i}", "fetch", page=i) for i in range(3)]
    model = ScriptedModel(
        [*steps, ContextOverflowError("prompt is too long"), ContextOverflowError("still long")]
    )
    with pytest.raises(ContextOverflowError) as raised:
        await agent_with(model, local_ws, pipeline).reply("go")
    text = str(raised.value)
    assert "again (still long)" in text and "SlidingWindow: moved" in text


async def test_an_overflow_nothing_can_shrink_is_raised_at_once(local_ws: LocalWorkspace) -> None:
    pipeline = ContextPipeline(pre_llm=[Null()], config=ContextConfig(context_window=100_000))
    model = ScriptedModel([ContextOverflowError("prompt is too long"), "never"])
    with pytest.raises(ContextOverflowError, match="could not shrink it"):
        await agent_with(model, local_ws, pipeline).reply("go")
    assert len(model.calls) == 1


async def test_an_in_memory_workspace_evicts_results_the_agent_stopped_using() -> None:
    ws = InMemoryWorkspace(evict_after_turns=2)
    pipeline = ContextPipeline(
        post_tool=[ToolOutputOffload(max_tokens=300, preview_tokens=50)],
        config=ContextConfig(context_window=50_000),
    )
    steps: list[Any] = [call(f"c{i}", "fetch", page=i) for i in range(5)]
    model = ScriptedModel([*steps, "done"])
    agent = agent_with(model, ws, pipeline)
    await agent.reply("go")
    # c0 was written before model call 2 and never read: after calls 3 and 4 it is gone.
    files = await ws.list_files("s1")
    assert not any("tool_result-c0" in f for f in files)
    assert any("tool_result-c4" in f for f in files)
    with pytest.raises(InvalidReference, match=r"was evicted at model call \d+"):
        await ws.read_reference("memory://workspace/sessions/s1/tool_result-c0.txt")
    assert len(await ws.read_context("s1")) == 0  # the record itself is never evicted
    events = await ws.read_events("s1")
    assert any(e["kind"] == "offload" for e in events)


def Read(path: str) -> str:
    """Read a project file (the user's own tool, not ctxoffload's).

    Args:
        path: the file.
    """
    return Path(path).read_text()


def Edit(path: str, text: str) -> str:
    """Overwrite a project file.

    Args:
        path: the file.
        text: the new content.
    """
    Path(path).write_text(text)
    return "ok"


async def test_a_tool_of_yours_called_read_is_cut_and_stored_like_any_other(
    tmp_path: Path,
) -> None:
    # Only the tools the agent marks as readers read offloaded content back; a user's own
    # `Read` of project files is cut by ToolOutputTruncate, and ClearToolUses stores its
    # output before clearing it (the file may change: "call it again" would not give it).
    from ctxoffload.compression import ClearToolUses, ToolOutputTruncate

    project = tmp_path / "notes.txt"
    project.write_text("ORIGINAL v1\n" + "\n".join(f"row {i} " + "x " * 20 for i in range(400)))
    ws = LocalWorkspace(tmp_path / "ws")
    steps = [
        call("c1", "Read", path=str(project)),
        call("c2", "Edit", path=str(project), text="v2"),
        call("c3", "Edit", path=str(project), text="v3"),
        "done",
    ]
    pipeline = ContextPipeline(
        post_tool=[ToolOutputTruncate(max_tokens=1000)],
        pre_llm=[ClearToolUses(keep=1)],
        config=ContextConfig(context_window=128_000),
    )
    agent = Agent(
        model=ScriptedModel(steps),
        tools=[Read, Edit],
        offloader=ws,
        context_config=pipeline,
        session_id="s1",
        counter=get_token_counter(exact=False),
    )
    await agent.reply("tidy the notes")
    [read] = [r for m in agent.messages for r in m.tool_results if r.id == "c1"]
    stored = ws.session_dir("s1") / "tool_result-c1.txt"
    assert str(stored) in str(read.output) and "call it again" not in str(read.output)
    assert stored.read_text().startswith("ORIGINAL v1\nrow 0 ")
    events = [json.loads(x) for x in ws.events_path("s1").read_text().splitlines()]
    assert any(e["kind"] == "truncation" and e.get("tool_id") == "c1" for e in events)
