"""Pins: no manager moves, summarises or cuts a pinned message; pins are checked against their
share of the window when they are made, and each pin and unpin is an event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Compressor,
    ContextConfig,
    ContextPipeline,
    LocalWorkspace,
    Msg,
    PinError,
    ScriptedModel,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import (
    ImageLimit,
    PipelineRun,
    SlidingWindow,
    Summarization,
    is_pinned,
    is_summary_message,
)
from ctxoffload.compression._notes import is_window_note
from helpers import SUMMARY, image_block, pipeline_run, probe_turn


def run_of(ws: Any, *managers: Any, window: int = 50_000, **config: Any) -> PipelineRun:
    model = ScriptedModel(default=SUMMARY)
    return pipeline_run(ws, *managers, window=window, model=model, **config)


def conversation(turns: int) -> list[Msg]:
    msgs = [Msg(role="system", content="sys"), Msg(role="user", content="probe everything")]
    plan = Msg(role="assistant", content="PLAN: 1. probe 2. report")
    msgs.append(plan)
    for i in range(turns):
        msgs += probe_turn(i)
    return msgs


def ids(msgs: list[Msg]) -> list[str]:
    return [m.id for m in msgs]


async def test_summarization_keeps_a_pinned_message_after_the_summary(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    run = run_of(ws, Summarization(summary_ratio=0.8, preserve_recent_messages=2))
    context = conversation(12)
    plan = context[2]
    context = await run.pin(plan.id, context)
    result = await run.pre_llm(context)
    assert result.compressed
    after = result.messages
    assert after[0].role == "system" and is_summary_message(after[1])
    assert after[2].id == plan.id and after[2].text == plan.text and is_pinned(after[2])
    rows = (tmp_path / "sessions/s1/context.jsonl").read_text().splitlines()
    assert plan.id not in {json.loads(r)["id"] for r in rows}


async def test_sliding_window_keeps_a_pinned_tool_result_with_its_call(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    run = run_of(ws, SlidingWindow(max_messages=4))
    context = conversation(10)
    call, result = context[3], context[4]
    context = await run.pin(result.id, context)
    after = (await run.pre_llm(context)).messages
    assert is_window_note(after[1])
    assert ids(after[2:4]) == [call.id, result.id]
    assert len(after) == 2 + 2 + 1 + 4  # system, note, pinned turn, latest request, 4 kept


async def test_the_compressor_split_keeps_pins_under_a_context_config(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    pipeline = ContextPipeline.from_config(
        ContextConfig(context_window=1000, trigger_ratio=0.5, reserve_ratio=0.1)
    )
    compressor = Compressor(
        pipeline.config, offloader=ws, session_id="s1", counter=get_token_counter(exact=False)
    )
    run = pipeline.bind(compressor)
    context = conversation(30)
    plan = context[2]
    context = await run.pin(plan.id, context)
    result = await run.pre_llm(context)
    assert result.compressed
    assert plan.id in ids(result.messages)


async def test_image_limit_leaves_the_images_of_a_pinned_message(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    run = run_of(ws, ImageLimit(max_images=0))
    shot = Msg(role="user", content=[image_block()])
    context = [Msg(role="system", content="sys"), shot, Msg(role="user", content="describe it")]
    context = await run.pin(shot.id, context)
    after = (await run.pre_llm(context)).messages
    assert after[1].content == shot.content


async def test_a_pin_over_its_share_of_the_window_is_refused_when_made(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    run = run_of(ws, SlidingWindow(max_messages=4), window=2000, pin_ratio=0.3)
    context = conversation(3)
    big = Msg(role="assistant", content="notes " * 400)
    context.append(big)
    with pytest.raises(PinError, match=r"pin_ratio 0.3.*unpin") as refused:
        await run.pin(big.id, context)
    assert big.id in str(refused.value)
    assert not any(is_pinned(m) for m in context)
    assert run.pinned_ids == frozenset()
    assert not [e for e in await ws.read_events("s1") if e["kind"] == "pin"]


async def test_pinning_an_unknown_message_names_it(tmp_path: Path) -> None:
    run = run_of(LocalWorkspace(tmp_path), SlidingWindow(max_messages=4))
    with pytest.raises(PinError, match="'nope' is not in the context"):
        await run.pin("nope", conversation(2))


async def test_pin_and_unpin_are_events_with_the_pins_tokens(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    seen: list[dict[str, Any]] = []
    run = run_of(ws, SlidingWindow(max_messages=4))
    run.compressor.on_event = seen.append
    context = conversation(2)
    plan = context[2]
    context = await run.pin(plan.id, context)
    context = await run.unpin(plan.id, context)
    assert not is_pinned(next(m for m in context if m.id == plan.id))
    kinds = [e for e in await ws.read_events("s1") if e["kind"] in ("pin", "unpin")]
    assert [e["kind"] for e in kinds] == ["pin", "unpin"]
    pin, unpin = kinds
    assert pin["message_id"] == plan.id and pin["by"] == "api"
    assert pin["pinned_tokens_before"] == 0 < pin["pinned_tokens_after"]
    assert unpin["pinned_tokens_before"] == pin["pinned_tokens_after"]
    assert unpin["pinned_tokens_after"] == 0
    assert [e["kind"] for e in seen if e["kind"] in ("pin", "unpin")] == ["pin", "unpin"]


async def test_an_unpinned_message_may_leave_again(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    run = run_of(ws, SlidingWindow(max_messages=4))
    context = conversation(10)
    plan = context[2]
    context = await run.unpin(plan.id, await run.pin(plan.id, context))
    after = (await run.pre_llm(context)).messages
    assert plan.id not in ids(after)


async def test_a_run_marks_the_ids_it_pinned_in_each_context_it_is_given(tmp_path: Path) -> None:
    """An integration hands the run its framework's messages at each call; the run's pins
    apply to them by id."""
    ws = LocalWorkspace(tmp_path)
    run = run_of(ws, SlidingWindow(max_messages=4))
    context = conversation(10)
    plan = context[2]
    await run.pin(plan.id, context)
    fresh_copy = [m.model_copy() for m in context]  # what a framework would hand over again
    after = (await run.pre_llm(fresh_copy)).messages
    assert plan.id in ids(after)


@pytest.mark.parametrize("seed", range(6))
async def test_pins_hold_over_many_steps_of_every_manager(tmp_path: Path, seed: int) -> None:
    """Every step: each pinned message is there once and unchanged, no message twice, and
    every tool result follows its call."""
    import random

    from ctxoffload.compression import ClearToolUses

    rng = random.Random(seed)
    ws = LocalWorkspace(tmp_path)
    run = run_of(
        ws,
        ClearToolUses(keep=2),
        SlidingWindow(max_messages=12),
        Summarization(summary_ratio=0.5, preserve_recent_messages=4),
        window=20_000,
    )
    context = conversation(0)
    pinned: dict[str, Msg] = {}
    for step in range(40):
        context += probe_turn(step, output="out " * rng.randint(5, 80))
        if rng.random() < 0.2:
            candidates = [m for m in context if m.role != "system" and m.id not in pinned]
            chosen = rng.choice(candidates)
            try:
                context = await run.pin(chosen.id, context)
                pinned[chosen.id] = next(m for m in context if m.id == chosen.id)
            except PinError:
                pass
        context = (await run.pre_llm(context)).messages
        seen = [m.id for m in context]
        assert len(seen) == len(set(seen))
        for pin_id, msg in pinned.items():
            now = [m for m in context if m.id == pin_id]
            assert len(now) == 1 and now[0].content == msg.content
        calls: set[str] = set()
        for m in context:
            calls |= {c.id for c in m.tool_calls}
            assert all(r.id in calls for r in m.tool_results)


async def test_a_summary_cannot_be_pinned(tmp_path: Path) -> None:
    run = run_of(LocalWorkspace(tmp_path), Summarization(summary_ratio=0.8))
    after = (await run.pre_llm(conversation(12))).messages
    assert is_summary_message(after[1])
    with pytest.raises(PinError, match="ctxoffload's own note"):
        await run.pin(after[1].id, after)


def reused_ids(turns: int) -> list[Msg]:
    """A conversation from a server that calls its first tool call `call_0` every turn."""
    msgs = [Msg(role="user", content="probe everything")]
    for i in range(turns):
        msgs += [
            Msg(
                role="assistant",
                content=[ToolCallBlock(id="call_0", name="probe", input={"host": i})],
            ),
            Msg(role="tool", content=[ToolResultBlock(id="call_0", name="probe", output=f"r{i}")]),
        ]
    return msgs


async def test_a_call_id_that_names_several_turns_is_refused_naming_each(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    run = run_of(ws, SlidingWindow(max_messages=4))
    context = reused_ids(3)
    calls = [m for m in context if m.tool_calls]
    with pytest.raises(PinError, match="'call_0' names tool calls in 3 messages") as refused:
        await run.pin("call_0", context)
    said = str(refused.value)
    # Newest first, each by the message id to pin instead, with the call it holds.
    at = [said.index(m.id) for m in reversed(calls)]
    assert at == sorted(at)
    assert 'probe {"host":2}' in said and "pin one by its message id" in said
    assert run.pinned_ids == frozenset()
    assert not any(is_pinned(m) for m in context)
    assert not [e for e in await ws.read_events("s1") if e["kind"] == "pin"]


async def test_the_message_id_a_refusal_names_pins_that_call(tmp_path: Path) -> None:
    run = run_of(LocalWorkspace(tmp_path), SlidingWindow(max_messages=4))
    context = reused_ids(3)
    meant = [m for m in context if m.tool_calls][1]
    marked = await run.pin(meant.id, context)
    assert [m.id for m in marked if is_pinned(m)] == [meant.id]
    assert run.message_named(meant.id, marked).id == meant.id


async def test_a_call_id_that_names_one_turn_still_pins_it(tmp_path: Path) -> None:
    run = run_of(LocalWorkspace(tmp_path), SlidingWindow(max_messages=4))
    twice = Msg(
        role="assistant",
        content=[ToolCallBlock(id="dup", name="probe", input={"host": h}) for h in (8, 9)],
    )
    context = [*reused_ids(1), *probe_turn(7), twice]
    marked = await run.pin("call_0", context)
    assert [m.id for m in marked if is_pinned(m)] == [context[1].id]
    # One message that holds the id twice (one step's calls) is one message: no ambiguity.
    assert run.message_named("dup", marked).id == twice.id


async def test_a_long_list_of_ambiguous_calls_is_bounded(tmp_path: Path) -> None:
    run = run_of(LocalWorkspace(tmp_path), SlidingWindow(max_messages=4))
    with pytest.raises(PinError, match="and 35 older") as refused:
        run.message_named("call_0", reused_ids(40))
    assert len(str(refused.value)) < 1200


async def test_an_unknown_id_of_any_length_is_named_in_a_short_refusal(tmp_path: Path) -> None:
    run = run_of(LocalWorkspace(tmp_path), SlidingWindow(max_messages=4))
    with pytest.raises(PinError, match="100,000 characters") as refused:
        await run.pin("x" * 100_000, conversation(2))
    assert len(str(refused.value)) < 400
