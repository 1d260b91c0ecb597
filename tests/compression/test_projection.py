"""The Projector: a host's whole history, sent on every call, projected the same way each time."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    ConfigError,
    ContextConfig,
    InvalidContent,
    InvalidSessionId,
    LocalWorkspace,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    to_msgs,
    to_openai,
)
from ctxoffload.compression import Projector
from ctxoffload.model import ScriptedModel
from helpers import AppendCounting, EventsOneByOne, plausible_session, summary_reply

CONFIG = ContextConfig(context_window=3000, tool_result_limit=200)
BIG = "\n".join(f"row {i}: " + "x" * 40 for i in range(2000))


def _model(mark: str) -> ScriptedModel:
    """A summary model whose every summary says `mark`."""
    return ScriptedModel([], default=summary_reply(mark))


def _bytes(messages: list[Msg]) -> bytes:
    """What a host would send: the messages serialised (OpenAI shape)."""
    return json.dumps(to_openai(messages), sort_keys=True).encode()


def _tool_turn(call_id: str, output: str) -> list[Msg]:
    return [
        Msg(role="assistant", content=[ToolCallBlock(id=call_id, name="grep", input={})]),
        Msg(role="tool", content=[ToolResultBlock(id=call_id, name="grep", output=output)]),
    ]


async def test_a_big_tool_result_is_sent_as_its_head_and_the_host_keeps_it_whole(
    local_ws: LocalWorkspace,
) -> None:
    history = [Msg(role="user", content="find the failing row"), *_tool_turn("c1", BIG)]
    projector = Projector(local_ws, "t1", config=CONFIG)
    sent = await projector.project(history)
    result = sent[2].tool_results[0]
    assert len(str(result.output)) < len(BIG) / 10
    stored = local_ws.session_dir("t1") / "tool_result-c1.txt"
    assert str(stored) in str(result.output)
    assert stored.read_text() == BIG
    assert history[2].tool_results[0].output == BIG  # the host's history is untouched


async def test_the_same_history_projects_to_the_same_bytes_and_one_more_message_to_the_tail(
    local_ws: LocalWorkspace,
) -> None:
    history = [Msg(role="user", content="go"), *_tool_turn("c1", BIG)]
    projector = Projector(local_ws, "t1", config=CONFIG)
    first = await projector.project(history)
    again = await projector.project(list(history))
    assert _bytes(again) == _bytes(first)
    assert all(a is b for a, b in zip(again, first, strict=True))
    longer = await projector.project([*history, Msg(role="assistant", content="row 7 fails")])
    assert longer[: len(first)] == first
    assert [m.text for m in longer[len(first) :]] == ["row 7 fails"]
    truncations = [e for e in await local_ws.read_events("t1") if e["kind"] == "truncation"]
    assert len(truncations) == 1  # decided once, re-applied after


async def test_a_long_history_is_summarised_once_and_the_summary_is_re_sent_as_is(
    local_ws: LocalWorkspace,
) -> None:
    system = Msg(role="system", content="You debug builds.")
    history = [system, *plausible_session(120)]
    projector = Projector(local_ws, "t1", config=CONFIG)
    first = await projector.project(history)
    assert first[0] is system
    assert len(first) < len(history)
    # Every message that left the context is in context.jsonl.
    logged = {m["id"] for m in await local_ws.read_context("t1")}
    sent_ids = {m.id for m in first}
    assert {m.id for m in history[1:]} - sent_ids <= logged
    following = [*history, Msg(role="user", content="and now?")]
    second = await projector.project(following)
    assert _bytes(second[: len(first)]) == _bytes(first)
    assert second[-1].text == "and now?"


async def test_a_summary_model_given_after_the_projector_was_made_writes_the_summary(
    local_ws: LocalWorkspace,
) -> None:
    # A host door sees the agent's model only at its first call, after it made the projector.
    projector = Projector(local_ws, "t1", config=CONFIG)
    writer = _model("later")
    projector.use_summary_model(writer)
    sent = await projector.project(plausible_session(120))
    assert writer.calls and "later task_overview" in _bytes(sent).decode()


async def test_a_restarted_process_projects_the_same_messages(local_ws: LocalWorkspace) -> None:
    # Each process has a model that would summarise differently: the restarted one sends the
    # summary the first one decided (read back from the session), not one of its own.
    history = [Msg(role="system", content="s"), *plausible_session(120), *_tool_turn("c9", BIG)]
    first = Projector(local_ws, "t1", config=CONFIG, model=_model("first"))
    before = await first.project(history)
    assert "first task_overview" in _bytes(before).decode()
    restarted = Projector(local_ws, "t1", config=CONFIG, model=_model("restarted"))
    after = await restarted.project(history)
    assert _bytes(after) == _bytes(before)


async def test_messages_without_ids_are_known_by_their_content(local_ws: LocalWorkspace) -> None:
    def history() -> list[dict[str, Any]]:  # new objects every call, as a host re-serialises
        return [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "grep", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": BIG},
        ]

    projector = Projector(local_ws, "t1", config=CONFIG)
    first = await projector.project(history())
    second = await projector.project(history())
    assert _bytes(second) == _bytes(first)
    assert len(_bytes(first)) < len(BIG) / 5


async def test_a_history_that_no_longer_holds_what_was_summarised_is_sent_as_it_is(
    local_ws: LocalWorkspace,
) -> None:
    history = plausible_session(120)
    projector = Projector(local_ws, "t1", config=CONFIG)
    await projector.project(history)
    rewritten = [Msg(role="user", content="a fresh start")]
    assert [m.text for m in await projector.project(rewritten)] == ["a fresh start"]


def test_a_sync_host_projects_from_any_thread(tmp_path: Path) -> None:
    projector = Projector(LocalWorkspace(tmp_path), "t1", config=CONFIG)
    history = [Msg(role="user", content="go"), *_tool_turn("c1", BIG)]
    results: list[bytes] = []

    def host() -> None:
        results.append(_bytes(projector.project_sync(history)))

    threads = [threading.Thread(target=host) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and len(set(results)) == 1
    assert len(results[0]) < len(BIG) / 5


async def test_what_is_not_a_history_is_refused_in_one_line_naming_the_message(
    local_ws: LocalWorkspace,
) -> None:
    projector = Projector(local_ws, "t1", config=CONFIG)
    with pytest.raises(InvalidContent, match="takes the whole history as a list"):
        await projector.project("hello")  # type: ignore[arg-type]
    with pytest.raises(InvalidContent, match=r"history\[1\] has role 'nope'"):
        await projector.project([{"role": "user", "content": "a"}, {"role": "nope"}])
    with pytest.raises(InvalidSessionId):
        Projector(local_ws, "../elsewhere")
    assert await projector.project([]) == []


async def test_a_host_that_drops_messages_does_not_keep_them_in_memory(
    local_ws: LocalWorkspace,
) -> None:
    projector = Projector(local_ws, "t1", config=ContextConfig(context_window=200_000))
    for start in range(0, 400, 20):  # a sliding history: 20 new messages, 20 dropped
        await projector.project(plausible_session(200)[start % 200 :] if start else [])
        await projector.project([Msg(role="user", content=f"turn {start} {i}") for i in range(20)])
    assert len(projector._seen) <= 2 * 20 + 64


async def test_a_restarted_process_does_not_read_again_what_a_summary_stands_for(
    local_ws: LocalWorkspace,
) -> None:
    history = [*_tool_turn("early", BIG), *plausible_session(120)]
    await Projector(local_ws, "t1", config=CONFIG).project(history)
    events = await local_ws.read_events("t1")
    assert any(e["kind"] == "projection" for e in events)
    await Projector(local_ws, "t1", config=CONFIG).project(history)
    again = await local_ws.read_events("t1")
    truncated = [e for e in again[len(events) :] if e["kind"] == "truncation"]
    assert truncated == []  # the early result is under the summary: not cut again


def test_a_result_cut_by_the_tool_hook_is_projected_as_it_is(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path)
    projector = Projector(workspace, "t1", config=CONFIG)
    small = ToolResultBlock(id="c0", name="grep", output="3 rows")
    assert projector.offload_tool_result_sync(small) is small
    cut = projector.offload_tool_result_sync(ToolResultBlock(id="c1", name="grep", output=BIG))
    stored = workspace.session_dir("t1") / "tool_result-c1.txt"
    assert stored.read_text() == BIG
    assert str(stored) in str(cut.output) and len(str(cut.output)) < len(BIG) / 10
    # The host keeps the cut result; projecting it stores nothing more and changes nothing.
    history = [Msg(role="user", content="go"), *_tool_turn("c1", str(cut.output))]
    assert projector.project_sync(history) == history
    assert [p.name for p in stored.parent.glob("tool_result-*")] == ["tool_result-c1.txt"]


async def test_a_forced_projection_summarises_below_the_trigger_and_is_re_applied(
    local_ws: LocalWorkspace,
) -> None:
    history = [Msg(role="user", content=f"step {i}: " + "y" * 200) for i in range(12)]
    projector = Projector(local_ws, "t1", config=CONFIG, model=_model("FORCED"))
    assert await projector.project(history) == history  # under the trigger
    forced = await projector.project(history, force=True)
    assert len(forced) < len(history) and "FORCED" in _bytes(forced).decode()
    assert _bytes(await projector.project(history)) == _bytes(forced)


@pytest.mark.slow
async def test_show_rebuilds_what_each_projected_call_sent_and_a_retry_is_its_next_attempt(
    tmp_path: Path,
) -> None:
    """A host's model calls are recorded as the Agent's are: `ctxoffload show --step N`
    prints exactly what the projection sent at call N (the head of a cut result, the summary
    after a compaction), and a restarted process goes on numbering the steps."""
    import subprocess
    import sys

    def show(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "ctxoffload", "show", "--workdir", str(tmp_path), *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    history: list[Msg] = [Msg(role="user", content="find the failing row"), *_tool_turn("c1", BIG)]
    projector = Projector(LocalWorkspace(tmp_path), "t1", config=CONFIG)
    first = await projector.project(history)
    history.append(Msg(role="assistant", content="row 7 fails"))
    second = await projector.project(history)
    again = await projector.project(history, force=True)  # the provider refused: a retry
    for step, sent in ((1, first), (2, second)):
        shown = json.loads(show("t1", "--step", str(step), "--json"))
        assert [m["id"] for m in shown["messages"]] == [m.id for m in sent]
    assert "tool_result-c1.txt" in show("t1", "--step", "1", "--full")
    assert BIG not in show("t1", "--step", "1", "--full")  # the head, as the model saw it
    # The retry is step 2's second attempt; the step rebuilt is its last attempt, the summary.
    shown = json.loads(show("t1", "--step", "2", "--json"))
    assert [m["id"] for m in shown["messages"]] == [m.id for m in again]
    timeline = show("t1")
    assert "step 2 · model call (attempt 2)" in timeline and "projected" in timeline

    restarted = Projector(LocalWorkspace(tmp_path), "t1", config=CONFIG)
    history.append(Msg(role="user", content="and row 8?"))
    latest = await restarted.project(history)
    shown = json.loads(show("t1", "--step", "3", "--json"))
    assert [m["id"] for m in shown["messages"]] == [m.id for m in latest]


async def test_a_history_converted_anew_on_every_call_is_neither_processed_nor_recorded_again(
    local_ws: LocalWorkspace,
) -> None:
    """Hosts convert their history to `Msg`s on every call (new objects, new timestamps): a
    message already projected is not processed again, and the record holds it once."""
    import asyncio

    def converted(count: int) -> list[Msg]:
        return [
            Msg(role="user" if i % 2 == 0 else "assistant", content=f"turn {i}", id=f"m{i}")
            for i in range(count)
        ]

    projector = Projector(local_ws, "t1", config=ContextConfig(context_window=100_000))
    first = await projector.project(converted(10))
    await asyncio.sleep(0.002)  # the next conversion's timestamps differ
    again = await projector.project(converted(11))
    assert all(a is b for a, b in zip(first, again[:10], strict=True))
    events = await local_ws.read_events("t1")
    recorded = [e["message"]["id"] for e in events if e["kind"] == "message"]
    assert recorded == [f"m{i}" for i in range(11)]
    # A new projector on the session (the next run of a host, a new process) records only
    # what the record does not hold yet.
    restarted = Projector(LocalWorkspace(local_ws.workdir), "t1", config=CONFIG)
    await restarted.project(converted(12))
    events = await local_ws.read_events("t1")
    recorded = [e["message"]["id"] for e in events if e["kind"] == "message"]
    assert recorded == [f"m{i}" for i in range(12)]


async def test_a_long_new_message_cut_by_a_compaction_is_sent_cut_on_this_call_and_after(
    local_ws: LocalWorkspace,
) -> None:
    # The model's own answer runs far past the window (a reasoning loop): the compaction that
    # its turn sets off cuts its text to a head naming the file that holds it whole. That cut
    # is what this call sends, and every later call, not only what the compaction returned.
    history = plausible_session(40)
    rambling = "\n".join(f"thinking step {i}: " + "y" * 60 for i in range(600))
    history += [
        Msg(
            role="assistant",
            content=[
                TextBlock(text=rambling),
                ToolCallBlock(id="c-last", name="grep", input={"pattern": "x"}),
            ],
        ),
        Msg(role="tool", content=[ToolResultBlock(id="c-last", name="grep", output="no match")]),
    ]
    projector = Projector(local_ws, "t1", config=CONFIG)
    sent = await projector.project(history)
    assert projector.counter.count_messages(sent) < CONFIG.context_window
    cut = next(m for m in sent if m.id == history[-2].id)
    assert cut.tool_calls == history[-2].tool_calls
    stored = [p for p in local_ws.session_dir("t1").iterdir() if p.name.startswith("tool_result")]
    assert [p.read_text() for p in stored if p.name in cut.text] == [rambling]
    again = await projector.project(list(history))
    assert _bytes(again) == _bytes(sent)


async def test_a_call_is_recorded_in_one_append_its_messages_before_it(tmp_path: Path) -> None:
    # One write and one flush to disk per model call, not one per message: the host waits
    # for the record before its model is called.
    workspace = AppendCounting(tmp_path)
    projector = Projector(workspace, "t1", config=CONFIG)
    history = [Msg(role="user", content="go"), Msg(role="assistant", content="on it")]
    await projector.project(history)
    await projector.project([*history, Msg(role="user", content="and then?")])
    assert workspace.appends == [["message", "message", "model_call"], ["message", "model_call"]]
    kinds = [e["kind"] for e in await workspace.read_events("t1")]
    assert kinds == ["message", "message", "model_call", "message", "model_call"]


async def test_a_compacting_call_writes_its_events_with_its_record_in_one_append(
    tmp_path: Path,
) -> None:
    # What leaves is stored first (context.jsonl and its `context` event, written by the
    # workspace itself); the compaction's own events then go with the call's record.
    workspace = AppendCounting(tmp_path)
    projector = Projector(workspace, "t1", config=CONFIG)
    history = [Msg(role="system", content="You debug builds."), *plausible_session(120)]
    sent = await projector.project(history)
    assert len(sent) < len(history)
    (append,) = workspace.appends
    assert append[-1] == "model_call"
    assert {"summary", "compression", "projection"} <= set(append)
    kinds = [e["kind"] for e in await workspace.read_events("t1")]
    assert kinds.index("context") < kinds.index("summary") < kinds.index("compression")
    assert kinds.index("compression") < kinds.index("projection") < kinds.index("model_call")
    # The next call, with nothing to compact, appends its record alone, and events are
    # written at once again between calls (a cut made by the tool hook).
    await projector.project([*history, Msg(role="user", content="and now?")])
    assert workspace.appends[1] == ["message", "model_call"]
    await projector.offload_tool_result(ToolResultBlock(id="c7", name="grep", output=BIG))
    assert workspace.appends[2:] == [["truncation"]]


async def test_an_event_log_without_batches_gets_each_event_in_order(tmp_path: Path) -> None:
    inner = LocalWorkspace(tmp_path)
    projector = Projector(EventsOneByOne(inner), "t1", config=CONFIG)
    await projector.project([Msg(role="user", content="go"), Msg(role="assistant", content="ok")])
    kinds = [e["kind"] for e in await inner.read_events("t1")]
    assert kinds == ["message", "message", "model_call"]


_KILLED_BEFORE_RECORD = """
import asyncio, json, os, signal, sys
from ctxoffload import ContextConfig, LocalWorkspace, Msg
from ctxoffload.compression import Projector
from ctxoffload.model import ScriptedModel

