"""The ContextOffloadPlugin under a real Google ADK `Runner`, offline (ADK's own `BaseLlm`,
scripted): tool results stored whole, a long run compacted with nothing lost, a session resumed
in a new process projecting the same way, `ctxoffload show` rebuilding each request, one live
run per session, and the read-back tools used from inside the agent."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from frameworks import context_ids, require_framework, run_as_a_user

require_framework("google.adk", "google_adk")

import pytest  # noqa: E402
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.genai import types  # noqa: E402
from google_adk_scripted import (  # noqa: E402
    APP,
    BIG,
    CONFIG,
    Scripted,
    ask,
    call,
    converse,
    dump,
    runner_on,
    say,
    session_of,
    stored_as,
    tokens,
    wire,
)

from ctxoffload import ContextConfig, LocalWorkspace, SessionBusyError  # noqa: E402
from ctxoffload.integrations.google_adk import (  # noqa: E402
    ContextOffloadPlugin,
    from_genai,
    to_genai,
)
from helpers import megabyte_output, retained_per_run  # noqa: E402


def responses(events: list[Any]) -> list[types.FunctionResponse]:
    """The function responses among a run's events."""
    return [
        part.function_response
        for event in events
        if event.content is not None
        for part in event.content.parts or []
        if part.function_response is not None
    ]


async def test_a_5_mb_tool_result_is_stored_whole_and_the_next_request_fits(tmp_path: Path) -> None:
    assert len(BIG) > 5_000_000
    model = Scripted(replies=[call("dump", {}, "call_1"), say("The export finished.")])
    runner, _ = runner_on(tmp_path / "ws", model)
    events = await ask(runner, await session_of(runner, "t1"), "dump the log")
    stored = tmp_path / "ws" / "sessions" / stored_as("t1") / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8") == BIG
    (kept,) = responses(events)
    assert kept.id == "call_1" and set(kept.response or {}) == {"result"}
    text = str((kept.response or {})["result"])
    assert text.startswith(BIG[:200])
    assert "tool_result-call_1.txt" in text and len(text) < 5_000
    # The session's event is as lean as what the model reads.
    session = await runner.session_service.get_session(
        app_name="ops", user_id="ana", session_id="t1"
    )
    assert session is not None and len(session.model_dump_json()) < 20_000
    assert tokens(model.seen[1]) < CONFIG.context_window


async def test_a_call_that_skips_summarisation_hands_its_result_back_whole(
    tmp_path: Path,
) -> None:
    # A tool that sets `skip_summarization` ends the run with its result as the answer: the
    # program reads it whole (it read the head and a notice before). The conversation going
    # on, the next request sends it cut, stored whole first.
    from google.adk.tools import ToolContext

    def export(tool_context: ToolContext) -> str:
        """Export the log: the whole log is the answer."""
        tool_context.actions.skip_summarization = True
        return BIG

    model = Scripted(replies=[call("export", {}, "call_x"), say("It was exported.")])
    runner, _ = runner_on(tmp_path / "ws", model, tools=[export])
    events = await ask(runner, await session_of(runner, "x1"), "export the log")
    (answer,) = responses(events)
    assert (answer.response or {})["result"] == BIG
    assert len(model.seen) == 1  # (the run ended at the tool)

    await ask(runner, "x1", "and now?")
    assert tokens(model.seen[1]) < CONFIG.context_window
    stored = tmp_path / "ws" / "sessions" / stored_as("x1") / "tool_result-call_x.txt"
    assert stored.read_text(encoding="utf-8") == BIG


async def test_a_result_that_is_no_string_is_stored_as_the_json_the_model_reads(
    tmp_path: Path,
) -> None:
    rows = [{"row": i, "status": "ok"} for i in range(5_000)]

    def table() -> dict[str, object]:
        """The export's table."""
        return {"rows": rows}

    model = Scripted(replies=[call("table", {}, "call_t"), say("ok")])
    runner, _ = runner_on(tmp_path / "ws", model, tools=[table])
    events = await ask(runner, await session_of(runner, "t"), "the table")
    stored = tmp_path / "ws" / "sessions" / stored_as("t") / "tool_result-call_t.txt"
    assert json.loads(stored.read_text(encoding="utf-8")) == {"rows": rows}
    (kept,) = responses(events)
    assert "tool_result-call_t.txt" in str((kept.response or {})["result"])


