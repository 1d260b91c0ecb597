"""Who writes the OpenAI Agents SDK door's summaries, under real `Runner.run` runs, offline (an
SDK `Model` of the test's own): an SDK model given as `summary_model` (asked through the SDK's
output schema, tracing disabled), the agent's own model when none is given, the extract with
`summary_model=False`, and anything else refused when the filter is built."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("agents", "openai-agents")

from agents import Agent, RunConfig, Runner  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model, ModelTracing  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai_agents_scripted import answer  # noqa: E402

from ctxoffload import ConfigError, ContextConfig, LocalWorkspace, Msg, Summary  # noqa: E402
from ctxoffload.integrations.openai_agents import (  # noqa: E402
    OffloadingInputFilter,
    WorkspaceSession,
)
from helpers import summary_reply  # noqa: E402

CONFIG = ContextConfig(context_window=4_000, tool_result_limit=300)


class Writer(Model):  # type: ignore[misc]
    """An SDK `Model` that answers the agent's turns and, asked with an output schema,
    answers the summary as JSON (or does what `failure` says). `asked` holds the schema and
    tracing of every summary call, `seen` the input of every other."""

    def __init__(self, mark: str, failure: str | None = None) -> None:
        self.summary = summary_reply(mark)
        self.failure = failure
        self.asked: list[dict[str, Any]] = []
        self.seen: list[list[Any]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: ModelTracing,
        **kwargs: Any,
    ) -> ModelResponse:
        if output_schema is not None and not output_schema.is_plain_text():
            self.asked.append(
                {
                    "schema": output_schema.json_schema(),
                    "strict": output_schema.is_strict_json_schema(),
                    "tracing": tracing,
                    "tools": tools,
                }
            )
            if self.failure == "raise":
                raise RuntimeError("provider down")
            if self.failure == "hang":
                await asyncio.sleep(3600)
            text = "<html>502</html>" if self.failure == "garbage" else json.dumps(self.summary)
            usage = Usage(requests=1, input_tokens=900, output_tokens=60, total_tokens=960)
            return ModelResponse(output=[answer(text)], usage=usage, response_id=None)
        self.seen.append(list(input) if isinstance(input, list) else [input])
        reply = f"Noted, step {len(self.seen)}. " + "ok " * 30
        return ModelResponse(output=[answer(reply)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("Writer answers Runner.run, not run_streamed")


def compactions(folder: Path, session: str) -> list[dict[str, Any]]:
    path = folder / "sessions" / session / "events.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in records if e["kind"] == "compression"]


async def converse(agent_model: Any, offload: OffloadingInputFilter, turns: int = 30) -> None:
    agent = Agent(name="ops", instructions="You log readings.", model=agent_model)
    config = RunConfig(call_model_input_filter=offload)
    history: list[Any] = []
    for turn in range(turns):
        prompt = f"Step {turn}: record the reading {turn * 7} " + "and more detail " * 20
        result = await Runner.run(
            agent, [*history, {"role": "user", "content": prompt}], run_config=config
        )
        history = result.to_input_list()


def written(mark: str, sent: list[Any]) -> bool:
    text = json.dumps(sent)
    return all(f"{mark} {name}" in text for name in Summary.model_fields)


async def test_an_sdk_model_writes_the_summary_through_an_output_schema(tmp_path: Path) -> None:
    writer, agent_model = Writer("written"), Writer("never")
    offload = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="s", summary_model=writer
    )
    await converse(agent_model, offload)
    assert writer.asked and not writer.seen and not agent_model.asked
    asked = writer.asked[0]
    assert set(asked["schema"]["properties"]) == set(Summary.model_fields)
    assert asked["strict"] and asked["tracing"] is ModelTracing.DISABLED and asked["tools"] == []
    assert written("written", agent_model.seen[-1])
    assert compactions(tmp_path / "ws", "s")[0]["summary_source"] == "model"


async def test_left_out_the_agents_own_model_writes_the_summary(tmp_path: Path) -> None:
    own = Writer("own")
    offload = OffloadingInputFilter(LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="s")
    await converse(own, offload)
    assert own.asked and written("own", own.seen[-1])
    assert compactions(tmp_path / "ws", "s")[0]["summary_source"] == "model"


async def test_left_out_the_model_wrap_was_given_writes_the_summary(tmp_path: Path) -> None:
    own = Writer("wrapped")
    offload = OffloadingInputFilter(LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="s")
    await converse(offload.wrap(own), offload)
    assert own.asked and written("wrapped", own.seen[-1])


async def test_false_keeps_the_extractive_summary(tmp_path: Path) -> None:
    own = Writer("never")
    offload = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="s", summary_model=False
    )
    await converse(own, offload)
    assert not own.asked
    assert compactions(tmp_path / "ws", "s")[0]["summary_source"] == "extractive"


async def test_a_sessions_compaction_is_written_by_the_model_its_filter_saw(
    tmp_path: Path,
) -> None:
    own = Writer("session")
    session = WorkspaceSession(LocalWorkspace(tmp_path / "ws"), "s", config=CONFIG)
    agent = Agent(name="ops", instructions="You log readings.", model=own)
    config = RunConfig(call_model_input_filter=session.input_filter())
    await Runner.run(agent, "Step 0: " + "details " * 50, run_config=config, session=session)
    for i in range(12):
        turn = {"role": "user", "content": f"step {i}: " + "details " * 300}
        await session.add_items([turn, {"role": "assistant", "content": f"noted {i}"}])
    await session.run_compaction()
    assert own.asked
    assert written("session", await session.get_items())


async def test_the_summary_calls_tokens_are_in_its_reply(tmp_path: Path) -> None:
    offload = OffloadingInputFilter(LocalWorkspace(tmp_path / "ws"), summary_model=Writer("used"))
    model = offload.summary_model
    assert model is not None
    reply = await model.generate(
        [Msg(role="system", content="Summarise."), Msg(role="user", content="the talk")],
        response_schema=Summary.model_json_schema(),
    )
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (900, 60)
    assert json.loads(reply.message.text) == summary_reply("used")


def test_a_model_name_is_taken_without_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK builds an Agent of a name without a key, and reads it at the first call: so
    # does the filter, at the first summary.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    offload = OffloadingInputFilter(LocalWorkspace(tmp_path / "ws"), summary_model="gpt-4.1-mini")
    assert offload.summary_model is not None
    assert offload.summary_model.model_name == "gpt-4.1-mini"


@pytest.mark.parametrize(
    "given",
    [42, "nosuchprefix/model-x", "", "litellm/anthropic/claude-haiku-4-5"],
    ids=["a number", "an unknown prefix", "an empty name", "LiteLLM not installed"],
)
def test_anything_else_is_refused_when_the_filter_is_built(tmp_path: Path, given: object) -> None:
    if given == "litellm/anthropic/claude-haiku-4-5":
        try:
            import litellm  # noqa: F401
        except ImportError:
            pass
        else:  # pragma: no cover - LiteLLM is not in the tests' environment
            pytest.skip("LiteLLM is installed: the name routes")
    with pytest.raises(ConfigError) as refused:
        OffloadingInputFilter(LocalWorkspace(tmp_path / "ws"), summary_model=given)
    said = str(refused.value)
    assert "summary_model=False" in said and "OpenAI Agents SDK Model" in said
    with pytest.raises(ConfigError):
        WorkspaceSession(LocalWorkspace(tmp_path / "ws"), "s", summary_model=given)


def test_an_object_of_another_framework_is_refused(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    client = openai.AsyncOpenAI(api_key="sk-test-not-used")
    with pytest.raises(ConfigError, match="AsyncOpenAI"):
        OffloadingInputFilter(LocalWorkspace(tmp_path / "ws"), summary_model=client)


def test_a_name_holding_a_secret_is_refused_without_quoting_it(tmp_path: Path) -> None:
    name = "https://ana:sk-live-0123456789abcdef@llm.example.com/v1?api_key=sk-other-987654"
    with pytest.raises(ConfigError) as refused:
        OffloadingInputFilter(LocalWorkspace(tmp_path / "ws"), summary_model=name)
    said = str(refused.value)
    assert "sk-live-0123456789abcdef" not in said and "sk-other-987654" not in said


@pytest.mark.parametrize("failure", ["raise", "hang", "garbage"])
async def test_a_summary_model_that_fails_leaves_the_extract(tmp_path: Path, failure: str) -> None:
    writer, agent_model = Writer("x", failure=failure), Writer("never")
    config = CONFIG.model_copy(update={"summary_timeout": 1.0})
    offload = OffloadingInputFilter(
        LocalWorkspace(tmp_path / "ws"), config=config, session_id="s", summary_model=writer
    )
    await converse(agent_model, offload)
    assert writer.asked
    assert compactions(tmp_path / "ws", "s")[0]["summary_source"] == "extractive"


async def test_two_sessions_at_once_share_one_summary_model(tmp_path: Path) -> None:
    writer = Writer("shared")
    filters = [
        OffloadingInputFilter(
            LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id=name, summary_model=writer
        )
        for name in "ab"
    ]
    models = [Writer("never"), Writer("never")]
    await asyncio.gather(converse(models[0], filters[0]), converse(models[1], filters[1]))
    for model, name in zip(models, "ab", strict=True):
        assert written("shared", model.seen[-1])
        assert compactions(tmp_path / "ws", name)[0]["summary_source"] == "model"
