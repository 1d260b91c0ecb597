"""ContextOffloadMiddleware under a real LangChain `create_agent`, offline (LangChain's own fake
chat model): tool results stored whole, checkpoints without the blob, compaction of a long
run, a byte-stable prefix, and a resumed thread projecting the same way."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import pytest
from frameworks import context_ids, require_framework, saver_bytes

require_framework("langchain", "langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware  # noqa: E402
from langchain_core.exceptions import ContextOverflowError  # noqa: E402
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.tools import InjectedToolCallId, ToolException, tool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from langchain_scripted import (  # noqa: E402
    CONFIG,
    ToolCallingFakeModel,
    agent_on,
    answers,
    call,
    converse,
    scripted,
    thread,
    wire,
)
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph.message import REMOVE_ALL_MESSAGES  # noqa: E402
from langgraph.types import Command  # noqa: E402
from pydantic import Field, ValidationError  # noqa: E402

from ctxoffload import ContextConfig, InMemoryWorkspace, LocalWorkspace, Summary  # noqa: E402
from ctxoffload.integrations.langchain import (  # noqa: E402
    ContextOffloadMiddleware,
    DeltaAgentState,
    from_langchain,
)
from ctxoffload.tokens import get_token_counter  # noqa: E402
from helpers import megabyte_output, retained_per_run  # noqa: E402

BIG = "".join(f"03:{i % 60:02d} INFO export batch {i} done\n" for i in range(160_000))  # ~5 MB


@tool
def dump() -> str:
    """Dump the export job's whole log."""
    return BIG


def tokens(messages: list[Any]) -> int:
    return get_token_counter(None).count_messages(from_langchain(messages))


def run_dump(tmp_path: Path, *, offload: bool) -> tuple[dict[str, Any], Any, InMemorySaver]:
    model = scripted(call("dump", {}, "call_1"), "The export finished.")
    saver = InMemorySaver()
    middleware = [
        ContextOffloadMiddleware(
            LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
        )
    ]
    agent = create_agent(
        model, tools=[dump], middleware=middleware if offload else [], checkpointer=saver
    )
    state = agent.invoke({"messages": [HumanMessage("dump the log")]}, thread("t1"))
    return state, model, saver


def test_a_5_mb_tool_result_is_stored_whole_and_state_keeps_its_head(tmp_path: Path) -> None:
    assert len(BIG) > 5_000_000
    state, model, _ = run_dump(tmp_path, offload=True)
    stored = tmp_path / "ws" / "sessions" / "t1" / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8") == BIG
    result = state["messages"][2]
    assert isinstance(result, ToolMessage)
    assert result.tool_call_id == "call_1" and result.status == "success" and result.id
    assert result.content.startswith(BIG[:200])
    assert "tool_result-call_1.txt" in result.content
    assert len(result.content) < 5_000
    second = model.seen[1]
    assert tokens(second) < CONFIG.context_window
    assert second[-1].content == result.content


async def test_an_async_run_stores_the_result_the_same_way(tmp_path: Path) -> None:
    model = scripted(call("dump", {}, "call_1"), "The export finished.")
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    agent = create_agent(model, tools=[dump], middleware=[offload])
    state = await agent.ainvoke({"messages": [HumanMessage("dump the log")]}, thread("a1"))
    stored = tmp_path / "ws" / "sessions" / "a1" / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8") == BIG
    assert "tool_result-call_1.txt" in state["messages"][2].content
    assert tokens(model.seen[1]) < CONFIG.context_window


@tool(return_direct=True)
def export() -> str:
    """Export the log: the whole log is the answer."""
    return BIG


def test_a_return_direct_tools_output_is_the_answer_whole_and_stored_when_sent_on(
    tmp_path: Path,
) -> None:
    # A `return_direct` tool ends the run with its output as the answer: the program gets it
    # whole (it got the head and a notice before). The conversation going on, the next
    # request sends it cut, stored whole first: nothing lost, nothing over the window.
    model = scripted(call("export", {}, "call_1"), "It was exported.")
    saver = InMemorySaver()
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    agent = create_agent(model, tools=[export], middleware=[offload], checkpointer=saver)

    state = agent.invoke({"messages": [HumanMessage("export the log")]}, thread("r1"))
    assert state["messages"][-1].content == BIG
    assert len(model.seen) == 1  # (the run ended at the tool)

    agent.invoke({"messages": [HumanMessage("and now?")]}, thread("r1"))
    sent = model.seen[1]
    assert tokens(sent) < CONFIG.context_window
    stored = tmp_path / "ws" / "sessions" / "r1" / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8") == BIG
    assert any("tool_result-call_1.txt" in str(m.content) for m in sent)


def test_the_checkpoints_hold_no_offloaded_blob(tmp_path: Path) -> None:
    _, _, without = run_dump(tmp_path / "without", offload=False)
    _, _, with_ = run_dump(tmp_path / "with", offload=True)
    plain, offloaded = saver_bytes(without), saver_bytes(with_)
    print(f"checkpoints: {plain:,} bytes without ctxoffload, {offloaded:,} with")
    assert plain > 3 * len(BIG)
    assert offloaded < 50_000


