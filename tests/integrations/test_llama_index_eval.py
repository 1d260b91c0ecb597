"""`ctxoffload eval` asks a LlamaIndex LLM through the LlamaIndex door's adapter: a
function-calling LLM (LlamaIndex's own `MockFunctionCallingLLM`) that sends what it is given in
OpenAI's form, as LlamaIndex's OpenAI integration does, to the deterministic reader, asked with
tools through `achat_with_tools` and its calls read back as LlamaIndex's, answers and reads as
the same reader over HTTP as an `OpenAIChatModel`, probe by probe. An LLM that calls no
functions is refused before any call."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("llama_index.core", "llama_index")

import pytest  # noqa: E402
from host_eval import (  # noqa: E402
    DEMO_SESSION,
    READER,
    assert_asked_alike,
    demo_workdir,
    over_http,
    summary_asked_with_tools,
)
from llama_index.core.base.llms.types import (  # noqa: E402
    ChatMessage,
    LLMMetadata,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.llms.custom import CustomLLM  # noqa: E402
from llama_index.core.llms.mock import MockFunctionCallingLLM  # noqa: E402

from ctxoffload import ConfigError  # noqa: E402
from ctxoffload.eval import evaluate  # noqa: E402


def openai_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """LlamaIndex's messages as OpenAI's chat messages, read as LlamaIndex's OpenAI
    integration reads them: an assistant's `ToolCallBlock`s as its `tool_calls`, a tool
    message answering the call its `additional_kwargs["tool_call_id"]` names, which must be
    one an assistant message before it made (OpenAI refuses a request where it is not)."""
    out: list[dict[str, Any]] = []
    made: set[str] = set()
    for message in messages:
        role = str(getattr(message.role, "value", message.role))
        text = "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))
        said: dict[str, Any] = {"role": role, "content": text}
        calls = [b for b in message.blocks if isinstance(b, ToolCallBlock)]
        if calls:
            said["tool_calls"] = [
                {
                    "id": call.tool_call_id,
                    "type": "function",
                    "function": {"name": call.tool_name, "arguments": json.dumps(call.tool_kwargs)},
                }
                for call in calls
            ]
            made.update(call.tool_call_id or "" for call in calls)
        if role == "tool":
            said["tool_call_id"] = message.additional_kwargs.get("tool_call_id")
            assert said["tool_call_id"] in made, f"a result of no call made: {said}"
        out.append(said)
    return out


class AsReader:
    """A `MockFunctionCallingLLM`'s response generator that answers as the reader: sent the
    messages and the tools (`FunctionTool`s, in OpenAI's form as LlamaIndex writes them) as a
    provider is, its tool calls given back as `ToolCallBlock`s. `offered` holds, per call, the
    names of the tools it was offered; `parameters`, each tool's schema as it was sent;
    `called` and `answered`, the ids of the calls it made and of the results it was sent."""

    def __init__(self) -> None:
        self.offered: list[list[str]] = []
        self.parameters: dict[str, Any] = {}
        self.called: list[str] = []
        self.answered: list[str] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        tools = [tool.metadata.to_openai_tool() for tool in kwargs.get("tools") or ()]
        self.offered.append([tool["function"]["name"] for tool in tools])
        self.parameters.update((t["function"]["name"], t["function"]["parameters"]) for t in tools)
        body: dict[str, Any] = {"model": "reader", "messages": openai_messages(messages)}
        if tools:
            body["tools"] = tools
        self.answered += [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
        said = READER.answer_as_reader(body)["choices"][0]["message"]
        self.called += [call["id"] for call in said.get("tool_calls") or []]
        blocks: list[Any] = [TextBlock(text=said["content"])] if said.get("content") else []
        blocks += [
            ToolCallBlock(
                tool_call_id=call["id"],
                tool_name=call["function"]["name"],
                tool_kwargs=json.loads(call["function"]["arguments"]),
            )
            for call in said.get("tool_calls") or []
        ]
        return ChatMessage(role="assistant", blocks=blocks)


class TextOnly(CustomLLM):
    """A LlamaIndex LLM that calls no functions (a `CustomLLM`, its metadata's default)."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="text-only")

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise AssertionError("eval asked a model it should have refused")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise AssertionError("eval asked a model it should have refused")


def test_a_function_calling_llm_is_asked_as_the_same_model_over_http(tmp_path: Path) -> None:
    workdir = demo_workdir(tmp_path)
    direct = over_http(workdir)
    reader = AsReader()
    llm = MockFunctionCallingLLM(response_generator=reader)
    through = asyncio.run(evaluate(str(workdir), DEMO_SESSION, llm))
    assert_asked_alike(direct, through, reader.offered)  # FunctionTools, achat_with_tools
    # The calls' ids came back with their results; the tools' schemas are eval's, as given.
    assert reader.called and set(reader.called) <= set(reader.answered)
    assert reader.parameters["Read"]["required"] == ["path"]
    assert reader.parameters["Grep"]["required"] == ["pattern"]


def test_an_llm_that_calls_no_functions_is_refused_before_any_call(tmp_path: Path) -> None:
    """The refusal says why (the LLM calls no functions) and what would do, before the
    workspace is even read."""
    refused = r"TextOnly is no function-calling LLM: .*OpenAIChatModel"
    with pytest.raises(ConfigError, match=refused):
        asyncio.run(evaluate(str(tmp_path / "none"), "s", TextOnly()))


def test_a_summary_request_carrying_the_agents_tools_is_asked_without_them() -> None:
    """A summary shaped as the agent's last request (for its cache) carries the agent's
    tools: the adapter asks it as before eval, by the summary's own tool alone."""
    reader = AsReader()
    summary_asked_with_tools(MockFunctionCallingLLM(response_generator=reader))
    assert reader.offered == [["write_summary"]]
