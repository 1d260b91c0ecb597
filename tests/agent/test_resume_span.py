"""An agent killed in the middle of a compression and resumed: its summary (or window note)
names exactly the lines of context.jsonl holding the messages it replaced, whether it was
killed between compression steps or mid-batch (its lines written, not yet counted), on disk
and in a bucket, and no message is logged twice."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
from collections.abc import Callable
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
    ObjectStoreWorkspace,
    ScriptedModel,
    SqlWorkspace,
    get_token_counter,
)
from ctxoffload.compression import SlidingWindow, is_summary_message
from ctxoffload.compression._notes import is_window_note
from ctxoffload.workspace import Workspace
from helpers import SUMMARY

SpawnPython = Callable[..., "subprocess.Popen[str]"]

# The agent both scripts run: 30 questions, each answered after two big tool results, in a
# 6,000-token window, with the offloader and summary model each script gives it.
AGENT_LOOP = """
from ctxoffload import Agent, ContextConfig, ScriptedModel, ToolCallBlock, get_token_counter

def fetch(page: int) -> str:
    \"\"\"Fetch a page.\"\"\"
    return "\\n".join(f"page {page} line {j} " + "x" * 40 for j in range(60))

script = []
for i in range(30):
    script += [
        ToolCallBlock(id=f"c{i}a", name="fetch", input={"page": i}),
        ToolCallBlock(id=f"c{i}b", name="fetch", input={"page": i + 100}),
        f"answer {i} " + "words " * 50,
    ]

async def run(offloader, summary_model):
    agent = Agent(
        name="tester", system_prompt="You test things.", model=ScriptedModel(script),
        tools=[fetch], summary_model=summary_model, offloader=offloader,
        counter=get_token_counter(exact=False),
        context_config=ContextConfig(context_window=6000, tool_result_limit=300),
        session_id="run")
    for i in range(30):
        await agent.reply(f"question {i} " + "long words " * (400 if i % 3 == 0 else 20))
"""

# An agent whose first compression is stopped for good between its steps: the older messages
# are in context.jsonl (persist), the summary model never answers (summarise), so neither
# the summary nor state.json is written. It prints "summarising" when it gets there.
KILLED_WHILE_SUMMARISING = (
    AGENT_LOOP
    + """
import asyncio, sys
from ctxoffload import LocalWorkspace

async def never_answer(messages):
    print("summarising", flush=True)
    await asyncio.Event().wait()

asyncio.run(run(LocalWorkspace(sys.argv[1]), ScriptedModel(default=never_answer)))
"""
)


def resumed_agent(ws: Workspace) -> Agent:
    """The agent that takes the killed writer's session "run" back, with the window it had."""
    return Agent(
        name="tester",
        system_prompt="You test things.",
        model=ScriptedModel([]),
        summary_model=ScriptedModel(default=SUMMARY),
        offloader=ws,
        counter=get_token_counter(exact=False),
        context_config=ContextConfig(context_window=6000, tool_result_limit=300),
        session_id="run",
    )


def _covered(spans: Any) -> set[int]:
    return {line for first, last in spans for line in range(first, last + 1)}