def test_the_projection_prefix_is_byte_stable_across_calls(tmp_path: Path) -> None:
    model = scripted(
        call("dump", {}, "call_1"), call("dump", {}, "call_2"), "Both dumps are stored."
    )
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    agent = create_agent(model, tools=[dump], middleware=[offload])
    agent.invoke({"messages": [HumanMessage("dump the log twice")]}, thread("s1"))
    sent = [wire(messages) for messages in model.seen]
    assert len(sent) == 3
    for before, after in itertools.pairwise(sent):
        assert after[: len(before)] == before


def test_a_200_turn_run_is_compacted_and_what_left_is_in_context_jsonl(tmp_path: Path) -> None:
    model = scripted(*answers(200))
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, full_state=True, summary_model=False
    )
    agent = create_agent(model, tools=[], middleware=[offload], checkpointer=InMemorySaver())
    state = converse(agent, range(200), "long")
    assert len(state["messages"]) == 400  # full_state: state keeps every message
    assert max(tokens(messages) for messages in model.seen) < CONFIG.context_window
    last = {m.id for m in model.seen[-1]}
    left = {m.id for m in state["messages"][:-1]} - last  # the last one is the last reply
    assert len(left) > 300
    assert left <= context_ids(tmp_path / "ws", "long")


def events(folder: Path, session: str, kind: str) -> list[dict[str, Any]]:
    """The events of one kind a session recorded."""
    lines = (folder / "sessions" / session / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["kind"] == kind]


def ever_in_state(agent: Any, name: str) -> dict[str, Any]:
    """Every message the thread's state held at any checkpoint, by id."""
    return {
        m.id: m
        for snapshot in agent.get_state_history(thread(name))
        for m in snapshot.values.get("messages", [])
    }


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
async def test_state_keeps_what_the_model_was_sent_and_what_left_is_stored(
    tmp_path: Path, run: str
) -> None:
    model = scripted(*answers(60))
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    agent = create_agent(model, tools=[], middleware=[offload], checkpointer=InMemorySaver())
    for turn in range(60):
        question = {"messages": [HumanMessage(f"Question {turn}: " + "and then? " * 30)]}
        if run == "invoke":
            state = agent.invoke(question, thread("lean"))
        else:
            state = await agent.ainvoke(question, thread("lean"))
    # The state is the last request (the system prompt is the request's own) and its answer.
    assert wire(state["messages"][:-1]) == wire(model.seen[-1])
    assert len(state["messages"]) < 20
    # Every message state ever held and no longer holds was stored before it left: in
    # context.jsonl, or (an earlier summary, folded into the next) in the session's record.
    left = set(ever_in_state(agent, "lean")) - {m.id for m in state["messages"]}
    assert len(left) > 90
    summaries = {
        m["id"] for e in events(tmp_path / "ws", "lean", "projection") for m in e["messages"]
    }
    assert left <= context_ids(tmp_path / "ws", "lean") | summaries


def test_after_several_compactions_state_holds_one_summary(tmp_path: Path) -> None:
    # The summary state holds is the projector's own: the next compaction folds it into the
    # new one instead of keeping it as a user message.
    model = scripted(*answers(120))
    agent = agent_on(tmp_path / "ws", model, InMemorySaver())
    state = converse(agent, range(120), "folds")
    projections = events(tmp_path / "ws", "folds", "projection")
    assert len(projections) > 5
    summaries = [m for m in state["messages"] if m.id == projections[-1]["messages"][0]["id"]]
    assert len(summaries) == 1
    assert sum("context.jsonl" in str(m.content) for m in state["messages"]) == 1


def test_lean_state_costs_a_fraction_of_full_states_checkpoints(tmp_path: Path) -> None:
    sizes = {}
    for full in (False, True):
        saver = InMemorySaver()
        offload = ContextOffloadMiddleware(
            LocalWorkspace(tmp_path / str(full)),
            config=CONFIG,
            full_state=full,
            summary_model=False,
        )
        model = scripted(*answers(150))
        converse(create_agent(model, middleware=[offload], checkpointer=saver), range(150), "c")
        sizes[full] = saver_bytes(saver)
    print(f"checkpoints: {sizes[True]:,} bytes with full state, {sizes[False]:,} lean")
    assert sizes[False] * 4 < sizes[True]


def test_delta_state_checkpoints_each_message_once(tmp_path: Path) -> None:
    sizes = {}
    for delta in (False, True):
        saver, model = InMemorySaver(), scripted(*answers(150))
        state = converse(
            agent_on(tmp_path / str(delta), model, saver, delta=delta), range(150), "d"
        )
        assert wire(state["messages"][:-1]) == wire(model.seen[-1])  # lean either way
        sizes[delta] = saver_bytes(saver)
    print(f"checkpoints: {sizes[False]:,} bytes lean, {sizes[True]:,} lean on deltas")
    assert sizes[True] * 3 < sizes[False]


