"""Background compaction: past `trigger_ratio - background_lead` the span that will leave is
stored and its summary starts in a task; at the trigger the ready summary is applied, or
dropped as stale; cancelling leaves nothing half-written and no task behind. The summary
model here waits on an event the test sets, so nothing depends on the machine's speed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ConfigError,
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    get_token_counter,
)
from ctxoffload.compression import CompressionResult, Compressor, is_pinned
from ctxoffload.compression._protect import pinned_copy
from helpers import summary_reply

COUNTER = get_token_counter(exact=True)
SYSTEM = Msg(role="system", content="You are a coding agent.")
WORDS = " ".join(f"word{j}" for j in range(60))


class GatedSummaries:
    """A summary model whose every answer waits until `release` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.asked = 0
        self.model = ScriptedModel([], default=self._answer, model_name="summaries")

    async def _answer(self, messages: Sequence[Msg]) -> str:
        self.asked += 1
        await self.release.wait()
        return json.dumps(summary_reply(f"background{self.asked}"))


def turn(i: int) -> list[Msg]:
    return [
        Msg(role="user", content=f"question {i}: {WORDS}"),
        Msg(role="assistant", content=f"answer {i}: {WORDS}"),
    ]


def compressor(ws: LocalWorkspace, model: ScriptedModel, **config: Any) -> Compressor:
    return Compressor(
        ContextConfig(context_window=4000, background_compaction=True, **config),
        model=model,
        offloader=ws,
        session_id="s1",
        counter=COUNTER,
    )


def events(ws: LocalWorkspace, kind: str) -> list[dict[str, Any]]:
    path = ws.session_dir("s1") / "events.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e for e in rows if e["kind"] == kind]


def logged_ids(ws: LocalWorkspace) -> list[str]:
    path = ws.session_dir("s1") / "context.jsonl"
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


async def grow_until(comp: Compressor, context: list[Msg], status: str, ws: LocalWorkspace) -> int:
    """Add turns, running the compressor before each model call, until a background event
    of `status` is written; the number of turns added."""
    for i in range(100):
        context += turn(i)
        result = await comp.maybe_compress(context)
        assert not result.compressed, "the trigger came before the background summary started"
        context[:] = result.messages
        if any(e["status"] == status for e in events(ws, "background_summary")):
            return i
    raise AssertionError("the background summary never started")


async def until_compressed(comp: Compressor, context: list[Msg]) -> CompressionResult:
    """Add turns, running the compressor before each model call, until it compresses."""
    for i in range(100, 300):
        context += turn(i)
        result = await comp.maybe_compress(context)
        context = result.messages
        if result.compressed:
            return result
    raise AssertionError("the context never reached the trigger")


async def test_a_ready_summary_is_applied_at_the_trigger_without_a_new_call(
    local_ws: LocalWorkspace,
) -> None:
    gated = GatedSummaries()
    comp = compressor(local_ws, gated.model)
    context = [SYSTEM]
    await grow_until(comp, context, "started", local_ws)
    started = events(local_ws, "background_summary")[-1]
    # Stored before the summary started: persist before drop.
    assert len(logged_ids(local_ws)) == started["messages"]
    await asyncio.sleep(0)
    assert gated.asked == 1
    assert comp.background == "running"
    gated.release.set()
    while comp.background != "ready":  # the summary finishes while the agent goes on
        await asyncio.sleep(0)

    result = await until_compressed(comp, context)
    assert (
        result.summary is not None and result.summary.task_overview == "background1 task_overview"
    )
    assert gated.asked == 1  # no summary call on the step that hit the trigger
    applied = events(local_ws, "background_summary")[-1]
    assert applied["status"] == "applied" and applied["waited_ms"] == 0
    ids = logged_ids(local_ws)
    assert len(ids) == len(set(ids))  # no message written twice


async def test_a_step_that_comes_first_waits_for_the_summary_under_way(
    local_ws: LocalWorkspace,
) -> None:
    gated = GatedSummaries()
    comp = compressor(local_ws, gated.model)
    context = [SYSTEM]
    await grow_until(comp, context, "started", local_ws)
    # The agent is fast: the trigger comes while the summary is still under way.
    for i in range(100, 200):
        context += turn(i)
        if comp.count(context) > comp.config.trigger_ratio * comp.window():
            break
    asyncio.get_running_loop().call_later(0.05, gated.release.set)
    result = await comp.maybe_compress(context)
    assert result.compressed
    assert (
        result.summary is not None and result.summary.task_overview == "background1 task_overview"
    )
    assert events(local_ws, "background_summary")[-1]["status"] == "applied"
    assert gated.asked == 1


