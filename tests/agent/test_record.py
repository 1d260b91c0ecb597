"""The session record: what an Agent writes to events.jsonl, logs, and tells on_event."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    __version__,
    get_token_counter,
)
from ctxoffload._disk.read import rebuild_step
from ctxoffload.agent import SessionRecorder, _record
from ctxoffload.compression import Compressor
from ctxoffload.messages import ToolCallBlock, ToolResultBlock
from helpers import SUMMARY, OffloaderOnly, call, explode, fetch_log


def make_agent(model: ScriptedModel, workspace: Any, **kwargs: Any) -> Agent:
    kwargs.setdefault("context_config", ContextConfig(context_window=4000, tool_result_limit=300))
    kwargs.setdefault("counter", get_token_counter(exact=False))
    kwargs.setdefault("summary_model", ScriptedModel(default=SUMMARY))
    kwargs.setdefault("tools", [fetch_log, explode])
    return Agent(
        name="tester",
        system_prompt="You test things.",
        model=model,
        offloader=workspace,
        **kwargs,
    )


@pytest.fixture
def workspace(tmp_path: Path) -> LocalWorkspace:
    return LocalWorkspace(tmp_path / "ws")


def of_kind(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == kind]


def sent(msgs: list[Msg]) -> list[dict[str, Any]]:
    return [{"role": m.role, "content": m.model_dump(mode="json")["content"]} for m in msgs]


async def test_session_start_names_config_models_tools_and_version(
    workspace: LocalWorkspace,
) -> None:
    agent = make_agent(ScriptedModel(["hi"], model_name="gpt-test"), workspace)
    await agent.reply("hello")
    (start,) = of_kind(await workspace.read_events(agent.session_id), "session_start")
    assert start["version"] == __version__
    assert start["model"] == "scripted (gpt-test)"
    assert start["summary_model"] == "scripted"
    assert start["tools"] == ["fetch_log", "explode", "retrieve_offloaded_content"]
    assert start["config"]["tool_result_limit"] == 300
    assert start["context_window"] == 4000


async def test_user_requests_and_final_answers_stay_in_the_record(
    workspace: LocalWorkspace,
) -> None:
    agent = make_agent(ScriptedModel(["first answer", "second answer"]), workspace)
    await agent.reply("first question")
    await agent.reply("second question")
    messages = [
        e["message"] for e in of_kind(await workspace.read_events(agent.session_id), "message")
    ]
    texts = [(m["role"], m["content"]) for m in messages]
    for pair in [
        ("system", "You test things."),
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question"),
        ("assistant", "second answer"),
    ]:
        assert pair in texts


async def test_each_step_is_rebuilt_from_the_files_through_compressions(
    workspace: LocalWorkspace,
) -> None:
    steps: list[Any] = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(24)]
    model = ScriptedModel([*steps, "done"])
    agent = make_agent(model, workspace)
    await agent.reply("read many logs")
    assert agent.compressor.compressions >= 2
    events = await workspace.read_events(agent.session_id)
    first_compression = next(i for i, e in enumerate(events) if e["kind"] == "compression")
    calls = of_kind(events, "model_call")
    assert len(calls) == len(model.calls)
    assert any(events.index(c) < first_compression for c in calls)
    for n, expected in enumerate(model.calls, start=1):
        rebuilt = rebuild_step(events, n)
        assert [{"role": m["role"], "content": m["content"]} for m in rebuilt] == sent(expected)


async def test_model_calls_record_ids_tokens_duration_and_outcome(
    workspace: LocalWorkspace,
) -> None:
    model = ScriptedModel([call("c1", "fetch_log", log="a"), "done"])
    agent = make_agent(model, workspace)
    await agent.reply("go")
    events = await workspace.read_events(agent.session_id)
    first, second = of_kind(events, "model_call")
    assert first["step"] == 1 and second["step"] == 2
    assert first["messages"] == [m.id for m in model.calls[0]]
    assert first["tokens_counted"] > 0
    assert first["duration_ms"] >= 0
    assert first["outcome"] == "ok"
    assert first["tool_calls"] == [{"id": "c1", "name": "fetch_log"}]
    assert second["reply"] == agent.messages[-1].id


async def test_a_failed_model_call_is_recorded_with_its_error(workspace: LocalWorkspace) -> None:
    model = ScriptedModel([ValueError("provider down")])
    agent = make_agent(model, workspace)
    with pytest.raises(ValueError):
        await agent.reply("go")
    (failed,) = of_kind(await workspace.read_events(agent.session_id), "model_call")
    assert failed["outcome"] == "error"
    assert failed["error"] == {"type": "ValueError", "message": "provider down"}


async def test_tool_exception_keeps_type_message_and_traceback(
    workspace: LocalWorkspace, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel([call("c1", "explode", reason="test"), "done"])
    agent = make_agent(model, workspace)
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        await agent.reply("go")
    (tool,) = of_kind(await workspace.read_events(agent.session_id), "tool_call")
    assert tool["name"] == "explode"
    assert tool["arguments"] == {"reason": "test"}
    assert tool["outcome"] == "error"
    assert tool["error"]["type"] == "RuntimeError"
    assert tool["error"]["message"] == "boom: test"
    assert 'raise RuntimeError(f"boom: {reason}")' in tool["error"]["traceback"]
    warning = next(r for r in caplog.records if "explode" in r.getMessage())
    assert warning.levelno == logging.WARNING
    assert warning.exc_info is not None


async def test_a_successful_tool_call_is_recorded(workspace: LocalWorkspace) -> None:
    model = ScriptedModel([call("c1", "fetch_log", log="a"), "done"])
    agent = make_agent(model, workspace)
    await agent.reply("go")
    (tool,) = of_kind(await workspace.read_events(agent.session_id), "tool_call")
    assert tool["outcome"] == "ok"
    assert tool["step"] == 1
    assert tool["tool_id"] == "c1"
    assert tool["duration_ms"] >= 0
    assert "error" not in tool


async def test_large_arguments_are_referenced_not_copied(workspace: LocalWorkspace) -> None:
    big = "x" * 5000
    model = ScriptedModel([call("c1", "fetch_log", log=big), "done"])
    agent = make_agent(model, workspace)
    await agent.reply("go")
    events = await workspace.read_events(agent.session_id)
    (tool,) = of_kind(events, "tool_call")
    assert "arguments" not in tool
    ref = tool["arguments_ref"]
    holder = next(
        e["message"] for e in of_kind(events, "message") if e["message"]["id"] == ref["message_id"]
    )
    (block,) = [b for b in holder["content"] if b.get("id") == ref["tool_call_id"]]
    assert block["input"] == {"log": big}


async def test_on_event_sees_the_events_as_written(workspace: LocalWorkspace) -> None:
    seen: list[dict[str, Any]] = []
    model = ScriptedModel([call("c1", "fetch_log", log="a"), "done"])
    agent = make_agent(model, workspace, on_event=seen.append)
    await agent.reply("go")
    written = await workspace.read_events(agent.session_id)
    # The workspace's own lines (tool_result, context) are not ours to announce.
    ours = [e for e in written if e["kind"] not in ("tool_result", "context")]
    assert seen == ours
    assert {"session_start", "message", "model_call", "tool_call", "truncation"} <= {
        e["kind"] for e in seen
    }


async def test_an_async_on_event_is_awaited(workspace: LocalWorkspace) -> None:
    seen: list[str] = []

    async def observe(event: dict[str, Any]) -> None:
        seen.append(event["kind"])

    agent = make_agent(ScriptedModel(["done"]), workspace, on_event=observe)
    await agent.reply("go")
    assert "model_call" in seen


async def test_a_failing_on_event_is_logged_and_the_run_goes_on(
    workspace: LocalWorkspace, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: dict[str, Any]) -> None:
        raise KeyError("observer bug")

    agent = make_agent(ScriptedModel(["done"]), workspace, on_event=broken)
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        reply = await agent.reply("go")
    assert reply.text == "done"
    assert any("on_event" in r.getMessage() for r in caplog.records)


class FailingRecordOffloader(OffloaderOnly):
    """An `EventLog` whose writes fail."""

    async def record_event(self, session_id: str, kind: str, **fields: Any) -> None:
        raise OSError("disk full")

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        return []


@pytest.mark.parametrize("offloader_class", [OffloaderOnly, FailingRecordOffloader])
async def test_an_offloader_that_cannot_record_never_breaks_the_run(
    workspace: LocalWorkspace,
    offloader_class: type[OffloaderOnly],
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[dict[str, Any]] = []
    steps: list[Any] = [call("c1", "explode", reason="x"), call("c2", "fetch_log", log="a")]
    agent = make_agent(
        ScriptedModel([*steps, "done"]), offloader_class(workspace), on_event=seen.append
    )
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        assert (await agent.reply("go")).text == "done"
    assert any(e["kind"] == "tool_call" for e in seen)
    failed = any("could not record a" in r.getMessage() for r in caplog.records)
    assert failed is (offloader_class is FailingRecordOffloader)


async def test_truncation_and_compression_are_logged_at_info(
    workspace: LocalWorkspace, caplog: pytest.LogCaptureFixture
) -> None:
    steps: list[Any] = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(12)]
    agent = make_agent(ScriptedModel([*steps, "done"]), workspace)
    with caplog.at_level(logging.DEBUG, logger="ctxoffload"):
        await agent.reply("go")
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    truncated = [m for m in infos if m.startswith("truncated fetch_log ")]
    assert len(truncated) == 12
    assert "tool_result-c0.txt" in truncated[0] and "→" in truncated[0]
    compressed = [m for m in infos if m.startswith("compressed ")]
    assert len(compressed) == agent.compressor.compressions
    assert "context.jsonl lines 1-" in compressed[0]
    debugs = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(m.startswith("step 1:") for m in debugs)


async def test_compressor_on_event_gets_truncations(workspace: LocalWorkspace) -> None:
    seen: list[dict[str, Any]] = []
    compressor = Compressor(
        ContextConfig(context_window=4000, tool_result_limit=300),
        offloader=workspace,
        session_id="s1",
        counter=get_token_counter(exact=False),
        on_event=seen.append,
    )
    await compressor.process_tool_result(
        ToolResultBlock(id="t1", name="fetch_log", output=fetch_log("a"))
    )
    assert [e["kind"] for e in seen] == ["truncation"]
    written = of_kind(await workspace.read_events("s1"), "truncation")
    assert written == seen


async def test_an_overflow_retry_is_recorded_and_the_retry_is_rebuilt(
    workspace: LocalWorkspace,
) -> None:
    from ctxoffload import ContextOverflowError

    steps: list[Any] = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(3)]
    model = ScriptedModel([*steps, ContextOverflowError("prompt is too long"), "recovered"])
    agent = make_agent(
        model,
        workspace,
        context_config=ContextConfig(context_window=100_000, tool_result_limit=300),
    )
    await agent.reply("go")
    events = await workspace.read_events(agent.session_id)
    overflow, retry = [e for e in of_kind(events, "model_call") if e["step"] == 4]
    assert overflow["outcome"] == "overflow" and overflow["attempt"] == 1
    assert retry["outcome"] == "ok" and retry["attempt"] == 2
    assert retry["summary"] is not None
    rebuilt = rebuild_step(events, 4)
    assert [{"role": m["role"], "content": m["content"]} for m in rebuilt] == sent(model.calls[-1])


async def test_a_user_request_cut_by_compression_is_rebuilt_as_each_step_saw_it(
    workspace: LocalWorkspace,
) -> None:
    request = "Please look into this.\n" + "\n".join(
        f"detail {i} of the request" for i in range(150)
    )
    steps: list[Any] = [call(f"c{i}", "fetch_log", log=f"n{i}") for i in range(8)]
    model = ScriptedModel([*steps, "done"])
    agent = make_agent(model, workspace)
    await agent.reply(request)
    events = await workspace.read_events(agent.session_id)
    user_versions = [e for e in of_kind(events, "message") if e["message"]["role"] == "user"]
    assert len({e["message"]["id"] for e in user_versions}) < len(user_versions), (
        "the request was never cut, so this test tests nothing"
    )
    for n, expected in enumerate(model.calls, start=1):
        rebuilt = rebuild_step(events, n)
        assert [{"role": m["role"], "content": m["content"]} for m in rebuilt] == sent(expected)


async def test_steps_keep_counting_when_a_session_is_resumed(workspace: LocalWorkspace) -> None:
    first = make_agent(ScriptedModel([call("c1", "fetch_log", log="a"), "one"]), workspace)
    await first.reply("go")
    await first.aclose()
    model = ScriptedModel(["two"])
    second = make_agent(model, workspace, session_id=first.session_id)
    await second.reply("again")
    events = await workspace.read_events(first.session_id)
    assert [e["step"] for e in of_kind(events, "model_call")] == [1, 2, 3]
    rebuilt = rebuild_step(events, 3)
    assert [{"role": m["role"], "content": m["content"]} for m in rebuilt] == sent(model.calls[0])


async def test_a_resumed_session_is_announced_once(
    workspace: LocalWorkspace, caplog: pytest.LogCaptureFixture
) -> None:
    """One INFO line says the session was resumed, with the count its session_start records
    (the system prompt is the constructor's, not restored), and a closed agent's lease is
    taken with no takeover line at all."""
    async with make_agent(ScriptedModel(["one"]), workspace, session_id="run-42") as first:
        await first.reply("go")
    second = make_agent(ScriptedModel(["two", "three"]), workspace, session_id="run-42")
    with caplog.at_level(logging.INFO, logger="ctxoffload"):
        await second.reply("again")
        await second.reply("and again")
    await second.aclose()
    starts = of_kind(await workspace.read_events("run-42"), "session_start")
    restored = starts[-1]["restored_messages"]
    lines = [r.getMessage() for r in caplog.records if "resum" in r.getMessage()]
    assert lines == [
        f"resumed session run-42 from its saved state: {restored} messages restored; "
        "pass another session_id to start afresh"
    ]
    assert not [r for r in caplog.records if "took over" in r.getMessage()]


async def test_without_an_offloader_on_event_still_sees_the_run() -> None:
    seen: list[dict[str, Any]] = []
    agent = Agent(
        model=ScriptedModel([call("c1", "explode", reason="x"), "done"]),
        tools=[explode],
        context_config=ContextConfig(context_window=4000),
        counter=get_token_counter(exact=False),
        on_event=seen.append,
    )
    assert (await agent.reply("go")).text == "done"
    assert [e["kind"] for e in seen if e["kind"] != "message"] == [
        "session_start",
        "model_call",
        "tool_call",
        "model_call",
    ]


class RefusingOffloader(OffloaderOnly):
    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        raise OSError("disk full")


async def test_a_failed_offload_is_a_warning(
    workspace: LocalWorkspace, caplog: pytest.LogCaptureFixture
) -> None:
    agent = make_agent(
        ScriptedModel([call("c1", "fetch_log", log="a"), "done"]), RefusingOffloader(workspace)
    )
    with caplog.at_level(logging.INFO, logger="ctxoffload"):
        await agent.reply("go")
    # Once after the tool ran, and again when the fresh result is cut to fit before the
    # next model call: each failed attempt is its own warning.
    warnings = [r for r in caplog.records if "could not offload" in r.getMessage()]
    assert warnings
    for warning in warnings:
        assert warning.levelno == logging.WARNING and "fetch_log" in warning.getMessage()


async def test_tool_results_are_recorded_as_the_model_will_see_them(
    workspace: LocalWorkspace,
) -> None:
    model = ScriptedModel([call("c1", "fetch_log", log="a")])
    agent = make_agent(model, workspace)
    with pytest.raises(Exception, match="no steps left"):
        await agent.reply("go")
    events = await workspace.read_events(agent.session_id)
    (tool_msg,) = [
        e["message"] for e in of_kind(events, "message") if e["message"]["role"] == "tool"
    ]
    assert tool_msg == agent.messages[-1].model_dump(mode="json")
    assert "tool_result-c1.txt" in tool_msg["content"][0]["output"]


async def test_each_model_call_says_what_its_tokens_were_spent_on(
    workspace: LocalWorkspace,
) -> None:
    """`window` splits a call's count by part (system, tools, pinned, tool results, images,
    messages); the parts add up to `tokens_counted` (ScriptedModel reports no usage, so no
    provider anchor moves the count), and the window and trigger line come with them."""
    import base64

    from ctxoffload.messages import Base64Source, DataBlock, TextBlock

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256))).decode()

    def screenshot() -> list[TextBlock | DataBlock]:
        """Take a screenshot."""
        return [DataBlock(source=Base64Source(media_type="image/png", data=png))]

    model = ScriptedModel(
        [call("c1", "fetch_log", log="x"), call("c2", "screenshot"), "done", "again"]
    )
    agent = make_agent(
        model,
        workspace,
        tools=[fetch_log, screenshot],
        context_config=ContextConfig(context_window=50_000, tool_result_limit=5_000),
    )
    await agent.reply("look at the log")
    await agent.pin(agent.messages[1].id)
    await agent.reply("and now?")
    calls = of_kind(await workspace.read_events(agent.session_id), "model_call")
    assert [c["step"] for c in calls] == [1, 2, 3, 4]
    for event in calls:
        window = event["window"]
        assert sum(window.values()) == event["tokens_counted"], window
        assert window["system"] > 0 and window["tools"] > 0
        assert event["context_window"] == 50_000
        assert event["trigger_tokens"] == int(0.8 * 50_000)
    assert calls[0]["window"]["tool_results"] == 0
    assert calls[1]["window"]["tool_results"] > 0  # fetch_log's truncated result
    assert calls[2]["window"]["images"] > 0  # the screenshot
    assert calls[2]["window"]["pinned"] == 0
    assert calls[3]["window"]["pinned"] > 0  # the first request, pinned


class CountingWorkspace(LocalWorkspace):
    """A workspace on disk that notes the kinds of each append to events.jsonl."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.appends: list[list[str]] = []

    async def record_event(self, session_id: str, kind: str, **fields: Any) -> None:
        self.appends.append([kind])
        await super().record_event(session_id, kind, **fields)

    async def record_events(
        self, session_id: str, events: Sequence[tuple[str, dict[str, Any]]]
    ) -> None:
        self.appends.append([kind for kind, _ in events])
        await super().record_events(session_id, events)


