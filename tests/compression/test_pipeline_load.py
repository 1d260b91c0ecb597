"""Loading a ContextPipeline from JSON templates: the documented ones, OpenSearch's, mistakes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ctxoffload import (
    Activation,
    ConfigError,
    ContextConfig,
    ContextPipeline,
    ScriptedModel,
)
from ctxoffload.compression import (
    ImageLimit,
    Null,
    SlidingWindow,
    Summarization,
    ToolOutputOffload,
    ToolOutputTruncate,
)

TEMPLATES = Path(__file__).with_name("pipeline_templates.json")


def documented_templates() -> list[dict[str, Any]]:
    """The templates of the pipelines guide (docs/guides/pipelines.md), as test data."""
    templates: list[dict[str, Any]] = json.loads(TEMPLATES.read_text(encoding="utf-8"))
    return templates


def test_the_documented_templates_are_three_use_cases_and_an_opensearch_one() -> None:
    names = [t["name"] for t in documented_templates()]
    assert names == [
        "long-conversations",
        "tool-heavy",
        "tool-heavy-summarised",
        "token-aware-truncation",
    ]


@pytest.mark.parametrize("template", documented_templates(), ids=lambda t: t["name"])
def test_every_documented_template_loads(template: dict[str, Any]) -> None:
    pipeline = ContextPipeline.from_dict(template, models={"small": ScriptedModel()})
    assert pipeline.name == template["name"]
    hooks = {k.lower(): v for k, v in template["hooks"].items()}
    assert len(pipeline.pre_llm) == len(hooks.get("pre_llm", []))
    assert len(pipeline.post_tool) == len(hooks.get("post_tool", []))


def test_an_opensearch_template_loads_unchanged_with_its_meaning() -> None:
    template = documented_templates()[-1]
    pipeline = ContextPipeline.from_dict(template)
    (truncate,) = pipeline.post_tool
    (window,) = pipeline.pre_llm
    assert isinstance(truncate, ToolOutputTruncate)
    assert truncate.max_output_length == 100_000
    assert truncate.activation.is_always  # {"rule_type": "always"}
    assert isinstance(window, SlidingWindow)
    assert window.max_messages == 6
    assert window.activation == Activation(tokens_exceed=200_000)


def test_the_opensearch_summarization_manager_resolves_its_model_id() -> None:
    small = ScriptedModel()
    template = {
        "hooks": {
            "pre_llm": [
                {
                    "type": "SummarizationManager",
                    "config": {
                        "summary_ratio": 0.4,
                        "preserve_recent_messages": 6,
                        "summarization_model_id": "abc123",
                        "activation": {"message_count_exceed": 20, "tokens_exceed": 5000},
                    },
                }
            ]
        }
    }
    (manager,) = ContextPipeline.from_dict(template, models={"abc123": small}).pre_llm
    assert isinstance(manager, Summarization)
    assert manager.summary_model is small
    assert (manager.summary_ratio, manager.preserve_recent_messages) == (0.4, 6)
    assert manager.activation == Activation(message_count_exceed=20, tokens_exceed=5000)


def test_every_type_name_builds_its_manager() -> None:
    template = {
        "hooks": {
            "post_tool": [
                {"type": "ToolOutputOffload", "config": {"max_tokens": 10, "preview_tokens": 5}},
                {"type": "ToolOutputTruncate", "config": {"max_tokens": 50}},
                {"type": "Null"},
            ],
            "pre_llm": [
                {"type": "ImageLimit", "config": {"max_images": 2}},
                {"type": "SlidingWindow", "config": {"max_messages": 8, "per_turn": 3}},
                {"type": "Summarization", "config": {}},
                {"type": "Null", "config": None},
            ],
        }
    }
    pipeline = ContextPipeline.from_dict(template)
    assert [type(m) for m in pipeline.post_tool] == [ToolOutputOffload, ToolOutputTruncate, Null]
    assert [type(m) for m in pipeline.pre_llm] == [ImageLimit, SlidingWindow, Summarization, Null]
    assert pipeline.pre_llm[1].per_turn == 3  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("template", "message"),
    [
        (
            {
                "hooks": {
                    "pre_llm": [
                        {"type": "SlidingWindow", "config": {"max_messages": 4}},
                        {"type": "Summarization", "config": {"summary_ratio": 1.5}},
                    ]
                }
            },
            "hooks.pre_llm[1].config.summary_ratio: 1.5 is above 0.8",
        ),
        (
            {"hooks": {"pre_llm": [{"type": "Summarization", "config": {"summary_ratio": 0.05}}]}},
            "hooks.pre_llm[0].config.summary_ratio: 0.05 is not at least 0.1",
        ),
        (
            {"hooks": {"pre_llm": [{"type": "SlidingWindowManagr", "config": {}}]}},
            "hooks.pre_llm[0].type: unknown manager type 'SlidingWindowManagr'",
        ),
        (
            {"hooks": {"pre_llm": [{"type": "SlidingWindow", "config": {"max_msgs": 4}}]}},
            "hooks.pre_llm[0].config.max_msgs: unknown setting for SlidingWindow",
        ),
        (
            {"hooks": {"pre_llm": [{"type": "SlidingWindow", "config": {"max_messages": 0}}]}},
            "hooks.pre_llm[0].config.max_messages: 0 is below 1",
        ),
        (
            {"hooks": {"pre_llm": [{"type": "SlidingWindow", "config": {"max_messages": "9"}}]}},
            "hooks.pre_llm[0].config.max_messages: '9' is not a whole number",
        ),
        (
            {
                "hooks": {
                    "pre_llm": [
                        {
                            "type": "SlidingWindow",
                            "config": {"activation": {"tokens_exceeds": 5}},
                        }
                    ]
                }
            },
            "hooks.pre_llm[0].config.activation.tokens_exceeds: unknown setting",
        ),
        (
            {
                "hooks": {
                    "pre_llm": [
                        {"type": "SlidingWindow", "config": {"activation": {"ratio_exceed": 0}}}
                    ]
                }
            },
            "hooks.pre_llm[0].config.activation.ratio_exceed: 0 is not above 0",
        ),
        (
            {"hooks": {"post_tool": [{"type": "SlidingWindow", "config": {}}]}},
            "hooks.post_tool[0].type: SlidingWindow cannot run at post_tool; it runs at pre_llm",
        ),
        (
            {"hooks": {"post_llm": []}},
            "hooks.post_llm: unknown hook; the hooks are pre_llm and post_tool",
        ),
        (
            {"hooks": {"pre_llm": [], "PRE_LLM": []}},
            "hooks.PRE_LLM: the same hook as hooks.pre_llm",
        ),
        ({"hooks": {}}, "hooks: {} is not an object naming at least one hook"),
        ({"name": "x"}, "hooks: None is not an object"),
        ({"hooks": {"pre_llm": {}}}, "hooks.pre_llm: {} is not a list of managers"),
        (
            {"hooks": {"pre_llm": []}, "owner": "me"},
            "owner: unknown key; a template takes name, description and hooks",
        ),
        (
            {"hooks": {"post_tool": [{"type": "ToolOutputTruncate", "config": {}}]}},
            "give exactly one of max_output_length (characters) and max_tokens",
        ),
        (
            {
                "hooks": {
                    "post_tool": [
                        {
                            "type": "ToolOutputOffload",
                            "config": {"max_tokens": 100, "preview_tokens": 200},
                        }
                    ]
                }
            },
            "hooks.post_tool[0].config.preview_tokens: preview_tokens 200 is above max_tokens 100",
        ),
        (
            # A limit under the default preview: the path names the setting that was written.
            {"hooks": {"post_tool": [{"type": "ToolOutputOffload", "config": {"max_tokens": 1}}]}},
            "hooks.post_tool[0].config.max_tokens: preview_tokens 1000 is above max_tokens 1",
        ),
        (
            {
                "hooks": {
                    "post_tool": [{"type": "ToolOutputOffload", "config": {"preview_tokens": 3000}}]
                }
            },
            "hooks.post_tool[0].config.preview_tokens: preview_tokens 3000 is above max_tokens",
        ),
        (
            {"hooks": {"pre_llm": [{"type": "Summarization", "config": {"summary_model": "big"}}]}},
            "hooks.pre_llm[0].config.summary_model: model id 'big' is not in models=",
        ),
        (
            {"hooks": {"pre_llm": [{"type": "SlidingWindow", "conf": {}}]}},
            "hooks.pre_llm[0].conf: unknown key",
        ),
        ([], "the template is a list, not an object with 'hooks'"),
    ],
)
def test_a_mistake_fails_at_load_time_with_its_json_path(template: Any, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ContextPipeline.from_dict(template)
    assert message in str(raised.value)
    assert str(raised.value).startswith("context pipeline: ")


def test_a_template_file_loads_and_its_errors_name_the_file(tmp_path: Path) -> None:
    good = tmp_path / "pipeline.json"
    good.write_text(json.dumps(documented_templates()[1]), encoding="utf-8")
    pipeline = ContextPipeline.from_json_file(good)
    assert pipeline.name == "tool-heavy"

    bad = tmp_path / "bad.json"
    bad.write_text('{"hooks": {"pre_llm": [{"type": "ImageLimit", "config": {"max_images": -1}}]}}')
    with pytest.raises(ConfigError, match=r"bad\.json: hooks\.pre_llm\[0\]\.config\.max_images"):
        ContextPipeline.from_json_file(bad)
    broken = tmp_path / "broken.json"
    broken.write_text('{"hooks": ')
    with pytest.raises(ConfigError, match="is not valid JSON"):
        ContextPipeline.from_json_file(broken)
    with pytest.raises(ConfigError, match="does not exist"):
        ContextPipeline.from_json_file(tmp_path / "missing.json")


def test_python_constructors_check_the_same_values() -> None:
    with pytest.raises(ConfigError, match=r"summary_ratio: 0\.9 is above 0\.8"):
        Summarization(summary_ratio=0.9)
    with pytest.raises(ConfigError, match="message_count_exceed: -1 is below 0"):
        Activation(message_count_exceed=-1)
    with pytest.raises(ConfigError, match="per_turn: 0 is below 1"):
        SlidingWindow(per_turn=0)
    with pytest.raises(ConfigError, match="post_tool"):
        ContextPipeline(pre_llm=[ToolOutputOffload()])
    with pytest.raises(ConfigError, match="is not a context manager"):
        ContextPipeline(pre_llm=["SlidingWindow"])  # type: ignore[list-item]


class PreLlmOnly:
    """Runs at pre_llm and has no post_tool: not a `ContextManager`."""

    HOOKS: ClassVar[frozenset[str]] = frozenset({"pre_llm"})

    def __init__(self) -> None:
        self.activation = Activation()

    async def pre_llm(self, messages: list[Any], run: Any) -> list[Any]:
        return messages


class KeepEverything(PreLlmOnly):
    """A user's own manager with every method of the `ContextManager` protocol."""

    async def post_tool(self, result: Any, run: Any) -> Any:
        return result