async def test_a_result_json_has_no_form_for_is_stored_and_cut_at_the_tool_too(
    tmp_path: Path,
) -> None:
    """A result holding a datetime (a set, a model: values `json.dumps` refuses) was left whole
    in the session's event, 172,937 characters, cut only in each request; it is stored as
    the model reads it (each such value as its `str`) and the event keeps the head."""
    import datetime

    rows = [{"row": i, "status": "ok"} for i in range(5_000)]
    at = datetime.datetime(2026, 11, 27, 12, 0)

    def table() -> dict[str, object]:
        """The export's table."""
        return {"rows": rows, "fetched_at": at}

    model = Scripted(replies=[call("table", {}, "call_t"), say("ok")])
    runner, _ = runner_on(tmp_path / "ws", model, tools=[table])
    events = await ask(runner, await session_of(runner, "t"), "the table")
    stored = tmp_path / "ws" / "sessions" / stored_as("t") / "tool_result-call_t.txt"
    assert json.loads(stored.read_text(encoding="utf-8")) == {"rows": rows, "fetched_at": str(at)}
    (kept,) = responses(events)
    assert set(kept.response or {}) == {"result"}
    assert "tool_result-call_t.txt" in str((kept.response or {})["result"])
    assert len(json.dumps(kept.response, default=str)) < 5_000


async def test_a_failed_calls_big_error_keeps_its_error_key(tmp_path: Path) -> None:
    """A tool's `{"error": <a long log>}` became `{"result": <head + notice>}`: the model, and
    ctxoffload's own reading of the request, were told the call succeeded. The error is stored
    whole and stays an error."""
    log = "connection refused; retry log follows\n" + "attempt failed: timeout\n" * 3_000

    def query() -> dict[str, object]:
        """Query the export's database."""
        return {"error": log}

    model = Scripted(replies=[call("query", {}, "call_q"), say("It failed.")])
    runner, _ = runner_on(tmp_path / "ws", model, tools=[query])
    events = await ask(runner, await session_of(runner, "q"), "query it")
    stored = tmp_path / "ws" / "sessions" / stored_as("q") / "tool_result-call_q.txt"
    assert stored.read_text(encoding="utf-8") == log
    (kept,) = responses(events)
    assert set(kept.response or {}) == {"error"}
    assert "tool_result-call_q.txt" in str((kept.response or {})["error"])
    (sent,) = [
        part.function_response
        for content in model.seen[1].contents
        for part in content.parts or []
        if part.function_response is not None
    ]
    assert set(sent.response or {}) == {"error"}
    assert tokens(model.seen[1]) < CONFIG.context_window


async def test_the_projection_prefix_is_byte_stable_across_requests(tmp_path: Path) -> None:
    model = Scripted(replies=[call("dump", {}, "c1"), call("dump", {}, "c2"), say("Both stored.")])
    runner, _ = runner_on(tmp_path / "ws", model)
    await ask(runner, await session_of(runner, "s1"), "dump the log twice")
    sent = [wire(request) for request in model.seen]
    assert len(sent) == 3
    for before, after in itertools.pairwise(sent):
        assert after[: len(before)] == before