def many_calls(count: int, *extra: ToolCallBlock) -> Msg:
    calls = [
        ToolCallBlock(id=f"c{i}", name="fetch_log", input={"log": str(i)}) for i in range(count)
    ]
    return Msg(role="assistant", content=[*calls, *extra])


async def test_a_steps_tool_calls_are_recorded_in_one_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Held longer than the step takes on any machine: the step's end writes them, together.
    monkeypatch.setattr(_record, "HELD_FOR", 3600.0)
    workspace = CountingWorkspace(tmp_path / "ws")
    model = ScriptedModel([many_calls(30), "done"])
    agent = make_agent(model, workspace, context_config=ContextConfig(context_window=200_000))
    await agent.reply("go")
    with_calls = [kinds for kinds in workspace.appends if "tool_call" in kinds]
    assert with_calls == [["tool_call"] * 30]


async def test_a_calls_event_is_on_disk_while_the_steps_next_call_runs(
    workspace: LocalWorkspace,
) -> None:
    """A step of slow tools shows each call as it ends (`ctxoffload watch`, a process killed
    in the step's next call): held calls wait `HELD_FOR`, not the step's end."""
    seen: list[str] = []

    async def slow(n: int) -> str:
        """Wait, in the second call, until the first call's event is on disk."""
        if n == 2:
            for _ in range(6000):  # (a stuck test ends, failing, after about a minute)
                path = workspace.workdir / "sessions" / "slow-tools" / "events.jsonl"
                lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
                if any(json.loads(line).get("tool_id") == "s1" for line in lines):
                    seen.append("s1 on disk")
                    break
                await asyncio.sleep(0.01)
        return f"call {n} done"

    reply = Msg(
        role="assistant",
        content=[ToolCallBlock(id=f"s{n}", name="slow", input={"n": n}) for n in (1, 2)],
    )
    agent = make_agent(
        ScriptedModel([reply, "done"]), workspace, tools=[slow], session_id="slow-tools"
    )
    await agent.reply("go")
    assert seen == ["s1 on disk"]
    events = of_kind(await workspace.read_events("slow-tools"), "tool_call")
    assert [e["tool_id"] for e in events] == ["s1", "s2"]