def test_a_result_cut_in_the_request_is_checkpointed_alone(tmp_path: Path) -> None:
    # A fresh result under tool_result_limit but over the reserve is cut in the request (a
    # `projection_cut`), and state keeps the cut as it was sent. The checkpoint stores that
    # one message in place of the result, not every message of the request again: a cut once
    # wrote them all, and on shapes with many such results ctxoffload's checkpoints were
    # larger than deepagents' with WorkspaceBackend.
    @tool
    def fetch(page: int) -> str:
        """Fetch a page of the export log."""
        return f"page {page}: " + "row done " * 600

    # Three long answers bring the context near the trigger, where the result would pass it:
    # cut to fit, it passes it no more, and nothing is summarised.
    said = "the batch finished and the next one started. " * 170
    long = [f"Answer {i}: {said}" for i in range(3)]
    model = scripted(*long, call("fetch", {"page": 0}, "c0"), "Page 0 read.", "Noted.")
    saver = InMemorySaver()
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"),
        config=ContextConfig(context_window=8_000, tool_result_limit=3_000),
        summary_model=False,
    )
    agent = create_agent(
        model,
        tools=[fetch],
        middleware=[offload],
        checkpointer=saver,
        state_schema=DeltaAgentState,
    )
    state = converse(agent, range(5), "cut")
    assert events(tmp_path / "ws", "cut", "projection_cut")
    assert not events(tmp_path / "ws", "cut", "projection")  # no summary: nothing left
    (result,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(result.content) < len("row done " * 600)  # state keeps the cut
    assert wire(state["messages"][:-1]) == wire(model.seen[-1])
    written: dict[str, int] = {}
    for writes in saver.writes.values():
        for _task, channel, value, _path in writes.values():
            if channel != "messages":
                continue
            for message in saver.serde.loads_typed(value):
                assert message.id != REMOVE_ALL_MESSAGES
                written[message.id] = written.get(message.id, 0) + 1
    # Each message once, the result twice: as the tool gave it, and cut.
    assert written.pop(result.id) == 2
    assert set(written.values()) == {1}
    assert set(written) == {m.id for m in state["messages"]} - {result.id}


def test_a_request_another_middleware_edited_never_replaces_state(tmp_path: Path) -> None:
    # LangChain's context editing, outside this middleware, hands on a request whose old tool
    # results it cleared (copies; state holds them whole). State must not take that request's
    # messages: the results cleared in it are stored nowhere.
    @tool
    def fetch(page: int) -> str:
        """Fetch a page of the export log."""
        return f"page {page}: " + "row done " * 80

    replies: list[Any] = []
    for page in range(30):
        replies += [call("fetch", {"page": page}, f"c{page}"), f"Page {page}: " + "read. " * 90]
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    editing = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=800, keep=1)])
    agent = create_agent(
        scripted(*replies),
        tools=[fetch],
        middleware=[editing, offload],
        checkpointer=InMemorySaver(),
    )
    for page in range(30):
        state = agent.invoke({"messages": [HumanMessage(f"read page {page}")]}, thread("e"))
    assert events(tmp_path / "ws", "e", "projection")  # a summary stood in the request
    outputs = [m.content for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(outputs) == 30
    assert all(output.startswith("page ") for output in outputs)


def test_a_system_message_in_state_is_sent_and_kept(tmp_path: Path) -> None:
    model = scripted(*answers(40))
    agent = agent_on(tmp_path / "ws", model, InMemorySaver())
    rule = SystemMessage("Answer in one sentence.", id="rule")
    agent.invoke({"messages": [rule, HumanMessage("Question 0")]}, thread("sys"))
    state = converse(agent, range(1, 40), "sys")
    assert all(messages[0].id == "rule" for messages in model.seen)
    assert state["messages"][0].id == "rule"


def unbroken_run(folder: Path) -> tuple[list[list[str]], int]:
    """What 41 turns in one process send on each call, and a turn to resume at: one that
    extends the call before it (a summary made earlier is re-sent, none is made now)."""
    control = scripted(*answers(41))
    converse(agent_on(folder, control, InMemorySaver()), range(41), "t")
    sent = [wire(messages) for messages in control.seen]
    extends = [k for k in range(1, 41) if sent[k][: len(sent[k - 1])] == sent[k - 1]]
    return sent, max(k for k in extends if len(sent[k]) < 2 * k)  # after a summary


def test_a_resumed_thread_projects_the_same_messages(tmp_path: Path) -> None:
    # A new middleware and workspace object on the folder, as a restarted process has, runs
    # the turn from the checkpoint: it must send what the unbroken run sent.
    sent, turn = unbroken_run(tmp_path / "a")
    saver = InMemorySaver()
    converse(agent_on(tmp_path / "b", scripted(*answers(turn)), saver), range(turn), "t")
    resumed = scripted(*answers(turn + 1)[turn:])
    converse(agent_on(tmp_path / "b", resumed, saver), range(turn, turn + 1), "t")
    unbroken = [line.replace(str(tmp_path / "a"), "WS") for line in sent[turn]]
    again = [line.replace(str(tmp_path / "b"), "WS") for line in wire(resumed.seen[0])]
    assert again == unbroken


def test_one_middleware_keeps_the_state_of_the_threads_used_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One middleware serves every thread of a server: it kept each thread's projector and
    its converted messages (the whole history as ctxoffload messages) for good. Past
    `SESSIONS_KEPT`, the least recently used threads whose run is over are forgotten; one
    that comes back projects from its record and its checkpoint, sending what an unbroken
    run sends."""
    from ctxoffload._doors import runs

    sent, turn = unbroken_run(tmp_path / "a")
    monkeypatch.setattr(runs, "SESSIONS_KEPT", 2)
    saver = InMemorySaver()
    model = scripted(*answers(turn), *(f"other {k}" for k in range(5)), *answers(turn + 1)[turn:])
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "b"), config=CONFIG, summary_model=False
    )
    agent = create_agent(model, tools=[], middleware=[offload], checkpointer=saver)
    converse(agent, range(turn), "t")
    for k in range(5):
        converse(agent, range(1), f"other-{k}")
        assert len(offload._projectors) <= 2 and len(offload._converted) <= 2
    assert "t" not in offload._projectors and "t" not in offload._converted
    seen = len(model.seen)
    converse(agent, range(turn, turn + 1), "t")
    unbroken = [line.replace(str(tmp_path / "a"), "WS") for line in sent[turn]]
    again = [line.replace(str(tmp_path / "b"), "WS") for line in wire(model.seen[seen])]
    assert again == unbroken


def test_a_long_threads_readings_stay_the_size_of_its_state(tmp_path: Path) -> None:
    """The middleware reads each message of the state once and keeps the reading; those of
    messages moved out of the state (summarised) were kept for good, the whole thread's
    history in memory. Readings of messages the state no longer holds go."""
    model = scripted(*answers(120))
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    agent = create_agent(model, tools=[], middleware=[offload], checkpointer=InMemorySaver())
    state = converse(agent, range(120), "t")
    assert len(state["messages"]) < 120  # the state is as lean as the request
    assert len(offload._converted["t"]) <= 2 * len(state["messages"]) + 64 + 2


@pytest.mark.parametrize("state", ["default", "delta"])
def test_a_thread_resumed_in_a_new_process_projects_the_same_messages(
    tmp_path: Path, state: str
) -> None:
    # Not in the extra: .ci/run installs it beside it.
    pytest.importorskip(
        "langgraph.checkpoint.sqlite",
        reason="no langgraph-checkpoint-sqlite: pip install 'langgraph-checkpoint-sqlite>=3.1,<4' "
        "(.ci/run installs it beside the langchain extra)",
    )
    sent, turn = unbroken_run(tmp_path / "a")
    script = Path(__file__).with_name("langchain_resume.py")
    db, folder, out = tmp_path / "checkpoints.sqlite", tmp_path / "b", tmp_path / "sent.json"
    for first, last in ((0, turn), (turn, turn + 1)):
        args = [str(db), str(folder), str(first), str(last), str(out)]
        subprocess.run(
            [sys.executable, str(script), *args, *(["delta"] if state == "delta" else [])],
            check=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    (resumed,) = json.loads(out.read_text())
    unbroken = [line.replace(str(tmp_path / "a"), "WS") for line in sent[turn]]
    assert [line.replace(str(folder), "WS") for line in resumed] == unbroken


def test_the_agent_reads_an_offloaded_result_back_with_the_tools(tmp_path: Path) -> None:
    model = scripted(
        call("dump", {}, "call_1"),
        call("Grep", {"pattern": "batch 123456 done"}, "call_2"),
        "Batch 123456 finished.",
    )
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    assert [t.name for t in offload.tools] == [
        "Read",
        "Grep",
        "Glob",
    ]
    agent = create_agent(model, tools=[dump, *offload.tools], middleware=[offload])
    state = agent.invoke({"messages": [HumanMessage("find batch 123456")]}, thread("r1"))
    found = state["messages"][4]
    assert isinstance(found, ToolMessage) and found.tool_call_id == "call_2"
    assert "tool_result-call_1.txt" in found.content
    assert "batch 123456 done" in found.content


def test_the_tools_schemas_say_no_null_and_their_arguments_are_still_checked(
    tmp_path: Path,
) -> None:
    # The schemas go with every model call: an optional parameter is sent as its type alone
    # (no `anyOf [T, null]`, no `default: null`); a wrong argument is refused all the same.
    # (The retrieval tool comes with a workspace on no folder, the file tools with one on.)
    on_disk = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    in_memory = ContextOffloadMiddleware(InMemoryWorkspace(), config=CONFIG, summary_model=False)
    tools = [*on_disk.tools, *in_memory.tools]
    assert [t.name for t in tools] == ["Read", "Grep", "Glob", "retrieve_offloaded_content"]
    schemas = [convert_to_openai_tool(t)["function"]["parameters"] for t in tools]
    for schema in schemas:
        for field in schema["properties"].values():
            assert "anyOf" not in field and field.get("default", 0) is not None, field
    retrieve = schemas[3]["properties"]
    assert retrieve["line_range"] == {
        "description": "[first, last] line numbers, from 1.",
        "items": {"type": "integer"},
        "type": "array",
    }
    with pytest.raises(ValidationError):
        tools[3].invoke({"reference": "x", "line_range": "all"})


def test_middlewares_made_per_request_share_tool_schemas_and_read_their_own_workspace(
    tmp_path: Path,
) -> None:
    # A server that builds an agent per request makes a middleware each time: the tools'
    # argument models are made once per process, and each tool still reads its own
    # workspace, with its own output limit.
    one = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "one"), config=CONFIG, summary_model=False
    )
    two = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "two"),
        config=CONFIG,
        max_output_chars=4_000,
        memory=True,
        summary_model=False,
    )
    assert [t.args_schema for t in one.tools] == [t.args_schema for t in two.tools[:3]]
    assert [t.description for t in one.tools] == [t.description for t in two.tools[:3]]
    for name, folder in (("one", tmp_path / "one"), ("two", tmp_path / "two")):
        stored = folder / "sessions" / "s" / "tool_result-call_1.txt"
        stored.parent.mkdir(parents=True)
        stored.write_text(f"workspace {name}\n" + "filler line\n" * 2_000, encoding="utf-8")
    read_one = one.tools[0].invoke({"path": "sessions/s/tool_result-call_1.txt", "limit": 2_001})
    read_two = two.tools[0].invoke({"path": "sessions/s/tool_result-call_1.txt", "limit": 2_001})
    assert "workspace one" in read_one and "workspace two" not in read_one
    assert "workspace two" in read_two and "workspace one" not in read_two
    assert len(read_two) <= 4_000 < len(read_one)


def test_a_server_s_tools_made_per_request_are_not_kept_alive(tmp_path: Path) -> None:
    """A server keeps one middleware and makes its agent, model and tools per request. The
    middleware's table of converted tool schemas held every tool for good, with what its
    closure held (each request's 200 KB payload here); a tool is now held no longer than
    its caller holds it, and a tool kept across requests is converted once."""
    import gc
    import weakref

    from langchain_core.messages import AIMessage

    def tool_of_request(payload: str) -> Any:
        @tool
        def fetch() -> str:
            """Fetch the output."""
            return payload

        return fetch

    middleware = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    tools: list[weakref.ref[Any]] = []
    for number in range(5):
        fetch = tool_of_request(f"request {number} " + "x" * 200_000)
        model = ToolCallingFakeModel(
            messages=iter([call("fetch", {}, f"call_{number}"), AIMessage(content="done")])
        )
        agent = create_agent(model, tools=[fetch, *middleware.tools], middleware=[middleware])
        agent.invoke({"messages": [HumanMessage(f"q {number}")]}, thread(f"t-{number}"))
        tools.append(weakref.ref(fetch))
        del agent, model, fetch
    gc.collect()
    assert [ref() for ref in tools] == [None] * 5
    # The middleware's own read-back tools, used by every request, stay converted once.
    assert {id(t) for t in middleware.tools} == set(middleware._tool_schemas)


def test_a_server_keeps_no_output_of_a_thread_whose_run_is_over(tmp_path: Path) -> None:
    """One middleware serves every thread of a server and keeps each thread's projector for
    its next run (up to `SESSIONS_KEPT`). Each kept the whole text of the output its last call
    cut, and its counter the counts of long texts with the texts: 1.26 MB per thread of a
    1.1 MB output, up to 256 threads. Once a run is over its projector lets go of them; the
    output is in its file, where a result cut again is read back from."""
    middleware = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )

    def run(number: int) -> None:
        output = megabyte_output(number)

        @tool
        def fetch() -> str:
            """Fetch the output."""
            return output

        model = scripted(call("fetch", {}, f"call_{number}"), "done")
        agent = create_agent(model, tools=[fetch], middleware=[middleware])
        agent.invoke({"messages": [HumanMessage(f"q {number}")]}, thread(f"t{number}"))

    assert len(megabyte_output(0)) > 1_000_000
    assert retained_per_run(run) < 200_000
    assert len(middleware._projectors) == 8  # each thread's projector is still kept


async def test_a_langchain_summary_model_is_called_as_an_internal_call(tmp_path: Path) -> None:
    summary = json.dumps({name: "the export ran" for name in Summary.model_fields})
    summarizer = scripted(*[summary] * 10)
    model = scripted(*answers(20))
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=summarizer
    )
    agent = create_agent(model, tools=[], middleware=[offload], checkpointer=InMemorySaver())
    streamed: list[Any] = []
    for turn in range(20):
        question = HumanMessage(f"Question {turn}: " + "what happened next? " * 16)
        async for chunk, _ in agent.astream(
            {"messages": [question]}, thread("sum"), stream_mode="messages"
        ):
            streamed.append(chunk)
    assert summarizer.seen, "the summary model was never called"
    assert any("the export ran" in str(m.content) for m in model.seen[-1])
    # The summary model's tokens are never streamed; the summary that enters state is, once,
    # marked as LangChain marks its own summaries, so a UI leaves it out the same way.
    summaries = [c for c in streamed if "the export ran" in str(c.content)]
    assert summaries
    assert all(c.additional_kwargs.get("lc_source") == "summarization" for c in summaries)
    assert all(c.type == "human" for c in summaries)


def test_a_run_without_a_thread_id_uses_the_fallback_session(tmp_path: Path) -> None:
    model = scripted(call("dump", {}, "call_1"), "Done.")
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="nightly", summary_model=False
    )
    create_agent(model, tools=[dump], middleware=[offload]).invoke(
        {"messages": [HumanMessage("dump the log")]}
    )
    stored = tmp_path / "ws" / "sessions" / "nightly" / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8") == BIG


def test_a_thread_id_that_is_no_plain_name_gets_a_safe_session_of_its_own(
    tmp_path: Path,
) -> None:
    # A host's thread id is not checked by anyone before it names a folder: an email and a
    # path must neither fail the run nor reach outside sessions/ (the rule deepagents uses too).
    for name in ("ana@example.com/chat 1", "../../outside"):
        model = scripted(call("dump", {}, "call_1"), "Done.")
        offload = ContextOffloadMiddleware(
            LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
        )
        create_agent(model, tools=[dump], middleware=[offload]).invoke(
            {"messages": [HumanMessage("dump the log")]}, thread(name)
        )
    sessions = sorted(p.name for p in (tmp_path / "ws" / "sessions").iterdir())
    assert len(sessions) == 2 and all("/" not in s and not s.startswith(".") for s in sessions)
    assert not (tmp_path / "outside").exists()
    for session in sessions:
        stored = tmp_path / "ws" / "sessions" / session / "tool_result-call_1.txt"
        assert stored.read_text(encoding="utf-8") == BIG


def test_a_failed_tool_keeps_its_error_status_and_a_command_leaves_state_whole(
    tmp_path: Path,
) -> None:
    @tool
    def failing() -> str:
        """Run the export; it fails with a long trace."""
        raise ToolException(BIG)

    failing.handle_tool_error = True

    @tool
    def note(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Keep a note in the agent's state."""
        return Command(update={"messages": [ToolMessage(BIG, tool_call_id=tool_call_id)]})

    model = scripted(call("failing", {}, "call_1"), call("note", {"text": "x"}, "call_2"), "Ok.")
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    agent = create_agent(model, tools=[failing, note], middleware=[offload])
    state = agent.invoke({"messages": [HumanMessage("export")]}, thread("e1"))
    failed, noted = state["messages"][2], state["messages"][4]
    assert failed.status == "error" and "tool_result-call_1.txt" in failed.content
    sent = model.seen[2][-1]  # a Command writes state itself: the model is sent its projection
    assert sent.id == noted.id and "tool_result-call_2.txt" in sent.content
    assert len(sent.content) < 5_000
    assert noted == sent  # ... and state keeps what was sent, the whole text in the file
    stored = tmp_path / "ws" / "sessions" / "e1" / "tool_result-call_2.txt"
    assert stored.read_text(encoding="utf-8") == BIG


def test_the_window_is_the_one_the_model_declares_when_the_config_has_none(
    tmp_path: Path,
) -> None:
    model = ToolCallingFakeModel(messages=iter(answers(30)), profile={"max_input_tokens": 4_000})
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"),
        config=ContextConfig(tool_result_limit=300),
        summary_model=False,
    )
    agent = create_agent(model, tools=[], middleware=[offload], checkpointer=InMemorySaver())
    converse(agent, range(30), "w")
    assert len(model.seen) == 30
    assert max(tokens(messages) for messages in model.seen) < 4_000


def test_one_middleware_serving_models_of_two_windows_keeps_each_under_its_own(
    tmp_path: Path,
) -> None:
    """One middleware (no window in its config) serving agents whose models declare
    200,000 and 4,000 tokens: the window was the one the first model it ever saw declared,
    and the 4,000-token model was sent requests of up to 7,086 tokens."""
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"),
        config=ContextConfig(tool_result_limit=300),
        summary_model=False,
    )
    wide = ToolCallingFakeModel(messages=iter(["ok"]), profile={"max_input_tokens": 200_000})
    replies = [f"Answer {i}: " + "ok " * 300 for i in range(12)]
    narrow = ToolCallingFakeModel(messages=iter(replies), profile={"max_input_tokens": 4_000})
    first = create_agent(wide, tools=[], middleware=[offload], checkpointer=InMemorySaver())
    first.invoke({"messages": [HumanMessage("hi")]}, thread("tenant-a"))
    second = create_agent(narrow, tools=[], middleware=[offload], checkpointer=InMemorySaver())
    for turn in range(12):
        question = HumanMessage(f"Q{turn} " + "what next? " * 100)
        second.invoke({"messages": [question]}, thread("tenant-b"))
    assert len(narrow.seen) == 12
    assert max(tokens(messages) for messages in narrow.seen) < 4_000


