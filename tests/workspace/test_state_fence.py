"""A writer whose lease lapsed unrenewed (its event loop blocked past the time to live) and was
taken over by another writer cannot write the session's state.json any more: the store refuses
it in the same step as the write, naming the new holder, and the new holder's state.json stays
as it wrote it. Before, `write_state` replaced state.json whatever lease it was written under,
and only the Agent's own check before a write (which can pass just before the lease lapses)
stood between a stale writer and the new holder's state.

Every other write of the session through that workspace object (a context batch, a tool
result, an event, a history record) is refused the same way, before anything is written:
before, only state.json was fenced, and a door's run that lost its lease (smolagents', or any
door taking its lease through `_doors/runs.py`) went on writing its events, tool results and
context lines among the new holder's.

On a disk and in memory a lease cannot lapse while its holder runs, so there is nothing to
fence there; one writer's ordinary life (writes, resume, fork, compaction) is unchanged on
every store."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxoffload.workspace._lease as lease_module
from ctxoffload import (
    Agent,
    ContextConfig,
    InMemoryWorkspace,
    LocalWorkspace,
    ObjectStoreWorkspace,
    ScriptedModel,
    SessionBusyError,
    SqlWorkspace,
    get_token_counter,
)
from ctxoffload.cli import main
from ctxoffload.workspace import fork_session
from helpers import SUMMARY, call, probe

TTL = 0.4
"""The lease's time to live: renewed every third of it while its event loop runs."""

LAPSING = ["sqlite", "postgres", pytest.param("bucket", marks=pytest.mark.slow)]
"""A bucket's lease lapses only after the store's clock, which stamps whole seconds, has
moved on: about 3 s of waiting a case, so its cases are among the tests marked slow."""


@pytest.fixture
def two_writers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any, float]]:
    """Two workspace objects on one store (`request.param`): A's and B's, as two processes
    would have them; and how long A's loop must stay blocked for its lease to lapse."""
    kind = request.param
    make: Callable[[], Any]
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'ws.db'}"
        make, blocked = (lambda: SqlWorkspace(url)), TTL * 1.5
    elif kind == "postgres":
        schema = request.getfixturevalue("postgres").new_schema()
        make, blocked = (lambda: SqlWorkspace(schema)), TTL * 1.5
    else:
        server = request.getfixturevalue("s3")
        bucket = f"s3://{server.new_bucket()}/ws"
        make = lambda: ObjectStoreWorkspace(bucket, **server.workspace_kwargs())  # noqa: E731
        blocked = TTL + 2.5  # (the store's clock stamps whole seconds)
    yield make(), make(), blocked


