"""OffloadingStepCallbacks under a real smolagents `ToolCallingAgent` (and a `CodeAgent`),
offline (a subclass of smolagents' own `Model` answering from a script): a 5 MB observation
stored whole and the next call under the window, a long run compacted with nothing lost, what
each call was sent rebuilt by `ctxoffload show`, one live run per session, and the read-back
tools used from inside the agent."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

from frameworks import require_framework

require_framework("smolagents", "smolagents")

import pytest  # noqa: E402
from smolagents import CodeAgent, Tool, ToolCallingAgent  # noqa: E402
from smolagents.models import ChatMessage, MessageRole  # noqa: E402
from smolagents_scripted import (  # noqa: E402
    BIG,
    Fetch,
    Scripted,
    agent_with,
    answer,
    call,
    texts,
    tokens,
)

from ctxoffload import (  # noqa: E402
    ConfigError,
    ContextConfig,
    LocalWorkspace,
    Msg,
    SessionBusyError,
)
from ctxoffload.integrations.smolagents import (  # noqa: E402
    ContextSummaryStep,
    OffloadingStepCallbacks,
)

CONFIG = ContextConfig(context_window=8_000, tool_result_limit=300)
"""A small window (smolagents' own system prompt is ~3,000 tokens), so a few dozen steps are
compacted."""


def show(workdir: Path, session: str, *args: str) -> str:
    command = [sys.executable, "-m", "ctxoffload", "show", session, "--workdir", str(workdir)]
    done = subprocess.run([*command, *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def session_files(workdir: Path, session: str) -> str:
    """Everything the session's folder holds, as text (what nothing-lost is checked against)."""
    folder = workdir / "sessions" / session
    return "\n".join(
        p.read_text(encoding="utf-8")
        for p in sorted(folder.iterdir())
        if p.suffix in (".txt", ".jsonl")
    )


def test_a_5_mb_observation_is_stored_whole_and_the_next_call_fits(tmp_path: Path) -> None:
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    model = Scripted([call("fetch", {}, "call_1"), answer("The export finished.")])
    agent = agent_with(model, offload, Fetch([BIG]))
    assert agent.run("dump the export log") == "The export finished."
    session = offload.session_of(agent)
    assert session is not None and session.startswith("smolagents-")
    (stored,) = (tmp_path / "ws" / "sessions" / session).glob("tool_result-*.txt")
    assert stored.name == "tool_result-call_1.txt"
    # smolagents strips a tool's output; all of what it kept is in the file.
    assert stored.read_text(encoding="utf-8") == BIG.strip()
    step = agent.memory.steps[1]
    assert str(stored) in step.observations and len(step.observations) < 5_000
    assert tokens(model.seen[1]) < CONFIG.context_window
    assert all(len(json.dumps(sent)) < 100_000 for sent in model.seen)


def test_the_callbacks_object_itself_is_accepted_as_step_callbacks(tmp_path: Path) -> None:
    # `step_callbacks=offload` where the guide passes `offload.step_callbacks`: smolagents
    # takes a list or a dict there, and refused the object with its own "step_callbacks must
    # be a list or a dict", which gives no fix.
    workspace = LocalWorkspace(tmp_path / "ws")
    offload = OffloadingStepCallbacks(workspace, config=CONFIG)
    model = Scripted([call("fetch", {}, "call_1"), answer("The export finished.")])
    agent = ToolCallingAgent(
        tools=[Fetch([BIG]), *offload.tools], model=model, step_callbacks=offload, verbosity_level=0
    )
    assert agent.run("dump the export log") == "The export finished."
    session = offload.session_of(agent)
    assert session is not None
    (stored,) = (tmp_path / "ws" / "sessions" / session).glob("tool_result-*.txt")
    assert stored.read_text(encoding="utf-8") == BIG.strip()
    assert tokens(model.seen[1]) < CONFIG.context_window
    # Its run reached the final answer's callback too: the session's lease is given up.

    async def take() -> None:
        await (await workspace.acquire_lease(session)).release()

    asyncio.run(take())
    # The callbacks object stays itself: hashable, equal to itself only.
    assert offload != OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    assert {offload: 1}[offload] == 1


def test_the_callbacks_object_in_a_list_is_refused_with_the_fix(tmp_path: Path) -> None:
    # smolagents calls a list's callbacks at action steps only (the door needs the planning
    # and final-answer steps too), and failed with "... is not a callable object".
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    model = Scripted([call("fetch", {}, "call_1"), answer("The export finished.")])
    agent = ToolCallingAgent(
        tools=[Fetch([BIG]), *offload.tools], model=model, step_callbacks=[offload]
    )
    with pytest.raises(ConfigError, match=r"pass step_callbacks=offload \(not \[offload\]\)"):
        agent.run("dump the export log")


def test_a_long_run_is_compacted_whole_steps_at_a_time_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    readings = [f"reading {i} of the export: " + f"gauge {i * 7} nominal, " * 40 for i in range(50)]
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    model = Scripted(
        [*(call("fetch", {}, f"call_{i}") for i in range(50)), answer("All 50 readings taken.")]
    )
    agent = agent_with(model, offload, Fetch(list(readings)), max_steps=60)
    assert agent.run("take 50 readings") == "All 50 readings taken."
    assert max(tokens(sent) for sent in model.seen) < CONFIG.context_window
    summaries = [s for s in agent.memory.steps if isinstance(s, ContextSummaryStep)]
    assert len(summaries) == 1 and agent.memory.steps[0] is summaries[0]
    assert "context.jsonl" in summaries[0].messages[0].text
    # Whole steps left: every step kept has its call and its observation.
    kept = [s for s in agent.memory.steps if type(s).__name__ == "ActionStep"]
    assert all(s.tool_calls and s.observations for s in kept)
    assert len(kept) < 20
    # Nothing is lost: each reading is in the session's files, whole.
    session = offload.session_of(agent)
    assert session is not None
    stored = session_files(tmp_path / "ws", session)
    assert all(reading.strip() in stored for reading in readings)
    # ... and no step is both summarised and kept: context.jsonl holds none of a kept step's
    # messages (its call, its observation).
    context = (tmp_path / "ws" / "sessions" / session / "context.jsonl").read_text()
    for step in kept:
        call_id = step.tool_calls[0].id
        assert f"'{call_id}'" not in context and f'"{call_id}"' not in context
    # The latest task stays verbatim, after the summary.
    assert any(type(s).__name__ == "TaskStep" for s in agent.memory.steps)
    # The last call was sent the summary, not the first readings.
    last = json.dumps(model.seen[-1])
    assert "reading 0 of" not in last and "context.jsonl" in last


def test_a_step_is_never_cut_between_its_thought_and_its_call(tmp_path: Path) -> None:
    # A long thought and a short observation: a cut by messages alone falls inside a step.
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    replies = []
    for i in range(30):
        reply = call("fetch", {}, f"call_{i}")
        reply.content = f"Thought {i}: " + "the gauge drifts, check again. " * 30
        replies.append(reply)
    model = Scripted([*replies, answer("Steady.")])
    agent = agent_with(model, offload, Fetch([f"gauge {i} ok" for i in range(30)]), max_steps=40)
    agent.run("watch the gauge")
    session = offload.session_of(agent)
    assert session is not None
    context = (tmp_path / "ws" / "sessions" / session / "context.jsonl").read_text()
    kept = [s for s in agent.memory.steps if type(s).__name__ == "ActionStep"]
    assert kept and any(isinstance(s, ContextSummaryStep) for s in agent.memory.steps)
    for step in kept[:-1]:  # the final answer's step may not be recorded yet
        assert step.model_output[:12] not in context
        assert f"'{step.tool_calls[0].id}'" not in context


def test_show_prints_what_each_call_was_sent(tmp_path: Path) -> None:
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    readings = [f"reading {i}: " + "gauge nominal, " * 60 for i in range(30)]
    model = Scripted([*(call("fetch", {}, f"call_{i}") for i in range(30)), answer("Done.")])
    agent = agent_with(model, offload, Fetch(list(readings)), max_steps=40)
    agent.run("take 30 readings")
    session = offload.session_of(agent)
    assert session is not None
    compacted = False
    for step, sent in enumerate(model.seen, start=1):
        shown = json.loads(show(tmp_path / "ws", session, "--step", str(step), "--json"))
        messages = [Msg.model_validate(m) for m in shown["messages"]]
        assert [m.role for m in messages] == [role for role, _ in sent]
        assert [_text(m) for m in messages] == [text for _, text in sent]
        compacted = compacted or any("context.jsonl" in text for _, text in sent)
    assert compacted
    listing = show(tmp_path / "ws", session)
    assert f"step {len(model.seen)} · model call" in listing
    # The door's line, after the session's (one line, or two when the folder is long).
    door_line = next(line for line in listing.splitlines() if line[:2].isdigit())
    assert "OffloadingStepCallbacks" in door_line


def _text(msg: Msg) -> str:
    """A recorded message's text as smolagents sent it (an observation rides as a result)."""
    if isinstance(msg.content, str):
        return msg.content
    parts = []
    for block in msg.content:
        output = getattr(block, "output", None)
        if output is not None:
            parts.append(output if isinstance(output, str) else "".join(b.text for b in output))
        else:
            parts.append(getattr(block, "text", ""))
    return "\n".join(parts)


def test_each_run_is_a_session_and_reset_false_goes_on_in_it(tmp_path: Path) -> None:
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    model = Scripted([answer("one"), answer("two"), answer("three")])
    agent = agent_with(model, offload)
    agent.run("first")
    first = offload.session_of(agent)
    agent.run("second", reset=False)
    assert offload.session_of(agent) == first
    agent.run("third")  # reset: a new conversation
    third = offload.session_of(agent)
    assert third != first and first and third
    assert {first, third} <= {p.name for p in (tmp_path / "ws" / "sessions").iterdir()}
    # A session_id names one session for every run.
    named = OffloadingStepCallbacks(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="nightly"
    )
    again = agent_with(Scripted([answer("a"), answer("b")]), named)
    again.run("a")
    again.run("b")
    assert named.session_of(again) == "nightly"
    listing = show(tmp_path / "ws", "nightly").splitlines()
    steps = [line.split(" · ")[0].split()[-1] for line in listing if " · model call" in line]
    assert steps == ["1", "2"]  # numbered over the session, run after run


def test_a_second_live_run_of_a_session_is_refused_before_it_writes(tmp_path: Path) -> None:
    gate = threading.Event()
    first_offload = OffloadingStepCallbacks(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="shared"
    )
    fetch = Fetch(["ready", "the slow answer"], gate=None)
    first_model = Scripted(
        [call("fetch", {}, "call_1"), call("fetch", {}, "call_2"), answer("first done")]
    )
    first = agent_with(first_model, first_offload, fetch)
    original = fetch.forward

    def second_call_waits() -> str:
        if fetch.outputs == ["the slow answer"]:
            fetch.entered.set()
            gate.wait(60)
        return original()

    fetch.forward = second_call_waits  # type: ignore[method-assign]
    outcome: list[object] = []
    runner = threading.Thread(target=lambda: outcome.append(first.run("go")))
    runner.start()
    try:
        assert fetch.entered.wait(60)
        second_offload = OffloadingStepCallbacks(
            LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="shared"
        )
        big = Fetch([BIG])
        second = agent_with(
            Scripted([call("fetch", {}, "call_9"), answer("never")]), second_offload, big
        )
        with pytest.raises(SessionBusyError, match="another session_id") as refused:
            second.run("me too")
        assert "if_busy" not in str(refused.value)
        # Refused before it wrote: its 5 MB observation is nowhere in the workspace.
        assert not list((tmp_path / "ws" / "sessions" / "shared").glob("tool_result-call_9*"))
    finally:
        gate.set()
        runner.join(60)
    assert outcome == ["first done"]
    # The session is free again after the first run's final answer.
    later = agent_with(Scripted([answer("later")]), second_offload)
    assert later.run("later") == "later"


def test_a_run_that_raised_leaves_the_session_to_the_agents_next_run(tmp_path: Path) -> None:
    offload = OffloadingStepCallbacks(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="flaky"
    )
    model = Scripted([call("fetch", {}, "call_1")])  # then the script ends: the run raises
    agent = agent_with(model, offload, Fetch(["x"]))
    with pytest.raises(Exception):  # noqa: B017 - smolagents wraps the model's failure
        agent.run("fail")
    model.replies = iter([answer("recovered")])
    assert agent.run("again") == "recovered"
    other = agent_with(Scripted([answer("free")]), offload)
    offload.close()
    assert other.run("free") == "free"


def test_compact_from_outside_is_served_at_the_next_step(tmp_path: Path) -> None:
    offload = OffloadingStepCallbacks(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="long"
    )
    asked = threading.Event()
    readings = [f"reading {i}: " + "gauge nominal, " * 20 for i in range(6)]
    fetch = Fetch(list(readings))
    original = fetch.forward

    def ask_on_the_fourth() -> str:
        if len(fetch.outputs) == 2:
            command = [sys.executable, "-m", "ctxoffload", "compact", "long", "--wait", "0"]
            done = subprocess.run(
                [*command, "--workdir", str(tmp_path / "ws")], capture_output=True, text=True
            )
            assert done.returncode in (0, 3), done.stderr
            asked.set()
        return original()

    fetch.forward = ask_on_the_fourth  # type: ignore[method-assign]
    model = Scripted([*(call("fetch", {}, f"call_{i}") for i in range(6)), answer("done")])
    agent = agent_with(model, offload, fetch, max_steps=10)
    agent.run("take 6 readings")
    assert asked.is_set()
    events = [
        json.loads(line)
        for line in (tmp_path / "ws" / "sessions" / "long" / "events.jsonl")
        .read_text()
        .splitlines()
    ]
    kinds = [e["kind"] for e in events]
    assert kinds.index("compact") > kinds.index("compact_request")
    assert any(isinstance(s, ContextSummaryStep) for s in agent.memory.steps)


def test_the_agent_reads_an_offloaded_observation_back(tmp_path: Path) -> None:
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    model = Scripted(
        [
            call("fetch", {}, "call_1"),
            call("Grep", {"pattern": "batch 159999 done"}, "call_2"),
            call("Read", {"path": "PATH", "offset": 160_000, "limit": 1}, "call_3"),
            answer("The last batch, 159999, is done."),
        ]
    )
    session: list[str] = []

    def reply(sent: list[tuple[str, str]]) -> ChatMessage:
        chosen = next(model_replies)
        if chosen.tool_calls and chosen.tool_calls[0].function.name == "Read":
            (path,) = [p for p in (tmp_path / "ws" / "sessions").rglob("tool_result-call_1.txt")]
            session.append(str(path))
            chosen.tool_calls[0].function.arguments["path"] = str(path)
        return chosen

    model_replies = model.replies
    model.reply = reply
    agent = agent_with(model, offload, Fetch([BIG]))
    assert agent.run("did the export finish?") == "The last batch, 159999, is done."
    grep_answer = model.seen[2][-1][1]
    assert "tool_result-call_1.txt:160000:" in grep_answer
    read_answer = model.seen[3][-1][1]
    assert "160000" in read_answer and "batch 159999 done" in read_answer
    assert "events.jsonl" not in grep_answer


def test_a_code_agent_observation_is_stored_whole_too(tmp_path: Path) -> None:
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    code = "print(fetch())"
    replies = [
        ChatMessage(
            role=MessageRole.ASSISTANT, content=f"Thought: dump it.\n<code>\n{code}\n</code>"
        ),
        ChatMessage(
            role=MessageRole.ASSISTANT,
            content="Thought: done.\n<code>\nfinal_answer('dumped')\n</code>",
        ),
    ]
    model = Scripted(replies)
    agent = CodeAgent(
        tools=[Fetch([BIG]), *offload.tools],
        model=model,
        step_callbacks=offload.step_callbacks,
        verbosity_level=0,
        # smolagents cuts what a snippet prints at 50,000 characters before any callback
        # sees it: the guide says to raise the cap.
        max_print_outputs_length=10_000_000,
    )
    assert agent.run("dump the log") == "dumped"
    session = offload.session_of(agent)
    assert session is not None
    (stored,) = (tmp_path / "ws" / "sessions" / session).glob("tool_result-*.txt")
    assert BIG.strip() in stored.read_text(encoding="utf-8")
    assert tokens(model.seen[1]) < CONFIG.context_window


class _Build(Tool):  # type: ignore[misc]
    """A tool that fails with a build's whole log in its error, as a failed compiler does."""

    name = "build"
    description = "Run the build."
    inputs: ClassVar[dict[str, Any]] = {}
    output_type = "string"

    def forward(self) -> str:
        raise RuntimeError("build failed:\n" + BIG[:2_000_000])


def test_a_tool_error_over_the_limit_is_stored_whole_and_the_next_call_fits(
    tmp_path: Path,
) -> None:
    """smolagents sends a failed call's error message as the call's result ("Error:" and the
    message): one of 2 MB went to the model whole, under an 8,000-token window; it is stored
    whole and the step's error keeps its head and the notice."""
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    model = Scripted([call("build", {}, "call_1"), answer("The build failed.")])
    agent = agent_with(model, offload, _Build())
    assert agent.run("build it") == "The build failed."
    session = offload.session_of(agent)
    assert session is not None
    (stored,) = (tmp_path / "ws" / "sessions" / session).glob("tool_result-*.txt")
    whole = stored.read_text(encoding="utf-8")
    assert "build failed:" in whole and BIG[:2_000_000].strip() in whole
    error = agent.memory.steps[1].error
    assert str(stored) in str(error) and len(str(error)) < 5_000
    assert error.dict()["message"] == str(error)
    assert tokens(model.seen[1]) < CONFIG.context_window
    assert str(stored) in texts(model.seen[1])


@pytest.mark.parametrize("call_id", [None, 12345], ids=["None", "int"])
def test_a_tool_call_id_that_is_no_string_still_has_its_output_stored(
    tmp_path: Path, call_id: Any
) -> None:
    """A model's tool call whose id is None or a number (smolagents passes it on): the run
    went on without ctxoffload and raised pydantic's ValidationError with it."""
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    model = Scripted([call("fetch", {}, call_id), answer("done")])
    agent = agent_with(model, offload, Fetch([BIG]))
    assert agent.run("dump the export log") == "done"
    session = offload.session_of(agent)
    assert session is not None
    (stored,) = (tmp_path / "ws" / "sessions" / session).glob("tool_result-*.txt")
    assert stored.name == f"tool_result-{call_id}.txt"
    assert stored.read_text(encoding="utf-8") == BIG.strip()
    assert tokens(model.seen[1]) < CONFIG.context_window


def test_one_callbacks_object_shared_by_many_agents_keeps_none_alive(tmp_path: Path) -> None:
    """A server's way: one callbacks object, a new agent for each request, dropped after it.
    Each agent (its memory with it) stayed alive in the callbacks' table of conversations,
    0.7 MB a request; an agent is now held no longer than its caller holds it."""
    import gc
    import weakref

    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    agents: list[weakref.ref[Any]] = []
    sessions = []
    for request in range(5):
        model = Scripted([call("fetch", {}, "c1"), answer("ok")])
        agent = agent_with(model, offload, Fetch([BIG[:300_000]]))
        assert agent.run(f"request {request}") == "ok"
        sessions.append(offload.session_of(agent))
        agents.append(weakref.ref(agent))
        del agent, model
    gc.collect()
    assert [ref() for ref in agents] == [None] * 5
    assert offload._conversations == {}
    assert len(set(sessions)) == 5  # (each request its session, each stored whole)
    for session in sessions:
        (stored,) = (tmp_path / "ws" / "sessions" / str(session)).glob("tool_result-*.txt")
        assert stored.read_text(encoding="utf-8") == BIG[:300_000].strip()


def test_a_server_s_failed_runs_give_their_sessions_up_without_a_close(tmp_path: Path) -> None:
    """A server keeps one callbacks object and never closes it. A run that raised (the
    provider failed after a tool) and whose agent the server dropped kept its session's
    lease, its open lease file and its pipeline until `close()`: one descriptor and ~660 KB
    per failed request, until the process ran out of descriptors. The next run gives them
    up: the failed runs' sessions can be taken, and no descriptor is left open for them."""
    import gc
    import os

    workspace = LocalWorkspace(tmp_path / "ws")
    offload = OffloadingStepCallbacks(workspace, config=CONFIG)

    def failed_request(number: int) -> str | None:
        model = Scripted([call("fetch", {}, f"call_{number}")])  # then the provider fails
        agent = agent_with(model, offload, Fetch([BIG[:50_000]]))
        with pytest.raises(Exception):  # noqa: B017 - smolagents wraps the model's failure
            agent.run(f"request {number}")
        return offload.session_of(agent)

    def descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    failed_request(0)  # (the loop, the logs and the lease files of a first run opened)
    gc.collect()
    ok = agent_with(Scripted([answer("ok")]), offload)
    assert ok.run("a good request") == "ok"
    before = descriptors()
    sessions = [failed_request(number) for number in range(1, 11)]
    gc.collect()
    ok = agent_with(Scripted([answer("ok")]), offload)
    assert ok.run("a good request") == "ok"
    assert len(offload._orphans) == 0
    assert descriptors() <= before + 2  # (ten held one each before)

    async def take_each() -> None:
        for session in sessions:
            assert session is not None
            await (await workspace.acquire_lease(session)).release()

    asyncio.run(take_each())  # (SessionBusyError while a dropped run held one)


def test_a_memory_change_is_recorded_in_the_session_of_the_run_that_made_it(
    tmp_path: Path,
) -> None:
    """Two agents on one callbacks object, in two threads: B's run begins while A's is in
    progress, then A's agent writes a memory. The read-back tools (which smolagents does not
    tell their agent) worked in the session of the run begun last: A's change was recorded in
    B's session, after B's run had given it up. Each tool call now works in the session of
    the run its thread runs."""
    import time

    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG, memory=True)
    b_done = threading.Event()

    class WaitsForB(Fetch):  # type: ignore[misc]
        def forward(self) -> str:
            if len(self.outputs) == 1:
                b_done.wait(30)  # A's second fetch waits until B's run is over
            return str(super().forward())

    note = {"command": "create", "path": "/memories/a_note.md", "file_text": "A's note"}
    a_model = Scripted(
        [call("fetch", {}, "a1"), call("fetch", {}, "a2"), call("memory", note, "a3"), answer("A")]
    )
    a = agent_with(a_model, offload, WaitsForB(["a out 1", "a out 2"]))
    b = agent_with(Scripted([call("fetch", {}, "b1"), answer("B")]), offload, Fetch(["b out"]))
    answers: list[str] = []
    thread = threading.Thread(target=lambda: answers.append(a.run("task A")))
    thread.start()
    deadline = time.monotonic() + 60
    while offload.session_of(a) is None and time.monotonic() < deadline:
        time.sleep(0.01)  # A's run has begun
    answers.append(b.run("task B"))
    b_done.set()
    thread.join(60)
    assert sorted(answers) == ["A", "B"]

    def memory_events(agent: Any) -> int:
        events = tmp_path / "ws" / "sessions" / str(offload.session_of(agent)) / "events.jsonl"
        return [json.loads(line)["kind"] for line in events.read_text().splitlines()].count(
            "memory"
        )

    assert (memory_events(a), memory_events(b)) == (1, 0)