async def test_two_users_sessions_of_one_id_are_two_conversations(tmp_path: Path) -> None:
    """ADK keeps a session id unique only within an app and a user: two users who both name
    their session "default" write two workspace sessions, and neither's request carries a
    word of the other's, whatever order they come in."""
    model = Scripted(
        replies=[call("dump", {}, "call_1"), say("Ana's log is kept."), say("Hello, Bo.")]
    )
    runner, _ = runner_on(tmp_path / "ws", model)
    await ask(runner, await session_of(runner, "default"), "dump the log")
    bo = await session_of(runner, "default", user_id="bo")
    await ask(runner, bo, "hi, anything for me?", user_id="bo")

    ana_folder = tmp_path / "ws" / "sessions" / stored_as("default")
    bo_folder = tmp_path / "ws" / "sessions" / stored_as("default", user_id="bo")
    assert ana_folder != bo_folder
    assert (ana_folder / "tool_result-call_1.txt").read_text(encoding="utf-8") == BIG
    assert not (bo_folder / "tool_result-call_1.txt").exists()
    bo_sent = " ".join(wire(model.seen[-1]))
    assert "anything for me" in bo_sent
    assert "dump the log" not in bo_sent and "export batch" not in bo_sent
    # `ctxoffload show` finds each by the host's own id of the conversation.
    for conversation, said in (("ops/ana/default", "dump the log"), ("ops/bo/default", "hi,")):
        shown = subprocess.run(
            [sys.executable, "-m", "ctxoffload", "show", conversation],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "CTXOFFLOAD_WORKDIR": str(tmp_path / "ws")},
        ).stdout
        assert said in shown


async def test_a_long_run_is_compacted_and_what_left_is_in_context_jsonl(tmp_path: Path) -> None:
    model = Scripted()
    runner, _ = runner_on(tmp_path / "ws", model)
    await converse(runner, model, range(80), "long")
    session = await runner.session_service.get_session(
        app_name="ops", user_id="ana", session_id="long"
    )
    assert session is not None
    kept = [event.content for event in session.events if event.content is not None]
    assert len(kept) == 160  # the session keeps every turn
    assert max(tokens(request) for request in model.seen) < CONFIG.context_window
    last = set(wire(model.seen[-1]))
    everything = [
        msg
        for msg, content in zip(from_genai(kept[:-1]), kept[:-1], strict=True)
        if json.dumps(content.model_dump(mode="json", exclude_none=True), sort_keys=True)
        not in last
    ]
    left = {msg.id for msg in everything}
    assert len(left) > 100
    assert left <= context_ids(tmp_path / "ws", stored_as("long"))


async def test_a_resumed_session_projects_the_same_contents(tmp_path: Path) -> None:
    # A new runner, plugin and workspace object, on the session ADK kept, must send what the
    # unbroken run sent.
    control = Scripted()
    runner, _ = runner_on(tmp_path / "a", control)
    await converse(runner, control, range(41), "t")
    first = Scripted()
    runner, _ = runner_on(tmp_path / "b", first)
    await converse(runner, first, range(40), "t")
    resumed = Scripted()
    again, _ = runner_on(tmp_path / "b", resumed, sessions=runner.session_service)
    await converse(again, resumed, range(40, 41), "t")

    def neutral(lines: list[str], folder: Path) -> list[str]:
        return [line.replace(str(folder), "WS") for line in lines]

    assert neutral(wire(resumed.seen[0]), tmp_path / "b") == neutral(
        wire(control.seen[-1]), tmp_path / "a"
    )
    assert len(resumed.seen[0].contents) < 80  # it was compacted