class SmallWindowModel(ToolCallingFakeModel):
    """A provider whose window is smaller than the config says: it refuses a longer prompt
    with LangChain's own overflow error, as langchain-openai and langchain-anthropic do."""

    limit: int = 1_500
    refused: int = 0

    def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        if tokens(messages) > self.limit:
            self.refused += 1
            raise ContextOverflowError(f"prompt is too long: {tokens(messages)} > {self.limit}")
        return super()._generate(messages, *args, **kwargs)


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
async def test_a_call_refused_as_over_the_window_is_summarised_and_sent_again(
    tmp_path: Path, run: str
) -> None:
    model = SmallWindowModel(messages=iter(answers(20)))
    agent = agent_on(tmp_path / "ws", model, InMemorySaver())
    for turn in range(20):
        question = {"messages": [HumanMessage(f"Question {turn}: " + "and then? " * 30)]}
        if run == "invoke":
            state = agent.invoke(question, thread("o"))
        else:
            state = await agent.ainvoke(question, thread("o"))
    assert model.refused > 0
    assert state["messages"][-1].content == answers(20)[-1]
    answered = [m for m in model.seen if tokens(m) <= model.limit]
    assert len(answered) == 20


@pytest.mark.parametrize("invoke", ["sync", "async"])
def test_with_memory_the_agent_keeps_a_memory_recorded_in_the_threads_session(
    tmp_path: Path, invoke: str
) -> None:
    create = {"command": "create", "path": "/memories/exports.md", "file_text": "batch 7 fails\n"}
    model = scripted(call("memory", create, "m1"), "Noted.")
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, memory=True, summary_model=False
    )
    assert "memory" in [t.name for t in offload.tools]
    agent = create_agent(model, tools=offload.tools, middleware=[offload])
    request = {"messages": [HumanMessage("remember that batch 7 fails")]}
    if invoke == "sync":
        agent.invoke(request, thread("ops-1"))
    else:
        asyncio.run(agent.ainvoke(request, thread("ops-1")))
    memory = tmp_path / "ws" / "memories" / "exports.md"
    assert memory.read_text(encoding="utf-8") == "batch 7 fails\n"
    events_file = tmp_path / "ws" / "sessions" / "ops-1" / "events.jsonl"
    events = [json.loads(line) for line in events_file.read_text(encoding="utf-8").splitlines()]
    (change,) = [e for e in events if e["kind"] == "memory"]
    assert change["writer"]["agent"] == "langchain" and change["writer"]["session"] == "ops-1"
    plain = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    assert "memory" not in [t.name for t in plain.tools]