async def test_a_resumed_summary_names_the_lines_it_replaced(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    child = spawn_python(KILLED_WHILE_SUMMARISING, str(workdir))
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line == "summarising\n", child.communicate()[1]
    os.kill(child.pid, signal.SIGKILL)
    child.communicate()
    ws = LocalWorkspace(workdir)
    log = ws.context_path("run")
    logged = [json.loads(row) for row in log.read_bytes().splitlines()]
    assert logged, "the killed compression wrote nothing to context.jsonl"
    saved = await ws.read_state("run")
    assert saved is not None
    before = {m["id"] for m in saved["messages"] if m["role"] != "system"}

    # Resumed with a smaller window for this check: the split differs from the killed one,
    # so some messages it wrote stay in the context and others leave.
    resumed = resumed_agent(ws)
    result = await resumed.compress_context(
        ContextConfig(context_window=3000, tool_result_limit=300)
    )
    assert result.compressed
    left = before - {m.id for m in result.messages}
    logged = [json.loads(row) for row in log.read_bytes().splitlines()]
    replaced = {number for number, row in enumerate(logged, 1) if row.get("id") in left}
    [summary] = [m for m in result.messages if is_summary_message(m)]
    spans = summary.metadata["ctxoffload"]["spans"]
    assert _covered(spans) == replaced, (spans, sorted(replaced))


# The same agent, killed in the middle of its second compression's batch: after the lines are
# written and before they count (on disk, before the commit record is updated; in a bucket,
# once the segment is put and before the workspace returns). argv: backend, where, and for a
# bucket the workspace's keyword arguments as JSON.
KILLED_MID_BATCH = (
    AGENT_LOOP
    + """
import asyncio, json, os, signal, sys
from ctxoffload import LocalWorkspace, ObjectStoreWorkspace
from ctxoffload._disk import jsonl as _jsonl
from ctxoffload.workspace import _segments

batches = []

def die_at_the_second_batch():
    batches.append(1)
    if len(batches) == 2:
        os.kill(os.getpid(), signal.SIGKILL)

if sys.argv[1] == "local":
    ws = LocalWorkspace(sys.argv[2])
    encode = _jsonl.encode_commit_record

    def killing(size, lines, tail=b""):
        if lines:  # a batch's commit, not the empty record a new log starts with
            die_at_the_second_batch()
        return encode(size, lines, tail)

    _jsonl.encode_commit_record = killing
else:
    ws = ObjectStoreWorkspace(sys.argv[2], **json.loads(sys.argv[3]))
    append = _segments.SegmentLog.append

    async def killing(self, key, payload):
        span = await append(self, key, payload)
        if key.endswith("/context.jsonl"):
            die_at_the_second_batch()
        return span

    _segments.SegmentLog.append = killing

summary = {"task_overview": "t", "current_state": "s", "important_discoveries": "d",
           "next_steps": "n", "context_to_preserve": "c"}
asyncio.run(run(ws, ScriptedModel(default=summary)))
"""
)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "bucket"])
@pytest.mark.parametrize("window", [4500, 3000])
async def test_a_summary_resumed_after_a_kill_mid_batch_names_exactly_its_lines(
    workdir: Path, spawn_python: SpawnPython, backend: str, window: int, request: Any
) -> None:
    ws: Workspace
    if backend == "local":
        child = spawn_python(KILLED_MID_BATCH, "local", str(workdir))
        ws = LocalWorkspace(workdir)
    else:
        s3 = request.getfixturevalue("s3")
        bucket = s3.new_bucket()
        url = f"s3://{bucket}/agents"
        child = spawn_python(KILLED_MID_BATCH, "bucket", url, json.dumps(s3.workspace_kwargs()))
        ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    assert child.wait() == -signal.SIGKILL, child.communicate()[1]
    if backend == "bucket":
        # Its lease would lapse by itself within a minute (the store's clock decides); here
        # the record says it is over, as a released one does.
        s3.put_object(bucket, "agents/sessions/run/lease.json", b'{"released": "lapsed"}\n')
    reference = ws.context_path("run")

    resumed = resumed_agent(ws)
    result = await resumed.compress_context(
        ContextConfig(context_window=window, tool_result_limit=300)
    )
    assert result.compressed
    kept = {m.id for m in result.messages}
    logged = [json.loads(row) for row in (await ws.read_reference(reference)).splitlines()]
    # No message is in the log twice, and the summary names exactly the lines of those that
    # left the context (a message the killed batch wrote may stay in it, with another split).
    ids = [row["id"] for row in logged]
    assert len(ids) == len(set(ids)), "a message is in the log twice"
    left = {number for number, row in enumerate(logged, 1) if row["id"] not in kept}
    [summary] = [m for m in result.messages if is_summary_message(m)]
    spans = summary.metadata["ctxoffload"]["spans"]
    assert _covered(spans) == left, (spans, sorted(left))


