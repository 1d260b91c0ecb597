"""`WorkspaceSession` under the real OpenAI Agents SDK: the conversation's items as an
append-only log (history.jsonl) on every workspace, held to what the SDK's own `SQLiteSession`
gives back; a big output stored once; pop, clear and compaction appended, never rewritten;
a kill -9 mid-add losing nothing acknowledged; the filter of the same conversation on the
same ctxoffload session."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("agents", "openai_agents")

from agents import (  # noqa: E402
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import Session  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from openai_agents_scripted import call, run  # noqa: E402
from workspace_kinds import bucket, local, memory  # noqa: E402

from ctxoffload import (  # noqa: E402
    ConfigError,
    ContextConfig,
    InMemoryWorkspace,
    LocalWorkspace,
    OffloadError,
    SqlWorkspace,
)
from ctxoffload.integrations.openai_agents import (  # noqa: E402
    OffloadingInputFilter,
    WorkspaceSession,
)
from ctxoffload.workspace import HistoryLog, Workspace  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402

set_tracing_disabled(True)

CONFIG = ContextConfig(context_window=8_000, tool_result_limit=300)
BIG = "".join(f"03:{i % 60:02d} INFO export batch {i} done\n" for i in range(1_800))  # ~50 KB


@function_tool
def dump() -> str:
    """Dump the export job's log."""
    return BIG


def sqlite(tmp_path: Path) -> Workspace:
    return SqlWorkspace(f"sqlite:///{tmp_path / 'ws.db'}")


@pytest.fixture(params=[local, memory, bucket, sqlite], ids=lambda f: f.__name__)
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Workspace:
    make: Callable[[Path], Workspace] = request.param
    return make(tmp_path)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def history_file(folder: Path, session: str = "t1") -> Path:
    return folder / "sessions" / session / "history.jsonl"


