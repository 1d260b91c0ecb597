"""Deep agents run offline (a fake chat model of LangChain's own) with `WorkspaceBackend` routed
for /large_tool_results/ and /conversation_history/: a 2 MB tool result lands in the thread's
tool_result file and not in the checkpoint, the agent reads it back with deepagents' own
tools, and three summaries leave three histories, none overwritten."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework, saver_bytes

from ctxoffload import LocalWorkspace
from ctxoffload.workspace import Workspace

require_framework("deepagents", "deepagents")

from deepagents import create_deep_agent  # noqa: E402
from deepagents.backends import CompositeBackend, StateBackend  # noqa: E402
from deepagents.middleware.summarization import SummarizationMiddleware  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from ctxoffload.integrations.deepagents import WorkspaceBackend  # noqa: E402

LINES = 20_000


class ToolCallingFakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, which `create_deep_agent` can bind tools to (the base
    class raises NotImplementedError in `bind_tools`)."""

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self


def script(*steps: AIMessage | str) -> ToolCallingFakeModel:
    return ToolCallingFakeModel(messages=iter(list(steps)))


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}]
    )


@tool
def dump() -> str:
    """Return a big log."""
    return "".join(f"line {i} " + "z" * 90 + "\n" for i in range(LINES))  # ~2 MB


@tool
def echo(s: str) -> str:
    """Echo."""
    return s


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    yield LocalWorkspace(tmp_path / "ws", fsync=False)


def run_dump(backend: Any, *steps: AIMessage | str) -> tuple[dict[str, Any], InMemorySaver]:
    saver = InMemorySaver()
    model = script(call("dump", {}, "call_1"), *steps, "done")
    agent = create_deep_agent(model=model, tools=[dump], backend=backend, checkpointer=saver)
    out = agent.invoke({"messages": [("user", "dump")]}, {"configurable": {"thread_id": "t-1"}})
    return out, saver