async def test_a_window_note_names_only_the_lines_of_the_messages_it_dropped(
    workdir: Path,
) -> None:
    # The log holds a message the context still has (as a killed run that split otherwise
    # leaves it) and, after it, one the context no longer has: the window drops the first
    # and later ones, which land after both.
    ws = LocalWorkspace(workdir)
    first = Msg(role="user", content="first question")
    await ws.offload_context("s1", [first, Msg(role="user", content="another writer's")])
    context = [
        first,
        Msg(role="assistant", content="first answer"),
        Msg(role="user", content="second question"),
        Msg(role="assistant", content="second answer"),
    ]
    await ws.write_state("s1", {"messages": [m.model_dump(mode="json") for m in context]})
    model = ScriptedModel(["third answer"], context_window=32_000)
    agent = Agent(
        model=model,
        offloader=ws,
        context_config=ContextPipeline(pre_llm=[SlidingWindow(max_messages=2)]),
        session_id="s1",
    )
    await agent.reply("third question")
    [note] = [m for m in model.calls[0] if is_window_note(m)]
    sent = {m.id for m in model.calls[0]}
    logged = [json.loads(row) for row in ws.context_path("s1").read_bytes().splitlines()]
    dropped = {n for n, row in enumerate(logged, 1) if row["id"] in {m.id for m in context}}
    dropped -= {n for n, row in enumerate(logged, 1) if row["id"] in sent}
    assert 1 in dropped and 2 not in dropped
    spans = note.metadata["ctxoffload"]["spans"]
    assert _covered(spans) == dropped, (spans, sorted(dropped))


async def test_a_compaction_resumed_says_exactly_which_lines_it_wrote(workdir: Path) -> None:
    ws = LocalWorkspace(workdir)
    first = Msg(role="user", content="first question " + "words " * 200)
    await ws.offload_context("s1", [first, Msg(role="user", content="another writer's")])
    context = [first, Msg(role="assistant", content="first answer " + "words " * 200)]
    for i in range(2, 6):
        context.append(Msg(role="user", content=f"question {i} " + "words " * 200))
        context.append(Msg(role="assistant", content=f"answer {i} " + "words " * 200))
    await ws.write_state("s1", {"messages": [m.model_dump(mode="json") for m in context]})
    agent = Agent(
        model=ScriptedModel([], context_window=32_000),
        summary_model=ScriptedModel(default=SUMMARY),
        offloader=ws,
        counter=get_token_counter(exact=False),
        session_id="s1",
    )
    result = await agent.compact()
    assert result.compressed and result.line_span is not None
    logged = [json.loads(row) for row in ws.context_path("s1").read_bytes().splitlines()]
    left = {m.id for m in context} - {m.id for m in result.messages}
    lines = {n for n, row in enumerate(logged, 1) if row["id"] in left}
    assert 1 in lines and 2 not in lines
    assert _covered([list(s) for s in result.spans]) == lines
    last = max(lines)
    assert result.spans_text() == f"1, 3-{last}" if last > 3 else "1, 3"


# The agent of AGENT_LOOP, killed right after its first compression's offload returned and
# before state.json was written: the log holds the messages it moved out, its state.json the
# context from before (so the resumed agent, which has no newer question, keeps the newest
# one, "question 2", which the killed run moved out). argv: backend, where, and for a bucket
# the workspace's keyword arguments as JSON.
KILLED_AFTER_THE_OFFLOAD = (
    AGENT_LOOP
    + """
import asyncio, json, os, signal, sys
from ctxoffload import LocalWorkspace, ObjectStoreWorkspace, SqlWorkspace

backend, where = sys.argv[1], sys.argv[2]
if backend == "local":
    ws = LocalWorkspace(where)
elif backend == "sqlite":
    ws = SqlWorkspace(where)
else:
    ws = ObjectStoreWorkspace(where, **json.loads(sys.argv[3]))
offload = ws.offload_context

async def killed_once_stored(session_id, msgs):
    await offload(session_id, msgs)
    os.kill(os.getpid(), signal.SIGKILL)

ws.offload_context = killed_once_stored
summary = {"task_overview": "t", "current_state": "s", "important_discoveries": "d",
           "next_steps": "n", "context_to_preserve": "c"}
asyncio.run(run(ws, ScriptedModel(default=summary)))
"""
)


class _Killed(BaseException):
    """What stops the in-memory agent where the others are killed: nothing catches it."""


