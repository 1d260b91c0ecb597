"""The Compressor takes what the workspace takes: ctxoffload Msgs, OpenAI and Anthropic dicts."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from ctxoffload import (
    ContextConfig,
    InvalidContent,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    ToolResultBlock,
    get_token_counter,
    to_openai,
)
from ctxoffload.compression import Compressor, is_summary_message
from helpers import summary_reply

WORDS = " ".join(f"word{j}" for j in range(25))


def make(ws: LocalWorkspace) -> Compressor:
    summary = summary_reply("s")
    return Compressor(
        ContextConfig(context_window=3000, tool_result_limit=100),
        model=ScriptedModel(default=summary),
        offloader=ws,
        session_id="s1",
        counter=get_token_counter(exact=False),
    )


def openai_chat(n: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    msgs += [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: {WORDS}"}
        for i in range(n)
    ]
    return msgs


def anthropic_chat(n: int) -> list[dict[str, Any]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": f"message {i}: {WORDS}"}],
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("chat", [openai_chat, anthropic_chat], ids=["openai", "anthropic"])
async def test_maybe_compress_takes_provider_dicts_and_returns_msgs(
    local_ws: LocalWorkspace, chat: Any
) -> None:
    comp = make(local_ws)
    result = await comp.maybe_compress(chat(60))
    assert result.compressed
    assert all(isinstance(m, Msg) for m in result.messages)
    assert any(is_summary_message(m) for m in result.messages)
    lines = await local_ws.read_context("s1")
    assert len(lines) == result.compressed_messages
    assert lines[0]["content"] in (
        "message 0: " + WORDS,
        [{"type": "text", "text": "message 0: " + WORDS}],
    )
    to_openai(result.messages)  # ready to send back


async def test_below_the_trigger_provider_dicts_come_back_as_msgs(
    local_ws: LocalWorkspace,
) -> None:
    result = await make(local_ws).maybe_compress(openai_chat(2))
    assert not result.compressed
    assert [m.text for m in result.messages][1:] == ["message 0: " + WORDS, "message 1: " + WORDS]


@pytest.mark.parametrize(
    "messages",
    [[Msg(role="user", content="ok"), 3], [{"content": "no role"}], "just text"],
    ids=["int", "no-role", "str"],
)
async def test_messages_it_cannot_read_fail_in_one_line_naming_to_msgs(
    local_ws: LocalWorkspace, messages: Any
) -> None:
    with pytest.raises(InvalidContent) as caught:
        await make(local_ws).maybe_compress(messages)
    assert "to_msgs" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "result",
    [
        {"role": "tool", "tool_call_id": "c1", "content": "line\n" * 400},
        {"type": "tool_result", "tool_use_id": "c1", "content": "line\n" * 400},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "line\n" * 400}],
        },
    ],
    ids=["openai-tool-message", "anthropic-block", "anthropic-message"],
)
async def test_process_tool_result_takes_provider_dicts(
    local_ws: LocalWorkspace, result: dict[str, Any]
) -> None:
    block = await make(local_ws).process_tool_result(result)  # type: ignore[arg-type]
    assert isinstance(block, ToolResultBlock)
    assert block.id == "c1"
    assert "TRUNCATED" in str(block.output)
    (path,) = await local_ws.list_files("s1")
    assert path.endswith("tool_result-c1.txt")


@pytest.mark.parametrize("result", [3, {"role": "user", "content": "hi"}], ids=["int", "no-result"])
async def test_process_tool_result_fails_in_one_line_naming_to_msgs(
    local_ws: LocalWorkspace, result: Any
) -> None:
    with pytest.raises(InvalidContent) as caught:
        await make(local_ws).process_tool_result(result)
    assert "to_msgs" in str(caught.value)
    assert "\n" not in str(caught.value)


class ForeignText(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ForeignToolResult(BaseModel):
    """Shaped like AgentScope 2.x's ToolResultBlock."""

    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str
    output: list[ForeignText]


async def test_process_tool_result_takes_a_foreign_block_the_workspace_takes(
    local_ws: LocalWorkspace,
) -> None:
    foreign = ForeignToolResult(id="c9", name="bash", output=[ForeignText(text="x\n" * 400)])
    block = await make(local_ws).process_tool_result(foreign)  # type: ignore[arg-type]
    assert (block.id, block.name) == ("c9", "bash")
    assert "TRUNCATED" in str(block.output)
