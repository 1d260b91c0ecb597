"""A door's summary model is checked when the door is built (`checked_summary_model`): a
string or a host's own model object was accepted, then failed at the first summary, deep in
a run (pydantic-ai's "openai:gpt-4o-mini": `AttributeError: 'str' object has no attribute
'context_window'`; its FunctionModel: a TypeError on the second turn)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxoffload import ConfigError, ScriptedModel
from ctxoffload._doors.checks import checked_summary_model


class SyncGenerate:
    """A model whose generate is not a coroutine function."""

    model_name = "sync"

    def generate(self, messages: Any) -> str:
        return "no"


@pytest.mark.parametrize(
    "model",
    ["openai:gpt-4o-mini", b"gpt-4o", 42, object(), SyncGenerate()],
    ids=["a model's name", "bytes", "a number", "an object", "a sync generate"],
)
def test_anything_but_a_chat_model_is_refused_saying_what_to_pass(model: object) -> None:
    with pytest.raises(ConfigError, match="not a ctxoffload ChatModel") as refused:
        checked_summary_model(model)
    assert "None for an extractive summary" in str(refused.value)


def test_a_chat_model_and_none_pass_as_they_are() -> None:
    model = ScriptedModel([])
    assert checked_summary_model(model) is model
    assert checked_summary_model(None) is None