class ReportingModel(ToolCallingFakeModel):
    """A provider that counts three times the tokens ctxoffload's counter does (a model family
    it cannot count exactly) and says so in each reply's `usage_metadata`."""

    factor: int = 3
    reported: list[int] = Field(default_factory=list)

    def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        result = super()._generate(messages, *args, **kwargs)
        counted = self.factor * tokens(messages)
        self.reported.append(counted)
        reply = result.generations[0].message
        reply.usage_metadata = {
            "input_tokens": counted,
            "output_tokens": 1,
            "total_tokens": counted + 1,
        }
        return result


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
async def test_the_reported_usage_decides_the_next_compaction(tmp_path: Path, run: str) -> None:
    """The middleware hands each reply's reported input back to the projection: the trigger
    (0.8 of the 4,000-token window) is compared with the provider's count, so no request the
    provider counts is over the window, though the counter counts a third of it."""
    model = ReportingModel(messages=iter(answers(30)))
    agent = agent_on(tmp_path / "ws", model, InMemorySaver())
    for turn in range(30):
        question = {"messages": [HumanMessage(f"Question {turn}: " + "and then? " * 20)]}
        if run == "invoke":
            agent.invoke(question, thread("u"))
        else:
            await agent.ainvoke(question, thread("u"))
    assert len(model.reported) == 30
    assert max(model.reported) <= CONFIG.context_window  # the window as the provider counts
    assert max(tokens(m) for m in model.seen) < CONFIG.trigger_tokens(4_000) // 2


