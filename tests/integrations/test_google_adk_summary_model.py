"""Who writes a Google ADK session's summaries (DESIGN section 18): an ADK model, given as a
`BaseLlm` or a model string ADK's registry resolves, asked with ADK's structured output;
left out, the agent's own model; `summary_model=False`, the extract; anything else refused
when the plugin is built. Every run is a real ADK `Runner` on models of ADK's own base class
(offline)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("google.adk", "google_adk")

import pytest  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.models.registry import LLMRegistry  # noqa: E402
from google.genai import types  # noqa: E402
from google_adk_scripted import CONFIG, Scripted, converse, runner_on, say, wire  # noqa: E402
from pydantic import Field  # noqa: E402

from ctxoffload import ConfigError, ContextConfig, LocalWorkspace, Msg, Summary  # noqa: E402
from ctxoffload.integrations.google_adk import ContextOffloadPlugin  # noqa: E402
from helpers import summary_reply  # noqa: E402

TURNS = range(40)
"""A chat long enough to be compacted in `CONFIG`'s window."""


class Summarizer(BaseLlm):
    """An ADK model of the user's own that writes summaries: each request kept, answered with
    the five fields marked `mark` (or as `behaviour` says: raise, hang, reply garbage)."""

    model: str = "summarizer-1"
    mark: str = "adk-summarizer"
    behaviour: str = "answer"
    seen: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append(llm_request.model_copy(deep=True))
        if self.behaviour == "raise":
            raise RuntimeError("503 the summarizer is down")
        if self.behaviour == "hang":
            await asyncio.sleep(3600)
        text = (
            "I'd rather not."
            if self.behaviour == "garbage"
            else json.dumps(summary_reply(self.mark))
        )
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=text)]),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=1200, candidates_token_count=90
            ),
        )


class AnswersSummaries(Scripted):
    """The agent's own model: its script plays the agent's turns, and a request that asks
    for the summary's schema is answered with the five fields marked `agent-model`."""

    summaries: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if llm_request.config.response_schema is not None:
            self.summaries.append(llm_request.model_copy(deep=True))
            yield say(json.dumps(summary_reply("agent-model")))
            return
        async for response in super().generate_content_async(llm_request, stream):
            yield response


def sent_last(model: Scripted) -> str:
    return "\n".join(wire(model.seen[-1]))


def events_text(runner: Any, session_id: str) -> str:
    session = runner.session_service.sessions["ops"]["ana"][session_id]
    return "\n".join(
        json.dumps(e.content.model_dump(mode="json"), default=str)
        for e in session.events
        if e.content
    )


async def test_an_adk_model_given_writes_the_summary_asked_with_adks_structured_output(
    tmp_path: Path,
) -> None:
    writer = Summarizer()
    model = Scripted()
    runner, _ = runner_on(tmp_path / "ws", model, summary_model=writer)
    await converse(runner, model, TURNS, "long")
    assert writer.seen, "no compaction asked the summarizer"
    asked = writer.seen[0]
    assert asked.config.response_mime_type == "application/json"
    assert asked.config.response_schema is Summary  # ADK turns it into its provider's schema
    assert not asked.config.tools  # a summary calls no tool
    sent = sent_last(model)
    for field in Summary.model_fields:
        assert f"adk-summarizer {field}" in sent
    # Never a turn of the agent's: the summary is in what the model is sent, not in ADK's
    # session, and the agent's model was never asked for it.
    assert "adk-summarizer" not in events_text(runner, "long")
    assert all(request.config.response_schema is None for request in model.seen)


async def test_a_model_string_is_resolved_by_adks_registry(tmp_path: Path) -> None:
    made: list[Summarizer] = []

    class Registered(Summarizer):
        def __init__(self, **data: Any) -> None:
            super().__init__(**data)
            made.append(self)

        @classmethod
        def supported_models(cls) -> list[str]:
            return [r"ctxoffload-test-summarizer-.*"]

    LLMRegistry.register(Registered)
    model = Scripted()
    runner, _ = runner_on(tmp_path / "ws", model, summary_model="ctxoffload-test-summarizer-7")
    await converse(runner, model, TURNS, "long")
    (resolved,) = made
    assert resolved.model == "ctxoffload-test-summarizer-7" and resolved.seen
    assert "adk-summarizer task_overview" in sent_last(model)


