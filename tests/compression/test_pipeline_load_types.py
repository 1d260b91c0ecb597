"""A template's every field, given a value of the wrong type (or a hostile one), is refused
with a `ConfigError` that names its JSON path; nothing else escapes the loader."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxoffload import ConfigError, ContextPipeline
from helpers import examples

# Each manager type: the hook it runs at and the settings it needs to load at all.
KINDS: dict[str, tuple[str, dict[str, Any]]] = {
    "ToolOutputOffload": ("post_tool", {}),
    "ToolOutputTruncate": ("post_tool", {"max_tokens": 100}),
    "SlidingWindow": ("pre_llm", {}),
    "Summarization": ("pre_llm", {}),
    "ImageLimit": ("pre_llm", {}),
    "ClearToolUses": ("pre_llm", {}),
    "ClearThinking": ("pre_llm", {}),
    "Null": ("pre_llm", {}),
}


def settings_of(kind: str) -> list[str]:
    """The settings a manager type takes, as the loader itself lists them (so a setting added
    to the loader is tested here without this file changing)."""
    hook, _ = KINDS[kind]
    with pytest.raises(ConfigError) as raised:
        ContextPipeline.from_dict({"hooks": {hook: [{"type": kind, "config": {"zz": 1}}]}})
    listed = re.search(r"it takes: (.*)$", str(raised.value))
    assert listed, raised.value
    return listed.group(1).split(", ")


FIELDS = [(kind, name) for kind in KINDS for name in settings_of(kind)]

DEEP: Any = []
for _ in range(100_000):
    DEEP = [DEEP]

# Values of every JSON type and the hostile ones: for each field, those that are not of its
# type (a bool is not a number; a string is never a valid choice, count or ratio here).
WRONG = [
    ["head", 7],
    {"ls": True},
    "tail",
    True,
    1.5,
    -1,
    10**5000,
    float("inf"),
    float("nan"),
    DEEP,
]

# Which of WRONG a field accepts (its own type, a valid value).
VALID_FOR: dict[str, list[Any]] = {"per_turn": [True], "clear_tool_inputs": [True]}


def template(kind: str, config: dict[str, Any]) -> dict[str, Any]:
    hook, needed = KINDS[kind]
    return {"hooks": {hook: [{"type": kind, "config": {**needed, **config}}]}}


def test_every_manager_type_is_covered() -> None:
    with pytest.raises(ConfigError) as raised:
        ContextPipeline.from_dict({"hooks": {"pre_llm": [{"type": "?"}]}})
    names = str(raised.value).split("the types are ")[1].split(", ")
    aliases = {
        "ToolsOutputTruncateManager",
        "SlidingWindowManager",
        "SummarizationManager",
        "clear_tool_uses_20250919",
        "clear_thinking_20251015",
    }
    assert set(names) - aliases == set(KINDS)


@pytest.mark.parametrize(("kind", "field"), FIELDS)
@pytest.mark.parametrize("wrong", range(len(WRONG)))
def test_a_wrong_typed_value_is_refused_naming_its_json_path(
    kind: str, field: str, wrong: int
) -> None:
    value = WRONG[wrong]
    if any(value is ok for ok in VALID_FOR.get(field, [])):
        return
    hook = KINDS[kind][0]
    with pytest.raises(ConfigError) as raised:
        ContextPipeline.from_dict(template(kind, {field: value}))
    message = str(raised.value)
    assert f"hooks.{hook}[0].config.{field}" in message, message
    assert len(message) < 400, message


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("wrong", range(len(WRONG)))
def test_a_wrong_typed_activation_rule_is_refused_naming_its_json_path(
    kind: str, wrong: int
) -> None:
    hook = KINDS[kind][0]
    for rule in ("message_count_exceed", "tokens_exceed", "ratio_exceed"):
        value = WRONG[wrong]
        with pytest.raises(ConfigError) as raised:
            ContextPipeline.from_dict(template(kind, {"activation": {rule: value}}))
        message = str(raised.value)
        assert f"hooks.{hook}[0].config.activation.{rule}" in message, message
        assert len(message) < 400, message


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"hooks": {"pre_llm": [{"type": ["SlidingWindow"]}]}}, "hooks.pre_llm[0].type"),
        ({"hooks": {"pre_llm": [{"type": {"a": 1}}]}}, "hooks.pre_llm[0].type"),
        ({"hooks": {"pre_llm": [{"type": "Null", "config": [1]}]}}, "hooks.pre_llm[0].config"),
        ({"hooks": {"pre_llm": [{"type": "Null"}, 5]}}, "hooks.pre_llm[1]"),
        ({"hooks": {"pre_llm": 5}}, "hooks.pre_llm"),
        ({"hooks": [1]}, "hooks"),
        ({"name": ["x"], "hooks": {"pre_llm": []}}, "name"),
        ({"description": 10**5000, "hooks": {"pre_llm": []}}, "description"),
        ({"hooks": {"pre_llm": [{"type": "Null", 7: 1}]}}, "hooks.pre_llm[0]"),
        ({"hooks": {"pre_llm": DEEP}}, "hooks.pre_llm"),
        ({"hooks": {"pre_llm": [{"type": "Null", "config": {"activation": DEEP}}]}}, "hooks"),
    ],
)
def test_a_wrong_shape_anywhere_is_refused_naming_its_json_path(data: Any, path: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ContextPipeline.from_dict(data)
    message = str(raised.value)
    assert f"context pipeline: {path}" in message, message
    assert len(message) < 400, message


def test_a_tool_list_must_be_a_list_of_names() -> None:
    for value in ({"ls": True}, "ls", [1], ["ls", None], 5):
        with pytest.raises(ConfigError, match=r"config\.exclude_tools: .*list of tool names"):
            ContextPipeline.from_dict(template("ToolOutputOffload", {"exclude_tools": value}))
    loaded = ContextPipeline.from_dict(template("ToolOutputOffload", {"exclude_tools": ["ls"]}))
    assert loaded.post_tool[0].exclude_tools == frozenset({"ls"})  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"hooks": {"pre_llm": [{"type": "SlidingWindow", "config": {"max_messages": '
            + "9" * 5000
            + "}}]}}",
            "hooks.pre_llm[0].config.max_messages: a 5000-digit number",
        ),
        ("[" * 100_000 + "]" * 100_000, "nested more than"),
        ('{"hooks": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested more than"),
        ('{"hooks": ' + '{"a": ' * 5_000 + "1" + "}" * 5_001, "nested more than"),
    ],
)
def test_a_hostile_template_file_is_a_config_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        ContextPipeline.from_json_file(path)
    assert message in str(raised.value)
    assert str(path) in str(raised.value)
    assert len(str(raised.value)) < 400 + len(str(path))


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from([10**100, -(10**100)]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@pytest.mark.slow
@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(kind=st.sampled_from(list(KINDS)), data=st.data())
def test_any_json_value_in_any_field_loads_or_names_its_path(
    kind: str, data: st.DataObject
) -> None:
    field = data.draw(st.sampled_from([*settings_of(kind), "activation"]))
    value = data.draw(JSON)
    try:
        ContextPipeline.from_dict(template(kind, {field: value}))
    except ConfigError as exc:
        assert f"config.{field}" in str(exc), exc
        assert len(str(exc)) < 400, exc