def test_a_custom_manager_is_checked_against_the_context_manager_protocol() -> None:
    manager = KeepEverything()
    assert ContextPipeline(pre_llm=[manager]).pre_llm == (manager,)
    with pytest.raises(ConfigError, match=r"pre_llm\[0\]: .* is not a context manager"):
        ContextPipeline(pre_llm=[PreLlmOnly()])  # type: ignore[list-item]
    wrong = KeepEverything()
    wrong.activation = {"ratio_exceed": 0.5}  # type: ignore[assignment]
    with pytest.raises(ConfigError, match="is not a context manager"):
        ContextPipeline(pre_llm=[wrong])


def test_the_default_pipeline_is_what_a_context_config_stands_for() -> None:
    pipeline = ContextPipeline.from_config(ContextConfig(tool_result_limit=500, max_image_num=3))
    (truncate,) = pipeline.post_tool
    image_limit, summarization = pipeline.pre_llm
    assert isinstance(truncate, ToolOutputTruncate) and truncate.max_tokens == 500
    assert isinstance(image_limit, ImageLimit) and image_limit.max_images == 3
    assert summarization.activation == Activation(ratio_exceed=0.8)
    assert len(ContextPipeline.from_config(ContextConfig()).pre_llm) == 1


def test_agentscope_context_config_fields() -> None:
    assert ContextConfig(max_image_num=5).max_image_num == 5
    for field in (
        "context_buffer_ratio",
        "compression_fallback_to_truncation",
        "compression_tool_enabled",
    ):
        with pytest.raises(ConfigError) as raised:
            ContextConfig.from_dict({field: 0.2})
        text = str(raised.value)
        assert f"'{field}' is an AgentScope ContextConfig field that ctxoffload does not" in text
        assert "Extra inputs are not permitted" not in text


