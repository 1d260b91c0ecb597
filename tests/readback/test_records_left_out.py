"""The file tools search what the agent stored (tool results, data, memories, context.jsonl)
and leave the workspace's records out (events.jsonl, state.json, lease.json, commit records,
staging files) unless a path names one: an agent's Grep never finds its own earlier searches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxoffload import Agent, ContextConfig, LocalWorkspace, ScriptedModel
from ctxoffload.agent import workspace_tools
from ctxoffload.integrations import reading_functions
from ctxoffload.readback import FileToolbox
from ctxoffload.workspace import writing_as
from helpers import call

RECORDS = ("events.jsonl", "state.json", "lease.json", "history.jsonl", "context.jsonl.commit")


def fetch_logs(job: str) -> str:
    """Fetch the latest log of a batch job.

    Args:
        job: the job.
    """
    lines = [f"{job} batch {i}: ok" for i in range(5000)]
    lines[3217] = f"{job} batch 3217: ERROR disk quota exceeded on /mnt/exports"
    return "\n".join(lines)


async def store_the_log(ws: LocalWorkspace) -> None:
    """The README's quickstart: a 5,000-line log offloaded into session run-42."""
    model = ScriptedModel([call("call_1", "fetch_logs", job="nightly"), "quota"])
    config = ContextConfig(tool_result_limit=1_000)
    async with Agent(
        model=model, tools=[fetch_logs], offloader=ws, context_config=config, session_id="run-42"
    ) as agent:
        await agent.reply("Why did the nightly job fail?")


async def grep_as_the_analyst(ws: LocalWorkspace, run: int, tools: list[Any]) -> str:
    """One run of the README's server example: the agent greps sessions/ and answers; the
    Grep's answer, as the model was sent it."""
    grep = call(f"grep_{run}", "Grep", pattern="ERROR", path_or_glob="sessions/")
    model = ScriptedModel([grep, "Batch 3217 hit the quota."])
    async with Agent(name="analyst", model=model, tools=tools, offloader=ws) as agent:
        await agent.reply("Why did the nightly job fail? See sessions/")
    answer = [m for m in model.calls[1] if m.role == "tool"][-1].tool_results[0].output
    assert isinstance(answer, str)
    return answer


async def test_the_agents_grep_never_finds_its_own_earlier_searches(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "agent_workspace")
    await store_the_log(ws)
    answers = [await grep_as_the_analyst(ws, run, workspace_tools(ws)) for run in range(3)]
    # The records hold every earlier Grep and its answer: the third run found them too.
    assert answers[2] == answers[0]
    assert answers[2].splitlines() == [
        "sessions/run-42/tool_result-call_1.txt:3218:"
        "nightly batch 3217: ERROR disk quota exceeded on /mnt/exports"
    ]
    assert any(
        "ERROR" in path.read_text() for path in (tmp_path / "agent_workspace").rglob("*.json*")
    )


async def test_the_hosts_read_back_tools_leave_the_records_out(tmp_path: Path) -> None:
    # The MCP proxy and every host integration build theirs with `reading_functions`.
    ws = LocalWorkspace(tmp_path / "ws")
    await store_the_log(ws)
    tools = reading_functions(ws, 8_000)
    for run in range(2):
        answer = await grep_as_the_analyst(ws, run, tools)
        assert all(line.startswith("sessions/run-42/tool_result-") for line in answer.splitlines())
    glob = next(t for t in tools if t.__name__ == "Glob")
    listed = (await glob("sessions/**")).splitlines()
    assert not [line for line in listed if line.rsplit("/", 1)[-1] in RECORDS]


