"""`ClearThinking`: older thinking moved to context.jsonl first; kept thinking untouched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    ConfigError,
    ContextPipeline,
    LocalWorkspace,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ctxoffload._disk.events import event_sentence
from ctxoffload.compression import ClearThinking, PipelineRun
from helpers import OffloaderOnly, pipeline_run


def run_of(ws: Any, *managers: Any) -> PipelineRun:
    return pipeline_run(ws, *managers, window=100_000)


def thinking_turns(n: int) -> list[Msg]:
    msgs = [Msg(role="system", content="sys"), Msg(role="user", content="solve it")]
    for i in range(n):
        thought = ThinkingBlock(thinking=f"step {i}: " + "hmm " * 50, signature=f"sig-{i}==")
        call = ToolCallBlock(id=f"c{i}", name="probe", input={"i": i})
        msgs.append(Msg(role="assistant", content=[thought, TextBlock(text=f"try {i}"), call]))
        msgs.append(
            Msg(role="tool", content=[ToolResultBlock(id=f"c{i}", name="probe", output="ok")])
        )
    return msgs


def thoughts(msg: Msg) -> list[Any]:
    return [b for b in msg.blocks if isinstance(b, ThinkingBlock)]


async def test_older_thinking_is_stored_then_removed_and_newer_kept_untouched(
    tmp_path: Path,
) -> None:
    ws = LocalWorkspace(tmp_path)
    before = thinking_turns(5)
    after = (await run_of(ws, ClearThinking(keep=2)).pre_llm(before)).messages
    assistants = [(b, a) for b, a in zip(before, after, strict=True) if b.role == "assistant"]
    for old, new in assistants[:3]:
        assert thoughts(new) == [] and new.text == old.text and new.tool_calls == old.tool_calls
        mark = new.metadata["ctxoffload_thinking_cleared"]
        row = Path(mark["reference"]).read_text().splitlines()[mark["line"] - 1]
        assert json.loads(row)["content"][0] == old.content[0].model_dump()  # type: ignore[union-attr]
    for old, new in assistants[3:]:
        assert new is old  # byte for byte: the same message, signature and all
    (event,) = [e for e in await ws.read_events("s1") if e["kind"] == "clear_thinking"]
    assert event["messages"] == 3 and event["tokens_before"] > event["tokens_after"]
    sentence = event_sentence(event)
    assert sentence is not None and sentence.startswith("cleared the thinking of 3 turns")


async def test_by_default_every_thinking_block_stays(tmp_path: Path) -> None:
    before = thinking_turns(4)
    after = (await run_of(LocalWorkspace(tmp_path), ClearThinking()).pre_llm(before)).messages
    assert after == before


async def test_an_offloader_that_fails_clears_no_thinking(tmp_path: Path) -> None:
    class Failing(OffloaderOnly):
        async def offload_context(self, session_id: str, msgs: Any) -> Any:
            raise OSError("no space left on device")

    before = thinking_turns(4)
    result = await run_of(Failing(LocalWorkspace(tmp_path)), ClearThinking(keep=1)).pre_llm(before)
    assert result.messages == before and "offload failed" in result.reason


async def test_pinned_thinking_stays(tmp_path: Path) -> None:
    run = run_of(LocalWorkspace(tmp_path), ClearThinking(keep=1))
    context = thinking_turns(4)
    context = await run.pin(context[2].id, context)
    after = (await run.pre_llm(context)).messages
    assert thoughts(after[2]) == thoughts(context[2])
    assert thoughts(after[4]) == []


def test_the_anthropic_keys_load_from_json() -> None:
    pipeline = ContextPipeline.from_dict(
        {
            "hooks": {
                "pre_llm": [
                    {
                        "type": "clear_thinking_20251015",
                        "config": {"keep": {"type": "thinking_turns", "value": 2}},
                    },
                    {"type": "ClearThinking", "config": {"keep": "all"}},
                ]
            }
        }
    )
    assert [repr(m) for m in pipeline.pre_llm] == [
        "ClearThinking(keep=2)",
        "ClearThinking(keep='all')",
    ]
    with pytest.raises(ConfigError, match=r"keep: .*thinking_turns"):
        ContextPipeline.from_dict(
            {"hooks": {"pre_llm": [{"type": "ClearThinking", "config": {"keep": {"type": "x"}}}]}}
        )


async def test_a_cleared_turn_names_its_own_line_or_none_when_resumed(tmp_path: Path) -> None:
    # One turn is in the log already (a run killed in the middle of clearing, resumed), with
    # another writer's line after it: the turns cleared now land after both, and each mark
    # names the line that holds its own message (or no line), never another's.
    ws = LocalWorkspace(tmp_path)
    before = thinking_turns(5)
    await ws.offload_context("s1", [before[2], Msg(role="user", content="another writer's")])
    after = (await run_of(ws, ClearThinking(keep=2)).pre_llm(before)).messages
    rows = Path(ws.context_path("s1")).read_text().splitlines()
    marked = 0
    for old, new in zip(before, after, strict=True):
        mark = new.metadata.get("ctxoffload_thinking_cleared")
        if mark is None or mark["line"] is None:
            continue
        assert json.loads(rows[mark["line"] - 1])["id"] == old.id
        marked += 1
    assert marked == 3 or all(
        m.metadata.get("ctxoffload_thinking_cleared", {}).get("line") is None for m in after
    )


async def test_a_turn_cleared_again_after_a_kill_names_the_line_that_holds_it(
    tmp_path: Path,
) -> None:
    """A run killed after clearing the thinking of two turns left them on the log's last
    lines; resumed from its saved context, the run clears them with an older turn, which is
    appended after them. The three are on one run of lines, not in their order: each mark
    named the line its position would have had (the older turn's named the first of the
    others'), never checked against what the lines hold."""
    ws = LocalWorkspace(tmp_path)
    before = thinking_turns(5)
    await ws.offload_context("s1", [before[4], before[6]])
    after = (await run_of(ws, ClearThinking(keep=2)).pre_llm(before)).messages
    rows = [json.loads(row) for row in Path(ws.context_path("s1")).read_text().splitlines()]
    assert [row["id"] for row in rows] == [before[4].id, before[6].id, before[2].id]
    for old, new in zip(before[2:7:2], after[2:7:2], strict=True):
        mark = new.metadata["ctxoffload_thinking_cleared"]
        assert rows[mark["line"] - 1]["id"] == old.id
