"""`ctxoffload eval` asks a LangChain chat model through the LangChain door's adapter, tools
bound with LangChain's `bind_tools` and its calls read back as LangChain's: the same reader,
asked once over HTTP as an `OpenAIChatModel` and once as a LangChain chat model, answers and
reads alike, probe by probe."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("langchain", "langchain")

from host_eval import (  # noqa: E402
    DEMO_SESSION,
    READER,
    assert_asked_alike,
    demo_workdir,
    over_http,
    summary_asked_with_tools,
)
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, convert_to_openai_messages  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from pydantic import Field  # noqa: E402

from ctxoffload.eval import evaluate  # noqa: E402


class ReaderChatModel(BaseChatModel):
    """A LangChain chat model that answers as the deterministic reader: sent its messages and
    bound tools in OpenAI's form, as a provider is, its tool calls given back as LangChain's.
    `offered` holds, per call, the tools it was offered."""

    tools: list[dict[str, Any]] = Field(default_factory=list)
    offered: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "reader"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.model_copy(update={"tools": [convert_to_openai_tool(t) for t in tools]})

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **_: Any) -> Any:
        body: dict[str, Any] = {"model": "reader", "messages": convert_to_openai_messages(messages)}
        if self.tools:
            body["tools"] = self.tools
        self.offered.append([t["function"]["name"] for t in self.tools])
        said = READER.answer_as_reader(body)["choices"][0]["message"]
        calls = [
            {
                "name": call["function"]["name"],
                "args": json.loads(call["function"]["arguments"]),
                "id": call["id"],
                "type": "tool_call",
            }
            for call in said.get("tool_calls") or []
        ]
        reply = AIMessage(content=said.get("content") or "", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_a_langchain_chat_model_is_asked_as_the_same_model_over_http(tmp_path: Path) -> None:
    workdir = demo_workdir(tmp_path)
    direct = over_http(workdir)
    chat = ReaderChatModel()
    through = asyncio.run(evaluate(str(workdir), DEMO_SESSION, chat))
    assert_asked_alike(direct, through, chat.offered)  # tools bound through LangChain


def test_a_summary_request_carrying_the_agents_tools_is_asked_without_them() -> None:
    """A summary shaped as the agent's last request (for its cache) carries the agent's
    tools: the door's adapter asks it with the summary's schema alone, as before eval."""
    chat = ReaderChatModel()
    summary_asked_with_tools(chat)
    assert chat.offered and all("Read" not in offered for offered in chat.offered)