# -- runs that stop without a word ----------------------------------------------------------------


@tool
def deploy(env: str) -> str:
    """Deploy the build to `env`."""
    return "".join(f"deploy {env} step {i}: " + "ok " * 20 + "\n" for i in range(400))


def hitl_agent(folder: Path, model: Any, saver: Any) -> Any:
    """An agent whose `deploy` calls wait for a human (LangChain's HumanInTheLoopMiddleware),
    with a middleware of its own, as a worker serving one request builds it."""
    from langchain.agents.middleware import HumanInTheLoopMiddleware

    offload = ContextOffloadMiddleware(
        LocalWorkspace(folder),
        config=ContextConfig(context_window=64_000, tool_result_limit=500),
        summary_model=False,
    )
    hitl = HumanInTheLoopMiddleware(interrupt_on={"deploy": True})
    return create_agent(model, tools=[deploy], middleware=[offload, hitl], checkpointer=saver)


def released(folder: Path, session: str) -> None:
    """Wait until no live run holds `session`'s lease (a run idle gives it up in a quarter of
    a second); fails rather than hangs."""
    from ctxoffload import SessionBusyError
    from ctxoffload.workspace import take_lease

    deadline = time.monotonic() + 30
    while True:
        try:
            lease = asyncio.run(take_lease(LocalWorkspace(folder), session, "test"))
        except SessionBusyError:
            assert time.monotonic() < deadline, "the run stopped never gave its lease up"
            time.sleep(0.05)
            continue
        if lease is not None:
            asyncio.run(lease.release())
        return


