"""Who writes the LangChain door's summaries, under a real `create_agent`, offline: a LangChain
chat model given as `summary_model` (asked through LangChain's structured output), the
request's own model when none is given, the extract with `summary_model=False`, and anything
else refused when the middleware is built."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

require_framework("langchain", "langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.language_models.fake import FakeListLLM  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tracers.context import collect_runs  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from langchain_scripted import CONFIG, answers, converse, scripted, thread  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from pydantic import Field  # noqa: E402

from ctxoffload import ConfigError, LocalWorkspace, Msg, Summary  # noqa: E402
from ctxoffload.integrations._langchain_summary import LangChainSummaryModel  # noqa: E402
from ctxoffload.integrations.langchain import ContextOffloadMiddleware  # noqa: E402
from helpers import summary_reply  # noqa: E402


class SummarizingChatModel(BaseChatModel):
    """A chat model with tool binding, as a provider's is: asked with the summary schema as
    its one tool (LangChain's structured output), it calls that tool with `summary`; else it
    answers the agent's turns in order. `asked` holds the tools and tool_choice of every
    summary call, `seen` the messages of every other call."""

    replies: list[str] = Field(default_factory=list)
    summary: dict[str, str] = Field(default_factory=dict)
    asked: list[dict[str, Any]] = Field(default_factory=list)
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "summarizing-fake"

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        schemas = [convert_to_openai_tool(tool) for tool in tools]
        return self.bind(tools=schemas, tool_choice=tool_choice, **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        tools = kw.get("tools") or []
        if any(tool["function"]["name"] == "Summary" for tool in tools):
            self.asked.append({"tools": tools, "tool_choice": kw.get("tool_choice")})
            call = {"name": "Summary", "args": self.summary, "id": "s1", "type": "tool_call"}
            usage = {"input_tokens": 900, "output_tokens": 60, "total_tokens": 960}
            reply = AIMessage(content="", tool_calls=[call], usage_metadata=usage)  # type: ignore[arg-type]
        else:
            self.seen.append(list(messages))
            reply = AIMessage(content=self.replies[(len(self.seen) - 1) % len(self.replies)])
        return ChatResult(generations=[ChatGeneration(message=reply)])


class JsonModeChatModel(BaseChatModel):
    """A chat model whose structured output is a JSON mode, as OpenAI's `json_schema` method
    is: the schema is bound as `response_format` and the reply is the object as text."""

    summary: dict[str, str] = Field(default_factory=dict)
    formats: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "json-mode-fake"

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, method: str = "json_schema", **kw: Any
    ) -> Any:
        from langchain_core.output_parsers import JsonOutputParser
        from langchain_core.runnables import RunnableMap, RunnablePassthrough

        name = schema.get("title", "Summary")
        bound = self.bind(
            response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
        )
        parser = JsonOutputParser()
        if not include_raw:
            return bound | parser
        parsed = RunnablePassthrough.assign(parsed=lambda given: parser.invoke(given["raw"]))
        return RunnableMap(raw=bound) | parsed

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.formats.append(kw["response_format"])
        reply = AIMessage(content=json.dumps(self.summary))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def summarizing(mark: str) -> SummarizingChatModel:
    return SummarizingChatModel(replies=answers(40), summary=summary_reply(mark))


def compactions(folder: Path, session: str) -> list[dict[str, Any]]:
    path = folder / "sessions" / session / "events.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in records if e["kind"] == "compression"]


def agent_with(folder: Path, model: Any, **options: Any) -> Any:
    offload = ContextOffloadMiddleware(LocalWorkspace(folder), config=CONFIG, **options)
    return create_agent(model, tools=[], middleware=[offload], checkpointer=InMemorySaver())


def sent_text(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages)


async def test_a_langchain_model_writes_the_summary_through_structured_output(
    tmp_path: Path,
) -> None:
    writer = summarizing("written")
    model = scripted(*answers(20))
    agent = agent_with(tmp_path / "ws", model, summary_model=writer)
    streamed: list[Any] = []
    for turn in range(20):
        question = HumanMessage(f"Question {turn}: " + "what happened next? " * 16)
        async for chunk, _ in agent.astream(
            {"messages": [question]}, thread("t"), stream_mode="messages"
        ):
            streamed.append(chunk)
    assert writer.asked, "the summary model was never asked"
    [tool] = writer.asked[0]["tools"]
    assert tool["function"]["name"] == "Summary"
    assert set(tool["function"]["parameters"]["properties"]) == set(Summary.model_fields)
    assert writer.asked[0]["tool_choice"] in ("any", "required", "Summary")
    assert not writer.seen  # asked for the summary only
    last = sent_text(model.seen[-1])
    assert all(f"written {name}" in last for name in Summary.model_fields)
    [record, *_] = compactions(tmp_path / "ws", "t")
    assert record["summary_source"] == "model"
    # Its call is internal: none of its output streams (the summary in state does, once,
    # marked as LangChain marks its own summaries).
    assert not any(getattr(c, "tool_calls", None) for c in streamed)


def test_left_out_the_requests_own_model_writes_the_summary(tmp_path: Path) -> None:
    model = summarizing("own")
    agent = agent_with(tmp_path / "ws", model)
    converse(agent, range(20), "t")
    assert model.asked, "the agent's model never wrote a summary"
    assert all(f"own {name}" in sent_text(model.seen[-1]) for name in Summary.model_fields)
    assert compactions(tmp_path / "ws", "t")[0]["summary_source"] == "model"


def test_false_keeps_the_extractive_summary(tmp_path: Path) -> None:
    model = summarizing("never")
    agent = agent_with(tmp_path / "ws", model, summary_model=False)
    converse(agent, range(20), "t")
    assert not model.asked
    assert compactions(tmp_path / "ws", "t")[0]["summary_source"] == "extractive"


def test_a_model_without_structured_output_answers_json_that_the_parser_reads(
    tmp_path: Path,
) -> None:
    # FakeListChatModel has no bind_tools: it is asked with JSON instructions, and answers
    # with the object in a fenced block, as chat models do.
    reply = "```json\n" + json.dumps(summary_reply("plain")) + "\n```"
    writer = FakeListChatModel(responses=[reply] * 10)
    model = scripted(*answers(20))
    converse(agent_with(tmp_path / "ws", model, summary_model=writer), range(20), "t")
    assert all(f"plain {name}" in sent_text(model.seen[-1]) for name in Summary.model_fields)


async def test_the_summary_calls_tokens_are_in_its_reply() -> None:
    adapted = LangChainSummaryModel(summarizing("used"))
    reply = await adapted.generate(
        [Msg(role="user", content="summarise")], response_schema=Summary.model_json_schema()
    )
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (900, 60)
    assert json.loads(reply.message.text) == summary_reply("used")


async def test_a_summary_is_one_call_of_the_bound_model_read_by_ctxoffloads_parser() -> None:
    # LangChain's `include_raw` chain around the bound model (a parallel map, parsers, a
    # fallback) cost 4-6 ms of CPU a summary, ten times the model's own call: the bound
    # model is called alone, one LangChain run, and its tool call read as the chain read it.
    writer = summarizing("bound")
    adapted = LangChainSummaryModel(writer)
    with collect_runs() as collected:
        reply = await adapted.generate(
            [Msg(role="user", content="summarise")], response_schema=Summary.model_json_schema()
        )
    assert [run.run_type for run in collected.traced_runs] == ["llm"]
    assert json.loads(reply.message.text) == summary_reply("bound")
    assert writer.asked[0]["tool_choice"] in ("any", "required", "Summary")


async def test_a_json_mode_reply_of_the_bound_model_is_read_from_its_text() -> None:
    # A provider's JSON mode (OpenAI's `json_schema`) answers in text, with no tool call.
    writer = JsonModeChatModel(summary=summary_reply("json"))
    reply = await LangChainSummaryModel(writer).generate(
        [Msg(role="user", content="summarise")], response_schema=Summary.model_json_schema()
    )
    assert json.loads(reply.message.text) == summary_reply("json")
    assert writer.formats and writer.formats[0]["json_schema"]["name"] == "Summary"


class ThreadNoting(SummarizingChatModel):
    """`SummarizingChatModel` noting the thread each summary was generated on; with
    `native`, it has async generation of its own, as a provider's client has."""

    threads: list[int] = Field(default_factory=list)
    names: list[str] = Field(default_factory=list)
    native: bool = False

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if kw.get("tools"):
            self.threads.append(threading.get_ident())
            self.names.append(threading.current_thread().name)
        return super()._generate(messages, stop, run_manager, **kw)


class NativeAsync(ThreadNoting):
    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.native = True
        return self._generate(messages, stop, None, **kw)


def test_a_model_without_async_of_its_own_writes_on_the_agents_thread(tmp_path: Path) -> None:
    # Its `ainvoke` would run the same `_generate` in a thread of the loop's executor, the
    # sync agent waiting for it: called with `invoke` instead, where the agent waits anyway.
    writer = ThreadNoting(replies=answers(40), summary=summary_reply("here"))
    converse(
        agent_with(tmp_path / "ws", scripted(*answers(20)), summary_model=writer), range(20), "t"
    )
    assert writer.threads and set(writer.threads) == {threading.get_ident()}
    assert compactions(tmp_path / "ws", "t")[0]["summary_source"] == "model"


def test_a_background_summary_by_such_a_model_leaves_the_projectors_loop_free(
    tmp_path: Path,
) -> None:
    # With background compaction the summary runs on the projector's loop thread while the
    # agent's next calls need that loop: the model's call goes to a worker thread there.
    writer = ThreadNoting(replies=answers(40), summary=summary_reply("behind"))
    config = CONFIG.model_copy(update={"background_compaction": True})
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=config, summary_model=writer
    )
    agent = create_agent(
        scripted(*answers(20)), tools=[], middleware=[offload], checkpointer=InMemorySaver()
    )
    converse(agent, range(20), "t")
    assert writer.names, "no summary was written"
    assert threading.get_ident() not in writer.threads
    assert not any(name.startswith("ctxoffload-projector") for name in writer.names)


