"""`ctxoffload eval` asks a CrewAI LLM through the CrewAI door's adapter: the reader served on
127.0.0.1, asked once as ctxoffload's `OpenAIChatModel` and once as CrewAI's own
`crewai.LLM` (its native OpenAI provider over HTTP: the messages as its `LLMMessage`s, the tools
offered by the names CrewAI sanitises them to, its calls handed back by `call` and run by none),
answers and reads alike, probe by probe. An LLM that calls no functions is refused before any
call."""

from __future__ import annotations

import asyncio
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
from crewai_scripted import Scripted  # turns CrewAI's telemetry off, then imports it
from frameworks import require_framework
from host_eval import asked_alike, summary_asked_with_tools
from pydantic import Field

from ctxoffload import ConfigError
from ctxoffload.eval import evaluate

crewai = require_framework("crewai", "crewai")  # imported by crewai_scripted, telemetry off

from crewai.utilities.string_utils import sanitize_tool_name  # noqa: E402


def _crewai_llm(url: str) -> Any:
    return nullcontext(crewai.LLM(model="reader", provider="openai", base_url=url, api_key="test"))


# The host's OpenAI client may leave a socket for the collector (its pool, not ctxoffload's):
# `asked_alike` collects it inside this test, rather than failing whichever test runs next.
@pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)
def test_a_crewai_llm_is_asked_as_the_same_model_over_http(tmp_path: Path) -> None:
    # CrewAI offers `Read` as `read`: the reader calls what it was offered, and eval must
    # still run `Read`.
    asked_alike(tmp_path, _crewai_llm, offered_as=sanitize_tool_name)


class TextOnly(Scripted):
    """A CrewAI LLM of the user's own that says it calls no functions."""

    def supports_function_calling(self) -> bool:
        return False


def test_an_llm_that_calls_no_functions_is_refused_before_any_call(tmp_path: Path) -> None:
    """The refusal says why (CrewAI would send it no tools either) and what would do, before
    the workspace is even read."""
    refused = r"TextOnly.supports_function_calling\(\) is not True.*OpenAIChatModel"
    llm = TextOnly(model="text-only")
    with pytest.raises(ConfigError, match=refused):
        asyncio.run(evaluate(str(tmp_path / "none"), "s", llm))
    assert not llm.seen


class Offered(Scripted):
    """`Scripted`, keeping the tools each call was offered."""

    offered: list[Any] = Field(default_factory=list)

    def call(self, messages: Any, tools: Any = None, *args: Any, **kwargs: Any) -> Any:
        self.offered.append(tools)
        return super().call(messages, tools, *args, **kwargs)


def test_a_summary_request_carrying_the_agents_tools_is_asked_without_them() -> None:
    """A summary shaped as the agent's last request (for its cache) carries the agent's
    tools: the adapter asks it as before eval, with `response_model` and no tools."""
    llm = Offered(model="summarizer")
    summary_asked_with_tools(llm)
    assert llm.offered and all(tools is None for tools in llm.offered)