async def test_left_out_the_agents_own_model_writes_it(tmp_path: Path) -> None:
    model = AnswersSummaries()
    runner, _ = runner_on(tmp_path / "ws", model, summary_model=None)
    await converse(runner, model, TURNS, "long")
    assert model.summaries, "the agent's model was never asked for a summary"
    assert model.summaries[0].config.response_mime_type == "application/json"
    assert "agent-model next_steps" in sent_last(model)
    assert "agent-model" not in events_text(runner, "long")


async def test_false_keeps_the_extract_and_asks_no_model(tmp_path: Path) -> None:
    model = AnswersSummaries()
    runner, _ = runner_on(tmp_path / "ws", model, summary_model=False)
    await converse(runner, model, TURNS, "long")
    assert not model.summaries
    sent = sent_last(model)
    assert "<context_summary>" in sent and "agent-model" not in sent


@pytest.mark.parametrize("behaviour", ["raise", "garbage"])
async def test_a_summarizer_that_fails_leaves_the_extract_and_the_run_goes_on(
    tmp_path: Path, behaviour: str
) -> None:
    writer = Summarizer(behaviour=behaviour)
    model = Scripted()
    runner, _ = runner_on(tmp_path / "ws", model, summary_model=writer)
    await converse(runner, model, TURNS, "long")
    assert len(writer.seen) >= CONFIG.summary_max_retries + 1  # asked, retried, given up
    sent = sent_last(model)
    assert "<context_summary>" in sent and "adk-summarizer" not in sent


async def test_a_summarizer_that_hangs_costs_summary_timeout_then_the_extract(
    tmp_path: Path,
) -> None:
    writer = Summarizer(behaviour="hang")
    model = Scripted()
    config = ContextConfig(context_window=4_000, tool_result_limit=300, summary_timeout=0.5)
    runner, _ = runner_on(tmp_path / "ws", model, summary_model=writer, config=config)
    await asyncio.wait_for(converse(runner, model, TURNS, "long"), 60)
    assert writer.seen and "<context_summary>" in sent_last(model)


async def test_two_sessions_at_once_share_one_summarizer(tmp_path: Path) -> None:
    writer = Summarizer()
    first, second = Scripted(), Scripted()
    runner_a, _ = runner_on(tmp_path / "ws", first, summary_model=writer)
    runner_b, _ = runner_on(tmp_path / "ws", second, summary_model=writer)
    await asyncio.gather(
        converse(runner_a, first, TURNS, "a"), converse(runner_b, second, TURNS, "b")
    )
    for model in (first, second):
        assert "adk-summarizer current_state" in sent_last(model)


async def test_the_answer_carries_the_tokens_adk_reported() -> None:
    from ctxoffload.integrations._google_adk_summary import adk_summary_model

    adapted = adk_summary_model(Summarizer(), None)
    assert adapted is not None
    reply = await adapted.generate(
        [Msg(role="system", content="Summarise."), Msg(role="user", content="the chat")],
        response_schema=Summary.model_json_schema(),
    )
    assert json.loads(reply.message.text) == summary_reply("adk-summarizer")
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (1200, 90)


@pytest.mark.parametrize(
    "given",
    [42, "no-such-model-anywhere", "openai-client"],
    ids=["a number", "a string ADK cannot resolve", "another SDK's client"],
)
def test_what_adk_cannot_ask_is_refused_when_the_plugin_is_built(
    tmp_path: Path, given: object
) -> None:
    if given == "openai-client":
        import openai

        given = openai.AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError) as refused:
        ContextOffloadPlugin(LocalWorkspace(tmp_path / "ws"), summary_model=given)
    said = str(refused.value)
    assert "summary_model=False" in said and "BaseLlm" in said
    if given == "no-such-model-anywhere":
        assert "no-such-model-anywhere" in said and "not found" in said
