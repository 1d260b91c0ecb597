"""Who writes the pydantic-ai door's summaries, under a real `Agent`, offline (pydantic-ai's own
`FunctionModel`): a pydantic-ai model given as `summary_model` (asked through an output tool),
the run's own model when none is given, the extract with `summary_model=False`, and anything
else refused when the capability is built."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("pydantic_ai", "pydantic-ai")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.usage import RequestUsage  # noqa: E402
from pydantic_ai_scripted import CONFIG  # noqa: E402

from ctxoffload import ConfigError, LocalWorkspace, Msg, Summary  # noqa: E402
from ctxoffload.integrations._pydantic_ai_summary import PydanticAISummaryModel  # noqa: E402
from ctxoffload.integrations.pydantic_ai import ContextOffload  # noqa: E402
from helpers import summary_reply  # noqa: E402


class Writer:
    """A `FunctionModel` that answers the agent's turns with text and, asked through an
    output tool, calls that tool with `summary` (or does what `failure` says). `asked`
    holds the `AgentInfo` of every summary request, `seen` the messages of every other."""

    def __init__(self, mark: str, failure: str | None = None) -> None:
        self.summary = summary_reply(mark)
        self.failure = failure
        self.asked: list[AgentInfo] = []
        self.seen: list[list[ModelMessage]] = []
        self.model = FunctionModel(self.answer)

    async def answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if info.output_tools:
            self.asked.append(info)
            if self.failure == "raise":
                raise RuntimeError("provider down")
            if self.failure == "hang":
                await asyncio.sleep(3600)
            if self.failure == "garbage":
                return ModelResponse(parts=[TextPart("<html>502 Bad Gateway</html>")])
            call = ToolCallPart(info.output_tools[0].name, self.summary, "s1")
            usage = RequestUsage(input_tokens=900, output_tokens=60)
            return ModelResponse(parts=[call], usage=usage)
        self.seen.append(list(messages))
        return ModelResponse(parts=[TextPart(f"Noted, step {len(self.seen)}. " + "ok " * 30)])


def compactions(folder: Path, session: str) -> list[dict[str, Any]]:
    path = folder / "sessions" / session / "events.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in records if e["kind"] == "compression"]


async def converse(agent: Agent[None, str], turns: int, session: str) -> list[ModelMessage]:
    history: list[ModelMessage] = []
    for turn in range(turns):
        prompt = f"Step {turn}: record the reading {turn * 7} " + "and more detail " * 20
        result = await agent.run(prompt, message_history=history, conversation_id=session)
        history = result.all_messages()
    return history


def sent_text(messages: list[ModelMessage]) -> str:
    return "\n".join(
        str(getattr(part, "content", "")) for message in messages for part in message.parts
    )


def written_by(writer: Writer, mark: str, seen: list[ModelMessage]) -> bool:
    return all(f"{mark} {name}" in sent_text(seen) for name in Summary.model_fields)


async def test_a_pydantic_ai_model_writes_the_summary_through_an_output_tool(
    tmp_path: Path,
) -> None:
    writer, agent_model = Writer("written"), Writer("never")
    offload = ContextOffload(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=writer.model
    )
    agent = Agent(agent_model.model, capabilities=[offload])
    history = await converse(agent, 40, "s")
    assert writer.asked and not writer.seen and not agent_model.asked
    [tool] = writer.asked[0].output_tools
    assert set(tool.parameters_json_schema["properties"]) == set(Summary.model_fields)
    assert writer.asked[0].allow_text_output is False
    assert written_by(writer, "written", agent_model.seen[-1])
    assert compactions(tmp_path / "ws", "s")[0]["summary_source"] == "model"
    # The summary call is no part of the run: no message of the history holds it.
    calls = [p for m in history for p in m.parts if isinstance(p, ToolCallPart)]
    assert not calls


async def test_left_out_the_runs_own_model_writes_the_summary(tmp_path: Path) -> None:
    own = Writer("own")
    offload = ContextOffload(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    agent = Agent(own.model, capabilities=[offload])
    await converse(agent, 40, "s")
    assert own.asked
    assert written_by(own, "own", own.seen[-1])
    assert compactions(tmp_path / "ws", "s")[0]["summary_source"] == "model"


async def test_false_keeps_the_extractive_summary(tmp_path: Path) -> None:
    own = Writer("never")
    offload = ContextOffload(LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=False)
    await converse(Agent(own.model, capabilities=[offload]), 40, "s")
    assert not own.asked
    assert compactions(tmp_path / "ws", "s")[0]["summary_source"] == "extractive"


async def test_the_summary_calls_tokens_are_in_its_reply() -> None:
    adapted = PydanticAISummaryModel(Writer("used").model)
    reply = await adapted.generate(
        [Msg(role="system", content="Summarise."), Msg(role="user", content="the talk")],
        response_schema=Summary.model_json_schema(),
    )
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (900, 60)
    assert json.loads(reply.message.text) == summary_reply("used")


@pytest.mark.parametrize(
    "given",
    [42, "openai:gpt-4o-mini", "nosuchprovider:model-x", "not a model at all"],
    ids=["a number", "a provider without its key", "an unknown provider", "an unknown name"],
)
def test_anything_else_is_refused_when_the_capability_is_built(
    tmp_path: Path, given: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError) as refused:
        ContextOffload(LocalWorkspace(tmp_path / "ws"), summary_model=given)
    said = str(refused.value)
    assert "summary_model=False" in said and "pydantic-ai Model" in said


def test_an_object_of_another_framework_is_refused(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    client = openai.AsyncOpenAI(api_key="sk-test-not-used")
    with pytest.raises(ConfigError, match="AsyncOpenAI"):
        ContextOffload(LocalWorkspace(tmp_path / "ws"), summary_model=client)


def test_a_name_holding_a_secret_is_refused_without_quoting_it(tmp_path: Path) -> None:
    name = "openai:gpt-4o?api_key=sk-live-0123456789abcdef"
    with pytest.raises(ConfigError) as refused:
        ContextOffload(LocalWorkspace(tmp_path / "ws"), summary_model=name)
    assert "sk-live-0123456789abcdef" not in str(refused.value)


@pytest.mark.parametrize("failure", ["raise", "hang", "garbage"])
async def test_a_summary_model_that_fails_leaves_the_extract(tmp_path: Path, failure: str) -> None:
    writer, agent_model = Writer("x", failure=failure), Writer("never")
    config = CONFIG.model_copy(update={"summary_timeout": 1.0})
    offload = ContextOffload(
        LocalWorkspace(tmp_path / "ws"), config=config, summary_model=writer.model
    )
    await converse(Agent(agent_model.model, capabilities=[offload]), 40, "s")
    assert writer.asked
    assert compactions(tmp_path / "ws", "s")[0]["summary_source"] == "extractive"


async def test_two_conversations_at_once_share_one_summary_model(tmp_path: Path) -> None:
    writer = Writer("shared")
    offload = ContextOffload(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=writer.model
    )
    models = [Writer("never"), Writer("never")]
    agents = [Agent(m.model, capabilities=[offload]) for m in models]
    await asyncio.gather(converse(agents[0], 40, "a"), converse(agents[1], 40, "b"))
    for model, name in zip(models, "ab", strict=True):
        assert written_by(writer, "shared", model.seen[-1])
        assert compactions(tmp_path / "ws", name)[0]["summary_source"] == "model"