async def test_the_session_gives_back_what_the_sdks_sqlite_session_does(
    workspace: Workspace,
) -> None:
    image = {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "what is in it? été 日本"},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64,iVBORw0KGgo=",
                "detail": "auto",
            },
        ],
    }
    call_item = {"type": "function_call", "call_id": "c1", "name": "status", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    ours = WorkspaceSession(workspace, "t1", summary_model=False)
    theirs = SQLiteSession("t1")
    assert isinstance(ours, Session)
    for session in (ours, theirs):
        assert await session.pop_item() is None
        await session.add_items([user("one"), image])
        await session.add_items([call_item, output, {"role": "assistant", "content": "done"}])
        await session.add_items([])
    steps = [
        lambda s: s.get_items(),
        lambda s: s.get_items(limit=2),
        lambda s: s.get_items(limit=0),
        lambda s: s.get_items(limit=-1),
        lambda s: s.get_items(limit=99),
        lambda s: s.pop_item(),
        lambda s: s.get_items(),
        lambda s: s.add_items([user("two")]),
        lambda s: s.get_items(limit=1),
        lambda s: s.clear_session(),
        lambda s: s.get_items(),
        lambda s: s.pop_item(),
        lambda s: s.add_items([user("three")]),
        lambda s: s.get_items(),
    ]
    for step in steps:
        assert await step(ours) == await step(theirs)
    theirs.close()


async def test_a_new_object_on_the_store_reads_what_another_left(tmp_path: Path) -> None:
    """As a process started later, or one that writes beside this one, sees it."""
    for make in (local, sqlite):
        first = WorkspaceSession(make(tmp_path), "t1", summary_model=False)
        second = WorkspaceSession(make(tmp_path), "t1", summary_model=False)
        await first.add_items([user("a"), user("b")])
        assert await second.get_items() == [user("a"), user("b")]
        await second.add_items([user("c")])
        assert await first.pop_item() == user("c")  # it reads what the other added first
        await first.add_items([user("d")])
        assert await second.get_items() == [user("a"), user("b"), user("d")]
        await second.clear_session()
        await first.add_items([user("e")])
        assert await second.get_items() == await first.get_items() == [user("e")]


async def test_each_call_appends_one_line_and_rewrites_nothing(tmp_path: Path) -> None:
    session = WorkspaceSession(
        LocalWorkspace(tmp_path / "ws"), "t1", config=CONFIG, summary_model=False
    )
    log = history_file(tmp_path / "ws")
    before = b""
    for i in range(40):
        await session.add_items([user(f"step {i}: " + "details " * 60), user(f"noted {i}")])
        if i % 10 == 9:
            await session.pop_item()
        if i == 30:
            await session.run_compaction({"force": True})
        now = log.read_bytes()
        assert now.startswith(before)  # what was written stays as it was
        before = now
    assert len(before.splitlines()) == 40 + 4 + 1
    assert not (tmp_path / "ws" / "sessions" / "t1" / "state.json").exists()
    again = WorkspaceSession(LocalWorkspace(tmp_path / "ws"), "t1", summary_model=False)
    assert await again.get_items() == await session.get_items()
    assert "<context_summary>" in json.dumps((await again.get_items())[0])


async def test_get_items_reads_only_what_the_log_gained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    real = LocalWorkspace.read_history

    async def spied(self: LocalWorkspace, session_id: str, *, after: int = 0) -> Any:
        reads.append(after)
        return await real(self, session_id, after=after)

    monkeypatch.setattr(LocalWorkspace, "read_history", spied)
    session = WorkspaceSession(LocalWorkspace(tmp_path / "ws"), "t1", summary_model=False)
    for i in range(50):
        await session.add_items([user(f"turn {i}")])
    assert reads == []  # adding reads nothing back
    assert len(await session.get_items(limit=3)) == 3
    assert reads == [50]  # from the end: the 50 lines it wrote are not read again
    fresh = WorkspaceSession(LocalWorkspace(tmp_path / "ws"), "t1", summary_model=False)
    assert len(await fresh.get_items()) == 50
    assert reads[-1] == 0  # a new object reads the log once


async def test_a_big_output_is_stored_once_and_the_item_keeps_what_the_model_was_sent(
    tmp_path: Path,
) -> None:
    session = WorkspaceSession(
        LocalWorkspace(tmp_path / "ws"), "nightly check", config=CONFIG, summary_model=False
    )
    offload = session.input_filter()
    assert isinstance(offload, OffloadingInputFilter)
    assert offload.session_id == session.session_id  # one ctxoffload session
    with OpenAIServer() as server:
        server.add(call("dump", {}, "call_1"))
        server.add_completion("The export finished.")
        await run(server, offload, [dump, *offload.tools], "dump the log", session=session)
    folder = tmp_path / "ws" / "sessions" / session.session_id
    assert sorted(p.name for p in folder.glob("tool_result-*")) == ["tool_result-call_1.txt"]
    assert (folder / "tool_result-call_1.txt").read_text(encoding="utf-8") == BIG
    items = await session.get_items()
    (kept,) = [item for item in items if item.get("type") == "function_call_output"]
    assert kept["output"].startswith(BIG[:100]) and "tool_result-call_1.txt" in kept["output"]
    assert len(kept["output"]) < 5_000
    # What the session keeps is what the model was sent for it.
    (sent,) = [m for m in server.requests[1]["messages"] if m.get("tool_call_id") == "call_1"]
    assert sent["content"] == kept["output"]
    # The 50 KB are on disk once: in the file, not in the history.
    log = history_file(tmp_path / "ws", session.session_id).read_bytes()
    assert len(log) < 8_000 and BIG[-200:].encode() not in log
    # Stored and cut once, for the session and the model both: one record of each.
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    kinds = [
        e["kind"]
        for e in events
        if e.get("tool_id") == "call_1" or "call_1" in str(e.get("reference", ""))
    ]
    assert kinds.count("tool_result") == 1 and kinds.count("truncation") == 1


@function_tool(needs_approval=True)
def purge() -> str:
    """Purge the export's staging tables (asks a person first)."""
    return BIG


async def test_a_run_resumed_after_an_approval_saves_its_turn_lean(tmp_path: Path) -> None:
    """The SDK saves a turn resumed from a `RunState` through its pending-write path, which
    reads the session's tail before it appends: lean items go through it."""
    session = WorkspaceSession(
        LocalWorkspace(tmp_path / "ws"), "t1", config=CONFIG, summary_model=False
    )
    offload = session.input_filter()
    with OpenAIServer() as server:
        server.add(call("purge", {}, "call_1"))
        server.add_completion("Purged.")
        async with AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
            model = OpenAIChatCompletionsModel(model="test-model", openai_client=client)
            agent = Agent(name="ops", model=model, tools=[purge])
            config = RunConfig(call_model_input_filter=offload)
            first = await Runner.run(agent, "purge staging", run_config=config, session=session)
            (asked,) = first.interruptions
            state = first.to_state()
            state.approve(asked)
            done = await Runner.run(agent, state, run_config=config, session=session)
    assert done.final_output == "Purged."
    items = await session.get_items()
    assert [item.get("type", "message") for item in items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert "tool_result-call_1.txt" in items[2]["output"] and len(items[2]["output"]) < 5_000


async def test_keep_whole_outputs_keeps_each_item_as_the_sdk_gave_it(tmp_path: Path) -> None:
    session = WorkspaceSession(
        LocalWorkspace(tmp_path / "ws"),
        "t1",
        config=CONFIG,
        keep_whole_outputs=True,
        summary_model=False,
    )
    output = {"type": "function_call_output", "call_id": "c1", "output": BIG}
    await session.add_items([output])
    assert await session.get_items() == [output]
    assert not list((tmp_path / "ws" / "sessions" / "t1").glob("tool_result-*"))


async def test_an_output_that_cannot_be_stored_stays_whole(tmp_path: Path) -> None:
    class FullDisk(LocalWorkspace):
        async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
            raise OffloadError("cannot write tool_result-c1.txt: no space left on device")

    session = WorkspaceSession(FullDisk(tmp_path / "ws"), "t1", config=CONFIG, summary_model=False)
    output = {"type": "function_call_output", "call_id": "c1", "output": BIG}
    await session.add_items([output])
    assert await session.get_items() == [output]  # nothing is dropped before it is stored


async def test_a_planted_link_is_never_written_through(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    session = WorkspaceSession(
        LocalWorkspace(tmp_path / "ws"), "t1", config=CONFIG, summary_model=False
    )
    await session.add_items([user("start")])
    folder = tmp_path / "ws" / "sessions" / "t1"
    (folder / "tool_result-c1.txt").symlink_to(tmp_path / "elsewhere" / "x.txt")
    output = {"type": "function_call_output", "call_id": "c1", "output": BIG}
    await session.add_items([output])
    kept = (await session.get_items())[-1]
    assert not list((tmp_path / "elsewhere").iterdir())
    # Stored under the next free name, which the item names.
    assert "tool_result-c1.2.txt" in kept["output"]
    assert (folder / "tool_result-c1.2.txt").read_text(encoding="utf-8") == BIG


async def test_the_filter_of_a_session_is_on_its_session(tmp_path: Path) -> None:
    session = WorkspaceSession(
        LocalWorkspace(tmp_path / "ws"), "../../etc/passwd", summary_model=False
    )
    assert "/" not in session.session_id
    offload = session.input_filter(memory=True)
    assert offload.session_id == session.session_id
    assert offload.config is session.config and offload.workspace is session.workspace
    assert "memory" in [tool.name for tool in offload.tools]
    other = ContextConfig(context_window=64_000)
    assert session.input_filter(config=other).config is other
    with pytest.raises(ConfigError, match="leave it out"):
        session.input_filter(session_id="other")


async def test_a_workspace_that_keeps_no_history_is_refused_at_construction() -> None:
    class NoHistory:
        """A workspace of one's own that keeps no history log."""

        def __init__(self) -> None:
            self._workspace = InMemoryWorkspace()

        def __getattr__(self, name: str) -> Any:
            if name in ("append_history", "read_history"):
                raise AttributeError(name)
            return getattr(self._workspace, name)

    with pytest.raises(ConfigError, match="append_history, read_history"):
        WorkspaceSession(NoHistory(), "t1", summary_model=False)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not a ctxoffload Workspace"):
        WorkspaceSession(object(), "t1", summary_model=False)  # type: ignore[arg-type]
    # A path is refused naming the class the user built, not the door's filter.
    with pytest.raises(ConfigError, match=r"^WorkspaceSession: workspace is the path 'ws'"):
        WorkspaceSession("ws", "t1", summary_model=False)  # type: ignore[arg-type]
    assert WorkspaceSession(InMemoryWorkspace(), "t1", summary_model=False).session_id == "t1"


async def test_an_add_a_kill_cut_part_way_is_never_seen_half(tmp_path: Path) -> None:
    session = WorkspaceSession(LocalWorkspace(tmp_path / "ws"), "t1", summary_model=False)
    await session.add_items([user("a"), user("b")])
    log = history_file(tmp_path / "ws")
    whole = log.read_bytes()
    await session.add_items([user("c" * 1_000), user("d")])
    log.write_bytes(log.read_bytes()[: len(whole) + 500])  # the write, cut by a kill
    fresh = WorkspaceSession(LocalWorkspace(tmp_path / "ws"), "t1", summary_model=False)
    assert await fresh.get_items() == [user("a"), user("b")]
    await fresh.add_items([user("e")])
    again = WorkspaceSession(LocalWorkspace(tmp_path / "ws"), "t1", summary_model=False)
    assert await again.get_items() == [user("a"), user("b"), user("e")]


WRITER = """
import asyncio, sys
from ctxoffload import LocalWorkspace
from ctxoffload.integrations.openai_agents import WorkspaceSession

async def main():
    session = WorkspaceSession(LocalWorkspace(sys.argv[1]), "t1", summary_model=False)
    first = int(sys.argv[2])
    for i in range(first, first + 10_000):
        body = f"{i}:" + "x" * int(sys.argv[3])
        answer = {"role": "assistant", "content": f"ack {i}"}
        await session.add_items([{"role": "user", "content": body}, answer])
        print(i, flush=True)

asyncio.run(main())
"""


def test_a_kill_mid_add_loses_no_acknowledged_item_and_leaves_no_half_one(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ws"
    size = 400_000  # a write long enough to be cut part-way
    acknowledged: list[int] = []
    rng = random.Random(56)
    for _ in range(6):
        first = acknowledged[-1] + 1 if acknowledged else 0
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(folder), str(first), str(size)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        for _ in range(rng.randint(1, 4)):
            acknowledged.append(int(child.stdout.readline()))
        time.sleep(rng.random() * 0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        acknowledged += [int(n) for n in child.stdout.read().split()]  # printed before it died
        child.stdout.close()

    items = asyncio.run(
        WorkspaceSession(LocalWorkspace(folder), "t1", summary_model=False).get_items()
    )
    # Pairs, each whole; every acknowledged pair there, in order; at most one more per kill.
    assert len(items) % 2 == 0
    numbers = []
    for asked, answered in zip(items[::2], items[1::2], strict=True):
        n, body = asked["content"].split(":", 1)
        assert body == "x" * size and answered["content"] == f"ack {n}"
        numbers.append(int(n))
    assert set(acknowledged) <= set(numbers)
    assert numbers == sorted(numbers) and len(numbers) - len(set(acknowledged)) <= 6
    # The session goes on after the kills: the next add lands whole after them.
    session = WorkspaceSession(LocalWorkspace(folder), "t1", summary_model=False)
    asyncio.run(session.add_items([user("after")]))
    assert asyncio.run(
        WorkspaceSession(LocalWorkspace(folder), "t1", summary_model=False).get_items()
    )[-1] == user("after")


# Two writers of one conversation (two workers, two processes): the log's order decides.

WRITERS = ContextConfig(context_window=4_000, tool_result_limit=300)
SUMMARY = "<context_summary>"


def conversation(turns: int = 30) -> list[dict[str, Any]]:
    return [
        item
        for t in range(turns)
        for item in (user(f"M{t}u " + "detail " * 30), {"role": "assistant", "content": f"M{t}a"})
    ]


@pytest.fixture(params=[local, sqlite], ids=lambda f: f.__name__)
def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Workspace, Workspace]:
    """Two workspace objects on one store, as two workers have (in memory nothing waits
    between the reads and the writes of two objects: no race to lose there)."""
    make: Callable[[Path], Workspace] = request.param
    first = make(tmp_path)
    return first, make(tmp_path)


async def two_sessions(stores: tuple[Workspace, Workspace]) -> list[WorkspaceSession]:
    a, b = (WorkspaceSession(store, "t1", config=WRITERS, summary_model=False) for store in stores)
    await a.add_items(conversation())
    return [a, b]


async def compacted_alone() -> list[Any]:
    """What one compaction of `conversation()` leaves, with nobody beside it."""
    session = WorkspaceSession(InMemoryWorkspace(), "t1", config=WRITERS, summary_model=False)
    await session.add_items(conversation())
    await session.run_compaction({"force": True})
    return await session.get_items()


async def assert_compacted_once(sessions: list[WorkspaceSession]) -> None:
    alone = await compacted_alone()
    for session in sessions:
        items = await session.get_items()
        assert [SUMMARY in json.dumps(item) for item in items] == [True] + [False] * (
            len(alone) - 1
        )
        assert items[1:] == alone[1:] == conversation()[-(len(alone) - 1) :]


async def test_two_workers_compacting_at_once_leave_one_summary_and_each_turn_once(
    two_stores: tuple[Workspace, Workspace],
) -> None:
    a, b = await two_sessions(two_stores)
    await b.get_items()  # both have read the conversation
    await asyncio.gather(a.run_compaction({"force": True}), b.run_compaction({"force": True}))
    fresh = WorkspaceSession(two_stores[0], "t1", summary_model=False)
    await assert_compacted_once([a, b, fresh])


@pytest.mark.parametrize("make", [local, sqlite], ids=lambda f: f.__name__)
async def test_two_threads_compacting_at_once_leave_one_summary_and_each_turn_once(
    make: Callable[[Path], Workspace], tmp_path: Path
) -> None:
    await two_sessions((make(tmp_path), make(tmp_path)))
    start = threading.Barrier(2)
    failed: list[BaseException] = []

    def compact() -> None:
        session = WorkspaceSession(make(tmp_path), "t1", config=WRITERS, summary_model=False)

        async def go() -> None:
            await session.get_items()
            start.wait()
            await session.run_compaction({"force": True})

        try:
            asyncio.run(go())  # a loop of its own, as a worker has
        except BaseException as exc:  # raised again in the test's thread
            failed.append(exc)

    threads = [threading.Thread(target=compact) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failed == []
    await assert_compacted_once([WorkspaceSession(make(tmp_path), "t1", summary_model=False)])


async def test_two_compactions_that_both_append_fold_to_the_first(
    two_stores: tuple[Workspace, Workspace], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both past their last read before either appends: the log's order decides.
    a, b = await two_sessions(two_stores)
    await b.get_items()
    store = type(two_stores[0])
    real = store.append_history
    arrived: list[Any] = []
    both_there = asyncio.Event()  # no asyncio.Barrier before Python 3.11

    async def held(self: Any, session_id: str, record: Any) -> int:
        if "base" in record:
            arrived.append(record)
            if len(arrived) == 2:
                both_there.set()
            await both_there.wait()
        return await real(self, session_id, record)

    monkeypatch.setattr(store, "append_history", held)
    await asyncio.gather(a.run_compaction({"force": True}), b.run_compaction({"force": True}))
    log = two_stores[0]
    assert isinstance(log, HistoryLog)
    assert sum("base" in record for _, record in await log.read_history("t1")) == 2
    await assert_compacted_once([a, b, WorkspaceSession(two_stores[0], "t1", summary_model=False)])


COMPACTOR = """
import asyncio, pathlib, sys, time
from ctxoffload import ContextConfig, LocalWorkspace, SqlWorkspace
from ctxoffload.integrations.openai_agents import WorkspaceSession

async def main():
    where, go = sys.argv[1], pathlib.Path(sys.argv[2])
    store = SqlWorkspace(where) if where.startswith("sqlite") else LocalWorkspace(where)
    config = ContextConfig(context_window=4_000)
    session = WorkspaceSession(store, "t1", config=config, summary_model=False)
    await session.get_items()
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    await session.run_compaction({"force": True})

asyncio.run(main())
"""


@pytest.mark.parametrize("make", [local, sqlite], ids=lambda f: f.__name__)
async def test_two_processes_compacting_at_once_leave_one_summary_and_each_turn_once(
    make: Callable[[Path], Workspace], tmp_path: Path
) -> None:
    await two_sessions((make(tmp_path), make(tmp_path)))
    where = str(tmp_path / "ws") if make is local else f"sqlite:///{tmp_path / 'ws.db'}"
    go = tmp_path / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", COMPACTOR, where, str(go)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
    go.touch()
    for child in children:
        assert child.wait(timeout=120) == 0
        assert child.stdout is not None
        child.stdout.close()
    await assert_compacted_once([WorkspaceSession(make(tmp_path), "t1", summary_model=False)])


async def test_an_add_beside_a_compaction_is_kept_once_after_the_summary(
    two_stores: tuple[Workspace, Workspace],
) -> None:
    a, b = await two_sessions(two_stores)
    late = [user("late question"), {"role": "assistant", "content": "late answer"}]
    await asyncio.gather(a.run_compaction({"force": True}), b.add_items(late))
    alone = await compacted_alone()
    for session in (a, b, WorkspaceSession(two_stores[0], "t1", summary_model=False)):
        items = await session.get_items()
        assert SUMMARY in json.dumps(items[0])
        assert items[1:] == [*alone[1:], *late]


async def test_a_pop_beside_a_compaction_removes_the_item_for_good(
    two_stores: tuple[Workspace, Workspace],
) -> None:
    a, b = await two_sessions(two_stores)
    await b.get_items()
    _, popped = await asyncio.gather(a.run_compaction({"force": True}), b.pop_item())
    assert popped == conversation()[-1]
    alone = await compacted_alone()
    for session in (a, b, WorkspaceSession(two_stores[0], "t1", summary_model=False)):
        items = await session.get_items()
        assert popped not in items
        if SUMMARY in json.dumps(items[0]):  # the compaction applied, one summary
            assert SUMMARY not in json.dumps(items[1:])
            kept = items[1:]
            # Either it came first, then the pop; or the pop came before it read the items
            # (it compacted the rest): the newest turns stay as they were, the popped gone.
            assert kept in (alone[1:-1], conversation()[:-1][-len(kept) :])
        else:  # the pop came first: the compaction found its items changed
            assert items == conversation()[:-1]


async def test_two_pops_at_once_remove_the_two_latest_items(
    two_stores: tuple[Workspace, Workspace],
) -> None:
    a, b = await two_sessions(two_stores)
    await b.get_items()
    popped = await asyncio.gather(a.pop_item(), b.pop_item())
    assert sorted(map(json.dumps, popped)) == sorted(map(json.dumps, conversation()[-2:]))
    assert await a.get_items() == await b.get_items() == conversation()[:-2]


async def test_a_clear_beside_a_compaction_leaves_the_conversation_empty(
    two_stores: tuple[Workspace, Workspace],
) -> None:
    a, b = await two_sessions(two_stores)
    await b.get_items()
    await asyncio.gather(a.run_compaction({"force": True}), b.clear_session())
    for session in (a, b, WorkspaceSession(two_stores[0], "t1", summary_model=False)):
        assert await session.get_items() == []


async def test_a_log_where_two_compactions_replaced_the_same_items_folds_to_the_first(
    tmp_path: Path,
) -> None:
    # As two compactions at once left it before they were told apart: the second new start
    # names items the first had replaced. It is skipped; both stay in the log.
    workspace = LocalWorkspace(tmp_path / "ws")
    await workspace.append_history("t1", {"add": [user("a"), user("b"), user("c")]})
    await workspace.append_history(
        "t1", {"base": [user("S1"), user("c")], "replaces": [[1, 0], [1, 1], [1, 2]]}
    )
    await workspace.append_history(
        "t1", {"base": [user("S2"), user("c")], "replaces": [[1, 0], [1, 1], [1, 2]]}
    )
    await workspace.append_history("t1", {"add": [user("d")]})
    session = WorkspaceSession(workspace, "t1", summary_model=False)
    assert await session.get_items() == [user("S1"), user("c"), user("d")]
    assert await session.pop_item() == user("d")
    await session.clear_session()
    assert await session.get_items() == []
    assert len(history_file(tmp_path / "ws").read_text().splitlines()) == 6
