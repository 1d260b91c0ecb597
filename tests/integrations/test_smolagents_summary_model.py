"""Who writes a smolagents run's summaries (DESIGN section 18): a smolagents `Model` given as
`summary_model`, asked with `response_format` (smolagents' structured output) where it takes
one, else by plain `generate` and parsed; left out, the agent's own `model`; `False`, the
extract; anything else refused when the callbacks are built. Every run is a real
`ToolCallingAgent` on models of smolagents' own `Model` class (offline)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("smolagents", "smolagents")

import pytest  # noqa: E402
from smolagents.models import ChatMessage, MessageRole, Model  # noqa: E402
from smolagents.monitoring import TokenUsage  # noqa: E402
from smolagents_scripted import Fetch, Scripted, agent_with, answer, call  # noqa: E402

from ctxoffload import ConfigError, ContextConfig, LocalWorkspace, Msg, Summary  # noqa: E402
from ctxoffload.integrations.smolagents import OffloadingStepCallbacks  # noqa: E402
from helpers import summary_reply  # noqa: E402

CONFIG = ContextConfig(context_window=8_000, tool_result_limit=300)
STEPS = 40


class Summarizer(Model):  # type: ignore[misc]
    """A smolagents model of the user's own that writes summaries: what each call was given
    kept, answered with the five fields marked `smol-summarizer` (or as `behaviour` says:
    raise, hang until released, answer garbage, or refuse `response_format` as smolagents'
    TransformersModel does), with its token usage."""

    def __init__(self, behaviour: str = "answer") -> None:
        super().__init__(model_id="summarizer-1")
        self.behaviour = behaviour
        self.asked: list[dict[str, Any]] = []
        self.release = threading.Event()

    def generate(self, messages: list[Any], **kwargs: Any) -> ChatMessage:
        self.asked.append({"messages": messages, **kwargs})
        if self.behaviour == "raise":
            raise RuntimeError("503 the summarizer is down")
        if self.behaviour == "hang":
            self.release.wait(30)
        if self.behaviour == "no-structured" and kwargs.get("response_format") is not None:
            raise ValueError("This model does not support structured outputs.")
        text = (
            "I'd rather not."
            if self.behaviour == "garbage"
            else json.dumps(summary_reply("smol-summarizer"))
        )
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content=text,
            token_usage=TokenUsage(input_tokens=1500, output_tokens=70),
        )


def run(tmp_path: Path, summary_model: Any, **kw: Any) -> tuple[Scripted, Any]:
    """An agent taking `STEPS` readings (compacted on the way) with callbacks built with
    `summary_model`; its own model scripted."""
    offload = OffloadingStepCallbacks(
        LocalWorkspace(tmp_path / "ws"),
        config=kw.pop("config", CONFIG),
        summary_model=summary_model,
    )
    readings = [f"reading {i}: " + f"gauge {i * 7} nominal, " * 40 for i in range(STEPS)]
    model = Scripted(
        [*(call("fetch", {}, f"call_{i}") for i in range(STEPS)), answer("All readings taken.")]
    )
    agent = agent_with(model, offload, Fetch(readings), max_steps=STEPS + 10)
    assert agent.run("take the readings") == "All readings taken."
    return model, agent


def sent_last(model: Scripted) -> str:
    return json.dumps(model.seen[-1])


def test_a_smolagents_model_given_writes_the_summary_with_response_format(
    tmp_path: Path,
) -> None:
    writer = Summarizer()
    model, agent = run(tmp_path, writer)
    assert writer.asked, "no compaction asked the summarizer"
    shaped = writer.asked[0]["response_format"]
    assert shaped["type"] == "json_schema"
    assert shaped["json_schema"]["schema"] == Summary.model_json_schema()
    assert shaped["json_schema"]["strict"] is True
    sent = sent_last(model)
    for field in Summary.model_fields:
        assert f"smol-summarizer {field}" in sent
    # No step of the agent's, and the agent's own model wrote none of them.
    assert not model.summaries
    assert all(
        "smol-summarizer" not in str(getattr(s, "model_output", "")) for s in agent.memory.steps
    )
    # The record says the summary came through this door, and what its replies cost.
    origins = [
        event["summary_origin"]
        for path in (tmp_path / "ws" / "sessions").glob("*/events.jsonl")
        for event in map(json.loads, path.read_text(encoding="utf-8").splitlines())
        if event.get("kind") == "compression"
    ]
    assert origins and all(o["door"] == "smolagents" for o in origins)
    assert all(o["usage"]["output_tokens"] >= 70 for o in origins)


def test_a_model_without_structured_output_is_asked_plainly_and_parsed(tmp_path: Path) -> None:
    writer = Summarizer("no-structured")
    model, _ = run(tmp_path, writer)
    assert any(ask.get("response_format") is None for ask in writer.asked)
    assert "smol-summarizer next_steps" in sent_last(model)


def test_left_out_the_agents_own_model_writes_it(tmp_path: Path) -> None:
    model, _ = run(tmp_path, None)
    assert model.summaries, "the agent's model was never asked for a summary"
    assert "scripted task_overview" in sent_last(model)


def test_false_keeps_the_extract(tmp_path: Path) -> None:
    model, _ = run(tmp_path, False)
    assert not model.summaries
    sent = sent_last(model)
    assert "<context_summary>" in sent and "scripted task_overview" not in sent


@pytest.mark.parametrize("behaviour", ["raise", "garbage"])
def test_a_summarizer_that_fails_leaves_the_extract_and_the_run_goes_on(
    tmp_path: Path, behaviour: str
) -> None:
    writer = Summarizer(behaviour)
    model, _ = run(tmp_path, writer)
    assert len(writer.asked) >= CONFIG.summary_max_retries + 1
    sent = sent_last(model)
    assert "<context_summary>" in sent and "smol-summarizer" not in sent


def test_a_summarizer_that_hangs_costs_summary_timeout_then_the_extract(tmp_path: Path) -> None:
    writer = Summarizer("hang")
    config = ContextConfig(context_window=8_000, tool_result_limit=300, summary_timeout=0.5)
    try:
        model, _ = run(tmp_path, writer, config=config)
    finally:
        writer.release.set()  # (smolagents' generate is synchronous: its thread waits)
    assert writer.asked and "<context_summary>" in sent_last(model)


def test_two_runs_at_once_share_one_summarizer(tmp_path: Path) -> None:
    writer = Summarizer()
    done: dict[str, Scripted] = {}
    errors: list[BaseException] = []

    def go(name: str) -> None:
        try:
            done[name] = run(tmp_path / name, writer)[0]
        except BaseException as exc:  # (said in the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors and set(done) == {"a", "b"}
    for model in done.values():
        assert "smol-summarizer current_state" in sent_last(model)


async def test_the_answer_carries_the_tokens_smolagents_reported() -> None:
    from ctxoffload.integrations._smolagents_summary import smolagents_summary_model

    adapted = smolagents_summary_model(Summarizer(), 8_000)
    assert adapted is not None and adapted.context_window == 8_000
    reply = await adapted.generate(
        [Msg(role="system", content="Summarise."), Msg(role="user", content="the chat")],
        response_schema=Summary.model_json_schema(),
    )
    assert json.loads(reply.message.text) == summary_reply("smol-summarizer")
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (1500, 70)


@pytest.mark.parametrize(
    "given",
    [42, "gpt-4o-mini", "openai-client"],
    ids=["a number", "a model's name", "another SDK's client"],
)
def test_what_smolagents_cannot_ask_is_refused_when_the_callbacks_are_built(
    tmp_path: Path, given: object
) -> None:
    if given == "openai-client":
        import openai

        given = openai.OpenAI(api_key="sk-test", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError) as refused:
        OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), summary_model=given)
    said = str(refused.value)
    assert "summary_model=False" in said and "smolagents Model" in said