async def test_a_steps_tool_calls_come_before_its_results_and_their_truncations(
    workspace: LocalWorkspace,
) -> None:
    boom = ToolCallBlock(id="x1", name="explode", input={"reason": "on purpose"})
    model = ScriptedModel([many_calls(3, boom), "done"])
    agent = make_agent(model, workspace)
    await agent.reply("go")
    events = await workspace.read_events(agent.session_id)
    kinds = [e["kind"] for e in events]
    calls = [i for i, kind in enumerate(kinds) if kind == "tool_call"]
    assert sorted(events[i]["tool_id"] for i in calls) == ["c0", "c1", "c2", "x1"]
    assert calls == list(range(calls[0], calls[0] + 4))  # one run, in the order they ended
    assert kinds.index("truncation") > calls[-1]
    results = next(
        i for i, e in enumerate(events) if e["kind"] == "message" and e["message"]["role"] == "tool"
    )
    assert results > calls[-1]
    (failed,) = [events[i] for i in calls if events[i]["outcome"] == "error"]
    assert failed["error"]["type"] == "RuntimeError"
    # Each keeps the time its call ended at, not the time of the write.
    times = [events[i]["time"] for i in calls]
    assert times == sorted(times) and times[-1] <= events[results]["time"]


async def test_a_tool_given_another_function_checks_the_new_ones_arguments(
    workspace: LocalWorkspace,
) -> None:
    def word(log: int) -> str:
        """Say a number."""
        return f"number {log}"

    model = ScriptedModel([call("c1", "fetch_log", log="a"), "done"])
    agent = make_agent(model, workspace)
    await agent.reply("first")
    agent.tools["fetch_log"].func = word  # (its arguments now checked as an int)
    model.add(call("c2", "fetch_log", log="a"), call("c3", "fetch_log", log=7), "done")
    await agent.reply("second")
    events = of_kind(await workspace.read_events(agent.session_id), "tool_call")
    assert {e["tool_id"]: e["outcome"] for e in events} == {"c1": "ok", "c2": "error", "c3": "ok"}


async def test_a_tool_call_recorded_on_its_own_is_written_at_once(
    workspace: LocalWorkspace,
) -> None:
    # What the MCP proxy records for each call: nothing holds it for a step's one write.
    recorder = SessionRecorder(workspace, "proxied")
    call_block = ToolCallBlock(id="c1", name="search", input={"q": "x"})
    result = ToolResultBlock(id="c1", name="search", output="found")
    await recorder.tool_call(1, call_block, result, time.monotonic())
    (event,) = of_kind(await workspace.read_events("proxied"), "tool_call")
    assert (event["tool_id"], event["outcome"]) == ("c1", "ok")