async def test_a_message_pinned_meanwhile_makes_it_stale(local_ws: LocalWorkspace) -> None:
    gated = GatedSummaries()
    gated.release.set()
    comp = compressor(local_ws, gated.model)
    context = [SYSTEM]
    await grow_until(comp, context, "started", local_ws)
    # The agent pins the oldest message, which the background summary was to replace.
    context[1] = pinned_copy(context[1], "api")
    context = (await until_compressed(comp, context)).messages
    assert any(m.id == context[1].id or is_pinned(m) for m in context)
    stale = [e for e in events(local_ws, "background_summary") if e["status"] == "stale"]
    assert stale and stale[0]["reason"].startswith("the messages to drop changed")
    assert gated.asked == 2  # the summary was made anew, as usual
    ids = logged_ids(local_ws)
    assert len(ids) == len(set(ids))


async def test_closing_cancels_it_with_nothing_half_written_and_no_task_left(
    local_ws: LocalWorkspace,
) -> None:
    gated = GatedSummaries()  # never released
    comp = compressor(local_ws, gated.model)
    context = [SYSTEM]
    await grow_until(comp, context, "started", local_ws)
    await comp.aclose()
    await comp.aclose()  # twice is fine
    statuses = [e["status"] for e in events(local_ws, "background_summary")]
    assert statuses == ["started", "cancelled"]
    assert events(local_ws, "summary") == []  # nothing recorded as a summary
    # Every stored line is whole, and no task of ours is left.
    assert all(json.loads(line) for line in logged_lines(local_ws))
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert others == []


def logged_lines(ws: LocalWorkspace) -> list[str]:
    return (ws.session_dir("s1") / "context.jsonl").read_text().splitlines()


async def test_an_agent_compacts_in_the_background_and_closes_cleanly(tmp_path: Any) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    gated = GatedSummaries()
    gated.release.set()
    replies = [f"answer {i}: {WORDS}" for i in range(40)]
    async with Agent(
        model=ScriptedModel(replies),
        summary_model=gated.model,
        offloader=ws,
        session_id="s1",
        context_config=ContextConfig(context_window=4000, background_compaction=True),
    ) as agent:
        for i in range(40):
            await agent.reply(f"question {i}: {WORDS}")
            if any(e["status"] == "applied" for e in events(ws, "background_summary")):
                break
    statuses = [e["status"] for e in events(ws, "background_summary")]
    assert statuses[:2] == ["started", "applied"]
    ids = logged_ids(ws)
    assert len(ids) == len(set(ids))


def test_the_lead_must_be_below_the_trigger() -> None:
    with pytest.raises(ConfigError, match=r"background_lead 0\.85 is not below trigger_ratio"):
        ContextConfig(background_compaction=True, background_lead=0.85)


def test_a_sync_hosts_background_summary_goes_on_between_its_calls(tmp_path: Any) -> None:
    # A projector's sync calls run on the host's thread, and its loop rests between them;
    # with background compaction the summary must go on while the host waits on its model,
    # so that projector keeps a loop thread of its own.
    import threading

    from ctxoffload.compression import Projector

    asked, go_on, done = threading.Event(), threading.Event(), threading.Event()

    async def answer(messages: Sequence[Msg]) -> str:
        asked.set()
        while not go_on.is_set():  # (the host, on its own thread, lets it go)
            await asyncio.sleep(0.005)
        done.set()
        return json.dumps(summary_reply("between calls"))

    projector = Projector(
        LocalWorkspace(tmp_path),
        "s1",
        config=ContextConfig(context_window=4000, background_compaction=True),
        model=ScriptedModel([], default=answer, model_name="summaries"),
    )
    history = [SYSTEM]
    for i in range(40):
        history += turn(i)
        projector.project_sync(history)
        if asked.is_set():
            break
    assert asked.is_set(), "no background summary started"
    go_on.set()  # the host's model call: no projector call runs meanwhile
    assert done.wait(timeout=10), "the background summary stood still between calls"
