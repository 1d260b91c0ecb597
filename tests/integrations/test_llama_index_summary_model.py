"""Who writes an `OffloadingMemory`'s summaries (DESIGN section 18): a LlamaIndex `LLM` given
as `summary_model`, asked by LlamaIndex's function-calling structured output (a required call
of a tool shaped as the summary) where it calls tools, else by chat and parsed; left out, the
extract (a LlamaIndex agent never hands its LLM to its memory); `False`, the extract; anything
else refused when the memory is built. Every run is a real `FunctionAgent` on LlamaIndex's own
models (`MockFunctionCallingLLM`, a `CustomLLM`: offline)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("llama_index.core", "llama_index")

import pytest  # noqa: E402
from llama_index.core.base.llms.types import (  # noqa: E402
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    ToolCallBlock,
)
from llama_index.core.llms.custom import CustomLLM  # noqa: E402
from llama_index.core.llms.mock import MockFunctionCallingLLM  # noqa: E402
from llama_index_scripted import (  # noqa: E402
    CONFIG,
    HOST_WARNINGS,
    Scripted,
    converse,
    memory_on,
    wire,
)

from ctxoffload import ConfigError, ContextConfig, LocalWorkspace, Msg, Summary  # noqa: E402
from ctxoffload.integrations.llama_index import OffloadingMemory  # noqa: E402
from helpers import summary_reply  # noqa: E402

pytestmark = pytest.mark.filterwarnings(HOST_WARNINGS)

TURNS = range(40)
"""A chat long enough to be compacted in `CONFIG`'s window."""


