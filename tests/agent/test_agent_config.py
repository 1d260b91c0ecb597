"""Bad configuration fails at construction, with a ConfigError that says what to pass."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Agent,
    ConfigError,
    ContextConfig,
    ContextPipeline,
    CtxOffloadError,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    ToolCallBlock,
    get_token_counter,
)
from ctxoffload.compression import SlidingWindow
from ctxoffload.model import ModelResponse
from helpers import SUMMARY


class SyncModel:
    model_name = "sync"
    context_window = 8000

    def generate(self, messages: Sequence[Msg], **kwargs: Any) -> ModelResponse:
        return ModelResponse(message=Msg(role="assistant", content="hi"))


class NoWindowModel:
    model_name = "no-window"

    async def generate(self, messages: Sequence[Msg], **kwargs: Any) -> ModelResponse:
        return ModelResponse(message=Msg(role="assistant", content="hi"))


class BadWindowModel(NoWindowModel):
    def __init__(self, window: Any) -> None:
        self.context_window = window


class SyncOffloader:
    def offload_context(self, session_id: str, msgs: Sequence[Any]) -> str:
        return "x"

    def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        return "x"

    def offload_data_block(self, block: Any) -> Any:
        return block


class HalfOffloader:
    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> str:
        return "x"

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        return "x"


def ping() -> str:
    """Ping."""
    return "pong"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"model": None}, "model is None: pass a chat model"),
        ({"model": SyncModel()}, "SyncModel.generate is not async"),
        ({"model": object()}, "has no generate method"),
        ({"model": NoWindowModel()}, "ContextConfig(context_window="),
        ({"model": BadWindowModel(0)}, "context_window 0"),
        ({"model": BadWindowModel("big")}, "context_window 'big'"),
        ({"summary_model": SyncModel()}, "summary_model is SyncModel, not a ctxoffload ChatModel"),
        ({"offloader": SyncOffloader()}, "SyncOffloader.offload_context is not async"),
        ({"offloader": HalfOffloader()}, "HalfOffloader has no offload_data_block"),
        ({"tools": [ping, 3]}, "tools[1] is a int"),
        ({"tools": ping}, "tools is a function, not a list"),
        ({"max_steps": 0}, "max_steps 0 is below 1"),
    ],
    ids=[
        "model-none",
        "model-sync",
        "model-no-generate",
        "no-window",
        "zero-window",
        "str-window",
        "summary-sync",
        "offloader-sync",
        "offloader-half",
        "tool-not-callable",
        "tools-not-a-list",
        "max-steps",
    ],
)
def test_bad_configuration_is_refused_at_construction(
    kwargs: dict[str, Any], expected: str
) -> None:
    kwargs.setdefault("model", ScriptedModel(["hi"]))
    with pytest.raises(ConfigError) as caught:
        Agent(**kwargs)
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_max_steps_error_is_still_a_value_error() -> None:
    with pytest.raises(ValueError):
        Agent(model=ScriptedModel(["hi"]), max_steps=0)


async def test_a_model_without_a_window_runs_when_the_config_has_one() -> None:
    agent = Agent(model=NoWindowModel(), context_config=ContextConfig(context_window=8000))
    assert (await agent.reply("hello")).text == "hi"


def test_context_config_construction_raises_config_error_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as caught:
        ContextConfig(trigger_ration=0.8)  # type: ignore[call-arg]
    assert "unknown field 'trigger_ration': did you mean 'trigger_ratio'?" in str(caught.value)
    assert isinstance(caught.value, CtxOffloadError)
    with pytest.raises(ConfigError, match=r"trigger_ratio 0\.95 is above 0\.9"):
        ContextConfig(trigger_ratio=0.95)


def test_context_config_lists_every_problem_one_per_line() -> None:
    with pytest.raises(ConfigError) as caught:
        ContextConfig(trigger_ratio=2, tool_result_limit=0)
    lines = str(caught.value).splitlines()
    assert lines[0] == "ContextConfig(...) is invalid:"
    assert any("trigger_ratio 2" in line for line in lines[1:])
    assert any("tool_result_limit 0" in line for line in lines[1:])


# -- one ScriptedModel for the agent and its summaries -----------------------------------


def fetch(n: int) -> str:
    """Fetch text.

    Args:
        n: which.
    """
    return f"{n} " + "word " * 250


def calls(count: int) -> list[Any]:
    steps: list[Any] = [
        Msg(role="assistant", content=[ToolCallBlock(id=f"c{i}", name="fetch", input={"n": i})])
        for i in range(count)
    ]
    return [*steps, "finished"]


async def test_a_scripted_model_without_summary_model_gets_extractive_summaries(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel(calls(10))
    with caplog.at_level(logging.INFO, logger="ctxoffload"):
        agent = Agent(
            model=model,
            tools=[fetch],
            offloader=LocalWorkspace(tmp_path / "ws"),
            context_config=ContextConfig(context_window=4000, tool_result_limit=300),
            counter=get_token_counter(exact=False),
        )
    assert any("extractive" in r.getMessage() for r in caplog.records)
    reply = await agent.reply("go")
    assert reply.text == "finished"  # the script was not eaten by summary requests
    assert any(step.compressed for step in agent.steps)
    assert model.remaining == 0


class ScriptPlayer:
    """A model of the user's own (no `ScriptedModel`, so it writes the agent's summaries
    unless told not to) that plays a `ScriptedModel`'s script."""

    model_name = "player"
    context_window = 4000

    def __init__(self, script: list[Any]) -> None:
        self.script = ScriptedModel(script)
        self.schemas: list[object] = []

    async def generate(self, messages: Sequence[Msg], **kwargs: Any) -> ModelResponse:
        schema = kwargs.get("response_schema")
        self.schemas.append(schema)
        if schema is not None:  # a summary request: the five fields, not a turn
            return ModelResponse(message=Msg(role="assistant", content=json.dumps(SUMMARY)))
        return await self.script.generate(messages, tools=kwargs.get("tools"))