def in_another_process(work: Callable[[], Awaitable[None]]) -> None:
    """Run `work` on an event loop of its own in another thread (as another process would,
    while this one's loop is blocked), and wait for it."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(work())
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failures:
        raise failures[0]


def take_over_and_write(theirs: Any, state: dict[str, Any], blocked: float) -> None:
    """Block this event loop until A's lease lapses unrenewed, while B takes the session
    over and writes `state` (B keeps the lease: it expires by itself)."""
    time.sleep(blocked)

    async def take_over() -> None:
        await theirs.acquire_lease("s", agent="B", ttl=TTL)
        if state:
            await theirs.write_state("s", state)

    in_another_process(take_over)


@pytest.mark.parametrize("two_writers", LAPSING, indirect=True)
@pytest.mark.parametrize("wrote_before", [True, False], ids=["wrote before", "first write"])
async def test_a_writer_whose_lease_was_taken_over_cannot_write_over_the_new_holders_state(
    two_writers: tuple[Any, Any, float], wrote_before: bool
) -> None:
    mine, theirs, blocked = two_writers
    lease = await mine.acquire_lease("s", agent="A", ttl=TTL)
    if wrote_before:
        await mine.write_state("s", {"by": "A", "n": 1})
    # (A first write: an object that never wrote nor read the state must not create it
    # over B's either.)
    take_over_and_write(theirs, {"by": "B", "n": 1}, blocked)

    with pytest.raises(SessionBusyError, match=r"state\.json was not written") as refused:
        await mine.write_state("s", {"by": "A", "n": 2})

    assert "agent 'B'" in str(refused.value)  # who holds the session now
    assert refused.value.holder.get("agent") == "B"
    assert await theirs.read_state("s") == {"by": "B", "n": 1}
    assert await mine.read_state("s") == {"by": "B", "n": 1}  # (as every reader sees it)
    # The new holder goes on writing, and the stale writer stays refused.
    await theirs.write_state("s", {"by": "B", "n": 2})
    with pytest.raises(SessionBusyError):
        await mine.write_state("s", {"by": "A", "n": 3})
    assert await theirs.read_state("s") == {"by": "B", "n": 2}
    await lease.release()


@pytest.mark.parametrize("two_writers", LAPSING, indirect=True)
async def test_a_stale_write_before_the_new_holders_first_never_outlives_it(
    two_writers: tuple[Any, Any, float],
) -> None:
    """B took the session over but has not written state.json yet when A writes. In a
    database A is refused (its token is not the lease row's); a bucket cannot tell yet (the
    state.json is still the one A wrote) and takes it, and B's first write then goes over it:
    either way the session ends with B's state, and A's next write is refused."""
    mine, theirs, blocked = two_writers
    kind = "bucket" if isinstance(mine, ObjectStoreWorkspace) else "sql"
    await mine.acquire_lease("s", agent="A", ttl=TTL)
    await mine.write_state("s", {"by": "A", "n": 1})
    take_over_and_write(theirs, {}, blocked)

    if kind == "sql":
        with pytest.raises(SessionBusyError, match="agent 'B'"):
            await mine.write_state("s", {"by": "A", "n": 2})
    else:
        await mine.write_state("s", {"by": "A", "n": 2})
    await theirs.write_state("s", {"by": "B", "n": 1})
    assert await theirs.read_state("s") == {"by": "B", "n": 1}
    with pytest.raises(SessionBusyError, match="agent 'B'"):
        await mine.write_state("s", {"by": "A", "n": 3})
    assert await theirs.read_state("s") == {"by": "B", "n": 1}


@pytest.mark.parametrize("two_writers", LAPSING, indirect=True)
async def test_stale_writes_racing_the_new_holders_writes_never_land(
    two_writers: tuple[Any, Any, float],
) -> None:
    """Once B has written, A's writes and B's interleave on two event loops: every one of
    A's is refused, and state.json ends as B's last write."""
    mine, theirs, blocked = two_writers
    await mine.acquire_lease("s", agent="A", ttl=TTL)
    await mine.write_state("s", {"by": "A", "n": 0})
    take_over_and_write(theirs, {"by": "B", "n": 0}, blocked)
    rounds = 15
    go = threading.Event()

    async def b_writes() -> None:
        go.wait()
        for n in range(1, rounds + 1):
            await theirs.write_state("s", {"by": "B", "n": n})

    writer = threading.Thread(target=lambda: asyncio.run(b_writes()))
    writer.start()
    refused = 0
    go.set()
    try:
        for n in range(1, rounds + 1):
            try:
                await mine.write_state("s", {"by": "A", "n": n})
            except SessionBusyError:
                refused += 1
    finally:
        writer.join()
    assert refused == rounds
    assert await theirs.read_state("s") == {"by": "B", "n": rounds}


@pytest.mark.parametrize("kind", ["local", "memory"])
async def test_on_a_disk_and_in_memory_a_blocked_holder_keeps_its_session(
    tmp_path: Path, kind: str
) -> None:
    """There is nothing to fence where a lease cannot lapse: a holder whose loop was blocked
    far past any time to live still holds the session, and no one else can take it."""
    mine: Any = LocalWorkspace(tmp_path / "ws") if kind == "local" else InMemoryWorkspace()
    theirs = LocalWorkspace(tmp_path / "ws") if kind == "local" else mine
    lease = await mine.acquire_lease("s", agent="A", ttl=0.05)
    time.sleep(0.3)
    with pytest.raises(SessionBusyError, match="agent 'A'"):
        await theirs.acquire_lease("s", agent="B", ttl=0.05)
    await mine.write_state("s", {"by": "A"})
    assert await theirs.read_state("s") == {"by": "A"}
    await lease.release()


# -- every write of the session, not only state.json -------------------------------------------

WRITES: dict[str, Callable[[Any], Awaitable[Any]]] = {
    "context": lambda ws: ws.offload_context("s", [{"role": "user", "content": "A again"}]),
    "tool result": lambda ws: ws.offload_tool_result(
        "s", {"role": "tool", "tool_call_id": "A2", "content": "A's late output"}
    ),
    "event": lambda ws: ws.record_event("s", "note", text="A's late note"),
    "events": lambda ws: ws.record_events("s", [("note", {"text": "A's late notes"})]),
    "history": lambda ws: ws.append_history("s", {"by": "A"}),
}


async def session_as_read(workspace: Any) -> tuple[Any, ...]:
    """All a reader sees of session "s": its context, events, tool results, history."""
    files = await workspace.list_files("s")
    return (
        await workspace.read_context("s"),
        await workspace.read_events("s"),
        files,
        [await workspace.read_reference(ref) for ref in files],
        await workspace.read_history("s"),
    )


@pytest.mark.parametrize("two_writers", LAPSING, indirect=True)
@pytest.mark.parametrize("write", list(WRITES))
async def test_a_writer_whose_lease_was_taken_over_writes_nothing_more_to_the_session(
    two_writers: tuple[Any, Any, float], write: str
) -> None:
    mine, theirs, blocked = two_writers
    lease = await mine.acquire_lease("s", agent="A", ttl=TTL)
    await WRITES[write](mine)  # (before the lapse: written)
    time.sleep(blocked)

    async def take_over() -> None:
        await theirs.acquire_lease("s", agent="B", ttl=TTL)
        await theirs.offload_context("s", [{"role": "user", "content": "B's question"}])
        await theirs.offload_tool_result(
            "s", {"role": "tool", "tool_call_id": "B1", "content": "B's output"}
        )
        await theirs.record_event("s", "note", text="B's note")

    in_another_process(take_over)
    before = await session_as_read(theirs)

    # The first write after the lapse (which asks the store), then every other kind.
    for attempt in [write, *(other for other in WRITES if other != write)]:
        with pytest.raises(SessionBusyError, match="agent 'B'") as refused:
            await WRITES[attempt](mine)
        assert "was not written" in str(refused.value)
        assert refused.value.holder.get("agent") == "B"

    assert await session_as_read(theirs) == before  # B's session as B left it
    assert not lease.held
    await lease.release()


@pytest.mark.slow
@pytest.mark.parametrize("two_writers", LAPSING, indirect=True)
async def test_a_lapsed_lease_nobody_took_is_renewed_by_the_next_write(
    two_writers: tuple[Any, Any, float],
) -> None:
    """A holder whose loop was blocked past the time to live, its session not taken by
    anyone meanwhile, writes on: its next write renews the lease, which stays its own."""
    mine, theirs, blocked = two_writers
    # A longer life than the other tests' (blocked for as much longer): B's attempt must come
    # within the renewed lease's life, and on a busy machine the writes alone, a bucket's
    # round trips, can take longer than TTL.
    ttl = TTL * 5
    lease = await mine.acquire_lease("s", agent="A", ttl=ttl)
    time.sleep(blocked - TTL + ttl)
    for write in WRITES.values():
        await write(mine)
    with pytest.raises(SessionBusyError, match="agent 'A'"):
        await theirs.acquire_lease("s", agent="B", ttl=ttl)
    assert lease.held
    await lease.release()


@pytest.mark.parametrize("kind", ["local", "memory"])
async def test_on_a_disk_and_in_memory_a_blocked_holder_writes_on(
    tmp_path: Path, kind: str
) -> None:
    mine: Any = LocalWorkspace(tmp_path / "ws") if kind == "local" else InMemoryWorkspace()
    lease = await mine.acquire_lease("s", agent="A", ttl=0.05)
    time.sleep(0.3)
    for write in WRITES.values():
        await write(mine)
    assert len(await mine.read_context("s")) == 1
    await lease.release()


# -- one writer's ordinary life, on every store ------------------------------------------------


def agent_on(workspace: Any, replies: list[Any]) -> Agent:
    return Agent(
        name="worker",
        model=ScriptedModel(replies),
        offloader=workspace,
        tools=[probe],
        session_id="s",
        system_prompt="You probe.",
        context_config=ContextConfig(context_window=100_000),
        counter=get_token_counter(exact=False),
        summary_model=ScriptedModel(default=SUMMARY),
    )


@pytest.fixture(params=["local", "memory", "sqlite", "postgres", "bucket"])
def one_store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, Callable[[], Any], str]:
    """Each store in turn: its kind, a maker of new workspace objects on it (as processes
    make them; in memory: the one object, which is all there is of it), and the
    `--workdir` that points the ctxoffload command at it."""
    kind: str = request.param
    if kind == "local":
        return kind, lambda: LocalWorkspace(tmp_path / "ws"), str(tmp_path / "ws")
    if kind == "memory":
        memory = InMemoryWorkspace()
        return kind, lambda: memory, ""
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'ws.db'}"
        return kind, lambda: SqlWorkspace(url), url
    if kind == "postgres":
        url = request.getfixturevalue("postgres").new_schema()
        return kind, lambda: SqlWorkspace(url), url
    server = request.getfixturevalue("s3")
    for name, value in server.environment().items():
        monkeypatch.setenv(name, value)  # (for the command)
    url = f"s3://{server.new_bucket()}/ws"
    return kind, lambda: ObjectStoreWorkspace(url, **server.workspace_kwargs()), url


@pytest.mark.slow
def test_one_writer_writes_resumes_forks_and_is_compacted_as_before(
    one_store: tuple[str, Callable[[], Any], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lease_module, "DEFAULT_LEASE_TTL", 2.0)
    kind, new_object, workdir = one_store
    turns = 6

    async def write_resume_fork() -> dict[str, Any]:
        workspace = new_object()
        async with agent_on(workspace, [call("c0", "probe", i=0), *["ok"] * turns]) as agent:
            for n in range(turns):
                await agent.reply(f"turn {n}")  # a state.json written at every step
        saved = await workspace.read_state("s")
        assert saved is not None and saved["steps"] >= turns
        # Resumed from the saved state through a new workspace object: state.json written
        # again under a new lease, over the one an earlier lease wrote.
        again = new_object()
        resumed = agent_on(again, ["resumed"])
        async with resumed:
            await resumed.reply("go on")
        assert len(resumed.model.calls[0]) == len(saved["messages"]) + 1  # type: ignore[attr-defined]
        after = await again.read_state("s")
        assert after is not None and after["messages"][-1]["content"] == "resumed"
        # A fork writes its own state.json, under its own lease.
        await fork_session(again, "s", "s-fork")
        forked = await again.read_state("s-fork")
        assert forked is not None and forked["messages"] == after["messages"]
        return after

    after = asyncio.run(write_resume_fork())
    if kind == "memory":
        return  # (no command reaches a workspace in memory)

    # `ctxoffload compact` takes the idle session's lease and writes its state.json; an
    # agent resumes from what it wrote.
    assert main(["compact", "s", "--workdir", workdir, "--instructions", "keep paths"]) == 0

    async def resume_compacted() -> None:
        compacted = await new_object().read_state("s")
        assert compacted is not None and len(compacted["messages"]) < len(after["messages"])
        async with agent_on(new_object(), ["after compaction"]) as last:
            await last.reply("and now")
        final = await new_object().read_state("s")
        assert final is not None and final["messages"][-1]["content"] == "after compaction"

    asyncio.run(resume_compacted())
