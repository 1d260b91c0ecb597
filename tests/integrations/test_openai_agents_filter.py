"""OffloadingInputFilter under the real OpenAI Agents SDK, offline: an
`OpenAIChatCompletionsModel` (the models the SDK's own compaction never serves) talks to the
project's local OpenAI-compatible server, which records what each call was sent."""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from frameworks import context_ids, require_framework

require_framework("agents", "openai_agents")

from agents import (  # noqa: E402
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.run_config import CallModelData, ModelInputData  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from openai_agents_scripted import call, run  # noqa: E402

from ctxoffload import ContextConfig, LocalWorkspace  # noqa: E402
from ctxoffload.formats import from_openai  # noqa: E402
from ctxoffload.integrations.openai_agents import (  # noqa: E402
    OffloadingInputFilter,
    WorkspaceSession,
)
from ctxoffload.tokens import get_token_counter  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402

set_tracing_disabled(True)

CONFIG = ContextConfig(context_window=4_000, tool_result_limit=300)
BIG = "".join(f"03:{i % 60:02d} INFO export batch {i} done\n" for i in range(160_000))  # ~5 MB


@function_tool
def dump() -> str:
    """Dump the export job's whole log."""
    return BIG


@function_tool
def status(batch: int) -> str:
    """The status line of one export batch."""
    return f"batch {batch}: " + "rows exported, checksums match, index rebuilt. " * 6


def offload_in(folder: Path) -> OffloadingInputFilter:
    return OffloadingInputFilter(
        LocalWorkspace(folder), config=CONFIG, session_id="t1", summary_model=False
    )


def tokens(body: dict[str, Any]) -> int:
    return get_token_counter(None).count_messages(from_openai(body["messages"]))


async def test_a_5_mb_tool_output_is_stored_whole_and_the_next_request_is_under_the_window(
    tmp_path: Path,
) -> None:
    with OpenAIServer() as server:
        server.add(call("dump", {}, "call_1"))
        server.add_completion("The export finished.")
        result = await run(server, offload_in(tmp_path / "ws"), [dump], "dump the log")
    assert result.final_output == "The export finished."
    stored = tmp_path / "ws" / "sessions" / "t1" / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8") == BIG
    sent = server.requests[1]["messages"]
    (output,) = [m for m in sent if m["role"] == "tool"]
    assert output["tool_call_id"] == "call_1"
    assert output["content"].startswith(BIG[:200])
    assert "tool_result-call_1.txt" in output["content"]
    assert len(output["content"]) < 5_000
    assert tokens(server.requests[1]) < CONFIG.context_window
    # The run itself keeps the whole output; only what the model is sent is cut.
    outputs = [i for i in result.to_input_list() if i.get("type") == "function_call_output"]
    assert outputs[0]["output"] == BIG


TURNS = 60


async def long_run(offload: OffloadingInputFilter) -> tuple[Any, OpenAIServer]:
    """A run of `TURNS` tool calls, each output under the limit: the run's result and the
    server that recorded what each call was sent."""
    with OpenAIServer() as server:
        for i in range(TURNS):
            server.add(call("status", {"batch": i}, f"call_{i}"))
        server.add_completion("All batches are exported.")
        result = await run(server, offload, [status], "check every batch", max_turns=100)
    return result, server


async def test_a_long_run_is_compacted_and_every_output_that_left_is_in_context_jsonl(
    tmp_path: Path,
) -> None:
    turns = TURNS
    result, server = await long_run(offload_in(tmp_path / "ws"))
    assert result.final_output == "All batches are exported."
    assert max(tokens(body) for body in server.requests) < CONFIG.context_window
    last = json.dumps(server.requests[-1])
    left = {f"function_call_output-call_{i}" for i in range(turns) if f'"call_{i}"' not in last}
    assert len(left) > turns // 2
    assert left <= context_ids(tmp_path / "ws", "t1")


async def test_the_agent_reads_an_offloaded_output_back_with_the_tools(tmp_path: Path) -> None:
    offload = offload_in(tmp_path / "ws")
    assert [t.name for t in offload.tools] == [
        "Read",
        "Grep",
        "Glob",
    ]
    with OpenAIServer() as server:
        server.add(call("dump", {}, "call_1"))
        server.add(call("Grep", {"pattern": "batch 123456 done"}, "call_2"))
        server.add_completion("Batch 123456 finished.")
        result = await run(server, offload, [dump, *offload.tools], "find batch 123456")
    assert result.final_output == "Batch 123456 finished."
    found = [m for m in server.requests[2]["messages"] if m.get("tool_call_id") == "call_2"]
    assert "tool_result-call_1.txt" in found[0]["content"]
    assert "batch 123456 done" in found[0]["content"]


async def test_a_run_its_tools_are_in_but_its_filter_not_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`offload.tools` given to the agent, the filter not in the run's `RunConfig`: the run
    went to its end with the output whole in what the model was sent, nothing stored, and
    nothing said."""
    offload = offload_in(tmp_path / "ws")
    with OpenAIServer() as server, caplog.at_level(logging.WARNING, "ctxoffload"):
        for _ in range(2):
            server.add(call("dump", {}, "call_1"))
            server.add(call("Grep", {"pattern": "batch 9 done"}, "call_2"))
            server.add_completion("Done.")
        async with AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0) as client:
            model = OpenAIChatCompletionsModel(model="test-model", openai_client=client)
            agent = Agent(name="ops", model=model, tools=[dump, *offload.tools])
            for _ in range(2):  # (said once)
                await Runner.run(agent, "find batch 9")
    (said,) = [r.getMessage() for r in caplog.records if r.name == "ctxoffload"]
    assert said.startswith("OffloadingInputFilter: its tools are in a run of the OpenAI Agents")
    assert said.endswith("RunConfig(call_model_input_filter=offload))")
    assert not (tmp_path / "ws" / "sessions").exists()


async def test_a_run_with_the_filter_in_says_nothing_of_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    offload = offload_in(tmp_path / "ws")
    with OpenAIServer() as server, caplog.at_level(logging.WARNING, "ctxoffload"):
        server.add(call("dump", {}, "call_1"))
        server.add(call("Grep", {"pattern": "batch 9 done"}, "call_2"))
        server.add_completion("Done.")
        await run(server, offload, [dump, *offload.tools], "find batch 9")
    assert not [r for r in caplog.records if r.name == "ctxoffload"]


async def test_the_projection_prefix_is_byte_stable_across_calls(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        server.add(call("dump", {}, "call_1"), call("dump", {}, "call_2"))
        server.add_completion("Both dumps are stored.")
        await run(server, offload_in(tmp_path / "ws"), [dump], "dump it twice")
    sent = [[json.dumps(m, sort_keys=True) for m in body["messages"]] for body in server.requests]
    assert len(sent) == 3
    for before, after in itertools.pairwise(sent):
        assert after[: len(before)] == before


async def test_a_resumed_session_projects_the_same_items(tmp_path: Path) -> None:
    # A new filter and workspace object on the folder, as a restarted process has, must send
    # what the filter of the run sent for the same items (the summary it decided included).
    first = offload_in(tmp_path / "ws")
    result, _ = await long_run(first)
    items = result.to_input_list()
    agent = Agent(name="ops", instructions="You run exports.", tools=[status])

    def data() -> CallModelData[Any]:
        return CallModelData(ModelInputData(list(items), "You run exports."), agent, None)

    sent = await first(data())
    resumed = await offload_in(tmp_path / "ws")(data())
    assert len(sent.input) < len(items)  # compacted
    assert resumed.input == sent.input


async def test_a_workspace_session_keeps_the_items_and_a_resumed_run_sees_them(
    tmp_path: Path,
) -> None:
    with OpenAIServer() as server:
        server.add(call("dump", {}, "call_1"))
        server.add_completion("The export finished.")
        server.add_completion("Yes: the last batch is 159999.")
        session = WorkspaceSession(
            LocalWorkspace(tmp_path / "ws"), "t1", config=CONFIG, summary_model=False
        )
        await run(server, offload_in(tmp_path / "ws"), [dump], "dump the log", session=session)
        # A new session, filter and workspace object on the folder: a restarted process.
        again = WorkspaceSession(
            LocalWorkspace(tmp_path / "ws"), "t1", config=CONFIG, summary_model=False
        )
        items = await again.get_items()
        assert [i.get("type", "message") for i in items] == [
            "message",
            "function_call",
            "function_call_output",
            "message",
        ]
        # The session keeps what the model was sent: the head and the notice naming the
        # file that holds the output whole, not the 5 MB again.
        assert items[2]["output"].startswith(BIG[:200]) and len(items[2]["output"]) < 5_000
        assert "tool_result-call_1.txt" in items[2]["output"]
        assert (tmp_path / "ws/sessions/t1/tool_result-call_1.txt").read_text() == BIG
        await run(server, offload_in(tmp_path / "ws"), [dump], "all done?", session=again)
    resumed = server.requests[2]["messages"]
    assert [m["role"] for m in resumed] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert "tool_result-call_1.txt" in resumed[3]["content"]
    assert tokens(server.requests[2]) < CONFIG.context_window
    assert len(await again.get_items()) == 6
    assert (await again.get_items(limit=2))[-1]["content"][0]["text"] == (
        "Yes: the last batch is 159999."
    )
    assert (await again.pop_item()) is not None and len(await again.get_items()) == 5
    await again.clear_session()
    assert await again.get_items() == [] and await again.pop_item() is None


RESUME = """
import asyncio, sys, types
from test_openai_agents_filter import (
    CONFIG, WorkspaceSession, LocalWorkspace, dump, offload_in, run,
)
server = types.SimpleNamespace(base_url=sys.argv[1])
session = WorkspaceSession(LocalWorkspace(sys.argv[2]), "t1", config=CONFIG, summary_model=False)
asyncio.run(run(server, offload_in(sys.argv[2]), [dump], "all done?", session=session))
"""


async def test_a_run_resumed_in_a_new_process_sends_what_one_in_this_process_sends(
    tmp_path: Path,
) -> None:
    with OpenAIServer() as server:
        server.add(call("dump", {}, "call_1"))
        server.add_completion("The export finished.")
        server.add_completion("Yes.", usage=(10, 1))
        server.add_completion("Yes.", usage=(10, 1))
        session = WorkspaceSession(
            LocalWorkspace(tmp_path / "a"), "t1", config=CONFIG, summary_model=False
        )
        await run(server, offload_in(tmp_path / "a"), [dump], "dump the log", session=session)
        # The same folder (notices name its path) resumed twice: here, then, put back as the
        # first run left it, in a new process.
        shutil.copytree(tmp_path / "a", tmp_path / "saved")
        here = WorkspaceSession(
            LocalWorkspace(tmp_path / "a"), "t1", config=CONFIG, summary_model=False
        )
        await run(server, offload_in(tmp_path / "a"), [dump], "all done?", session=here)
        shutil.rmtree(tmp_path / "a")
        shutil.copytree(tmp_path / "saved", tmp_path / "a")
        tests = [str(Path(__file__).parent), str(Path(__file__).parents[1])]
        path = os.pathsep.join([*tests, os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "PYTHONPATH": path}
        done = subprocess.run(
            [sys.executable, "-c", RESUME, server.base_url, str(tmp_path / "a")],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    assert done.returncode == 0, done.stderr
    in_process, new_process = server.requests[2], server.requests[3]
    assert new_process == in_process
    assert "tool_result-call_1.txt" in json.dumps(new_process)


async def test_run_compaction_summarises_the_session_and_keeps_every_item_that_left(
    tmp_path: Path,
) -> None:
    workspace = LocalWorkspace(tmp_path / "ws")
    session = WorkspaceSession(workspace, "t1", config=CONFIG, summary_model=False)
    with OpenAIServer() as server:
        for i in range(TURNS):
            server.add(call("status", {"batch": i}, f"call_{i}"))
        server.add_completion("All batches are exported.")
        await run(
            server, offload_in(tmp_path / "ws"), [status], "check", session=session, max_turns=100
        )
    before = await session.get_items()
    await session.run_compaction()
    after = await session.get_items()
    assert len(after) < len(before) // 4
    assert after[-1] == before[-1]  # the newest turn stays as it was
    summary = json.dumps(after[0])
    assert "context.jsonl" in summary and "<context_summary>" in summary
    kept = {json.dumps(item, sort_keys=True) for item in after}
    left = {
        f"{item['type']}-{item['call_id']}"
        for item in before
        if item.get("type", "").startswith("function_call")
        and json.dumps(item, sort_keys=True) not in kept
    }
    assert len(left) > TURNS
    assert left <= context_ids(tmp_path / "ws", "t1")
    # A run resumed on the compacted session sends the summary and stays small.
    with OpenAIServer() as server:
        server.add_completion("Yes, all of them.")
        again = WorkspaceSession(
            LocalWorkspace(tmp_path / "ws"), "t1", config=CONFIG, summary_model=False
        )
        await run(server, offload_in(tmp_path / "ws"), [status], "all done?", session=again)
    assert "<context_summary>" in json.dumps(server.requests[0])
    assert len(server.requests[0]["messages"]) < len(before) // 4


async def test_run_compaction_leaves_a_short_session_alone_unless_forced(tmp_path: Path) -> None:
    session = WorkspaceSession(
        LocalWorkspace(tmp_path / "ws"), "t1", config=CONFIG, summary_model=False
    )
    await session.run_compaction()  # nothing stored: nothing to do
    for i in range(6):  # about 1,800 tokens: under the trigger
        turn = {"role": "user", "content": f"step {i}: " + "details " * 300}
        await session.add_items([turn, {"role": "assistant", "content": f"noted {i}"}])
    await session.run_compaction()
    assert len(await session.get_items()) == 12
    await session.run_compaction({"force": True})
    forced = await session.get_items()
    assert len(forced) < 12 and "<context_summary>" in json.dumps(forced[0])


async def test_run_compaction_without_a_window_compacts_only_when_forced(tmp_path: Path) -> None:
    # The SDK calls run_compaction after every turn of a Responses model: a session made
    # without a window must not end the run; forced, it compacts as if the items filled it.
    session = WorkspaceSession(LocalWorkspace(tmp_path / "ws"), "t1", summary_model=False)
    for i in range(6):
        turn = {"role": "user", "content": f"step {i}: " + "details " * 300}
        await session.add_items([turn, {"role": "assistant", "content": f"noted {i}"}])
    await session.run_compaction()
    await session.run_compaction({"compaction_mode": "auto", "store": True})
    assert len(await session.get_items()) == 12
    await session.run_compaction({"force": True})
    forced = await session.get_items()
    assert len(forced) < 12 and "<context_summary>" in json.dumps(forced[0])
    assert "step 0: details" in (tmp_path / "ws/sessions/t1/context.jsonl").read_text()


async def test_a_request_refused_as_over_the_window_is_sent_again_summarised(
    tmp_path: Path,
) -> None:
    """The provider's window is smaller than the config says: its refusal is retried once
    through the filter, summarised (only with the wrapped model)."""
    refused = "This model's maximum context length is 2000 tokens. Reduce the length."

    async def wrapped_run(server: OpenAIServer, offload: OffloadingInputFilter, wrap: bool) -> Any:
        async with AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
            model: Any = OpenAIChatCompletionsModel(model="test-model", openai_client=client)
            if wrap:
                model = offload.wrap(model)
            agent = Agent(name="ops", instructions="You run exports.", model=model, tools=[status])
            config = RunConfig(call_model_input_filter=offload)
            return await Runner.run(agent, "check", run_config=config, max_turns=40)

    def script(server: OpenAIServer) -> None:
        for i in range(12):
            server.add(call("status", {"batch": i}, f"call_{i}"))
        server.add_error(400, refused, code="context_length_exceeded")
        server.add_completion("All batches are exported.")

    with OpenAIServer() as server:
        script(server)
        with pytest.raises(Exception, match="maximum context length"):
            await wrapped_run(server, offload_in(tmp_path / "plain"), wrap=False)
    with OpenAIServer() as server:
        script(server)
        result = await wrapped_run(server, offload_in(tmp_path / "ws"), wrap=True)
        assert result.final_output == "All batches are exported."
    refused_body, retried = server.requests[-2], server.requests[-1]
    assert len(retried["messages"]) < len(refused_body["messages"])
    assert "<context_summary>" in json.dumps(retried)
    # Any other error is not retried: a bad key stays the caller's error.
    with OpenAIServer() as server:
        server.add_error(401, "Incorrect API key provided", code="invalid_api_key")
        server.add_completion("never sent")
        with pytest.raises(Exception, match="Incorrect API key"):
            await wrapped_run(server, offload_in(tmp_path / "bad"), wrap=True)
        assert server.remaining == 1


async def test_show_prints_what_each_call_was_sent(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        server.add(call("dump", {}, "call_1"))
        server.add_completion("The export finished.")
        await run(server, offload_in(tmp_path / "ws"), [dump], "dump the log")
    command = [sys.executable, "-m", "ctxoffload", "show", "t1", "--workdir", str(tmp_path / "ws")]
    for step, body in enumerate(server.requests, start=1):
        done = subprocess.run(
            [*command, "--step", str(step), "--json"], capture_output=True, text=True, check=True
        )
        shown = json.loads(done.stdout)["messages"]
        assert [m["role"] for m in shown] == [m["role"] for m in body["messages"]]
    full = subprocess.run([*command, "--step", "2", "--full"], capture_output=True, text=True)
    assert "tool_result-call_1.txt" in full.stdout and len(full.stdout) < 20_000


async def test_with_memory_the_agent_keeps_a_memory_recorded_in_its_session(
    tmp_path: Path,
) -> None:
    offload = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"),
        config=CONFIG,
        session_id="t1",
        memory=True,
        summary_model=False,
    )
    assert "memory" in [t.name for t in offload.tools]
    assert "memory" not in [t.name for t in offload_in(tmp_path / "other").tools]
    create = {"command": "create", "path": "/memories/exports.md", "file_text": "batch 7 fails\n"}
    with OpenAIServer() as server:
        server.add(call("memory", create, "m1"))
        server.add_completion("Noted.")
        await run(server, offload, offload.tools, "remember that batch 7 fails")
    memory = tmp_path / "ws" / "memories" / "exports.md"
    assert memory.read_text(encoding="utf-8") == "batch 7 fails\n"
    events_file = tmp_path / "ws" / "sessions" / "t1" / "events.jsonl"
    events = [json.loads(line) for line in events_file.read_text(encoding="utf-8").splitlines()]
    (change,) = [e for e in events if e["kind"] == "memory"]
    assert change["command"] == "create" and change["writer"]["session"] == "t1"