def test_a_big_tool_result_is_in_the_threads_file_not_in_the_checkpoint(
    workspace: Workspace,
) -> None:
    routes = WorkspaceBackend.routes(workspace)
    out, saver = run_dump(CompositeBackend(default=StateBackend(), routes=routes))
    routed = saver_bytes(saver)
    _, in_state = run_dump(StateBackend())
    default = saver_bytes(in_state)

    files = asyncio.run(workspace.list_files("t-1"))
    assert [Path(f).name for f in files] == ["tool_result-call_1.txt"]
    assert asyncio.run(workspace.read_reference(files[0])) == dump.invoke({}).encode()
    (notice,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert "/large_tool_results/call_1" in notice.content and len(notice.content) < 5_000
    assert out.get("files", {}) == {}
    # deepagents' own eviction into state keeps the 2 MB in every checkpoint.
    assert default > 2_000_000
    assert routed < 50_000, (routed, default)
    print(f"checkpoints: StateBackend {default:,} bytes, routed to ctxoffload {routed:,} bytes")


def test_an_async_run_goes_through_the_async_twins(workspace: Workspace) -> None:
    routes = WorkspaceBackend.routes(workspace)
    backend = CompositeBackend(default=StateBackend(), routes=routes)
    model = script(
        call("dump", {}, "call_1"),
        call("read_file", {"file_path": "/large_tool_results/call_1", "limit": 2}, "call_2"),
        "done",
    )
    agent = create_deep_agent(model=model, tools=[dump], backend=backend)
    config = {"configurable": {"thread_id": "t-async"}}
    out = asyncio.run(agent.ainvoke({"messages": [("user", "dump")]}, config))
    files = asyncio.run(workspace.list_files("t-async"))
    assert [Path(f).name for f in files] == ["tool_result-call_1.txt"]
    (_, read) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert "line 0 " in read.content and "line 1 " in read.content
    assert "line 2 " not in read.content


def test_the_agent_reads_it_back_with_deepagents_own_tools(workspace: Workspace) -> None:
    routes = WorkspaceBackend.routes(workspace)
    backend = CompositeBackend(default=StateBackend(), routes=routes)
    path = "/large_tool_results/call_1"
    out, _ = run_dump(
        backend,
        call("read_file", {"file_path": path, "offset": 19_998, "limit": 5}, "call_2"),
        call("grep", {"pattern": "line 12345 ", "output_mode": "content"}, "call_3"),
        call("ls", {"path": "/large_tool_results"}, "call_4"),
        call("glob", {"pattern": "**/call_*"}, "call_5"),
    )
    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert "line 19998 " in answers["call_2"].content
    assert "line 19999 " in answers["call_2"].content
    assert "line 19997 " not in answers["call_2"].content
    assert "12346" in answers["call_3"].content  # deepagents numbers lines from 1
    assert path in answers["call_3"].content
    assert path in answers["call_4"].content
    assert path in answers["call_5"].content
    assert all(m.status != "error" for m in answers.values())


def test_three_summaries_leave_three_histories(workspace: Workspace) -> None:
    routes = WorkspaceBackend.routes(workspace)
    backend = CompositeBackend(default=StateBackend(), routes=routes)
    steps = [call("echo", {"s": f"step {i} " + "w" * 400}, f"c{i}") for i in range(8)]
    summaries = script(*[f"SUMMARY {n}" for n in range(1, 10)])
    summarizer = SummarizationMiddleware(
        summaries, backend=backend, trigger=("messages", 8), keep=("messages", 4)
    )
    agent = create_deep_agent(
        model=script(*steps, "done"),
        tools=[echo],
        backend=backend,
        middleware=[summarizer],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "t-2"}})

    # Outside the run, a backend on the thread's session reads what the run stored.
    reader = WorkspaceBackend(workspace, "/conversation_history/", session_id="t-2")
    (entry,) = reader.ls("/").entries  # one history file for the run
    events = [
        e
        for e in asyncio.run(workspace.read_events("t-2"))
        if str(e.get("tool_name")).startswith("deepagents/conversation_history/")
    ]
    # The first summary wrote the file; each later one appended its section, stored alone.
    assert [e["tool_name"] for e in events] == [
        "deepagents/conversation_history/",
        "deepagents/conversation_history/ (appended)",
        "deepagents/conversation_history/ (appended)",
    ]
    parts = [asyncio.run(workspace.read_reference(e["reference"])).decode() for e in events]
    assert len({e["reference"] for e in events}) == 3
    assert "step 0 " in parts[0] and "step 0 " not in parts[1] + parts[2]
    assert all(part.lstrip().startswith("## Summarized at") for part in parts), parts
    (download,) = reader.download_files([entry["path"]])
    assert download.error is None and download.content.decode() == "".join(parts)


@pytest.mark.parametrize("mode", ["fork", "isolated"])
def test_a_sub_agent_given_the_middleware_writes_a_child_session(tmp_path: Path, mode: str) -> None:
    """deepagents gives a forked sub-agent the parent's middleware (and an isolated one gets
    it when its spec lists it): the sub-agent's run began on the parent's thread while the
    parent's `task` call was in flight, was refused with SessionBusyError, and the parent's
    run ended. It writes a child session of its own now, linked to the parent's."""
    import json
    import warnings

    from ctxoffload import ContextConfig
    from ctxoffload.integrations.langchain import ContextOffloadMiddleware

    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"),
        config=ContextConfig(context_window=64_000, tool_result_limit=2_000),
    )
    model = script(
        call("task", {"description": "read the log", "subagent_type": "helper"}, "call_task"),
        "sub: done",
        "parent: done",
    )
    spec: dict[str, Any] = {
        "name": "helper",
        "description": "Reads logs.",
        "system_prompt": "You read logs.",
        "mode": mode,
    }
    if mode == "isolated":
        spec["middleware"] = [offload]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # forked sub-agents are a beta of deepagents
        agent = create_deep_agent(
            model=model, middleware=[offload], subagents=[spec], checkpointer=InMemorySaver()
        )
    out = agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "t1"}})
    assert out["messages"][-1].content == "parent: done"
    sessions = tmp_path / "ws" / "sessions"
    (child,) = [p.name for p in sessions.iterdir() if p.name != "t1"]
    assert child.startswith("t1--helper-")
    first = json.loads((sessions / child / "events.jsonl").read_text().splitlines()[0])
    assert first["kind"] == "door" and first["parent"]["session"] == "t1"
