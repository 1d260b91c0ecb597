"""Who writes a CrewAI run's summaries (DESIGN section 18): a CrewAI LLM given as
`summary_model` (a `BaseLLM`, or a model string `crewai.LLM` takes), asked with
`response_model`, never streamed; left out, the calling agent's own `llm`; `False`, the
extract; anything else refused when the hooks are built. Every run is a real crew's kickoff
on LLMs of CrewAI's own base class (offline)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from crewai_scripted import (
    HOST_WARNINGS,
    Fetch,
    Scripted,
    agent_with,
    call,
    crew_of,
    say,
    texts,
)
from pydantic import PrivateAttr

from ctxoffload import ConfigError, ContextConfig, LocalWorkspace, Msg, Summary
from ctxoffload.integrations.crewai import ContextOffloadHooks
from helpers import summary_reply

pytestmark = [pytest.mark.filterwarnings(w) for w in HOST_WARNINGS]

CONFIG = ContextConfig(context_window=4_000, tool_result_limit=300)
PARTS = 30


class Summarizer(Scripted):
    """A CrewAI LLM of the user's own (a `BaseLLM`) that writes summaries: what each call was
    given kept (its messages, its `response_model`, whether it was to stream), answered with
    the five fields marked `crewai-summarizer` as the `response_model` asked (or as
    `behaviour` says: raise, hang until released, answer garbage), its tokens counted as a
    provider counts them."""

    behaviour: str = "answer"
    _asked: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    _release: threading.Event = PrivateAttr(default_factory=threading.Event)

    def call(self, messages: Any, *args: Any, response_model: Any = None, **kwargs: Any) -> Any:
        self._asked.append(
            {"messages": messages, "model": response_model, "stream": self._effective_stream()}
        )
        if self.behaviour == "raise":
            raise RuntimeError("503 the summarizer is down")
        if self.behaviour == "hang":
            self._release.wait(30)
        self._track_token_usage_internal({"prompt_tokens": 900, "completion_tokens": 80})
        if self.behaviour == "garbage":
            return "I'd rather not."
        fields = summary_reply("crewai-summarizer")
        return response_model(**fields) if response_model is not None else json.dumps(fields)

    def supports_function_calling(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 64_000


class AnswersSummaries(Scripted):
    """The agent's own LLM: its script plays the agent's turns; a call that asks for a
    `response_model` is answered with the five fields marked `agent-llm`."""

    _summaries: list[Any] = PrivateAttr(default_factory=list)

    def call(self, messages: Any, *args: Any, response_model: Any = None, **kwargs: Any) -> Any:
        if response_model is not None:
            self._summaries.append(messages)
            return response_model(**summary_reply("agent-llm"))
        return super().call(messages, *args, **kwargs)


def run(tmp_path: Path, summary_model: Any, model: Scripted | None = None, **kw: Any) -> Scripted:
    """A crew reading `PARTS` parts of a log (compacted on the way) through hooks built with
    `summary_model`; its agent's LLM, scripted."""
    offload = ContextOffloadHooks(
        LocalWorkspace(tmp_path / "ws"),
        config=kw.pop("config", CONFIG),
        session_id=kw.pop("session_id", "long"),
        summary_model=summary_model,
    )
    outputs = [f"part {i}: " + "checked the export rows " * 30 for i in range(PARTS)]
    replies = [call("fetch", {}, f"call_{i}") for i in range(PARTS)] + [say("All parts read.")]
    model = (model or Scripted(model="scripted")).script(replies)
    agent = agent_with(model, [Fetch().give(outputs)])
    with offload:
        assert crew_of(agent, "read every part").kickoff().raw == "All parts read."
    return model


def sent_last(model: Scripted) -> str:
    return "\n".join(texts(model.seen[-1]))


def test_a_crewai_llm_given_writes_the_summary_with_response_model_never_streamed(
    tmp_path: Path,
) -> None:
    writer = Summarizer(model="summarizer-1", stream=True)
    model = run(tmp_path, writer)
    assert writer._asked, "no compaction asked the summarizer"
    asked = writer._asked[0]
    assert asked["model"] is Summary  # CrewAI's structured output
    assert asked["stream"] is False  # its stream=True is off for a summary
    sent = sent_last(model)
    for field in Summary.model_fields:
        assert f"crewai-summarizer {field}" in sent
    # No step of the agent's: the agent's LLM was asked only its own turns.
    assert len(model.seen) == PARTS + 1
    assert writer.get_token_usage_summary().prompt_tokens == 900 * len(writer._asked)


