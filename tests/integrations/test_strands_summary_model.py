"""Who writes the Strands conversation manager's summaries, inside a real Strands `Agent`,
offline (a Strands `Model` of the test's own): a Strands model given as `summary_model` (asked
through its structured output, or streamed where it has none), the agent's own model when none
is given, the extract with `summary_model=False`, and anything else refused when the manager
is built."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("strands", "strands")

from strands import Agent  # noqa: E402
from strands_scripted import ScriptedModelBase  # noqa: E402

from ctxoffload import ConfigError, LocalWorkspace, Msg, Summary  # noqa: E402
from ctxoffload.integrations._strands_summary import StrandsSummaryModel  # noqa: E402
from ctxoffload.integrations.strands import OffloadingConversationManager  # noqa: E402
from helpers import summary_reply  # noqa: E402


class Writer(ScriptedModelBase):
    """A Strands model that answers the agent's turns and writes summaries: through its
    structured output (`asked` holds the output model of each call), or, with
    `structured=False`, as streamed JSON text (a call with a system prompt: the agent here
    has none). `failure` makes a summary call raise, hang or answer garbage; `seen` holds
    the messages of every turn of the agent."""

    def __init__(self, mark: str, *, structured: bool = True, failure: str | None = None) -> None:
        self.summary = summary_reply(mark)
        self.structured = structured
        self.failure = failure
        self.asked: list[Any] = []
        self.seen: list[Any] = []

    async def _summary_text(self) -> str:
        if self.failure == "raise":
            raise RuntimeError("provider down")
        if self.failure == "hang":
            await asyncio.sleep(3600)
        return "<html>502</html>" if self.failure == "garbage" else json.dumps(self.summary)

    async def structured_output(
        self, output_model: Any, prompt: Any, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        if not self.structured:
            raise NotImplementedError
        self.asked.append(output_model)
        text = await self._summary_text()
        yield {"output": output_model.model_validate_json(text)}

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        if system_prompt:
            self.asked.append("streamed")
            text = await self._summary_text()
            usage = {"inputTokens": 900, "outputTokens": 60, "totalTokens": 960}
            metadata = {"metadata": {"usage": usage, "metrics": {"latencyMs": 1}}}
        else:
            self.seen.append(json.loads(json.dumps(messages, default=repr)))
            text, metadata = f"Noted, step {len(self.seen)}. " + "ok " * 30, {}
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockDelta": {"delta": {"text": text}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}
        if metadata:
            yield metadata


def manager_on(folder: Path, **options: Any) -> OffloadingConversationManager:
    return OffloadingConversationManager(
        LocalWorkspace(folder, fsync=False),
        session_id="s",
        strategy="summarization",
        summary_ratio=0.5,
        preserve_recent_messages=2,
        context_window=8_000,
        **options,
    )


def converse(model: Writer, manager: OffloadingConversationManager, turns: int = 8) -> None:
    agent = Agent(model=model, conversation_manager=manager, callback_handler=None)
    for turn in range(turns):
        agent(f"Step {turn}: record the reading {turn * 7} " + "and more detail " * 20)


def compactions(folder: Path) -> list[dict[str, Any]]:
    path = folder / "sessions" / "s" / "events.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in records if e["kind"] == "compression"]


def written(mark: str, sent: Any) -> bool:
    text = json.dumps(sent)
    return all(f"{mark} {name}" in text for name in Summary.model_fields)


def test_a_strands_model_writes_the_summary_through_its_structured_output(
    tmp_path: Path,
) -> None:
    writer, agent_model = Writer("written"), Writer("never")
    converse(agent_model, manager_on(tmp_path / "ws", summary_model=writer))
    assert writer.asked and all(asked is Summary for asked in writer.asked)
    assert not writer.seen and not agent_model.asked
    assert written("written", agent_model.seen[-1])
    assert compactions(tmp_path / "ws")[0]["summary_source"] == "model"


def test_a_model_without_structured_output_is_streamed_and_parsed(tmp_path: Path) -> None:
    writer, agent_model = Writer("streamed", structured=False), Writer("never")
    converse(agent_model, manager_on(tmp_path / "ws", summary_model=writer))
    assert writer.asked and set(writer.asked) == {"streamed"}
    assert written("streamed", agent_model.seen[-1])


def test_left_out_the_agents_own_model_writes_the_summary(tmp_path: Path) -> None:
    own = Writer("own")
    converse(own, manager_on(tmp_path / "ws"))
    assert own.asked and written("own", own.seen[-1])
    assert compactions(tmp_path / "ws")[0]["summary_source"] == "model"


def test_false_keeps_the_extractive_summary(tmp_path: Path) -> None:
    own = Writer("never")
    converse(own, manager_on(tmp_path / "ws", summary_model=False))
    assert not own.asked
    assert compactions(tmp_path / "ws")[0]["summary_source"] == "extractive"


async def test_the_summary_calls_tokens_are_in_its_reply() -> None:
    adapted = StrandsSummaryModel(Writer("used", structured=False))
    reply = await adapted.generate(
        [Msg(role="system", content="Summarise."), Msg(role="user", content="the talk")],
        response_schema=Summary.model_json_schema(),
    )
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (900, 60)
    assert json.loads(reply.message.text) == summary_reply("used")


@pytest.mark.parametrize(
    "given", [42, "us.anthropic.claude-haiku-4-5"], ids=["a number", "a model id"]
)
def test_anything_else_is_refused_when_the_manager_is_built(tmp_path: Path, given: object) -> None:
    # Strands builds a model from an id only inside `Agent(model=...)`: the manager takes the
    # model object, and a name is refused with what to pass.
    with pytest.raises(ConfigError) as refused:
        manager_on(tmp_path / "ws", summary_model=given)
    said = str(refused.value)
    assert "summary_model=False" in said and "Strands Model" in said


def test_an_object_of_another_framework_is_refused(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    client = openai.AsyncOpenAI(api_key="sk-test-not-used")
    with pytest.raises(ConfigError, match="AsyncOpenAI"):
        manager_on(tmp_path / "ws", summary_model=client)


@pytest.mark.parametrize("failure", ["raise", "hang", "garbage"])
def test_a_summary_model_that_fails_leaves_the_extract(tmp_path: Path, failure: str) -> None:
    writer, agent_model = Writer("x", failure=failure), Writer("never")
    manager = manager_on(tmp_path / "ws", summary_model=writer)
    # The manager takes no ContextConfig of its own: its timeout is set where it runs.
    manager._bridge.run.compressor.config = manager._bridge.run.compressor.config.model_copy(
        update={"summary_timeout": 1.0}
    )
    converse(agent_model, manager, turns=6)
    assert writer.asked
    assert compactions(tmp_path / "ws")[0]["summary_source"] == "extractive"


def test_two_agents_at_once_share_one_summary_model(tmp_path: Path) -> None:
    writer = Writer("shared")
    models = [Writer("never"), Writer("never")]
    managers = [manager_on(tmp_path / name, summary_model=writer) for name in "ab"]

    async def both() -> None:
        await asyncio.gather(
            *(asyncio.to_thread(converse, m, g) for m, g in zip(models, managers, strict=True))
        )

    asyncio.run(both())
    for model, name in zip(models, "ab", strict=True):
        assert written("shared", model.seen[-1])
        assert compactions(tmp_path / name)[0]["summary_source"] == "model"


def test_a_name_holding_a_secret_is_refused_without_quoting_it(tmp_path: Path) -> None:
    name = "https://ana:sk-live-0123456789abcdef@bedrock.example.com?api_key=sk-other-987654"
    with pytest.raises(ConfigError) as refused:
        manager_on(tmp_path / "ws", summary_model=name)
    said = str(refused.value)
    assert "sk-live-0123456789abcdef" not in said and "sk-other-987654" not in said
