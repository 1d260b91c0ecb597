"""No message can poison an Agent's session: deep arguments, odd tool returns, odd base64."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    Base64Source,
    ContextConfig,
    DataBlock,
    InvalidContent,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    TextBlock,
    ToolCallBlock,
    get_token_counter,
    to_openai,
)
from ctxoffload._depth import MAX_DEPTH
from helpers import SUMMARY


def nested(depth: int, leaf: Any = "bottom") -> Any:
    value: Any = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def call(call_id: str, name: str, args: dict[str, Any]) -> Msg:
    return Msg(role="assistant", content=[ToolCallBlock(id=call_id, name=name, input=args)])


@pytest.fixture
def workspace(tmp_path: Path) -> LocalWorkspace:
    return LocalWorkspace(tmp_path / "ws")


def make_agent(
    model: ScriptedModel,
    workspace: LocalWorkspace,
    tools: list[Any],
    config: ContextConfig | None = None,
) -> Agent:
    return Agent(
        name="tester",
        system_prompt="You test things.",
        model=model,
        summary_model=ScriptedModel(default=SUMMARY),
        tools=tools,
        offloader=workspace,
        context_config=config or ContextConfig(context_window=4000, tool_result_limit=300),
        counter=get_token_counter(exact=False),
    )


def echo(query: Any) -> str:
    """Echo a query.

    Args:
        query: anything.
    """
    return "echoed"


async def test_deep_tool_call_arguments_give_an_error_result_and_state_is_saved(
    workspace: LocalWorkspace,
) -> None:
    model = ScriptedModel([call("c1", "echo", {"query": nested(300)}), "done"])
    agent = make_agent(model, workspace, [echo])
    reply = await agent.reply("go")
    assert reply.text == "done"
    (result,) = agent.messages[-2].tool_results
    assert result.is_error
    assert f"nested deeper than {MAX_DEPTH} levels" in str(result.output)
    state = await workspace.read_state(agent.session_id)
    assert state is not None
    assert [m["role"] for m in state["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    # The call is kept whole, as the JSON text the model sent.
    kept = state["messages"][2]["content"][0]["input"]["_raw_arguments"]
    assert json.loads(kept) == {"query": nested(300)}


async def test_compression_still_works_after_deep_arguments(workspace: LocalWorkspace) -> None:
    def fetch(n: int) -> str:
        """Fetch text.

        Args:
            n: which.
        """
        return f"{n} " + "word " * 250

    script: list[Any] = [call("c0", "echo", {"query": nested(300)})]
    script += [call(f"c{i}", "fetch", {"n": i}) for i in range(1, 12)]
    script.append("finished")
    agent = make_agent(ScriptedModel(script), workspace, [echo, fetch])
    await agent.reply("go")
    assert any(step.compressed for step in agent.steps)
    lines = await workspace.read_context(agent.session_id)
    first_call = next(m for m in lines if m["role"] == "assistant")
    assert first_call["content"][0]["input"]["_raw_arguments"].count('{"a":') == 300


async def test_state_is_saved_when_one_message_cannot_be_serialised(
    workspace: LocalWorkspace,
) -> None:
    agent = make_agent(ScriptedModel(["ok"]), workspace, [])
    await agent.reply("first")
    # A message put in the context directly (not through the model) with a too-deep input.
    agent.messages.append(call("cx", "echo", {"query": nested(400)}))
    agent.messages.append(Msg(role="user", content="still here"))
    await agent._save_state()
    state = await workspace.read_state(agent.session_id)
    assert state is not None
    texts = [m["content"] for m in state["messages"] if isinstance(m["content"], str)]
    assert "still here" in texts
    stand_in = state["messages"][-2]
    assert stand_in["metadata"]["ctxoffload"]["kind"] == "unstored"
    assert stand_in["content"][0]["input"]["_raw_arguments"].count('{"a":') == 400


async def test_an_unpadded_url_safe_tool_image_is_saved(workspace: LocalWorkspace) -> None:
    raw = bytes([0xFB, 0xFF, 0xBF]) * 50 + b"\x01"
    data = base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def snap() -> DataBlock:
        """Take a picture."""
        return DataBlock(source=Base64Source(media_type="image/png", data=data))

    roomy = ContextConfig(context_window=100_000, tool_result_limit=5000)
    agent = make_agent(ScriptedModel([call("c1", "snap", {}), "seen"]), workspace, [snap], roomy)
    await agent.reply("look")
    state = await workspace.read_state(agent.session_id)
    assert state is not None
    (part,) = state["messages"][3]["content"][0]["output"]
    assert await workspace.read_reference(part["source"]["url"]) == raw


class BadStr:
    def __str__(self) -> str:
        raise RuntimeError("cannot print me")

    __repr__ = __str__


def cyclic() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (nested(5000), f"nested deeper than {MAX_DEPTH} levels"),
        (nested(MAX_DEPTH + 1), f"nested deeper than {MAX_DEPTH} levels"),
        (10**5000, "digits"),
        (BadStr(), "cannot print me"),
        ({"x": BadStr()}, "cannot print me"),
        (cyclic(), f"nested deeper than {MAX_DEPTH} levels"),
    ],
    ids=["deep-5000", "just-too-deep", "huge-int", "str-raises", "inner-str-raises", "cycle"],
)
async def test_a_tool_return_that_cannot_be_rendered_is_an_error_result(
    workspace: LocalWorkspace, value: Any, expected: str
) -> None:
    def produce() -> Any:
        """Produce a value."""
        return value

    agent = make_agent(ScriptedModel([call("c1", "produce", {}), "ok"]), workspace, [produce])
    reply = await agent.reply("go")
    assert reply.text == "ok"
    (result,) = agent.messages[-2].tool_results
    assert result.is_error
    assert "produce returned a value that cannot be shown to the model" in str(result.output)
    assert expected in str(result.output)
    assert await workspace.read_state(agent.session_id) is not None


async def test_a_tool_return_at_the_depth_limit_is_rendered(workspace: LocalWorkspace) -> None:
    def produce() -> Any:
        """Produce a value."""
        return nested(MAX_DEPTH, leaf="deepest")

    roomy = ContextConfig(context_window=100_000, tool_result_limit=20_000)
    model = ScriptedModel([call("c1", "produce", {}), "ok"])
    agent = make_agent(model, workspace, [produce], roomy)
    await agent.reply("go")
    (result,) = agent.messages[-2].tool_results
    assert not result.is_error
    assert "deepest" in str(result.output)


async def test_text_blocks_from_a_tool_are_kept(workspace: LocalWorkspace) -> None:
    def produce() -> Any:
        """Produce text."""
        return [TextBlock(text="one"), TextBlock(text="two")]

    agent = make_agent(ScriptedModel([call("c1", "produce", {}), "ok"]), workspace, [produce])
    await agent.reply("go")
    (result,) = agent.messages[-2].tool_results
    assert [b.text for b in result.output if isinstance(b, TextBlock)] == ["one", "two"]


async def test_bytes_from_a_tool_never_put_surrogates_in_the_context(
    workspace: LocalWorkspace,
) -> None:
    blob = bytes(range(256)) * 4

    def read_raw(binary: bool) -> bytes:
        """Read raw bytes.

        Args:
            binary: binary data, or latin-1 text.
        """
        return blob if binary else "café, naïve".encode("latin-1")

    script = [call("c1", "read_raw", {"binary": False}), call("c2", "read_raw", {"binary": True})]
    model = ScriptedModel([*script, "done"])
    agent = make_agent(model, workspace, [read_raw])
    await agent.reply("go")
    wire = to_openai(model.calls[-1])
    json.dumps(wire, ensure_ascii=False).encode("utf-8")  # what the OpenAI client does
    text_result = agent.messages[3].tool_results[0]
    assert "were not valid UTF-8 and were replaced with U+FFFD" in str(text_result.output)
    binary_result = agent.messages[5].tool_results[0]
    stored = [p for p in binary_result.output if isinstance(p, DataBlock)]
    assert stored and Path(stored[0].source.url).read_bytes() == blob  # type: ignore[union-attr]


async def test_a_too_deep_user_message_is_refused_before_it_enters_the_context(
    workspace: LocalWorkspace,
) -> None:
    agent = make_agent(ScriptedModel(["ok"]), workspace, [])
    deep = Msg(role="user", content="look", metadata={"x": nested(5000)})
    with pytest.raises(InvalidContent, match="user_input is nested deeper than"):
        await agent.reply(deep)
    assert [m.role for m in agent.messages] == ["system"]
    assert (await agent.reply("plain")).text == "ok"