def test_a_run_stopped_at_an_interrupt_goes_on_through_another_middleware(tmp_path: Path) -> None:
    """A run stopped at an interrupt never reaches `after_agent`: its middleware kept the
    thread's lease for as long as it lived, so the resume and every later message through
    another worker's middleware were refused with SessionBusyError, and the resume (which
    skips `before_agent`) wrote the session with no lease at all. A run's lease now goes once
    it is idle, and its next call, wherever it runs, takes it again."""
    saver = InMemorySaver()
    first = hitl_agent(tmp_path / "ws", scripted(call("deploy", {"env": "prod"}, "c1")), saver)
    stopped = first.invoke({"messages": [HumanMessage("deploy please")]}, thread("t3"))
    assert "__interrupt__" in stopped
    released(tmp_path / "ws", "t3")
    other = hitl_agent(tmp_path / "ws", scripted("deployed, done", "second answer"), saver)
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    assert other.invoke(approve, thread("t3"))["messages"][-1].content == "deployed, done"
    later = other.invoke({"messages": [HumanMessage("and now?")]}, thread("t3"))
    assert later["messages"][-1].content == "second answer"
    stored = tmp_path / "ws" / "sessions" / "t3" / "tool_result-c1.txt"
    assert stored.read_text(encoding="utf-8") == deploy.invoke({"env": "prod"})
    assert first is not None  # the first worker still holds its agent


