"""ContextConfig: defaults, validation with actionable messages, loaders, window helpers."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pydantic
import pytest

from ctxoffload import ConfigError, ContextConfig, Summary
from ctxoffload.compression._config import SUMMARY_EXTRA_PLACEHOLDERS
from ctxoffload.compression._summary_model import SUMMARY_FIELDS


def _placeholders(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}


def test_defaults_match_the_design() -> None:
    config = ContextConfig()
    assert (config.trigger_ratio, config.reserve_ratio) == (0.8, 0.1)
    assert config.tool_result_limit == 3000
    assert config.context_window is None
    assert config.summary_max_retries == 2
    assert config.artifact_trail_limit == 20
    assert config.summary_schema == Summary.model_json_schema()


def test_default_template_uses_every_summary_field_and_names_the_context_file() -> None:
    used = _placeholders(ContextConfig().summary_template)
    assert set(SUMMARY_FIELDS) <= used
    assert {"context_path", "line_span", "artifacts"} <= used
    assert used <= set(SUMMARY_FIELDS) | set(SUMMARY_EXTRA_PLACEHOLDERS)


def test_default_template_renders() -> None:
    values = {name: f"<{name}>" for name in (*SUMMARY_FIELDS, *SUMMARY_EXTRA_PLACEHOLDERS)}
    rendered = ContextConfig().summary_template.format(**values)
    assert all(value in rendered for value in values.values())


def test_default_prompt_asks_for_the_five_fields_and_forbids_invention() -> None:
    prompt = ContextConfig().compression_prompt
    assert all(name in prompt for name in SUMMARY_FIELDS)
    assert "invent" in prompt
    assert "file paths" in prompt


def test_summary_schema_requires_the_five_fields_and_nothing_else() -> None:
    schema = Summary.model_json_schema()
    assert schema["type"] == "object"
    assert schema["required"] == list(SUMMARY_FIELDS)
    assert schema["additionalProperties"] is False
    assert all(schema["properties"][name]["description"] for name in SUMMARY_FIELDS)


def test_summary_parses_a_reply_with_an_extra_key() -> None:
    reply = {name: "x" for name in SUMMARY_FIELDS} | {"confidence": "high"}
    assert Summary.model_validate(reply).next_steps == "x"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"trigger_ratio": 0.95}, "trigger_ratio 0.95 is above 0.9"),
        ({"trigger_ratio": 0}, "trigger_ratio 0 is not above 0"),
        ({"trigger_ratio": float("nan")}, "trigger_ratio nan is not above 0"),
        ({"reserve_ratio": 0}, "reserve_ratio 0 is not in (0, 1)"),
        ({"reserve_ratio": -0.1}, "reserve_ratio -0.1 is not in (0, 1)"),
        ({"trigger_ratio": 0.5, "reserve_ratio": 0.5}, "reserve_ratio 0.5 is not below"),
        ({"reserve_ratio": 0.85}, "reserve_ratio 0.85 is not below trigger_ratio 0.8"),
        ({"tool_result_limit": 0}, "tool_result_limit 0 is below 1"),
        ({"context_window": 0}, "context_window 0 is below 1"),
        ({"summary_max_retries": -1}, "summary_max_retries -1 is negative"),
        ({"artifact_trail_limit": -5}, "artifact_trail_limit -5 is negative"),
        ({"compression_prompt": "  "}, "compression_prompt is empty"),
        ({"summary_template": "{task_overview} {secret}"}, "placeholder {secret} is unknown"),
        ({"summary_template": "{}"}, "placeholder {} is unknown"),
        ({"summary_template": "{task_overview.upper}"}, "{task_overview.upper} is unknown"),
        ({"summary_template": "a { b"}, "not a valid format string"),
        ({"summary_schema": {"type": "array"}}, "summary_schema has type 'array'"),
        ({"trigger_ration": 0.8}, "unknown field 'trigger_ration': did you mean 'trigger_ratio'"),
        ({"tool_result_limit": "lots"}, "tool_result_limit 'lots'"),
    ],
)
def test_impossible_values_are_rejected_with_the_value_and_a_fix(
    values: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        ContextConfig.from_dict(values)
    assert expected in str(info.value)


def test_direct_construction_raises_config_error() -> None:
    with pytest.raises(ConfigError, match=r"trigger_ratio 0\.95 is above 0\.9"):
        ContextConfig(trigger_ratio=0.95)
    assert issubclass(ConfigError, ValueError)


def test_config_error_lists_every_problem() -> None:
    with pytest.raises(ConfigError) as info:
        ContextConfig.from_dict({"trigger_ratio": 2, "tool_result_limit": 0})
    message = str(info.value)
    assert "trigger_ratio 2" in message
    assert "tool_result_limit 0" in message


def test_valid_custom_values_are_kept() -> None:
    config = ContextConfig.from_dict(
        {
            "trigger_ratio": 0.9,
            "reserve_ratio": 0.3,
            "tool_result_limit": 1,
            "context_window": 32_000,
            "summary_template": "{{literal}} {next_steps} from {context_path}",
            "summary_max_retries": 0,
            "artifact_trail_limit": 0,
        }
    )
    assert config.trigger_ratio == 0.9
    assert config.summary_template.format(next_steps="n", context_path="p") == "{literal} n from p"


def test_config_is_frozen() -> None:
    config = ContextConfig()
    with pytest.raises(pydantic.ValidationError):
        config.reserve_ratio = 0.85  # type: ignore[misc]
    assert config.reserve_ratio == 0.1


def test_from_dict_rejects_a_non_mapping() -> None:
    with pytest.raises(ConfigError, match="is a list, not a mapping"):
        ContextConfig.from_dict([("trigger_ratio", 0.8)])  # type: ignore[arg-type]


def test_from_json_file_reads_a_config(tmp_path: Path) -> None:
    path = tmp_path / "context.json"
    path.write_text(json.dumps({"trigger_ratio": 0.7, "context_window": 200_000}))
    config = ContextConfig.from_json_file(path)
    assert (config.trigger_ratio, config.context_window) == (0.7, 200_000)


def test_from_json_file_names_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError, match=r"nope\.json' does not exist"):
        ContextConfig.from_json_file(missing)


def test_from_json_file_reports_where_the_json_is_broken(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "trigger_ratio": 0.8,\n}\n')
    with pytest.raises(ConfigError, match=r"is not valid JSON: .* line 3 column 1"):
        ContextConfig.from_json_file(path)


def test_from_json_file_reports_bad_values_with_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"trigger_ratio": 0.95}))
    with pytest.raises(ConfigError) as info:
        ContextConfig.from_json_file(path)
    assert "bad.json" in str(info.value)
    assert "trigger_ratio 0.95 is above 0.9" in str(info.value)


def test_from_json_file_rejects_a_top_level_array(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text("[0.8]")
    with pytest.raises(ConfigError, match=r"list\.json' is a list, not a mapping"):
        ContextConfig.from_json_file(path)


def test_window_prefers_the_override_then_the_model() -> None:
    assert ContextConfig(context_window=8000).window(128_000) == 8000
    assert ContextConfig().window(128_000) == 128_000


@pytest.mark.parametrize("model_window", [None, 0, -1])
def test_window_without_a_usable_value_is_a_config_error(model_window: int | None) -> None:
    with pytest.raises(ConfigError, match=r"ContextConfig\(context_window=\.\.\.\)"):
        ContextConfig().window(model_window)


def test_trigger_and_reserve_tokens_are_fractions_of_the_window() -> None:
    config = ContextConfig(trigger_ratio=0.8, reserve_ratio=0.1)
    assert config.trigger_tokens(128_000) == 102_400
    assert config.reserve_tokens(128_000) == 12_800
    assert config.trigger_tokens(1001) == 800


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"context_window": ' + "9" * 5000 + "}", "context_window a 5000-digit number"),
        ('{"a": ' * 5000 + "1" + "}" * 5000, "nested more than 100 levels deep"),
        ("[" * 100_000 + "]" * 100_000, "nested more than 100 levels deep"),
    ],
)
def test_a_hostile_config_file_is_a_config_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        ContextConfig.from_json_file(path)
    assert message in str(raised.value)
    assert len(str(raised.value)) < 300 + len(str(path))


# -- a window that cannot hold what a compaction leaves --------------------------------------


@pytest.mark.parametrize("window", [1, 2, 100, 300, 378])
def test_a_window_that_cannot_hold_a_compaction_is_refused_with_the_least_that_can(
    window: int,
) -> None:
    with pytest.raises(ConfigError) as refused:
        ContextConfig(context_window=window)
    said = str(refused.value)
    assert f"context_window {window} cannot hold what a compaction leaves" in said
    assert "303 tokens" in said and "at least 379 tokens" in said
    # The least window it names is accepted, and so is any above it.
    assert ContextConfig(context_window=379).compaction_floor(379) <= 0.8 * 379


def test_a_smaller_preview_or_template_fits_a_smaller_window() -> None:
    # 300 tokens with 50-token previews: what a compaction leaves fits under the trigger.
    ContextConfig(context_window=300, tool_result_limit=50)
    short = "Earlier: {context_path} {artifacts}"
    ContextConfig(context_window=100, tool_result_limit=50, summary_template=short)
    with pytest.raises(ConfigError, match="context_window 60 cannot hold"):
        ContextConfig(context_window=60, tool_result_limit=50)


def test_from_dict_refuses_a_window_too_small_as_the_constructor_does() -> None:
    with pytest.raises(
        ConfigError, match=r"(?s)config small\.json is invalid:.*context_window 10 "
    ):
        ContextConfig.from_dict({"context_window": 10}, source="config small.json")


def test_a_window_known_only_later_is_checked_by_check_window() -> None:
    config = ContextConfig(tool_result_limit=500)
    config.check_window(128_000)
    with pytest.raises(ConfigError, match="the context window 250 cannot hold"):
        config.check_window(250)


@pytest.mark.parametrize("value", ["warn", "refuse"])
def test_over_window_is_warn_or_refuse(value: str) -> None:
    assert ContextConfig(over_window=value).over_window == value  # type: ignore[arg-type]
    assert ContextConfig().over_window == "warn"
    with pytest.raises(ConfigError, match="over_window"):
        ContextConfig(over_window="raise")  # type: ignore[arg-type]
