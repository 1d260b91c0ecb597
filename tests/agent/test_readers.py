"""Reading back with the tools the agent has: names in notices, the retrieval tool, no loops."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ConfigError,
    ContextConfig,
    InMemoryWorkspace,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    ToolCallBlock,
)
from ctxoffload.agent import as_tool, workspace_tools
from ctxoffload.compression import TRUNCATION_MARKER, ReaderTools
from ctxoffload.readback import RETRIEVAL_TOOL_NAME, retrieval_tool
from helpers import notes_in, tools_named

CONFIG = ContextConfig(context_window=64_000, tool_result_limit=1_500)


def call(call_id: str, name: str, **args: Any) -> Msg:
    return Msg(role="assistant", content=[ToolCallBlock(id=call_id, name=name, input=args)])


def fetch_log(log: str) -> str:
    """Fetch a log file.

    Args:
        log: which log.
    """
    lines = [f"{i:05d} INFO request served in {i % 97} ms" for i in range(4000)]
    lines[3210] = f"03210 ERROR order ORD-77 failed in {log}"
    return "\n".join(lines)


def last_tool_output(messages: Sequence[Msg]) -> str:
    result = [m for m in messages if m.role == "tool"][-1].tool_results[0]
    assert isinstance(result.output, str)
    return result.output


def reference_in(notice: str) -> str:
    found = re.search(r"reference='([^']+)'|path='([^']+)'", notice)
    assert found is not None, notice
    return found.group(1) or found.group(2)


async def test_notices_name_the_file_tools_the_agent_has(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    model = ScriptedModel([call("c1", "fetch_log", log="a"), "done"])
    agent = Agent(
        model=model, tools=[fetch_log, *workspace_tools(ws)], offloader=ws, context_config=CONFIG
    )
    await agent.reply("go")
    notice = last_tool_output(model.calls[1])
    assert TRUNCATION_MARKER in notice
    assert "Read(path=" in notice and "Grep(pattern=" in notice
    assert RETRIEVAL_TOOL_NAME not in notice


def test_an_agent_has_one_set_of_readers_never_both(tmp_path: Path) -> None:
    """The rule of every door (docs/guides/hosts.md, "Same tools, same answers"): given
    Read, Grep and Glob, the agent adds no retrieval tool; given none, it adds that one."""
    ws = LocalWorkspace(tmp_path / "ws")
    given = Agent(model=ScriptedModel(), tools=[fetch_log, *workspace_tools(ws)], offloader=ws)
    assert sorted(given.tools) == ["Glob", "Grep", "Read", "fetch_log"]
    bare = Agent(model=ScriptedModel(), tools=[fetch_log], offloader=ws)
    assert sorted(bare.tools) == ["fetch_log", RETRIEVAL_TOOL_NAME]
    # Both, when asked for by name: the retrieval tool given with the file tools.
    both = Agent(
        model=ScriptedModel(), tools=[*workspace_tools(ws), retrieval_tool(ws)], offloader=ws
    )
    assert sorted(both.tools) == ["Glob", "Grep", "Read", RETRIEVAL_TOOL_NAME]


async def test_with_an_in_memory_workspace_the_notice_names_the_retrieval_tool_and_it_works() -> (
    None
):
    ws = InMemoryWorkspace()
    model = ScriptedModel([call("c1", "fetch_log", log="a")])
    agent = Agent(model=model, tools=[fetch_log], offloader=ws, context_config=CONFIG)
    with pytest.raises(Exception, match="no steps left"):
        await agent.reply("go")
    notice = last_tool_output(agent.messages)
    assert f"{RETRIEVAL_TOOL_NAME}(reference=" in notice
    assert "Read(" not in notice
    reference = reference_in(notice)
    model.add(call("c2", RETRIEVAL_TOOL_NAME, reference=reference, pattern="ERROR"), "done")
    await agent.reply("find the error")
    found = last_tool_output(model.calls[-1])
    assert "ORD-77" in found and ">  3211\t" in found


async def test_a_read_back_is_never_offloaded_again(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    model = ScriptedModel([call("c1", "fetch_log", log="a")])
    tools = [fetch_log, *workspace_tools(ws), retrieval_tool(ws)]  # both readers, on purpose
    agent = Agent(model=model, tools=tools, offloader=ws, context_config=CONFIG)
    with pytest.raises(Exception, match="no steps left"):
        await agent.reply("go")
    path = reference_in(last_tool_output(agent.messages))
    # Read's answer (up to 30,000 characters) is far over tool_result_limit=1,500 tokens.
    model.add(
        call("c2", "Read", path=path, offset=1, limit=500),
        call("c3", RETRIEVAL_TOOL_NAME, reference=path, line_range=[1, 300]),
        "done",
    )
    await agent.reply("read it")
    read_back = [m for m in model.calls[-2] if m.role == "tool"][-1].tool_results[0]
    retrieved = [m for m in model.calls[-1] if m.role == "tool"][-1].tool_results[0]
    for result in (read_back, retrieved):
        assert isinstance(result.output, str)
        assert TRUNCATION_MARKER not in result.output
        assert "00050 INFO" in result.output
    assert [Path(p).name for p in await ws.list_files(agent.session_id)] == ["tool_result-c1.txt"]


async def test_the_retrieval_tool_can_be_left_out_or_replaced(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    agent = Agent(model=ScriptedModel(), offloader=ws, include_retrieval_tool=False)
    assert RETRIEVAL_TOOL_NAME not in agent.tools

    async def retrieve_offloaded_content(reference: str) -> str:
        """My own.

        Args:
            reference: what to read.
        """
        return "mine"

    agent = Agent(model=ScriptedModel(), offloader=ws, tools=[retrieve_offloaded_content])
    assert agent.tools[RETRIEVAL_TOOL_NAME].func is retrieve_offloaded_content
    assert Agent(model=ScriptedModel()).tools == {}  # no offloader, nothing to read back


async def test_the_retrieval_tool_answers_errors_as_text() -> None:
    ws = InMemoryWorkspace()
    tool = retrieval_tool(ws)
    assert "Error:" in await tool(reference="memory://nope/x")
    assert "Error:" in await tool(reference="memory://nope/x", line_range=[1])
    ref = await ws.offload_tool_result("s", {"tool_call_id": "c", "content": "a\nb\nc"})
    assert "Error:" in await tool(reference=ref, line_range=[3, 1])
    assert "     2\tb" in await tool(reference=ref, line_range=[2, 2])


def test_the_retrieval_tool_has_a_plain_schema() -> None:
    schema = as_tool(retrieval_tool(InMemoryWorkspace())).parameters
    assert schema["required"] == ["reference"]
    line_range = schema["properties"]["line_range"]
    assert {"type": "array", "items": {"type": "integer"}} in line_range["anyOf"]


def test_retrieval_tool_refuses_a_source_it_cannot_read_and_impossible_caps() -> None:
    with pytest.raises(ConfigError, match="read_reference"):
        retrieval_tool(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_output_chars"):
        retrieval_tool(InMemoryWorkspace(), max_output_chars=10)


def _counting(tool: Any, style: str) -> Any:
    """`tool` wrapped by a decorator of one common style (a counter, a timer, a logger)."""
    if style == "wraps":

        @functools.wraps(tool)
        async def wrapper(**kwargs: Any) -> Any:
            return await tool(**kwargs)

        return wrapper
    if style == "wraps-without-dict":

        @functools.wraps(tool, updated=())
        async def wrapper_(**kwargs: Any) -> Any:
            return await tool(**kwargs)

        return wrapper_
    assert style == "twice"
    return _counting(_counting(tool, "wraps-without-dict"), "wraps")


@pytest.mark.parametrize("style", ["wraps", "wraps-without-dict", "twice"])
async def test_wrapped_file_tools_are_still_the_readers_notices_name(
    tmp_path: Path, style: str
) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    wrapped = [_counting(t, style) for t in workspace_tools(ws, max_output_chars=20_000)]
    model = ScriptedModel([call("c1", "fetch_log", log="a"), "done"])
    agent = Agent(
        model=model,
        tools=[fetch_log, *wrapped],
        offloader=ws,
        context_config=CONFIG,
        include_retrieval_tool=False,
    )
    await agent.reply("go")
    assert all(agent.tools[name].is_reader for name in ("Read", "Grep", "Glob"))
    sent = [m.model_dump_json() for calls in model.calls for m in calls]
    notes = [note for text in sent for note in notes_in(text)]
    assert notes
    for note in notes:
        assert tools_named(note) <= set(agent.tools), note
        assert {"Read", "Grep"} <= tools_named(note), note


async def test_reader_tools_the_agent_does_not_have_are_refused(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    config = ContextConfig(context_window=64_000, reader_tools=ReaderTools(read="view_text_file"))
    with pytest.raises(ConfigError, match=r"view_text_file.*not one of the agent's tools"):
        Agent(model=ScriptedModel(["done"]), tools=[fetch_log], offloader=ws, context_config=config)

    # Given the tool, the name stands.
    def view_text_file(path: str) -> str:
        """Read a file.

        Args:
            path: the file.
        """
        return ""

    Agent(
        model=ScriptedModel(["done"]),
        tools=[fetch_log, view_text_file],
        offloader=ws,
        context_config=config,
    )
