"""Who writes the Haystack compactor's summaries, under a real Haystack `Agent` with its
`CompactionHook`, offline (Haystack's own `MockChatGenerator`, and its `OpenAIChatGenerator`
against the project's loopback OpenAI server): a chat generator given as `summary_model`, the
extract when none is given (the hook never shows its compactor the Agent's generator) or with
`summary_model=False`, and anything else refused when the compactor is built."""

from __future__ import annotations

import json
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from frameworks import require_framework

require_framework("haystack", "haystack")

import pytest  # noqa: E402
from haystack import component  # noqa: E402
from haystack.components.agents import Agent  # noqa: E402
from haystack.components.generators.chat import (  # noqa: E402
    MockChatGenerator,
    OpenAIChatGenerator,
)
from haystack.dataclasses import ChatMessage, ChatRole  # noqa: E402
from haystack.hooks.compaction import CompactionHook  # noqa: E402
from haystack.utils import Secret  # noqa: E402
from haystack_scripted import as_sent, call, returning, say, tokens  # noqa: E402

from ctxoffload import ConfigError, LocalWorkspace, Msg, Summary  # noqa: E402
from ctxoffload.integrations._haystack_summary import HaystackSummaryModel  # noqa: E402
from ctxoffload.integrations.haystack import WorkspaceCompactor, WorkspaceResultStore  # noqa: E402
from helpers import summary_reply  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402

WINDOW = 8_000
READINGS = [f"reading {i} of the export: " + f"gauge {i * 7} nominal, " * 60 for i in range(40)]

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")


class Talker:
    """A `MockChatGenerator` that plays the agent's turns (40 readings, then an answer) and
    answers a summary request (the one call that opens with a system message: the agent has
    no system prompt) with `summary`, or as `failure` says. `asked` holds every summary
    request, `seen` every other call's messages."""

    def __init__(self, mark: str, failure: str | None = None, **options: Any) -> None:
        self.summary = summary_reply(mark)
        self.failure = failure
        self.asked: list[list[ChatMessage]] = []
        self.seen: list[list[ChatMessage]] = []
        self.script = [*(call("fetch", {}, f"call_{i}") for i in range(40)), say("All read.")]
        self._lock = threading.Lock()
        self.generator = MockChatGenerator(response_fn=self._reply, **options)

    def _reply(self, messages: list[ChatMessage]) -> ChatMessage:
        with self._lock:
            if messages and messages[0].role == ChatRole.SYSTEM:
                self.asked.append(list(messages))
                if self.failure == "raise":
                    raise RuntimeError("provider down")
                if self.failure == "hang":
                    time.sleep(5)
                text = "<html>502</html>" if self.failure == "garbage" else json.dumps(self.summary)
                usage = {"prompt_tokens": 900, "completion_tokens": 60}
                return ChatMessage.from_assistant(text, meta={"usage": usage})
            self.seen.append(list(messages))
            chosen = self.script.pop(0)
        # The usage a provider reports, which the CompactionHook sizes the context by (the
        # mock's own is a word count).
        sent = [as_sent(m) for m in messages]
        usage = {"prompt_tokens": tokens(sent), "completion_tokens": tokens([as_sent(chosen)])}
        return ChatMessage.from_assistant(
            chosen.text, tool_calls=chosen.tool_calls, meta={"usage": usage}
        )