def test_a_model_with_async_of_its_own_is_awaited(tmp_path: Path) -> None:
    writer = NativeAsync(replies=answers(40), summary=summary_reply("awaited"))
    converse(
        agent_with(tmp_path / "ws", scripted(*answers(20)), summary_model=writer), range(20), "t"
    )
    assert writer.threads and writer.native
    assert compactions(tmp_path / "ws", "t")[0]["summary_source"] == "model"


@pytest.mark.parametrize(
    "given",
    [42, FakeListLLM(responses=["x"]), "openai:gpt-4o-mini", "no-such-model-anywhere"],
    ids=["a number", "a text LLM, no chat model", "a provider not installed", "unknown name"],
)
def test_anything_else_is_refused_when_the_middleware_is_built(
    tmp_path: Path, given: object
) -> None:
    with pytest.raises(ConfigError) as refused:
        ContextOffloadMiddleware(LocalWorkspace(tmp_path / "ws"), summary_model=given)
    assert "summary_model=False" in str(refused.value)
    assert "init_chat_model" in str(refused.value)


def test_an_object_of_another_framework_is_refused(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    client = openai.AsyncOpenAI(api_key="sk-test-not-used")
    with pytest.raises(ConfigError, match="AsyncOpenAI"):
        ContextOffloadMiddleware(LocalWorkspace(tmp_path / "ws"), summary_model=client)


def test_a_name_holding_a_secret_is_refused_without_quoting_it(tmp_path: Path) -> None:
    name = "https://ana:sk-live-0123456789abcdef@llm.example.com/v1?api_key=sk-other-987654"
    with pytest.raises(ConfigError) as refused:
        ContextOffloadMiddleware(LocalWorkspace(tmp_path / "ws"), summary_model=name)
    said = str(refused.value)
    assert "sk-live-0123456789abcdef" not in said and "sk-other-987654" not in said


class Failing(SummarizingChatModel):
    """A summary model whose every call raises, or never returns (`hang`)."""

    hang: bool = False

    async def _agenerate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        tools = kw.get("tools") or []
        if any(tool["function"]["name"] == "Summary" for tool in tools):
            self.asked.append({"tools": tools})
            if self.hang:
                await asyncio.sleep(3600)
            raise RuntimeError("provider down")
        return self._generate(messages, stop, run_manager, **kw)


@pytest.mark.parametrize("hang", [False, True], ids=["raises", "hangs"])
async def test_a_summary_model_that_fails_or_hangs_leaves_the_extract(
    tmp_path: Path, hang: bool
) -> None:
    config = CONFIG.model_copy(update={"summary_timeout": 1.0})
    writer = Failing(replies=["-"], hang=hang)
    model = scripted(*answers(20))
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=config, summary_model=writer
    )
    agent = create_agent(model, tools=[], middleware=[offload], checkpointer=InMemorySaver())
    for turn in range(20):
        question = HumanMessage(f"Question {turn}: " + "what happened next? " * 16)
        await agent.ainvoke({"messages": [question]}, thread("t"))
    assert writer.asked
    assert compactions(tmp_path / "ws", "t")[0]["summary_source"] == "extractive"