def test_a_key_given_twice_in_a_template_file_is_refused(tmp_path: Path) -> None:
    """JSON keeps the last of two equal keys: the first list of managers would be dropped
    without a word, as `"pre_llm"` with `"PRE_LLM"` is refused."""
    twice = tmp_path / "twice.json"
    twice.write_text(
        '{"hooks": {"pre_llm": [{"type": "SlidingWindow", "config": {"max_messages": 8}}],\n'
        '           "pre_llm": [{"type": "ImageLimit", "config": {"max_images": 2}}]}}'
    )
    with pytest.raises(ConfigError) as raised:
        ContextPipeline.from_json_file(twice)
    assert str(raised.value) == (
        f"context pipeline file {str(twice)!r}: hooks.pre_llm is given twice in one object; "
        "JSON would keep only the last: give it once"
    )
    deeper = tmp_path / "deeper.json"
    deeper.write_text(
        '{"hooks": {"pre_llm": [{"type": "SlidingWindow",'
        ' "config": {"max_messages": 8, "max_messages": 80}}]}}'
    )
    with pytest.raises(ConfigError, match=r"hooks\.pre_llm\[0\]\.config\.max_messages is given"):
        ContextPipeline.from_json_file(deeper)


def test_a_key_given_twice_in_a_config_file_is_refused(tmp_path: Path) -> None:
    from ctxoffload import ContextConfig

    twice = tmp_path / "config.json"
    twice.write_text('{"trigger_ratio": 0.5, "trigger_ratio": 0.9}')
    with pytest.raises(ConfigError, match="trigger_ratio is given twice in one object"):
        ContextConfig.from_json_file(twice)
