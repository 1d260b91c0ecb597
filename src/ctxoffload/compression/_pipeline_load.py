"""Loading a `ContextPipeline` from a template shaped like OpenSearch's context management.

Every problem is a `ConfigError` naming its JSON path:
`hooks.pre_llm[1].config.summary_ratio: 1.5 is above 0.8`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ..exceptions import ConfigError
from ._activation import Activation, SettingError, unknown_keys
from ._clear_thinking import ClearThinking
from ._clear_tool_uses import ClearToolUses
from ._history_managers import Null, SlidingWindow, Summarization
from ._image_limit import ImageLimit
from ._tool_output import ToolOutputOffload, ToolOutputTruncate

if TYPE_CHECKING:
    from ..model import ChatModel
    from ._run import ContextManager

__all__ = ["MANAGER_TYPES", "Template", "load_pipeline"]


class Template(NamedTuple):
    """What a template holds: the managers of each hook, with its name and description."""

    name: str | None
    description: str | None
    post_tool: list[ContextManager]
    pre_llm: list[ContextManager]


# What OpenSearch adds to a stored template; accepted and ignored.
_METADATA = {"created_time", "last_modified", "last_updated_time", "created_by", "template_id"}

_Build = Callable[[dict[str, Any], Mapping[str, "ChatModel"]], "ContextManager"]


def _tool_output_offload(config: dict[str, Any], models: Mapping[str, ChatModel]) -> Any:
    unknown_keys(
        config,
        {"max_tokens", "preview_tokens", "preview", "exclude_tools", "activation"},
        "ToolOutputOffload",
    )
    return ToolOutputOffload(**config)


def _tool_output_truncate(config: dict[str, Any], models: Mapping[str, ChatModel]) -> Any:
    unknown_keys(
        config, {"max_output_length", "max_tokens", "preview", "activation"}, "ToolOutputTruncate"
    )
    return ToolOutputTruncate(**config)


def _sliding_window(config: dict[str, Any], models: Mapping[str, ChatModel]) -> Any:
    unknown_keys(config, {"max_messages", "per_turn", "activation"}, "SlidingWindow")
    return SlidingWindow(**config)


def _summarization(config: dict[str, Any], models: Mapping[str, ChatModel]) -> Any:
    unknown_keys(
        config,
        {
            "summary_ratio",
            "preserve_recent_messages",
            "summary_model",
            "summarization_model_id",
            "activation",
        },
        "Summarization",
    )
    if "summary_model" in config and "summarization_model_id" in config:
        raise SettingError(
            "summarization_model_id", "give summary_model or summarization_model_id, not both"
        )
    key = "summary_model" if "summary_model" in config else "summarization_model_id"
    model_id = config.pop(key, None)
    if model_id is not None:
        if not isinstance(model_id, str):
            raise SettingError(key, f"{model_id!r} is not a model id (a string)")
        if model_id not in models:
            known = ", ".join(sorted(models)) or "none were given"
            raise SettingError(
                key,
                f"model id {model_id!r} is not in models= (known: {known}); pass "
                f"ContextPipeline.from_dict(..., models={{{model_id!r}: your_model}})",
            )
        config["summary_model"] = models[model_id]
    return Summarization(**config)


def _image_limit(config: dict[str, Any], models: Mapping[str, ChatModel]) -> Any:
    unknown_keys(config, {"max_images", "activation"}, "ImageLimit")
    return ImageLimit(**config)


def _clear_tool_uses(config: dict[str, Any], models: Mapping[str, ChatModel]) -> Any:
    unknown_keys(
        config,
        {"trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs", "activation"},
        "ClearToolUses",
    )
    return ClearToolUses(**config)


def _clear_thinking(config: dict[str, Any], models: Mapping[str, ChatModel]) -> Any:
    unknown_keys(config, {"keep", "activation"}, "ClearThinking")
    return ClearThinking(**config)


def _null(config: dict[str, Any], models: Mapping[str, ChatModel]) -> Any:
    unknown_keys(config, {"activation"}, "Null")
    return Null(**config)


MANAGER_TYPES: dict[str, _Build] = {
    "ToolOutputOffload": _tool_output_offload,
    "ToolOutputTruncate": _tool_output_truncate,
    "ToolsOutputTruncateManager": _tool_output_truncate,
    "SlidingWindow": _sliding_window,
    "SlidingWindowManager": _sliding_window,
    "Summarization": _summarization,
    "SummarizationManager": _summarization,
    "ImageLimit": _image_limit,
    "ClearToolUses": _clear_tool_uses,
    "clear_tool_uses_20250919": _clear_tool_uses,
    "ClearThinking": _clear_thinking,
    "clear_thinking_20251015": _clear_thinking,
    "Null": _null,
}
"""Template type names (ctxoffload's and OpenSearch's) to the function that builds each."""


def _manager(entry: Any, path: str, models: Mapping[str, ChatModel]) -> ContextManager:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{path}: {entry!r} is not an object with 'type' and 'config'")
    for key in entry:
        if key not in ("type", "config"):
            raise ConfigError(f"{path}.{key}: unknown key; a manager takes 'type' and 'config'")
    kind = entry.get("type")
    if kind not in MANAGER_TYPES:
        raise ConfigError(
            f"{path}.type: unknown manager type {kind!r}; the types are " + ", ".join(MANAGER_TYPES)
        )
    config = entry.get("config", {})
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ConfigError(f"{path}.config: {config!r} is not an object")
    settings = {str(k): v for k, v in config.items()}
    try:
        if "activation" in settings:
            settings["activation"] = Activation.from_value(settings["activation"])
    except SettingError as exc:
        inner = "" if exc.key == "activation" else f".{exc.key}"
        raise ConfigError(f"{path}.config.activation{inner}: {exc.problem}") from None
    try:
        return MANAGER_TYPES[str(kind)](settings, models)
    except SettingError as exc:
        raise ConfigError(f"{path}.config.{exc.key}: {exc.problem}") from None
    except ConfigError as exc:
        raise ConfigError(f"{path}.config: {exc}") from None


def load_pipeline(data: Any, *, models: Mapping[str, ChatModel], source: str) -> Template:
    """The managers of a template (see `ContextPipeline.from_dict`)."""
    prefix = f"{source} " if source.endswith(":") else f"{source}: "
    try:
        return _load(data, models=models)
    except ConfigError as exc:
        raise ConfigError(prefix + str(exc)) from None


def _load(data: Any, *, models: Mapping[str, ChatModel]) -> Template:
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"the template is a {type(data).__name__}, not an object with 'hooks': give "
            '{"hooks": {"pre_llm": [...], "post_tool": [...]}}'
        )
    for key in data:
        if key not in ("name", "description", "hooks") and key not in _METADATA:
            raise ConfigError(f"{key}: unknown key; a template takes name, description and hooks")
    for key in ("name", "description"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ConfigError(f"{key}: {data[key]!r} is not a string")
    hooks = data.get("hooks")
    if not isinstance(hooks, Mapping) or not hooks:
        raise ConfigError(
            f"hooks: {hooks!r} is not an object naming at least one hook (pre_llm, post_tool)"
        )
    lists: dict[str, list[ContextManager]] = {"pre_llm": [], "post_tool": []}
    seen: dict[str, str] = {}
    for name, entries in hooks.items():
        hook = str(name).lower()
        if hook not in lists:
            raise ConfigError(f"hooks.{name}: unknown hook; the hooks are pre_llm and post_tool")
        if hook in seen:
            raise ConfigError(f"hooks.{name}: the same hook as hooks.{seen[hook]}")
        seen[hook] = str(name)
        if not isinstance(entries, list):
            raise ConfigError(f"hooks.{name}: {entries!r} is not a list of managers")
        for index, entry in enumerate(entries):
            path = f"hooks.{name}[{index}]"
            manager = _manager(entry, path, models)
            if hook not in manager.HOOKS:
                where = " or ".join(sorted(manager.HOOKS))
                raise ConfigError(
                    f"{path}.type: {entry['type']} cannot run at {hook}; it runs at {where}"
                )
            lists[hook].append(manager)
    return Template(data.get("name"), data.get("description"), lists["post_tool"], lists["pre_llm"])
