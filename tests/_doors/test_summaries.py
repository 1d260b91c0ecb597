"""Who writes a door's summaries (`SummaryWriter`, the door core's one rule): the model
given, in the host's type through the door's adapter or as a ctxoffload `ChatModel`; left
out, the agent's own model; `False`, the extract; anything else refused when the door is
built."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ctxoffload import ConfigError, ScriptedModel
from ctxoffload._doors.summaries import SummaryWriter, is_chat_model


class HostModel:
    """A host's own model type, which only the door's adapter knows."""

    def __init__(self, name: str) -> None:
        self.name = name


class SyncGenerate:
    model_name = "sync"

    def generate(self, messages: Any) -> str:
        return "no"


adapted: list[object] = []


def adapt(model: object) -> ScriptedModel | None:
    if not isinstance(model, HostModel):
        return None
    adapted.append(model)
    return ScriptedModel([], model_name=model.name)


def test_a_host_model_is_adapted_once_when_the_door_is_built() -> None:
    host = HostModel("host-1")
    writer = SummaryWriter(host, adapt=adapt, takes="a Host model")
    model = writer.model()
    assert model is not None and model.model_name == "host-1"
    assert writer.model(HostModel("agent's")) is model  # the one given wins
    assert writer.who() == "summary_model"


def test_left_out_the_agents_own_model_writes_adapted_once_per_object() -> None:
    writer = SummaryWriter(None, adapt=adapt, takes="a Host model")
    agent = HostModel("agent")
    before = len(adapted)
    first = writer.model(agent)
    assert first is not None and first.model_name == "agent"
    assert writer.model(agent) is first
    assert len(adapted) == before + 1
    assert writer.model(None) is None  # the door cannot see it: the extract
    chat = ScriptedModel([])
    assert writer.model(chat) is chat
    assert writer.who(agent) == "the agent's model"
    assert writer.who(None).startswith("extractive")


def test_the_agents_model_adapted_from_many_threads_at_once_is_one_model() -> None:
    writer = SummaryWriter(None, adapt=adapt)
    agent = HostModel("shared")
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(writer.model(agent))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(model) for model in got}) == 1


def test_false_keeps_the_extract_even_beside_an_agent_model() -> None:
    writer = SummaryWriter(False, adapt=adapt)
    assert writer.opted_out
    assert writer.model(HostModel("agent")) is None
    assert writer.who() == "extractive (summary_model=False)"


def test_an_agent_model_the_adapter_cannot_take_means_the_extract_not_a_crash() -> None:
    def refuse(model: object) -> None:
        raise ConfigError("no provider for it")

    assert SummaryWriter(None, adapt=refuse).model(HostModel("x")) is None


@pytest.mark.parametrize(
    "given",
    ["openai:gpt-4o-mini", b"gpt-4o", 42, object(), SyncGenerate(), True],
    ids=["a model's name", "bytes", "a number", "an object", "a sync generate", "True"],
)
def test_anything_else_is_refused_when_the_door_is_built_naming_what_it_takes(
    given: object,
) -> None:
    with pytest.raises(ConfigError) as refused:
        SummaryWriter(given, adapt=adapt, takes="a Host model")
    said = str(refused.value)
    assert "summary_model=False" in said
    if given is not True:
        assert "a Host model" in said and "ctxoffload ChatModel" in said


def test_a_chat_model_is_one_and_a_name_or_a_sync_model_is_not() -> None:
    assert is_chat_model(ScriptedModel([]))
    assert not is_chat_model("gpt-4o") and not is_chat_model(SyncGenerate())


def test_a_model_made_per_request_is_not_kept_for_ever() -> None:
    from ctxoffload._doors.summaries import ADAPTED_KEPT

    writer = SummaryWriter(None, adapt=adapt)
    models = [HostModel(f"m{i}") for i in range(ADAPTED_KEPT * 3)]
    for model in models:
        assert writer.model(model) is not None
    assert len(writer._adapted) == ADAPTED_KEPT
    newest = writer.model(models[-1])
    assert newest is writer.model(models[-1])  # the newest are still known