async def _killed_in_memory() -> InMemoryWorkspace:
    """AGENT_LOOP's agent on an InMemoryWorkspace, stopped as KILLED_AFTER_THE_OFFLOAD stops
    it (its memory is its process: the agent resumed is in the same one)."""
    ws = InMemoryWorkspace()
    offload = ws.offload_context

    async def killed_once_stored(session_id: str, msgs: Any) -> Any:
        await offload(session_id, msgs)
        raise _Killed

    ws.offload_context = killed_once_stored  # type: ignore[method-assign]
    namespace: dict[str, Any] = {}
    exec(AGENT_LOOP, namespace)
    with pytest.raises(_Killed):
        await namespace["run"](ws, ScriptedModel(default=SUMMARY))
    del ws.offload_context  # the workspace's own method again
    # Its lease is released, as the kernel or the store's clock frees a dead process's.
    lease = await ws.acquire_lease("run", agent="cleanup")
    await lease.release()
    return ws


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "memory", "sqlite", "bucket"])
async def test_a_reference_names_exactly_the_lines_of_its_messages_after_a_kill(
    tmp_path: Path,
    spawn_python: SpawnPython,
    backend: str,
    request: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ws: Any
    if backend == "memory":
        ws = await _killed_in_memory()
    else:
        if backend == "local":
            ws, args = LocalWorkspace(tmp_path / "ws"), ["local", str(tmp_path / "ws")]
        elif backend == "sqlite":
            url = f"sqlite:///{tmp_path / 'ws.db'}"
            ws, args = SqlWorkspace(url), ["sqlite", url]
        else:
            s3 = request.getfixturevalue("s3")
            bucket = s3.new_bucket()
            url = f"s3://{bucket}/agents"
            ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
            args = ["bucket", url, json.dumps(s3.workspace_kwargs())]
        child = spawn_python(KILLED_AFTER_THE_OFFLOAD, *args)
        assert child.wait() == -signal.SIGKILL, child.communicate()[1]
        if backend == "bucket":
            s3.put_object(bucket, "agents/sessions/run/lease.json", b'{"released": "lapsed"}\n')
    saved = await ws.read_state("run")
    assert saved is not None
    context = [Msg.model_validate(m) for m in saved["messages"]]

    resumed = resumed_agent(ws)
    with caplog.at_level(logging.INFO, logger="ctxoffload"):
        result = await resumed.compress_context(
            ContextConfig(context_window=4500, tool_result_limit=300)
        )
    assert result.compressed
    kept = {m.id for m in result.messages}
    left = [m for m in context if m.role != "system" and m.id not in kept]
    reference = ws.context_path("run")
    logged = [json.loads(row) for row in (await ws.read_reference(reference)).splitlines()]
    lines = sorted(n for n, row in enumerate(logged, 1) if row["id"] in {m.id for m in left})
    runs = _runs(lines)
    # What makes the re-run hard: a message the killed run moved out stays in the context
    # now, between lines of messages that leave.
    assert len(runs) > 1, lines
    said = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)

    # The summary, the sentence said of its compression (by `show`, `watch`, the viewer and
    # the log), the batch's event and the reference the workspace returns all name exactly
    # those lines, never the span from the first to the last.
    [summary] = [m for m in result.messages if is_summary_message(m)]
    assert set(lines) <= _covered(summary.metadata["ctxoffload"]["spans"])
    [compressed] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("comp")]
    assert f"context.jsonl lines {said};" in compressed, compressed
    [*_, batch] = [e for e in await ws.read_events("run") if e["kind"] == "context"]
    assert [tuple(run) for run in batch["spans"]] == runs
    again = await ws.offload_context("run", left)
    assert list(again.spans) == runs
    assert again.line_span == said
    assert str(again) == str(reference)


def _runs(lines: list[int]) -> list[tuple[int, int]]:
    """Sorted line numbers as runs of consecutive lines, `(first, last)`."""
    runs: list[tuple[int, int]] = []
    for n in lines:
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


