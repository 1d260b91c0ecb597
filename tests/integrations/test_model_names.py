"""What each host calls its model (`model_name_of`), read from the objects the hosts hand over,
for the counter of its family."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ctxoffload.integrations._model_name import model_name_of


class _Config:
    """A Strands-like model: its name only in `get_config()`."""

    def __init__(self, config: Any) -> None:
        self._config = config

    def get_config(self) -> Any:
        if isinstance(self._config, Exception):
            raise self._config
        return self._config


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("anthropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"),  # a name as it is
        (" gpt-4o ", "gpt-4o"),
        (SimpleNamespace(model_name="claude-opus-4-1"), "claude-opus-4-1"),  # pydantic-ai
        (SimpleNamespace(model_name=None, model="gpt-4o-mini"), "gpt-4o-mini"),  # ChatAnthropic
        (SimpleNamespace(model_id="us.anthropic.claude-4-v1:0"), "us.anthropic.claude-4-v1:0"),
        (SimpleNamespace(model=SimpleNamespace(model="gpt-4.1")), "gpt-4.1"),  # a wrapper
        (SimpleNamespace(config={"model_id": "claude-3-7-sonnet"}), "claude-3-7-sonnet"),
        (_Config({"model_id": "gpt-5"}), "gpt-5"),  # Strands' get_config()
        (_Config(RuntimeError("no config")), None),  # a getter that fails names nothing
        (_Config(["model_id"]), None),
        (None, None),
        ("", None),
        (object(), None),
        (SimpleNamespace(model_name=42, model=b"gpt-4o"), None),  # no string: no name
    ],
)
def test_each_hosts_model_names_itself(model: Any, name: str | None) -> None:
    assert model_name_of(model) == name


def test_a_model_that_wraps_itself_ends() -> None:
    """A wrapper chain (or one whose `model` is itself) is followed a few steps, never for
    ever."""
    loop = SimpleNamespace()
    loop.model = loop
    assert model_name_of(loop) is None
    deep: Any = SimpleNamespace(model="gpt-4o")
    for _ in range(10):
        deep = SimpleNamespace(model=deep)
    assert model_name_of(deep) is None
