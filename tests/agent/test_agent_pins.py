"""An Agent's pins: the API, the opt-in pin_context tool, and pins across a resume."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ContextConfig,
    ContextPipeline,
    InMemoryWorkspace,
    LocalWorkspace,
    Msg,
    PinError,
    ScriptedModel,
    ToolCallBlock,
    ToolResultBlock,
    Workspace,
    get_token_counter,
)
from ctxoffload.compression import ClearToolUses, is_pinned, is_summary_message
from helpers import SUMMARY, call, probe


def make_agent(ws: Any, model: ScriptedModel, **kwargs: Any) -> Agent:
    return Agent(
        system_prompt="You probe.",
        model=model,
        offloader=ws,
        tools=[probe],
        context_config=kwargs.pop(
            "context_config",
            ContextConfig(context_window=3000, trigger_ratio=0.5, reserve_ratio=0.1),
        ),
        counter=get_token_counter(exact=False),
        summary_model=ScriptedModel(default=SUMMARY),
        session_id=kwargs.pop("session_id", "pins"),
        **kwargs,
    )


def probes(n: int, first: int = 0) -> list[Any]:
    return [call(f"c{i}", "probe", i=i) for i in range(first, first + n)]


@pytest.fixture(params=["local", "memory"])
def ws(request: pytest.FixtureRequest, tmp_path: Path) -> Workspace:
    if request.param == "local":
        return LocalWorkspace(tmp_path)
    return InMemoryWorkspace()


async def test_a_pinned_message_survives_compressions_and_a_resume(ws: Workspace) -> None:
    agent = make_agent(ws, ScriptedModel(["PLAN: probe 0 to 9, then report.", *probes(3), "ok"]))
    await agent.reply("Make a plan.")
    plan = next(m for m in agent.messages if m.text.startswith("PLAN"))
    await agent.pin(plan.id)
    await agent.reply("Probe 0 to 2.")
    await agent.aclose()

    resumed = make_agent(ws, ScriptedModel([*probes(8, 3), "done"]))
    await resumed.reply("Go on with 3 to 10.")
    assert resumed.compressor.compressions >= 1
    kept = [m for m in resumed.messages if m.id == plan.id]
    assert len(kept) == 1 and is_pinned(kept[0]) and kept[0].text == plan.text
    summary_at = next(i for i, m in enumerate(resumed.messages) if is_summary_message(m))
    assert resumed.messages[summary_at + 1].id == plan.id  # the documented place
    state = await ws.read_state("pins")
    assert state is not None
    assert any(
        m["id"] == plan.id and m["metadata"].get("ctxoffload_pin") for m in state["messages"]
    )


async def test_agent_pin_over_the_share_is_refused(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    agent = make_agent(ws, ScriptedModel(["word " * 1200]))
    await agent.reply("Write a lot.")
    with pytest.raises(PinError, match="pin_ratio"):
        await agent.pin(agent.messages[-1].id)
    assert not any(is_pinned(m) for m in agent.messages)


async def test_agent_unpin_lets_the_message_leave(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    agent = make_agent(ws, ScriptedModel(["PLAN: a", *probes(10), "done"]))
    await agent.reply("Plan.")
    plan = agent.messages[-1]
    await agent.pin(plan.id)
    await agent.unpin(plan.id)
    await agent.reply("Probe.")
    assert plan.id not in {m.id for m in agent.messages}
    kinds = [e["kind"] for e in await ws.read_events("pins")]
    assert kinds.count("pin") == 1 and kinds.count("unpin") == 1


async def test_the_pin_context_tool_is_opt_in(tmp_path: Path) -> None:
    agent = make_agent(LocalWorkspace(tmp_path), ScriptedModel(["x"]))
    assert "pin_context" not in agent.tools
    agent = make_agent(LocalWorkspace(tmp_path), ScriptedModel(["x"]), include_pin_tool=True)
    assert "pin_context" in agent.tools


async def test_the_pin_context_tool_keeps_a_text_the_model_gives(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    script = [
        call("p1", "pin_context", text="TODO: 1. probe all 2. report the odd one"),
        *probes(10),
        "done",
    ]
    agent = make_agent(ws, ScriptedModel(script), include_pin_tool=True)
    await agent.reply("Probe everything; keep your todo list.")
    assert agent.compressor.compressions >= 1
    pinned = [m for m in agent.messages if is_pinned(m)]
    assert any("TODO: 1. probe all" in str(m.content) for m in pinned)
    pins = [e for e in await ws.read_events("pins") if e["kind"] == "pin"]
    assert len(pins) == 1 and pins[0]["by"] == "agent"


async def test_the_pin_context_tool_pins_the_turn_of_a_tool_call_id(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    script = [*probes(1), call("p1", "pin_context", message_id="c0"), *probes(10, 1), "done"]
    agent = make_agent(ws, ScriptedModel(script), include_pin_tool=True)
    await agent.reply("Probe everything; keep the first result.")
    assert agent.compressor.compressions >= 1
    kept = [m for m in agent.messages if any(b.id == "c0" for b in m.tool_calls + m.tool_results)]
    assert len(kept) == 2  # the call and its result, together


async def test_the_pin_context_tool_answers_a_refusal_as_an_error(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    script = [call("p1", "pin_context", text="x " * 3000), "done"]
    agent = make_agent(ws, ScriptedModel(script), include_pin_tool=True)
    await agent.reply("Pin it all.")
    result = next(b for m in agent.messages for b in m.tool_results if b.id == "p1")
    assert result.is_error and "pin_ratio" in str(result.output)
    assert not any(is_pinned(m) for m in agent.messages)


async def test_an_agent_with_no_pins_has_no_pin_events(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    agent = make_agent(ws, ScriptedModel([*probes(4), "done"]))
    await agent.reply("Probe.")
    assert not [e for e in await ws.read_events("pins") if e["kind"] in ("pin", "unpin")]
    assert all(not is_pinned(m) for m in agent.messages if isinstance(m, Msg))


async def slow_summary(messages: Any) -> dict[str, str]:
    """A summary model's answer after 0.4 s: a compaction is still under way while the other
    tools of its step run."""
    await asyncio.sleep(0.4)
    return SUMMARY


def step_calling(*calls: ToolCallBlock) -> Msg:
    return Msg(role="assistant", content=list(calls))


def tool_answers(agent: Agent, call_id: str) -> list[ToolResultBlock]:
    return [b for m in agent.messages for b in m.tool_results if b.id == call_id]


def compact_agent(tmp_path: Path, script: list[Any], clearing: bool = False) -> Agent:
    # A large window: only the compaction asked for moves anything.
    config = ContextConfig(context_window=100_000)
    # A clearing that runs only when asked for (its trigger is never reached).
    clear = ContextPipeline(pre_llm=[ClearToolUses(trigger=10**6, keep=1)], config=config)
    return Agent(
        system_prompt="You probe.",
        model=ScriptedModel(script),
        offloader=LocalWorkspace(tmp_path),
        tools=[probe],
        context_config=clear if clearing else config,
        counter=get_token_counter(exact=False),
        summary_model=ScriptedModel(default=slow_summary),
        session_id="pins",
        include_pin_tool=True,
        include_compact_tool=True,
    )


@pytest.mark.parametrize("clearing", [False, True], ids=["summary", "clearing"])
@pytest.mark.parametrize("pin_first", [True, False], ids=["pin-first", "compact-first"])
async def test_a_pin_beside_a_compaction_in_one_step_is_kept(
    tmp_path: Path, pin_first: bool, clearing: bool
) -> None:
    pin = ToolCallBlock(id="p1", name="pin_context", input={"message_id": "c1"})
    compact = ToolCallBlock(id="k1", name="compact_context", input={})
    both = step_calling(pin, compact) if pin_first else step_calling(compact, pin)
    agent = compact_agent(tmp_path, [*probes(8), both, "done"], clearing=clearing)
    await agent.reply("Probe, then keep c1 and compact.")
    assert str(tool_answers(agent, "k1")[0].output).startswith("Compacted:")
    assert str(tool_answers(agent, "p1")[0].output).startswith("Pinned c1")
    kept = [m for m in agent.messages if any(b.id == "c1" for b in m.tool_calls)]
    assert len(kept) == 1 and is_pinned(kept[0])
    # The result stayed too, whole.
    assert [str(b.output) for b in tool_answers(agent, "c1")] == [probe(1)]
    # c2 was moved out or cleared: the compaction did run.
    assert [str(b.output) for b in tool_answers(agent, "c2")] != [probe(2)]
    state = await agent.offloader.read_state("pins")  # type: ignore[union-attr]
    assert state is not None
    assert any(m["metadata"].get("ctxoffload_pin") for m in state["messages"])


async def test_two_pins_in_one_step_are_measured_one_after_the_other(tmp_path: Path) -> None:
    long_text = "word " * 400  # about 500 tokens: one fits the 900-token share, two do not
    script = [
        Msg(id="a1", role="assistant", content="A1 " + long_text),
        Msg(id="a2", role="assistant", content="A2 " + long_text),
        step_calling(
            ToolCallBlock(id="p1", name="pin_context", input={"message_id": "a1"}),
            ToolCallBlock(id="p2", name="pin_context", input={"message_id": "a2"}),
        ),
        "done",
    ]
    ws = LocalWorkspace(tmp_path)
    config = ContextConfig(context_window=3000, trigger_ratio=0.9, reserve_ratio=0.1)
    agent = make_agent(ws, ScriptedModel(script), include_pin_tool=True, context_config=config)
    await agent.reply("Write.")
    await agent.reply("Write more.")
    await agent.reply("Keep both.")
    answers = [tool_answers(agent, call_id)[0] for call_id in ("p1", "p2")]
    assert [a.is_error for a in answers] == [False, True]
    assert "pin_ratio" in str(answers[1].output)
    assert [m.id for m in agent.pinned] == ["a1"]
    pins = [e for e in await ws.read_events("pins") if e["kind"] == "pin"]
    assert len(pins) == 1 and pins[0]["pinned_tokens_after"] <= config.pin_ratio * 3000


def reused(turn: str, *calls: ToolCallBlock) -> Msg:
    """A step from a server that numbers the calls of every turn from `call_0`."""
    return Msg(id=turn, role="assistant", content=list(calls))


async def test_a_reused_call_id_is_refused_naming_the_message_ids_to_pin(tmp_path: Path) -> None:
    def pin_call(message_id: str) -> ToolCallBlock:
        return ToolCallBlock(id="call_0", name="pin_context", input={"message_id": message_id})

    script = [
        reused("turn-1", ToolCallBlock(id="call_0", name="probe", input={"i": 1})),
        reused("turn-2", ToolCallBlock(id="call_0", name="probe", input={"i": 2})),
        reused("turn-3", pin_call("call_0")),
        reused("turn-4", pin_call("turn-1")),
        "done",
    ]
    ws = LocalWorkspace(tmp_path)
    config = ContextConfig(context_window=100_000)
    agent = make_agent(ws, ScriptedModel(script), include_pin_tool=True, context_config=config)
    await agent.reply("Probe 1 and 2; keep the first.")
    refused, pinned = [b for m in agent.messages for b in m.tool_results if b.name == "pin_context"]
    assert refused.is_error and "names tool calls in 3 messages" in str(refused.output)
    assert "'turn-1' (probe {\"i\":1})" in str(refused.output)
    assert not pinned.is_error and str(pinned.output).startswith("Pinned turn-1")
    assert [m.id for m in agent.pinned] == ["turn-1"]
    assert await agent.pin("turn-1") == agent.pinned[0]


def dump(part: int) -> str:
    """Dump one part of the log.

    Args:
        part: which part.
    """
    return f"part {part}: " + "line " * 1000  # about 1,250 tokens


def share_agent(ws: Workspace, script: list[Any]) -> Agent:
    """An agent whose pins may take 1,000 tokens (a tenth of a 10,000-token window)."""
    return Agent(
        model=ScriptedModel(script),
        offloader=ws,
        tools=[probe, dump],
        context_config=ContextConfig(context_window=10_000, pin_ratio=0.1),
        counter=get_token_counter(exact=False),
        summary_model=ScriptedModel(default=SUMMARY),
        session_id="share",
        include_pin_tool=True,
    )


@pytest.mark.parametrize(
    "pin",
    [{"message_id": "d1"}, {"text": "TODO: read part 1"}],
    ids=["call-of-the-step", "text"],
)
async def test_a_pin_of_the_step_is_measured_with_its_results(ws: Workspace, pin: Any) -> None:
    step = step_calling(
        ToolCallBlock(id="d1", name="dump", input={"part": 1}),
        ToolCallBlock(id="p1", name="pin_context", input=pin),
    )
    agent = share_agent(ws, [step, "done"])
    await agent.reply("Dump part 1 and keep it.")
    answer = tool_answers(agent, "p1")[0]
    assert answer.is_error and "pin_ratio 0.1" in str(answer.output)
    said = re.search(r"bring the pins to ([\d,]+) tokens", str(answer.output))
    assert said is not None and int(said[1].replace(",", "")) > 1_000  # the result counted
    if "message_id" in pin:
        assert "pinning tool call 'd1' (message " in str(answer.output)
    assert agent.pinned == []
    assert not [e for e in await ws.read_events("share") if e["kind"] == "pin"]
    state = await ws.read_state("share")
    assert state is not None
    saved = [b for m in state["messages"] if m["role"] == "tool" for b in m["content"]]
    assert any(b["id"] == "p1" and b["is_error"] for b in saved)


async def test_a_pin_of_a_call_of_the_step_records_the_tokens_of_its_results(
    ws: Workspace,
) -> None:
    step = step_calling(
        ToolCallBlock(id="c1", name="probe", input={"i": 1}),
        ToolCallBlock(id="p1", name="pin_context", input={"message_id": "c1"}),
    )
    agent = share_agent(ws, [step, "done"])
    await agent.reply("Probe 1 and keep it.")
    assert str(tool_answers(agent, "p1")[0].output).startswith("Pinned c1")
    assert [m.id for m in agent.pinned] == [agent.messages[-3].id]
    (event,) = [e for e in await ws.read_events("share") if e["kind"] == "pin"]
    turn = agent.messages[-3:-1]  # the call and its results: what the pin keeps
    counted = sum(agent.compressor.tracker.count_message(m) for m in turn)
    assert event["pinned_tokens_after"] == counted
    assert counted > agent.compressor.tracker.count_message(turn[0]) + 60  # results included


async def test_a_pin_of_a_call_of_the_step_beside_a_compaction_is_kept(tmp_path: Path) -> None:
    step = step_calling(
        ToolCallBlock(id="k1", name="compact_context", input={}),
        ToolCallBlock(id="c9", name="probe", input={"i": 9}),
        ToolCallBlock(id="p1", name="pin_context", input={"message_id": "c9"}),
    )
    agent = compact_agent(tmp_path, [*probes(8), step, *probes(1, 10), "done"])
    await agent.reply("Probe, keep 9, compact.")
    assert str(tool_answers(agent, "k1")[0].output).startswith("Compacted:")
    assert str(tool_answers(agent, "p1")[0].output).startswith("Pinned c9")
    assert [m.id for m in agent.pinned] == [step.id]
    await agent.compact()
    assert [str(b.output) for b in tool_answers(agent, "c9")] == [probe(9)]