def run_agent(agent_model: Talker, folder: Path, **options: Any) -> dict[str, Any]:
    store = WorkspaceResultStore(LocalWorkspace(folder), session_id="long")
    compactor = WorkspaceCompactor(store, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hook = CompactionHook(compactor, context_window=WINDOW)
    agent = Agent(
        chat_generator=agent_model.generator,
        tools=[returning("fetch", list(READINGS)), *store.tools],
        hooks={"before_llm": [hook]},
        max_agent_steps=100,
    )
    out: dict[str, Any] = agent.run([ChatMessage.from_user("Take 40 readings.")])
    return out


def compactions(folder: Path) -> list[dict[str, Any]]:
    path = folder / "sessions" / "long" / "events.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in records if e["kind"] == "compression"]


def written(mark: str, messages: list[ChatMessage]) -> bool:
    text = "\n".join(m.text or "" for m in messages)
    return all(f"{mark} {name}" in text for name in Summary.model_fields)


def test_a_chat_generator_writes_the_summary(tmp_path: Path) -> None:
    streamed: list[Any] = []
    writer = Talker("written", streaming_callback=streamed.append)
    agent_model = Talker("never")
    out = run_agent(agent_model, tmp_path / "ws", summary_model=writer.generator)
    assert out["last_message"].text == "All read."
    assert writer.asked and not agent_model.asked
    assert written("written", agent_model.seen[-1])
    assert compactions(tmp_path / "ws")[0]["summary_source"] == "model"
    # The generator streams to the user's callback; its summary calls never do.
    assert not streamed


def test_the_agents_own_generator_given_writes_the_summary(tmp_path: Path) -> None:
    own = Talker("own")
    run_agent(own, tmp_path / "ws", summary_model=own.generator)
    assert own.asked and written("own", own.seen[-1])


def test_left_out_no_model_writes_it_the_hook_shows_none(tmp_path: Path) -> None:
    own = Talker("never")
    run_agent(own, tmp_path / "ws")
    assert not own.asked
    assert compactions(tmp_path / "ws")[0]["summary_source"] == "extractive"


def test_false_keeps_the_extractive_summary(tmp_path: Path) -> None:
    own = Talker("never")
    run_agent(own, tmp_path / "ws", summary_model=False)
    assert not own.asked
    assert compactions(tmp_path / "ws")[0]["summary_source"] == "extractive"


async def test_an_openai_generator_is_asked_for_the_summarys_json_schema() -> None:
    with OpenAIServer() as server:
        server.add_completion(json.dumps(summary_reply("openai")), usage=(900, 60))
        generator = OpenAIChatGenerator(
            api_key=Secret.from_token("test"), api_base_url=server.base_url, model="gpt-4o-mini"
        )
        reply = await HaystackSummaryModel(generator).generate(
            [Msg(role="system", content="Summarise."), Msg(role="user", content="the talk")],
            response_schema=Summary.model_json_schema(),
        )
    [request] = server.requests
    asked = request["response_format"]
    assert asked["type"] == "json_schema" and asked["json_schema"]["strict"] is True
    assert set(asked["json_schema"]["schema"]["properties"]) == set(Summary.model_fields)
    assert json.loads(reply.message.text) == summary_reply("openai")
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (900, 60)


@component
class Cleaner:
    """A Haystack component that is no chat generator."""

    @component.output_types(text=str)
    def run(self, text: str) -> dict[str, str]:
        return {"text": text.strip()}


@pytest.mark.parametrize(
    "given",
    [42, "gpt-4o-mini", Cleaner(), MockChatGenerator],
    ids=["a number", "a model name", "a component that is no generator", "a generator class"],
)
def test_anything_else_is_refused_when_the_compactor_is_built(
    tmp_path: Path, given: object
) -> None:
    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"), session_id="s")
    with pytest.raises(ConfigError) as refused:
        WorkspaceCompactor(store, summary_model=given)
    said = str(refused.value)
    assert "summary_model=False" in said and "Haystack chat generator" in said


def test_an_object_of_another_framework_is_refused(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"), session_id="s")
    client = openai.AsyncOpenAI(api_key="sk-test-not-used")
    with pytest.raises(ConfigError, match="AsyncOpenAI"):
        WorkspaceCompactor(store, summary_model=client)


@pytest.mark.parametrize("failure", ["raise", "hang", "garbage"])
def test_a_generator_that_fails_leaves_the_extract(tmp_path: Path, failure: str) -> None:
    from ctxoffload import ContextConfig

    writer, agent_model = Talker("x", failure=failure), Talker("never")
    config = ContextConfig(summary_timeout=1.0)
    run_agent(agent_model, tmp_path / "ws", summary_model=writer.generator, config=config)
    assert writer.asked
    assert compactions(tmp_path / "ws")[0]["summary_source"] == "extractive"


def test_two_agents_at_once_share_one_generator(tmp_path: Path) -> None:
    writer = Talker("shared")
    models = [Talker("never"), Talker("never")]
    threads = [
        threading.Thread(
            target=run_agent, args=(m, tmp_path / name), kwargs={"summary_model": writer.generator}
        )
        for m, name in zip(models, "ab", strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for model, name in zip(models, "ab", strict=True):
        assert written("shared", model.seen[-1])
        assert compactions(tmp_path / name)[0]["summary_source"] == "model"


def test_a_name_holding_a_secret_is_refused_without_quoting_it(tmp_path: Path) -> None:
    store = WorkspaceResultStore(LocalWorkspace(tmp_path / "ws"), session_id="s")
    name = "https://ana:sk-live-0123456789abcdef@llm.example.com/v1?api_key=sk-other-987654"
    with pytest.raises(ConfigError) as refused:
        WorkspaceCompactor(store, summary_model=name)
    said = str(refused.value)
    assert "sk-live-0123456789abcdef" not in said and "sk-other-987654" not in said