def test_a_copied_thread_resumed_writes_its_own_session(tmp_path: Path) -> None:
    """A thread's checkpoints copied to a new thread (LangGraph's `threads.copy`) hold the
    original's run in their state; resumed there, the copy wrote its results into the
    original thread's session, under that session's lease. Each thread writes its own."""
    import copy

    saver = InMemorySaver()
    agent = hitl_agent(tmp_path / "ws", scripted(call("deploy", {"env": "prod"}, "c1")), saver)
    assert "__interrupt__" in agent.invoke({"messages": [HumanMessage("deploy")]}, thread("orig"))
    saver.storage["copy"] = copy.deepcopy(saver.storage["orig"])
    for (owner, ns, checkpoint), value in list(saver.writes.items()):
        if owner == "orig":
            saver.writes[("copy", ns, checkpoint)] = copy.deepcopy(value)
    for (owner, ns, channel, version), value in list(saver.blobs.items()):
        if owner == "orig":
            saver.blobs[("copy", ns, channel, version)] = copy.deepcopy(value)
    copied = hitl_agent(tmp_path / "ws", scripted("copy done"), saver)
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    assert copied.invoke(approve, thread("copy"))["messages"][-1].content == "copy done"
    sessions = tmp_path / "ws" / "sessions"
    assert (sessions / "copy" / "tool_result-c1.txt").is_file()
    assert not list((sessions / "orig").glob("tool_result-*"))


def test_a_run_that_raised_leaves_the_thread_to_the_next_request(tmp_path: Path) -> None:
    """A server builds an agent per request: a run whose model call raised kept the thread's
    lease in its middleware, and the next request's middleware was refused with
    SessionBusyError naming a run that had ended. A call that raised gives the lease up."""

    class Failing(ToolCallingFakeModel):
        def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("provider 500")

    saver = InMemorySaver()

    def request(model: Any) -> Any:
        offload = ContextOffloadMiddleware(
            LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
        )
        return create_agent(model, tools=[], middleware=[offload], checkpointer=saver)

    failing = request(Failing(messages=iter([])))
    with pytest.raises(RuntimeError, match="provider 500"):
        failing.invoke({"messages": [HumanMessage("hi")]}, thread("t16"))
    again = request(scripted("hello")).invoke({"messages": [HumanMessage("retry")]}, thread("t16"))
    assert again["messages"][-1].content == "hello"


@tool
def write_file(path: str, content: str) -> str:
    """Write `content` to `path`."""
    return f"wrote {len(content)} characters to {path}"


def test_a_call_that_wrote_a_whole_file_is_sent_cut_and_state_keeps_it_whole(
    tmp_path: Path,
) -> None:
    """The newest turn over the window because the model's own call held a whole file: the
    request went out at ~20,000 tokens against 4,000 (the door kept the call's arguments as
    they were). The model is sent the call with its file cut to a head and a notice naming
    the file that holds it whole; the call's id and path stay; state keeps what was sent
    (lean, as for a cut result), the whole text being in that file first."""
    body = "".join(
        f"line {i}: total = compute(batch_{i}, rate={i * 7 % 13})\n" for i in range(1500)
    )
    model = scripted(
        call("write_file", {"path": "app/report.py", "content": body}, "w1"), "Written."
    )
    agent = create_agent(
        model,
        tools=[write_file],
        middleware=[
            ContextOffloadMiddleware(
                LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
            )
        ],
        checkpointer=InMemorySaver(),
    )
    state = agent.invoke({"messages": [HumanMessage("write the report module")]}, thread("f"))

    assert len(model.seen) == 2
    last = model.seen[-1]
    assert tokens(last) < CONFIG.context_window
    (sent,) = [m for m in last if getattr(m, "tool_calls", None)]
    args = sent.tool_calls[0]["args"]
    assert sent.tool_calls[0]["id"] == "w1" and args["path"] == "app/report.py"
    assert "<<<TRUNCATED>>>" in args["content"] and body.startswith(args["content"][:200])
    stored = next((tmp_path / "ws" / "sessions").glob("*/tool_result-w1_content*.txt"))
    assert str(stored) in args["content"] and stored.read_text(encoding="utf-8") == body
    # OpenAI's wire form carries the cut arguments too.
    assert body not in "".join(wire(last))
    (kept,) = [m for m in state["messages"] if getattr(m, "tool_calls", None)]
    assert kept.tool_calls[0]["args"] == args
