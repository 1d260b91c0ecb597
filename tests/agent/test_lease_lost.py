"""An agent whose lease expired unrenewed (its event loop blocked by a sync call in an async
tool) while another writer took the session over stops before writing again: it wrote its tool
results, its next model call and its state.json over the new holder's (state.json lost the
other writer's turn, the record held two step 2s)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

import ctxoffload.workspace._lease as lease_module
from ctxoffload import (
    Agent,
    LocalWorkspace,
    Msg,
    ObjectStoreWorkspace,
    ScriptedModel,
    SessionBusyError,
    SqlWorkspace,
    ToolCallBlock,
)

TTL = 0.4  # renewed every third of it while the loop runs


def other_writer_answers(store: object) -> None:
    """Agent B, on its own event loop in another thread, takes the session over once A's
    lease has expired and answers a question."""

    async def answer() -> None:
        model = ScriptedModel(["B's answer"], context_window=100_000)
        agent = Agent(name="B", model=model, offloader=store, session_id="s1")  # type: ignore[arg-type]
        await agent.reply("B's question")
        await agent.aclose()

    asyncio.run(answer())


@pytest.mark.parametrize("kind", ["sqlite", "bucket"])
async def test_a_writer_that_lost_its_lease_stops_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setattr(lease_module, "DEFAULT_LEASE_TTL", TTL)
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'agents.db'}"
        mine, theirs = SqlWorkspace(url), SqlWorkspace(url)
        blocked = TTL * 1.5
    else:
        url = f"memory:///{tmp_path.name}"
        mine = theirs = ObjectStoreWorkspace(url)
        blocked = TTL + 2.5  # (a bucket's clock stamps whole seconds)

    async def slow_query(q: str) -> str:
        """A query through a sync driver, inside an async tool: it blocks the event loop.

        Args:
            q: the query.
        """
        time.sleep(blocked)  # A's lease expires unrenewed
        writer = threading.Thread(target=other_writer_answers, args=(theirs,))
        writer.start()
        writer.join()
        return f"rows for {q}"

    call = Msg(
        role="assistant", content=[ToolCallBlock(id="a1", name="slow_query", input={"q": "x"})]
    )
    model = ScriptedModel([call, "A's answer"], context_window=100_000)
    agent = Agent(name="A", model=model, tools=[slow_query], offloader=mine, session_id="s1")

    with pytest.raises(SessionBusyError, match="lost the session's lease") as lost:
        await agent.reply("A's question")

    assert "slow_query" in str(lost.value)
    assert len(model.calls) == 1  # no model call after the lease was lost
    state = await theirs.read_state("s1")
    assert state is not None
    assert [m["content"] for m in state["messages"] if m["role"] != "system"][-2:] == [
        "B's question",
        "B's answer",
    ]
    events = await theirs.read_events("s1")
    writers = [e["writer"]["agent"] for e in events if e["kind"] == "message"]
    assert writers[-2:] == ["B", "B"], writers  # A wrote nothing after B took over
    steps = [e["step"] for e in events if e["kind"] == "model_call"]
    assert len(steps) == len(set(steps)), steps  # one step 2, B's
    await agent.aclose()


def test_a_lease_that_never_renews_is_held_while_its_process_lives(tmp_path: Path) -> None:
    """The disk's lease (an flock) needs no renewal: a blocked loop loses nothing there."""

    async def check() -> bool:
        lease = await LocalWorkspace(tmp_path / "ws").acquire_lease("s1")
        time.sleep(0.2)
        held = await lease.still_held()
        await lease.release()
        return held and not await lease.still_held()

    assert asyncio.run(check())