# AGENT_LOOP's agent on a folder, killed at one point of its first compaction (argv: the
# folder and the point): once the older messages are stored (`offload`), once they are read
# back (`read_back`), while its summary is asked for (`summary`), before and after the
# compaction's events are written (`events_before`, `events_after`), while the model is called
# with the compacted context (`model`), before state.json is written (`state`).
KILLED_AT_A_POINT = (
    AGENT_LOOP
    + """
import asyncio, os, signal, sys
from ctxoffload import LocalWorkspace

ws, point = LocalWorkspace(sys.argv[1]), sys.argv[2]
stored = []

def die_at(here):
    if stored and here == point:
        os.kill(os.getpid(), signal.SIGKILL)

def after(name, here):
    method = getattr(ws, name)
    async def wrapped(*args, **kwargs):
        done = await method(*args, **kwargs)
        if name == "offload_context":
            stored.append(1)
        die_at(here)
        return done
    setattr(ws, name, wrapped)

after("offload_context", "offload")
after("read_lines", "read_back")
after("read_reference", "read_back")
record, write_state = ws.record_events, ws.write_state

async def record_events(session_id, events):
    compaction = any(kind == "compression" for kind, _ in events)
    if compaction:
        die_at("events_before")
    await record(session_id, events)
    if compaction:
        die_at("events_after")

async def state(session_id, saved):
    die_at("state")
    return await write_state(session_id, saved)

ws.record_events, ws.write_state = record_events, state
summary = {"task_overview": "t", "current_state": "s", "important_discoveries": "d",
           "next_steps": "n", "context_to_preserve": "c"}

async def summarise(messages):
    die_at("summary")
    return summary

async def reply(messages):
    die_at("model")
    return script.pop(0)

# The loop's agent, its model and summary model dying where asked.
scripted = ScriptedModel
ScriptedModel = lambda steps=(), default=None: scripted(  # noqa: E731
    default=reply if steps else summarise
)
asyncio.run(run(ws, ScriptedModel()))
"""
)

POINTS = ["offload", "read_back", "summary", "events_before", "events_after", "model", "state"]


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
async def test_every_span_named_after_a_kill_holds_the_messages_it_names(
    workdir: Path, spawn_python: SpawnPython, point: str
) -> None:
    """The agent killed at each point of a compaction, then resumed on the session for six
    more requests: every line span named anywhere (each `context` and `compression` event,
    each summary sent, each artifact's line, the saved state's summary) holds exactly the
    messages it says, and no message is in the log twice."""
    child = spawn_python(KILLED_AT_A_POINT, str(workdir), point)
    assert child.wait() == -signal.SIGKILL, child.communicate()[1]
    ws = LocalWorkspace(workdir)
    resumed = resumed_agent(ws)
    resumed.model = ScriptedModel([f"answer {i}" for i in range(6)])
    for i in range(6):
        await resumed.reply(f"question {30 + i} " + "long words " * 600)
    await resumed.aclose()

    rows = [json.loads(row) for row in ws.context_path("run").read_bytes().splitlines()]
    copies = [json.dumps({**row, "timestamp": None}, sort_keys=True) for row in rows]
    assert len(copies) == len(set(copies)), "a message is in the log twice"
    said: dict[str, dict[str, Any]] = {}
    compactions = 0
    for event in await ws.read_events("run"):
        kind = event["kind"]
        if kind in ("context", "compression"):
            compactions += kind == "compression"
            runs = event.get("spans") or [event["lines"]]
            assert len(_covered(runs)) == event["messages"], event
        elif kind == "artifacts":
            for artifact in event["artifacts"]:
                if artifact.get("line") is not None:
                    assert artifact["value"] in json.dumps(rows[artifact["line"] - 1]), artifact
        elif kind == "message":
            said[event["message"]["id"]] = event["message"]
        elif kind == "model_call":
            sent = set(event["messages"])
            for mark in (said[i].get("metadata", {}).get("ctxoffload") for i in sent):
                if mark and mark.get("kind") == "summary":
                    named = _covered(mark["spans"])
                    assert max(named) <= len(rows)
                    assert not {n for n in named if rows[n - 1]["id"] in sent}, event["step"]
    assert compactions >= 2, "the resumed agent must compact too"
    saved = await ws.read_state("run")
    assert saved is not None
    context = {m["id"] for m in saved["messages"]}
    for mark in (m.get("metadata", {}).get("ctxoffload") for m in saved["messages"]):
        if mark and mark.get("kind") == "summary":
            assert not {n for n in _covered(mark["spans"]) if rows[n - 1]["id"] in context}