def test_a_session_resumed_in_a_new_process_projects_the_same_contents(tmp_path: Path) -> None:
    control = Scripted()
    runner, _ = runner_on(tmp_path / "a", control)
    asyncio.run(converse(runner, control, range(41), "t"))
    script = Path(__file__).with_name("google_adk_resume.py")
    folder, db, out = tmp_path / "b", tmp_path / "sessions.db", tmp_path / "sent.json"
    for first, last in ((0, 40), (40, 41)):
        subprocess.run(
            [sys.executable, str(script), str(folder), str(db), str(first), str(last), str(out)],
            check=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    (resumed,) = json.loads(out.read_text())
    unbroken = [line.replace(str(tmp_path / "a"), "WS") for line in wire(control.seen[-1])]
    assert [line.replace(str(folder), "WS") for line in resumed] == unbroken
    assert len(resumed) < 80


def test_show_prints_what_each_request_was_sent(tmp_path: Path) -> None:
    """`ctxoffload show --step N` on an ADK session: the contents request N was sent (the
    instruction first), the 5 MB result as the head and notice the model read."""
    model = Scripted(replies=[call("dump", {}, "call_1"), say("The export finished.")])
    runner, _ = runner_on(tmp_path / "ws", model)

    async def run() -> None:
        await ask(runner, await session_of(runner, "t1"), "dump the log")

    asyncio.run(run())

    def show(*args: str) -> str:
        workdir = str(tmp_path / "ws")
        # The host's own id of the conversation finds its session.
        command = [sys.executable, "-m", "ctxoffload", "show", "ops/ana/t1", "--workdir", workdir]
        return subprocess.run([*command, *args], capture_output=True, text=True, check=True).stdout

    for step, request in enumerate(model.seen, start=1):
        shown = json.loads(show("--step", str(step), "--json"))["messages"]
        sent = from_genai(request.contents)
        assert shown[0]["role"] == "system"
        assert "You keep the export job's log." in str(shown[0]["content"])
        assert [m["role"] for m in shown[1:]] == [m.role for m in sent]
        assert [str(m["content"]) for m in shown[1:]] == [
            str(m.model_dump(mode="json")["content"]) for m in sent
        ]
    step_2 = show("--step", "2", "--full")
    assert "tool_result-call_1.txt" in step_2 and len(step_2) < 20_000
    assert "step 2 · model call" in show()


async def test_a_run_holds_its_session_and_a_second_run_of_it_meanwhile_is_refused(
    tmp_path: Path,
) -> None:
    entered, gate = asyncio.Event(), asyncio.Event()

    async def slow() -> str:
        """Wait for the gate."""
        entered.set()
        await gate.wait()
        return "done"

    model = Scripted(replies=[call("slow", {}, "c1"), say("Finished.")])
    runner, _ = runner_on(tmp_path / "ws", model, tools=[slow])
    session = await session_of(runner, "shared")
    first = asyncio.create_task(ask(runner, session, "wait"))
    await entered.wait()
    other = Scripted(replies=[say("never")])
    second, _ = runner_on(tmp_path / "ws", other, sessions=runner.session_service)
    with pytest.raises(RuntimeError) as refused:
        await ask(second, session, "me too")
    busy = refused.value.__cause__
    assert isinstance(busy, SessionBusyError)
    assert "run this one in another session" in str(busy) and "if_busy" not in str(busy)
    assert other.seen == []  # the second run never reached its model
    gate.set()
    await first
    again = Scripted(replies=[say("Free again.")])
    third, _ = runner_on(tmp_path / "ws", again, sessions=runner.session_service)
    await ask(third, session, "now")
    assert len(again.seen) == 1


async def test_the_agent_reads_an_offloaded_result_back_with_its_tools(tmp_path: Path) -> None:
    model = Scripted(
        replies=[
            call("dump", {}, "call_1"),
            call("Grep", {"pattern": "batch 123456 done"}, None),
            say("Batch 123456 is done."),
        ]
    )
    runner, _ = runner_on(tmp_path / "ws", model)
    events = await ask(runner, await session_of(runner, "t"), "was batch 123456 done?")
    grep = responses(events)[-1]
    assert grep.name == "Grep"
    assert "tool_result-call_1.txt:123457:03:36 INFO export batch 123456 done" in str(
        (grep.response or {})["result"]
    )


def _left_out_app(folder: Path, model: Scripted) -> Runner:
    """A runner whose agent has the plugin's tools, and whose app has no plugin."""
    offload = ContextOffloadPlugin(LocalWorkspace(folder), config=CONFIG)
    agent = LlmAgent(name="ops", model=model, tools=[dump, *offload.tools])
    return Runner(
        app=App(name=APP, root_agent=agent, plugins=[]), session_service=InMemorySessionService()
    )


async def test_a_run_its_tools_are_in_but_its_plugin_not_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`offload.tools` given to the agent, the plugin not in `plugins=`: the run went to its
    end with the result whole in the session, nothing stored, and nothing said."""
    model = Scripted(replies=[call("dump", {}, "c1"), say("one"), say("two")])
    runner = _left_out_app(tmp_path / "ws", model)
    with caplog.at_level(logging.WARNING, "ctxoffload"):
        await ask(runner, await session_of(runner, "s1"), "Dump the log.")
        await ask(runner, "s1", "Again.")  # (said once)
    (said,) = [r.getMessage() for r in caplog.records if r.name == "ctxoffload"]
    assert said.startswith("ContextOffloadPlugin: its tools are in a run of Google ADK it is not")
    assert said.endswith("App(..., plugins=[offload]) or Runner(..., plugins=[offload])")
    assert len(model.seen) == 3 and not (tmp_path / "ws" / "sessions").exists()


async def test_a_run_with_the_plugin_in_says_nothing_of_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = Scripted(replies=[call("dump", {}, "c1"), say("one")])
    runner, _ = runner_on(tmp_path / "ws", model)
    with caplog.at_level(logging.WARNING, "ctxoffload"):
        await ask(runner, await session_of(runner, "s1"), "Dump the log.")
    assert not [r for r in caplog.records if r.name == "ctxoffload"]


def test_a_run_left_without_its_plugin_is_said_as_a_user_sees_it(tmp_path: Path) -> None:
    done = run_as_a_user(
        """
import asyncio
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google_adk_scripted import Scripted, ask, call, dump, say, session_of
from ctxoffload import LocalWorkspace
from ctxoffload.integrations.google_adk import ContextOffloadPlugin

offload = ContextOffloadPlugin(LocalWorkspace("ws"))
model = Scripted(replies=[call("dump", {}, "c1"), say("Done.")])
agent = LlmAgent(name="ops", model=model, tools=[dump, *offload.tools])
runner = Runner(app=App(name="ops", root_agent=agent), session_service=InMemorySessionService())


async def main():
    await ask(runner, await session_of(runner, "s1"), "Dump the log.")


asyncio.run(main())
""",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "it is not plugged into" in line]
    assert len(said) == 1 and "plugins=[offload]" in said[0]


def test_contents_round_trip_through_ctxoffload() -> None:
    contents = [
        types.Content(role="user", parts=[types.Part(text="look at the chart")]),
        types.Content(
            role="model",
            parts=[
                types.Part(text="thinking it over", thought=True, thought_signature=b"sig"),
                types.Part(function_call=types.FunctionCall(id="c1", name="chart", args={"n": 1})),
            ],
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="c1", name="chart", response={"result": "a chart"}
                    )
                ),
                types.Part(inline_data=types.Blob(data=b"\x89PNG", mime_type="image/png")),
            ],
        ),
    ]
    msgs = from_genai(contents)
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "user"]
    back = to_genai(msgs)
    assert back[1].parts[0].thought and back[1].parts[0].thought_signature == b"sig"
    assert back[1].parts[1].function_call.args == {"n": 1}
    assert back[2].parts[0].function_response.response == {"result": "a chart"}
    assert back[3].parts[0].inline_data.data == b"\x89PNG"


def test_calls_without_ids_pair_with_their_results() -> None:
    # Gemini gives no call ids; ADK sends the request without its own: the split must still
    # keep each call with its result, and the request keeps the parts as ADK built them.
    contents = [
        types.Content(role="user", parts=[types.Part(text="two logs")]),
        types.Content(
            role="model",
            parts=[
                types.Part(function_call=types.FunctionCall(name="dump", args={})),
                types.Part(function_call=types.FunctionCall(name="dump", args={"n": 2})),
            ],
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(name="dump", response={"result": "a"})
                ),
                types.Part(
                    function_response=types.FunctionResponse(name="dump", response={"result": "b"})
                ),
            ],
        ),
    ]
    calls, results = from_genai(contents)[1:]
    assert [b.id for b in calls.content] == [b.id for b in results.content]  # type: ignore[union-attr]
    assert len({b.id for b in calls.content}) == 2  # type: ignore[union-attr]


async def test_a_request_refused_as_over_the_window_makes_the_next_one_summarised(
    tmp_path: Path,
) -> None:
    class Overflowing(Scripted):
        fail: bool = False

        async def generate_content_async(self, llm_request, stream=False):  # type: ignore[no-untyped-def]
            if self.fail:
                self.fail = False
                raise ValueError("400 INVALID_ARGUMENT: The input token count exceeds the maximum")
            async for reply in super().generate_content_async(llm_request, stream):
                yield reply

    model = Overflowing()
    runner, _ = runner_on(tmp_path / "ws", model)
    await converse(runner, model, range(6), "t")
    assert "context.jsonl" not in wire(model.seen[-1])[0]  # below the trigger
    model.fail = True
    with pytest.raises(ValueError, match="exceeds the maximum"):
        await converse(runner, model, range(6, 7), "t")
    await converse(runner, model, range(7, 8), "t")
    assert "context.jsonl" in wire(model.seen[-1])[0]  # a summary stands for the older ones


# ADK marks its events compaction experimental, with a warning at each use.
@pytest.mark.filterwarnings(r"ignore:\[EXPERIMENTAL\]:UserWarning")
async def test_adks_own_compaction_runs_beside_the_plugin(tmp_path: Path) -> None:
    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.apps.app import EventsCompactionConfig
    from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService

    from ctxoffload import LocalWorkspace
    from ctxoffload.integrations.google_adk import ContextOffloadPlugin

    model = Scripted()
    summaries = Scripted(replies=[say(f"ADK's summary {i}") for i in range(10)])
    offload = ContextOffloadPlugin(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False
    )
    agent = LlmAgent(name="ops", model=model, tools=offload.tools)
    compaction = EventsCompactionConfig(
        compaction_interval=2, overlap_size=0, summarizer=LlmEventSummarizer(llm=summaries)
    )
    app = App(name="ops", root_agent=agent, plugins=[offload], events_compaction_config=compaction)
    runner = Runner(app=app, session_service=InMemorySessionService())
    session = await session_of(runner, "t")
    for turn in range(6):
        model.replies = [say(f"answer {turn}")]
        await ask(runner, session, f"question {turn}")
    assert "ADK's summary 0" in wire(model.seen[-1])[0]
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxoffload",
            "show",
            "ops/ana/t",
            "--workdir",
            str(tmp_path / "ws"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown.count("· model call ·") == 6


async def test_calls_the_model_gave_no_id_are_never_stored_as_a_copy_of_their_notice(
    tmp_path: Path,
) -> None:
    """Gemini gives calls no id: ADK makes up `adk-...` ids for its tool hooks and strips them
    from every request, so a result cut at the tool had another id when a later projection
    cut it again, and was stored again (a file holding the notice, named by the notice the
    model was sent). Every file now holds a whole output, and each notice names one."""
    import re

    whole: dict[int, str] = {}

    def probe(n: int) -> str:
        """Probe n."""
        return f"probe {n}: " + "reading value ok " * 40

    def rows(n: int) -> dict[str, object]:
        """Rows of n."""
        value = {"n": n, "rows": [f"row {i} of {n}" for i in range(400)]}
        whole[n] = json.dumps(value, ensure_ascii=False)
        return value

    model = Scripted()
    small = ContextConfig(context_window=4_000, tool_result_limit=300)
    runner, _ = runner_on(tmp_path / "ws", model, tools=[probe, rows], config=small)
    session = await session_of(runner, "g")
    for turn in range(5):
        parts = [
            types.Part(function_call=types.FunctionCall(name="probe", args={"n": turn})),
            types.Part(function_call=types.FunctionCall(name="rows", args={"n": turn})),
        ]
        model.replies = [
            LlmResponse(content=types.Content(role="model", parts=parts)),
            say(f"turn {turn} done"),
        ]
        await ask(runner, session, f"turn {turn}")
    folder = tmp_path / "ws" / "sessions" / stored_as("g")
    for stored in folder.glob("tool_result-*.txt"):
        assert str(folder) not in stored.read_text(encoding="utf-8"), stored.name
    named = 0
    for content in model.seen[-1].contents:
        for part in content.parts or []:
            response = part.function_response
            if response is None or response.name != "rows":
                continue
            text = str((response.response or {}).get("result", ""))
            paths = re.findall(r"all in (\S+\.txt)", text)
            if paths:
                n = int(re.search(r'"n": (\d+)', text).group(1))  # type: ignore[union-attr]
                assert Path(paths[-1]).read_text(encoding="utf-8") == whole[n]
                named += 1
    assert named >= 1


async def test_a_plugin_forgets_the_state_of_sessions_past_the_ones_it_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server keeps one plugin for every user's sessions: it kept each session's projector
    and history for good (0.28 MB a session, 300 sessions deleted from ADK kept 300). Past
    `SESSIONS_KEPT`, the least recently used whose run is over are forgotten; one that comes
    back projects from its record as a resumed session does, its prefix the same bytes."""
    from ctxoffload._doors import runs

    monkeypatch.setattr(runs, "SESSIONS_KEPT", 2)
    model = Scripted()
    runner, plugin = runner_on(tmp_path / "ws", model)
    names = [f"user-{i}" for i in range(5)]
    for name in names:
        model.replies = [say(f"Noted for {name}. " + "ok " * 30)]
        await ask(runner, await session_of(runner, name), f"remember {name} " + "detail " * 40)
        assert len(plugin._sessions) <= 2
    before = wire(model.seen[0])
    model.replies = [say("Back again.")]
    await ask(runner, names[0], "and once more")
    again = wire(model.seen[-1])
    assert again[: len(before)] == before
    assert "and once more" in again[-1]


def test_a_server_keeps_no_output_of_a_session_whose_run_is_over(tmp_path: Path) -> None:
    """A server keeps one plugin for every user's sessions, and the plugin each session's
    projector for its next run (up to `SESSIONS_KEPT`). Each kept the whole text of the
    output its last call cut, and its counter the counts of long texts with the texts. Once a
    run is over its projector lets go of them; the output is in its file, where a result cut
    again is read back from."""
    outputs: list[str] = []

    def fetch() -> str:
        """Fetch the output."""
        return outputs.pop()

    model = Scripted()
    runner, plugin = runner_on(tmp_path / "ws", model, tools=[fetch])

    def run(number: int) -> None:
        outputs.append(megabyte_output(number))
        model.replies = [call("fetch", {}, f"call_{number}"), say("done")]
        model.seen.clear()  # (the script's copies of the requests, not the server's)

        async def one() -> None:
            await ask(runner, await session_of(runner, f"s{number}"), f"q {number}")

        asyncio.run(one())

    assert retained_per_run(run) < 200_000
    assert len(plugin._sessions) == 8  # each session's projector is still kept


async def test_a_call_that_wrote_a_whole_file_is_sent_cut_with_its_own_id_and_signature(
    tmp_path: Path,
) -> None:
    """The newest turn over the window because the model's own call held a whole file: the
    model is sent the call with its file cut to a head and a notice naming the file that
    holds it whole, and the part is the model's own otherwise: the call's path, its id (none,
    as Gemini gives none) and its thought signature, which Gemini asks back with every call
    of a thinking model (the door made the part anew: a made-up id, no signature)."""
    body = "".join(
        f"line {i}: total = compute(batch_{i}, rate={i * 7 % 13})\n" for i in range(1500)
    )

    def write_file(path: str, content: str) -> str:
        """Write `content` to `path`."""
        return f"wrote {len(content)} characters to {path}"

    wrote = call("write_file", {"path": "app/report.py", "content": body}, None)
    assert wrote.content is not None and wrote.content.parts
    wrote.content.parts[0].thought_signature = b"signed-by-the-model"
    model = Scripted(replies=[wrote, say("Written.")])
    runner, _ = runner_on(tmp_path / "ws", model, tools=[write_file])
    await ask(runner, await session_of(runner, "f"), "write the report module")

    assert len(model.seen) == 2
    last = model.seen[-1]
    assert tokens(last) < CONFIG.context_window
    (sent,) = [
        part
        for content in last.contents
        for part in content.parts or []
        if part.function_call is not None
    ]
    args = sent.function_call.args or {}
    assert args["path"] == "app/report.py"
    assert sent.function_call.id is None
    assert sent.thought_signature == b"signed-by-the-model"
    assert "<<<TRUNCATED>>>" in args["content"] and body.startswith(args["content"][:200])
    folder = tmp_path / "ws" / "sessions" / stored_as("f")
    (stored,) = folder.glob("tool_result-*_content*.txt")
    assert str(stored) in args["content"] and stored.read_text(encoding="utf-8") == body
    assert body not in "".join(wire(last))