class ToolCaller:
    """LlamaIndex's `MockFunctionCallingLLM` writing summaries: it calls the tool it is given
    with the five fields marked `li-summarizer`, keeping what each call was given."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []
        self.llm = MockFunctionCallingLLM(response_generator=self.answer)

    def answer(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.asked.append({"messages": list(messages), **kwargs})
        (tool,) = kwargs["tools"]
        block = ToolCallBlock(
            tool_call_id="s1",
            tool_name=tool.metadata.name,
            tool_kwargs=summary_reply("li-summarizer"),
        )
        return ChatMessage(role="assistant", blocks=[block])


class ChatOnly(CustomLLM):  # type: ignore[misc]
    """A LlamaIndex LLM of the user's own that calls no tools: it answers the summary request
    in a fenced JSON block (or raises, hangs, or answers garbage), with its usage."""

    behaviour: str = "answer"
    calls: int = 0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="chat-only", context_window=16_000)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError  # the door asks with achat

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError  # a summary is never streamed

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.calls += 1
        if self.behaviour == "raise":
            raise RuntimeError("503 the summarizer is down")
        if self.behaviour == "hang":
            await asyncio.sleep(3600)
        text = (
            "Sorry, I cannot do that."
            if self.behaviour == "garbage"
            else "```json\n" + json.dumps(summary_reply("chat-only")) + "\n```"
        )
        return ChatResponse(
            message=ChatMessage(role="assistant", content=text),
            raw={"usage": {"prompt_tokens": 700, "completion_tokens": 60}},
        )


def sent_last(model: Scripted) -> str:
    return "\n".join(wire(model.seen[-1]))


async def test_an_llm_that_calls_tools_writes_the_summary_by_structured_output(
    tmp_path: Path,
) -> None:
    writer = ToolCaller()
    model = Scripted()
    memory = memory_on(tmp_path / "ws", "long", summary_model=writer.llm)
    await converse(memory, model, TURNS)
    await memory.aclose()
    assert writer.asked, "no compaction asked the summarizer"
    (tool,) = writer.asked[0]["tools"]
    assert tool.metadata.fn_schema is Summary  # the summary's schema, its call required
    sent = sent_last(model)
    for field in Summary.model_fields:
        assert f"li-summarizer {field}" in sent
    # No step of the agent's: what the chat store keeps holds no summary.
    stored = "\n".join(wire(await memory_on(tmp_path / "ws", "long").aget_all()))
    assert "li-summarizer" not in stored


async def test_an_llm_that_calls_no_tools_is_asked_by_chat_and_parsed(tmp_path: Path) -> None:
    writer = ChatOnly()
    model = Scripted()
    memory = memory_on(tmp_path / "ws", "long", summary_model=writer)
    await converse(memory, model, TURNS)
    await memory.aclose()
    assert writer.calls and "chat-only next_steps" in sent_last(model)


async def test_left_out_the_extract_writes_it_and_the_agents_llm_is_never_asked(
    tmp_path: Path,
) -> None:
    model = Scripted()  # a summary request would take a reply of its script: the run fails
    memory = memory_on(tmp_path / "ws", "long")
    await converse(memory, model, TURNS)
    await memory.aclose()
    assert "<context_summary>" in sent_last(model)


async def test_false_keeps_the_extract(tmp_path: Path) -> None:
    writer = ChatOnly()
    model = Scripted()
    memory = memory_on(tmp_path / "ws", "long", summary_model=False)
    await converse(memory, model, TURNS)
    await memory.aclose()
    assert writer.calls == 0 and "<context_summary>" in sent_last(model)


@pytest.mark.parametrize("behaviour", ["raise", "garbage"])
async def test_a_summarizer_that_fails_leaves_the_extract_and_the_run_goes_on(
    tmp_path: Path, behaviour: str
) -> None:
    writer = ChatOnly(behaviour=behaviour)
    model = Scripted()
    memory = memory_on(tmp_path / "ws", "long", summary_model=writer)
    await converse(memory, model, TURNS)
    await memory.aclose()
    assert writer.calls >= CONFIG.summary_max_retries + 1
    sent = sent_last(model)
    assert "<context_summary>" in sent and "chat-only" not in sent


async def test_a_summarizer_that_hangs_costs_summary_timeout_then_the_extract(
    tmp_path: Path,
) -> None:
    writer = ChatOnly(behaviour="hang")
    model = Scripted()
    config = ContextConfig(context_window=4_000, tool_result_limit=300, summary_timeout=0.5)
    memory = memory_on(tmp_path / "ws", "long", summary_model=writer, config=config)
    await asyncio.wait_for(converse(memory, model, TURNS), 60)
    await memory.aclose()
    assert writer.calls and "<context_summary>" in sent_last(model)


async def test_two_conversations_at_once_share_one_summarizer(tmp_path: Path) -> None:
    writer = ChatOnly()
    first, second = Scripted(), Scripted()
    # (A chat store of its own each: two stores creating one SQLite table at once collide.)
    memories = [memory_on(tmp_path / name, name, summary_model=writer) for name in ("a", "b")]
    await asyncio.gather(converse(memories[0], first, TURNS), converse(memories[1], second, TURNS))
    for memory in memories:
        await memory.aclose()
    for model in (first, second):
        assert "chat-only current_state" in sent_last(model)


async def test_the_answer_carries_the_tokens_the_llm_reported() -> None:
    from ctxoffload.integrations._llama_index_summary import llama_index_summary_model

    adapted = llama_index_summary_model(ChatOnly(), None)
    assert adapted is not None and adapted.context_window == 16_000
    reply = await adapted.generate(
        [Msg(role="system", content="Summarise."), Msg(role="user", content="the chat")],
        response_schema=Summary.model_json_schema(),
    )
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (700, 60)


@pytest.mark.parametrize(
    "given",
    [42, "gpt-4o-mini", "openai-client"],
    ids=["a number", "a model's name", "another SDK's client"],
)
def test_what_llama_index_cannot_ask_is_refused_when_the_memory_is_built(
    tmp_path: Path, given: object
) -> None:
    if given == "openai-client":
        import openai

        given = openai.AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError) as refused:
        OffloadingMemory(LocalWorkspace(tmp_path / "ws"), summary_model=given)
    said = str(refused.value)
    assert "summary_model=False" in said and "LlamaIndex LLM" in said