history_file, workdir, reply, form = sys.argv[1:5]
with open(history_file, encoding="utf-8") as lines:
    history = [json.loads(line) if form == "dicts" else Msg.model_validate_json(line)
               for line in lines]

async def killed(self, *args, **kwargs):
    # The compaction is done (what left is in context.jsonl, its events held): the call's
    # record, which would write them, is never reached.
    os.kill(os.getpid(), signal.SIGKILL)

Projector._record = killed
projector = Projector(
    LocalWorkspace(workdir),
    "t1",
    config=ContextConfig(context_window=3000, tool_result_limit=200),
    model=ScriptedModel([], default=json.loads(reply)),
)
asyncio.run(projector.project(history))
"""


@pytest.mark.slow
@pytest.mark.parametrize("form", ["messages", "dicts"])
def test_a_process_killed_between_a_compaction_and_its_record_loses_nothing(
    tmp_path: Path, form: str
) -> None:
    # A compaction's summary, compression and projection events are held and written with
    # the call's record; what leaves is stored before (context.jsonl and its `context`
    # event). Killed in between, the process loses those events only: the next process
    # finds every message that left in context.jsonl once, compacts again and records it.
    # A history of dicts without ids too: each message got a new random id in each
    # process, so the next one stored them all again, under other ids.
    import asyncio
    import signal
    import subprocess
    import sys

    from ctxoffload.cli import main as cli

    messages = [Msg(role="system", content="You debug builds."), *plausible_session(120)]
    history: list[Any] = messages
    if form == "dicts":
        history = [{k: v for k, v in d.items() if k != "id"} for d in to_openai(messages)]
    given = tmp_path / "history.jsonl"
    lines = [json.dumps(m if form == "dicts" else m.model_dump(mode="json")) for m in history]
    given.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    workdir = tmp_path / "ws"
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            _KILLED_BEFORE_RECORD,
            str(given),
            str(workdir),
            json.dumps(summary_reply("before the kill")),
            form,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    workspace = LocalWorkspace(workdir)
    kinds = [e["kind"] for e in asyncio.run(workspace.read_events("t1"))]
    assert "context" in kinds
    assert not {"summary", "compression", "projection", "model_call"} & set(kinds)
    stored_first = [m["id"] for m in asyncio.run(workspace.read_context("t1"))]
    assert stored_first and len(set(stored_first)) == len(stored_first)

    restarted = Projector(workspace, "t1", config=CONFIG, model=_model("after the kill"))
    sent = asyncio.run(restarted.project(history))
    assert "after the kill" in _bytes(sent).decode()
    rows = asyncio.run(workspace.read_context("t1"))
    assert [row["id"] for row in rows[: len(stored_first)]] == stored_first  # the kill's kept
    # Each message stored once (what it says, whatever its id), every one that left.
    stored = [_says(Msg.model_validate(row)) for row in rows]
    assert len(set(stored)) == len(stored)
    # (A dict is read on its own, as the projector reads it: a result's tool name is not
    # taken from the call before it.)
    read = messages if form == "messages" else [to_msgs([d])[0] for d in history]
    left = {_says(m) for m in read} - {_says(m) for m in sent}
    assert left and left <= set(stored)
    kinds = [e["kind"] for e in asyncio.run(workspace.read_events("t1"))]
    assert kinds.count("model_call") == 1 and "compression" in kinds
    assert cli(["verify", "--workdir", str(workdir), "t1"]) == 0
    assert cli(["show", "--workdir", str(workdir), "t1", "--step", "1"]) == 0


def _says(msg: Msg) -> str:
    """What a message says, whatever its id and time."""
    return msg.model_dump_json(include={"role", "content"})


def test_a_projector_serves_runs_on_new_event_loops_with_results_stored_at_once(
    local_ws: LocalWorkspace,
) -> None:
    """A host may run each of a session's runs on a loop of its own (ADK's `Runner.run`, an
    `asyncio.run` per request): two big results of one step stored at once (their steps wait
    on one another) on a first loop, then on a second. The projector's lock belonged to the
    first loop: the second run raised "bound to a different event loop"."""
    import asyncio

    projector = Projector(local_ws, "t1", config=CONFIG)

    async def one_step(run: int) -> list[ToolResultBlock]:
        blocks = [
            ToolResultBlock(id=f"r{run}-c{i}", name="grep", output=f"run {run} call {i}\n{BIG}")
            for i in range(3)
        ]
        return list(await asyncio.gather(*map(projector.offload_tool_result, blocks)))

    for run in range(3):
        cuts = asyncio.run(one_step(run))
        for i, cut in enumerate(cuts):
            stored = local_ws.session_dir("t1") / f"tool_result-r{run}-c{i}.txt"
            assert str(stored) in str(cut.output)
            assert stored.read_text() == f"run {run} call {i}\n{BIG}"


async def test_a_resumed_projector_cuts_stand_ins_again_from_the_files_they_name(
    local_ws: LocalWorkspace,
) -> None:
    """A host cut twelve big results of one turn at its tool hook (`offload_tool_result`) and
    keeps the stand-ins; a new projector on the session (another process) must fit that turn
    into its reserve. It stored each stand-in again (`tool_result-c0.2.txt`, a copy of the
    notice) and sent a notice naming that copy. Each is now cut again from the file that
    holds the whole output, which its notice names; nothing is stored twice."""
    config = ContextConfig(context_window=4_000, tool_result_limit=300)
    whole = {f"c{i}": f"log {i}\n" + BIG for i in range(12)}
    first = Projector(local_ws, "s", config=config)
    kept = [
        await first.offload_tool_result(ToolResultBlock(id=cid, name="fetch", output=text))
        for cid, text in whole.items()
    ]
    calls = [ToolCallBlock(id=cid, name="fetch", input={}) for cid in whole]
    history = [
        Msg(role="user", content="fetch every log"),
        Msg(role="assistant", content=calls),
        *(Msg(role="tool", content=[block]) for block in kept),
    ]
    folder = local_ws.session_dir("s")
    files = sorted(p.name for p in folder.glob("tool_result-*"))
    assert len(files) == 12
    sent = await Projector(local_ws, "s", config=config).project(history)
    assert sorted(p.name for p in folder.glob("tool_result-*")) == files
    results = [block for msg in sent for block in msg.tool_results]
    assert len(results) == 12
    for block in results:
        stored = folder / f"tool_result-{block.id}.txt"
        assert str(stored) in str(block.output)
        assert stored.read_text() == whole[block.id]


@pytest.mark.parametrize("over_window", ["warn", "refuse"])
async def test_a_request_still_over_the_window_is_reported_or_refused(
    local_ws: LocalWorkspace, over_window: str
) -> None:
    """The newest turn alone over the window (a tool call whose arguments hold a whole
    file): the projection sent it with no word, and `over_window="refuse"` was ignored. It
    is reported as the Agent reports it (an `over_window` event and a WARNING), or refused
    with ContextOverflowError, nothing sent."""
    from ctxoffload import ContextOverflowError

    config = CONFIG.model_copy(update={"over_window": over_window})
    body = "\n".join(f"line {i}: " + "y" * 60 for i in range(600))
    call = ToolCallBlock(id="w1", name="write_file", input={"path": "/a.txt", "content": body})
    history = [
        Msg(role="user", content="write the file"),
        Msg(role="assistant", content=[call]),
    ]
    projector = Projector(local_ws, "t1", config=config)
    if over_window == "refuse":
        with pytest.raises(ContextOverflowError, match="over the 3,000-token window"):
            await projector.project(history)
    else:
        sent = await projector.project(history)
        assert sent[-1].tool_calls[0].input["content"] == body
    lines = (local_ws.session_dir("t1") / "events.jsonl").read_text().splitlines()
    (over,) = [e for e in map(json.loads, lines) if e["kind"] == "over_window"]
    assert over["window"] == 3_000 and over["tokens"] > 3_000
    assert over["action"] == ("refused" if over_window == "refuse" else "sent")


async def test_a_restarted_process_whose_first_call_compacts_lists_the_files_stored_since(
    tmp_path: Path,
) -> None:
    """The summary a restarted process makes at its first call is the unbroken run's: the
    files stored since the previous summary are read back from the record (they were in
    the first process's memory only), and listed as an unbroken run lists them, not left
    to the index ("Offloaded files: none" and a different summary were sent, so the
    provider's cache missed after the restart)."""
    base = [Msg(role="system", content="s"), *plausible_session(120)]
    histories = [base]
    for i in range(3):
        histories.append([*histories[-1], *_tool_turn(f"t{i}", BIG)])
    histories.append([*histories[-1], *plausible_session(120)[1:]])

    def neutral(messages: list[Msg], folder: Path) -> bytes:
        return _bytes(messages).replace(str(folder).encode(), b"WS")

    unbroken = Projector(LocalWorkspace(tmp_path / "a"), "t1", config=CONFIG)
    sent = [await unbroken.project(h) for h in histories]
    first = Projector(LocalWorkspace(tmp_path / "b"), "t1", config=CONFIG)
    for history in histories[:-1]:
        await first.project(history)
    restarted = Projector(LocalWorkspace(tmp_path / "b"), "t1", config=CONFIG)
    resumed = await restarted.project(histories[-1])
    events = await LocalWorkspace(tmp_path / "a").read_events("t1")
    compactions = [e for e in events if e["kind"] == "compression"]
    assert len(compactions) >= 2, "the last call must compact for this test to say anything"
    assert b"tool_result-t2.txt" in neutral(sent[-1], tmp_path / "a")
    assert neutral(resumed, tmp_path / "b") == neutral(sent[-1], tmp_path / "a")


async def test_a_summary_model_given_at_a_call_writes_the_summary_but_never_sets_the_window(
    tmp_path: Path,
) -> None:
    """A door names the agent's model at each call (`project(summary_model=...)`); an adapted
    host model reports a window that may be a guess, which must not become the projector's:
    with no window known, the call is refused as before."""
    history = [Msg(role="user", content=f"question {i} " * 60) for i in range(30)]
    writer = ScriptedModel(default=summary_reply("per-call"), context_window=32_000)
    unknown = Projector(LocalWorkspace(tmp_path / "a"), "s")
    with pytest.raises(ConfigError, match="no context window is known"):
        await unknown.project(history, summary_model=writer)
    known = Projector(
        LocalWorkspace(tmp_path / "b"), "s", config=ContextConfig(context_window=2_000)
    )
    sent = await known.project(history, summary_model=writer)
    assert "per-call task_overview" in "\n".join(m.text for m in sent)
