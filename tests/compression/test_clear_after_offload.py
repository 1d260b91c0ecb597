"""`ClearToolUses` after a post_tool manager that stored the result whole (`ToolOutputOffload`,
`ToolOutputTruncate`): the placeholder names the file that holds the whole output and its
size, and nothing is stored twice, in one run, in a resumed one and for a host whose messages
lose their metadata between calls."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ContextConfig,
    ContextPipeline,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import (
    ClearToolUses,
    ToolOutputOffload,
    ToolOutputTruncate,
    is_summary_message,
)
from ctxoffload.formats import from_converse, to_converse
from helpers import pipeline_run

# A tool's page of 48,889 bytes, as in the report.
PAGE = "\n".join(f"line {n:04d} of the page " + "x" * 35 for n in range(843))[:48_889]
PAGE_BYTES = len(PAGE.encode())
PLACEHOLDER = re.compile(
    r"\[cleared: the output of fetch \(call c1, ~[\d,]+ tokens, ([\d,]+) bytes\)"
)

POST_TOOL: dict[str, Callable[[], Any]] = {
    "offload": lambda: ToolOutputOffload(max_tokens=500, preview_tokens=200),
    "truncate": lambda: ToolOutputTruncate(max_tokens=500),
    "truncate-characters": lambda: ToolOutputTruncate(max_output_length=800),
    "config": lambda: ToolOutputTruncate.from_config(ContextConfig(tool_result_limit=500)),
}


def fetch(page: int) -> str:
    """Fetch a page.

    Args:
        page: which one.
    """
    return PAGE


def fetch_blocks(page: int) -> list[TextBlock]:
    """Fetch a page in two parts.

    Args:
        page: which one.
    """
    return [TextBlock(text=PAGE), TextBlock(text=PAGE.upper())]


def _agent(ws: LocalWorkspace, post_tool: Any, tool: Any, replies: list[Any]) -> Agent:
    return Agent(
        model=ScriptedModel(replies, context_window=100_000),
        offloader=ws,
        tools=[tool],
        session_id="s",
        counter=get_token_counter(exact=False),
        context_config=ContextPipeline(post_tool=[post_tool], pre_llm=[ClearToolUses(keep=0)]),
    )


def _call(name: str = "fetch") -> ToolCallBlock:
    return ToolCallBlock(id="c1", name=name, input={"page": 1})


def _stored(ws: LocalWorkspace) -> list[str]:
    return sorted(p.name for p in ws.session_dir("s").glob("tool_result-*"))


def _sent_result(model: Any) -> str:
    [result] = [b for m in model.calls[-1] for b in m.tool_results]
    return str(result.output)


def _converted(history: list[Msg]) -> list[Msg]:
    """`history` as a host holding Converse messages gives it back: new `Msg`s, ids and
    ctxoffload's metadata gone."""
    _, messages = to_converse(history)
    return from_converse(messages)


def _clearing(events: list[dict[str, Any]]) -> dict[str, Any]:
    [event] = [e for e in events if e["kind"] == "clear_tool_uses"]
    return event


@pytest.mark.parametrize("post_tool", list(POST_TOOL))
async def test_clearing_a_stored_result_names_the_whole_file_and_stores_nothing(
    tmp_path: Path, post_tool: str
) -> None:
    # It stored the head and notice the context held as tool_result-c1.2.txt (769 bytes) and
    # named that copy, one more hop from the 48,889 bytes in tool_result-c1.txt.
    ws = LocalWorkspace(tmp_path)
    agent = _agent(ws, POST_TOOL[post_tool](), fetch, [_call(), "read it", "done"])
    await agent.reply("fetch page 1")
    assert _stored(ws) == ["tool_result-c1.txt"]
    await agent.reply("and now?")
    placeholder = _sent_result(agent.model)
    whole = ws.session_dir("s") / "tool_result-c1.txt"
    assert f"stored in {whole};" in placeholder, placeholder
    found = PLACEHOLDER.search(placeholder)
    assert found is not None and found.group(1) == f"{PAGE_BYTES:,}", placeholder
    assert _stored(ws) == ["tool_result-c1.txt"] and whole.read_text() == PAGE
    assert _clearing(await ws.read_events("s"))["references"] == [str(whole)]
    await agent.aclose()


async def test_clearing_a_result_offloaded_block_by_block_names_each_block_file(
    tmp_path: Path,
) -> None:
    ws = LocalWorkspace(tmp_path)
    manager = ToolOutputOffload(max_tokens=500, preview_tokens=200)
    agent = _agent(ws, manager, fetch_blocks, [_call("fetch_blocks"), "read it", "done"])
    await agent.reply("fetch page 1")
    await agent.reply("and now?")
    placeholder = _sent_result(agent.model)
    events = await ws.read_events("s")
    [offload] = [e for e in events if e["kind"] == "offload"]
    files = offload["references"]
    assert len(files) == 2 and f"is stored in {files[0]}, {files[1]};" in placeholder
    assert f"{2 * PAGE_BYTES:,} bytes" in placeholder
    assert _stored(ws) == sorted(Path(f).name for f in files)
    assert _clearing(events)["references"] == files
    await agent.aclose()


@pytest.mark.parametrize("post_tool", ["offload", "truncate"])
async def test_a_resumed_agent_clears_a_stored_result_without_a_copy(
    tmp_path: Path, post_tool: str
) -> None:
    # The resumed agent knows nothing of the first one's offload but the session's record.
    ws = LocalWorkspace(tmp_path)
    first = _agent(ws, POST_TOOL[post_tool](), fetch, [_call(), "read it"])
    await first.reply("fetch page 1")
    await first.aclose()
    resumed = _agent(ws, POST_TOOL[post_tool](), fetch, ["done"])
    await resumed.reply("and now?")
    placeholder = _sent_result(resumed.model)
    whole = ws.session_dir("s") / "tool_result-c1.txt"
    assert f"stored in {whole};" in placeholder, placeholder
    assert f"{PAGE_BYTES:,} bytes" in placeholder
    assert _stored(ws) == ["tool_result-c1.txt"]
    await resumed.aclose()


async def test_a_host_whose_messages_lose_their_metadata_clears_without_a_copy(
    tmp_path: Path,
) -> None:
    # What the Strands door does: the host keeps its history in Bedrock's Converse shape,
    # and each call the pipeline runs on it converted anew, without ctxoffload's metadata.
    ws = LocalWorkspace(tmp_path)
    run = pipeline_run(
        ws,
        ClearToolUses(keep=0),
        window=100_000,
        post=(ToolOutputOffload(max_tokens=500, preview_tokens=200),),
    )
    kept = await run.post_tool(ToolResultBlock(id="c1", name="fetch", output=PAGE))
    history = [
        Msg(role="user", content="fetch page 1"),
        Msg(role="assistant", content=[_call()]),
        Msg(role="tool", content=[kept]),
        Msg(role="assistant", content="read it"),
    ]
    await run.pre_llm(_converted(history))
    later = [*_converted(history), Msg(role="user", content="and now?")]
    sent = (await run.pre_llm(later)).messages
    [result] = [b for m in sent for b in m.tool_results]
    whole = tmp_path / "sessions" / "s1" / "tool_result-c1.txt"
    assert f"stored in {whole};" in str(result.output), result.output
    assert sorted(p.name for p in whole.parent.glob("tool_result-*")) == ["tool_result-c1.txt"]
    assert not any(is_summary_message(m) for m in sent)