async def test_a_reply_that_is_no_summary_is_retried_then_extracted(tmp_path: Path) -> None:
    writer = FakeListChatModel(responses=["I'd rather not.", "<html>502</html>", "{"] * 20)
    model = scripted(*answers(20))
    agent = agent_with(tmp_path / "ws", model, summary_model=writer)
    for turn in range(20):
        await agent.ainvoke(
            {"messages": [HumanMessage(f"Q{turn} " + "what next? " * 30)]}, thread("t")
        )
    assert compactions(tmp_path / "ws", "t")[0]["summary_source"] == "extractive"


async def test_two_threads_at_once_share_one_summary_model(tmp_path: Path) -> None:
    writer = summarizing("shared")
    offload = ContextOffloadMiddleware(
        LocalWorkspace(tmp_path / "ws"), config=CONFIG, summary_model=writer
    )
    models = [scripted(*answers(20)), scripted(*answers(20))]
    agents = [
        create_agent(model, tools=[], middleware=[offload], checkpointer=InMemorySaver())
        for model in models
    ]

    async def talk(agent: Any, name: str) -> None:
        for turn in range(20):
            question = HumanMessage(f"{name} {turn}: " + "what happened next? " * 16)
            await agent.ainvoke({"messages": [question]}, thread(name))

    await asyncio.gather(talk(agents[0], "a"), talk(agents[1], "b"))
    for model, name in zip(models, "ab", strict=True):
        assert all(f"shared {field}" in sent_text(model.seen[-1]) for field in Summary.model_fields)
        assert compactions(tmp_path / "ws", name)[0]["summary_source"] == "model"