async def compacting_run(tmp_path: Path, model: Any, **kwargs: Any) -> Agent:
    agent = Agent(
        model=model,
        tools=[fetch],
        offloader=LocalWorkspace(tmp_path / "ws"),
        context_config=ContextConfig(context_window=4000, tool_result_limit=300),
        counter=get_token_counter(exact=False),
        **kwargs,
    )
    assert (await agent.reply("go")).text == "finished"
    assert any(step.compressed for step in agent.steps)
    return agent


async def test_left_out_the_agents_own_model_writes_its_summaries(tmp_path: Path) -> None:
    model = ScriptPlayer(calls(10))
    agent = await compacting_run(tmp_path, model)
    assert any(schema is not None for schema in model.schemas)  # asked for the five fields
    assert agent.compressor.model is model
    assert "scripted task_overview" in " ".join(m.text for m in agent.messages)


async def test_summary_model_false_keeps_the_extract_and_never_asks_the_model(
    tmp_path: Path,
) -> None:
    model = ScriptPlayer(calls(10))
    agent = await compacting_run(tmp_path, model, summary_model=False)
    assert model.schemas == [None] * len(model.schemas)  # no summary request, ever
    assert agent.compressor.model is None
    assert model.script.remaining == 0


@pytest.mark.parametrize(
    "given",
    ["gpt-4o-mini", 42, True, object()],
    ids=["a model's name", "a number", "True", "an object"],
)
def test_a_summary_model_that_is_no_chat_model_is_refused_naming_the_opt_out(
    given: object,
) -> None:
    with pytest.raises(ConfigError, match=r"summary_model=False"):
        Agent(model=ScriptedModel(["hi"]), summary_model=given)  # type: ignore[arg-type]


def test_one_scripted_model_as_both_model_and_summary_model_is_refused() -> None:
    model = ScriptedModel(["hi", SUMMARY])
    with pytest.raises(ConfigError, match="the same ScriptedModel"):
        Agent(model=model, summary_model=model)


def test_context_config_takes_a_config_or_a_pipeline() -> None:
    model = ScriptedModel(["ok"], context_window=10_000)
    shared = ContextConfig(context_window=8_000)
    pipeline = ContextPipeline(pre_llm=[SlidingWindow(max_messages=4)], config=shared)
    agent = Agent(model=model, context_config=pipeline)
    assert agent.context_pipeline is pipeline
    assert agent.context_config is shared  # the settings in effect: the pipeline's
    config = ContextConfig(tool_result_limit=100)
    agent = Agent(model=model, context_config=config)
    assert agent.context_config is config
    assert agent.context_pipeline.post_tool[0].max_tokens == 100  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="context_config is a dict: give a ContextConfig or"):
        Agent(model=model, context_config={"hooks": {}})  # type: ignore[arg-type]


def test_context_management_is_gone() -> None:
    """The spelling deprecated while 0.1.0 was developed is removed before its release: a
    ConfigError, as for any keyword a door does not take, listing what it takes."""
    with pytest.raises(ConfigError, match=r"context_management.*context_config"):
        Agent(model=ScriptedModel(["ok"]), context_management=ContextConfig())  # type: ignore[call-arg]