def test_left_out_the_agents_own_llm_writes_it(tmp_path: Path) -> None:
    model = run(tmp_path, None, AnswersSummaries(model="scripted"))
    assert isinstance(model, AnswersSummaries) and model._summaries
    assert "agent-llm next_steps" in sent_last(model)
    assert len(model.seen) == PARTS + 1  # the summary requests are not among its turns


def test_false_keeps_the_extract(tmp_path: Path) -> None:
    model = run(tmp_path, False, AnswersSummaries(model="scripted"))
    assert isinstance(model, AnswersSummaries) and not model._summaries
    sent = sent_last(model)
    assert "<context_summary>" in sent and "agent-llm" not in sent


@pytest.mark.parametrize("behaviour", ["raise", "garbage"])
def test_a_summarizer_that_fails_leaves_the_extract_and_the_run_goes_on(
    tmp_path: Path, behaviour: str
) -> None:
    writer = Summarizer(model="summarizer-1", behaviour=behaviour)
    model = run(tmp_path, writer)
    assert len(writer._asked) >= CONFIG.summary_max_retries + 1
    sent = sent_last(model)
    assert "<context_summary>" in sent and "crewai-summarizer" not in sent


def test_a_summarizer_that_hangs_costs_summary_timeout_then_the_extract(tmp_path: Path) -> None:
    writer = Summarizer(model="summarizer-1", behaviour="hang")
    config = ContextConfig(context_window=4_000, tool_result_limit=300, summary_timeout=0.5)
    try:
        model = run(tmp_path, writer, config=config)
    finally:
        writer._release.set()  # (CrewAI's call is synchronous: its thread waits till then)
    assert writer._asked and "<context_summary>" in sent_last(model)


def test_two_kickoffs_at_once_share_one_summarizer(tmp_path: Path) -> None:
    writer = Summarizer(model="summarizer-1")
    done: dict[str, Scripted] = {}
    errors: list[BaseException] = []

    def kickoff(name: str) -> None:
        try:
            done[name] = run(tmp_path / name, writer, session_id=name)
        except BaseException as exc:  # (said in the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=kickoff, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors and set(done) == {"a", "b"}
    for model in done.values():
        assert "crewai-summarizer current_state" in sent_last(model)


async def test_the_answer_carries_the_tokens_crewai_counted() -> None:
    from ctxoffload.integrations._crewai_summary import crewai_summary_model

    adapted = crewai_summary_model(Summarizer(model="summarizer-1"), None)
    assert adapted is not None and adapted.context_window == 64_000
    reply = await adapted.generate(
        [Msg(role="system", content="Summarise."), Msg(role="user", content="the chat")],
        response_schema=Summary.model_json_schema(),
    )
    assert json.loads(reply.message.text) == summary_reply("crewai-summarizer")
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (900, 80)


def test_a_model_string_is_made_a_crewai_llm(tmp_path: Path) -> None:
    hooks = ContextOffloadHooks(LocalWorkspace(tmp_path / "ws"), summary_model="gpt-4o-mini")
    made = hooks.summaries.model()
    assert made is not None and made.model_name == "gpt-4o-mini"


@pytest.mark.parametrize(
    "given",
    [42, "nosuch/provider-model", "openai-client"],
    ids=["a number", "a string CrewAI makes no LLM of", "another SDK's client"],
)
def test_what_crewai_cannot_ask_is_refused_when_the_hooks_are_built(
    tmp_path: Path, given: object
) -> None:
    if given == "openai-client":
        import openai

        given = openai.OpenAI(api_key="sk-test", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError) as refused:
        ContextOffloadHooks(LocalWorkspace(tmp_path / "ws"), summary_model=given)
    said = str(refused.value)
    assert "summary_model=False" in said and "CrewAI LLM" in said