async def test_glob_lists_what_was_stored_and_no_record(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    await store_the_log(ws)
    session = tmp_path / "ws" / "sessions" / "run-42"
    # What a killed writer leaves, and a session folder being removed: staging, never content.
    (session / ".tmp-tool_result-call_2.txt-0f3a").write_text("ERROR half written\n")
    (session / "context.jsonl.commit").write_text("{}\n")
    purging = tmp_path / "ws" / "sessions" / ".purge-old-1"
    purging.mkdir()
    (purging / "tool_result-c.txt").write_text("ERROR being removed\n")
    assert (session / "events.jsonl").exists() and (session / "state.json").exists()
    toolbox = FileToolbox([ws.workdir])
    assert toolbox.glob("sessions/**").splitlines() == [
        "sessions/run-42/",
        "sessions/run-42/tool_result-call_1.txt",
    ]
    assert toolbox.glob("**/*.json*") == "No paths match '**/*.json*'."
    answer = toolbox.grep("ERROR", ".")
    assert answer.splitlines() == [
        "sessions/run-42/tool_result-call_1.txt:3218:"
        "nightly batch 3217: ERROR disk quota exceeded on /mnt/exports"
    ]


async def test_a_record_a_path_names_is_read_searched_and_listed(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    await store_the_log(ws)
    toolbox = FileToolbox([ws.workdir])
    events = "sessions/run-42/events.jsonl"
    assert toolbox.grep("tool_result", events).startswith(f"{events}:")
    assert toolbox.glob("sessions/*/events.jsonl") == events
    assert toolbox.glob("sessions/run-42/state.json") == "sessions/run-42/state.json"
    state = "sessions/run-42/state.json"
    assert toolbox.grep('"session_id"', state).startswith(f"{state}:1:")
    assert not toolbox.read(events).startswith("Error:")


async def test_a_session_kept_apart_greps_its_content_not_its_records(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", isolate_sessions=True)
    with writing_as("logger", "run-42"):
        await store_the_log(ws)
    grep = workspace_tools(ws)[1]
    with writing_as("logger", "run-42"):
        # "." is the session's own folder here; the tool's name is in its records only.
        answer = await grep("fetch_logs|ERROR")
    assert answer.splitlines() == [
        "tool_result-call_1.txt:3218:nightly batch 3217: ERROR disk quota exceeded on /mnt/exports"
    ]


async def test_a_link_to_a_record_is_left_out_of_a_walk_too(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    await store_the_log(ws)
    session = tmp_path / "ws" / "sessions" / "run-42"
    (session / "notes.txt").symlink_to(session / "events.jsonl")
    (tmp_path / "ws" / "state-link.json").symlink_to(session / "state.json")
    toolbox = FileToolbox([ws.workdir])
    assert (
        toolbox.grep("fetch_logs", ".")
        == "No matches for 'fetch_logs' in '.' (1 file(s) searched)."
    )
    assert "notes.txt" not in toolbox.glob("sessions/*/*") and toolbox.glob("*.json") == (
        "No paths match '*.json'."
    )
    # Named, it is read (and shown by the path it resolves to): the agent asked for it.
    assert toolbox.grep("fetch_logs", "sessions/run-42/notes.txt").startswith(
        "sessions/run-42/events.jsonl:"
    )


async def test_a_hosts_saved_conversation_is_a_record(tmp_path: Path) -> None:
    # history.jsonl holds the host's items, each earlier Grep call and its answer among them
    # (an OpenAI Agents SDK session's function_call_output): found again, it would grow.
    ws = LocalWorkspace(tmp_path / "ws")
    await store_the_log(ws)
    output = {"type": "function_call_output", "call_id": "g", "output": "ERROR in a search"}
    await ws.append_history("run-42", {"add": [output]})
    toolbox = FileToolbox([ws.workdir])
    assert "history.jsonl" not in toolbox.glob("sessions/**")
    assert toolbox.grep("ERROR", ".").splitlines() == [
        "sessions/run-42/tool_result-call_1.txt:3218:"
        "nightly batch 3217: ERROR disk quota exceeded on /mnt/exports"
    ]
    history = "sessions/run-42/history.jsonl"
    assert toolbox.grep("ERROR", history).startswith(f"{history}:1:")
