"""Loading a `ContextPipeline` from a template shaped like OpenSearch's context management.

Every problem is a `ConfigError` naming its JSON path:
`hooks.pre_llm[1].config.summary_ratio: 1.5 is above 0.8`. Every value is read through one
typed reader (`_At`), which checks its type before anything uses it and shows a bad value
in a few characters, however long, large or deeply nested it is: no `TypeError`,
`ValueError` or `RecursionError` escapes, whatever the template holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from ..._depth import text_form
from ...exceptions import ConfigError
from .._config import LongNumber
from ._activation import Activation, SettingError
from ._clear_thinking import ClearThinking
from ._clear_tool_uses import ClearToolUses
from ._history_managers import Null, SlidingWindow, Summarization
from ._image_limit import ImageLimit
from ._tool_output import PREVIEWS, ToolOutputOffload, ToolOutputTruncate

if TYPE_CHECKING:
    from ...model import ChatModel
    from ._run import ContextManager

__all__ = ["MANAGER_TYPES", "MAX_SETTING", "Template", "load_pipeline"]

MAX_SETTING = 10**12
"""The largest number a template's setting may hold: far above any count of tokens,
messages or images, and small enough to show and compute with."""

_SHOWN = 60  # characters of a bad value an error shows


class Template(NamedTuple):
    """What a template holds: the managers of each hook, with its name and description."""

    name: str | None
    description: str | None
    post_tool: list[ContextManager]
    pre_llm: list[ContextManager]


# What OpenSearch adds to a stored template; accepted and ignored.
_METADATA = {"created_time", "last_modified", "last_updated_time", "created_by", "template_id"}


def _show(value: Any) -> str:
    """`value` in at most about `_SHOWN` characters, never recursing (see `text_form`)."""
    if isinstance(value, LongNumber):
        return repr(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SETTING:
        digits = math.floor(math.log10(abs(value))) + 1
        return f"a {digits}-digit number"
    shown = repr(value) if isinstance(value, (str, int, float)) or value is None else None
    if shown is None:
        shown = text_form(value, limit=_SHOWN)
    return shown if len(shown) <= _SHOWN else shown[: _SHOWN - 1] + "…"


class _At(NamedTuple):
    """A value of the template and the JSON path that names it; each method reads it as one
    type or raises `ConfigError` naming the path, the value and what is expected."""

    value: Any
    path: str

    def fail(self, problem: str) -> NoReturn:
        """Raise the error of this value: `path: problem`."""
        raise ConfigError(f"{self.path}: {problem}")

    def wrong(self, expected: str) -> NoReturn:
        """Raise: the value is not what was expected."""
        self.fail(f"{_show(self.value)} is not {expected}")

    def key(self, name: str) -> _At:
        """The value at `name` of this object's path (present or not)."""
        value = self.value.get(name) if isinstance(self.value, Mapping) else None
        return _At(value, f"{self.path}.{name}" if self.path else name)

    def object(self, expected: str = "an object") -> dict[str, _At]:
        """The members of a JSON object, each with its path."""
        if not isinstance(self.value, Mapping):
            self.wrong(expected)
        prefix = f"{self.path}." if self.path else ""
        return {str(k): _At(v, f"{prefix}{k}") for k, v in self.value.items()}

    def array(self, expected: str = "a list") -> list[_At]:
        """The items of a JSON array, each with its path."""
        if not isinstance(self.value, list):
            self.wrong(expected)
        return [_At(v, f"{self.path}[{i}]") for i, v in enumerate(self.value)]

    def string(self, expected: str = "a string") -> str:
        """A string."""
        if not isinstance(self.value, str):
            self.wrong(expected)
        return self.value

    def optional_string(self) -> str | None:
        """A string or null."""
        return None if self.value is None else self.string()

    def whole(self) -> int:
        """A whole number (not a bool, not a float) of at most `MAX_SETTING`."""
        value = self.value
        if isinstance(value, bool) or not isinstance(value, int | LongNumber):
            self.wrong("a whole number")
        if isinstance(value, LongNumber) or abs(value) > MAX_SETTING:
            self.fail(f"{_show(value)} is too large: a setting is at most {MAX_SETTING:,}")
        return value

    def number(self) -> int | float:
        """A number (int or float, not a bool) of at most `MAX_SETTING` in size."""
        value = self.value
        if isinstance(value, bool) or not isinstance(value, int | float | LongNumber):
            self.wrong("a number")
        if isinstance(value, LongNumber) or (isinstance(value, int) and abs(value) > MAX_SETTING):
            self.fail(f"{_show(value)} is too large: a setting is at most {MAX_SETTING:,}")
        return value  # NaN and infinities: the range checks refuse them, by name

    def choice(self, options: tuple[str, ...]) -> str:
        """One of `options`."""
        if not isinstance(self.value, str) or self.value not in options:
            self.wrong(" or ".join(repr(o) for o in options))
        return self.value

    def names(self) -> list[str]:
        """A list of names (strings)."""
        if not isinstance(self.value, list) or not all(isinstance(v, str) for v in self.value):
            self.wrong("a list of tool names")
        return list(self.value)

    def whole_or_bool(self) -> bool | int:
        """true, false or a whole number."""
        return self.value if isinstance(self.value, bool) else self.whole()


def _activation(at: _At) -> Activation:
    """An `Activation` from a template's rules (or OpenSearch's `{"rule_type": "always"}`)."""
    rules = at.object("an object of rules")
    if set(rules) == {"rule_type"} and rules["rule_type"].value == "always":
        return Activation()
    read: dict[str, Callable[[_At], Any]] = {
        "message_count_exceed": _At.whole,
        "tokens_exceed": _At.whole,
        "ratio_exceed": _At.number,
    }
    values = _settings(rules, read, "an activation")
    try:
        return Activation(**values)
    except SettingError as exc:
        at.key(exc.key).fail(exc.problem)


def _settings(
    given: dict[str, _At], read: Mapping[str, Callable[[_At], Any]], what: str
) -> dict[str, Any]:
    """Each setting of `given` read as its type; an unknown one names those that are known."""
    values: dict[str, Any] = {}
    for key, at in given.items():
        if key not in read:
            at.fail(f"unknown setting for {what}; it takes: {', '.join(sorted(read))}")
        values[key] = read[key](at)
    return values


class _Kind(NamedTuple):
    """A manager type: its name, the class it builds and how each of its settings is read."""

    name: str
    build: Callable[..., ContextManager]
    settings: Mapping[str, Callable[[_At], Any]]


_TOOL_OUTPUT_OFFLOAD = _Kind(
    "ToolOutputOffload",
    ToolOutputOffload,
    {
        "max_tokens": _At.whole,
        "preview_tokens": _At.whole,
        "preview": lambda at: at.choice(PREVIEWS),
        "exclude_tools": _At.names,
        "activation": _activation,
    },
)
_TOOL_OUTPUT_TRUNCATE = _Kind(
    "ToolOutputTruncate",
    ToolOutputTruncate,
    {
        "max_output_length": _At.whole,
        "max_tokens": _At.whole,
        "preview": lambda at: at.choice(PREVIEWS),
        "activation": _activation,
    },
)
_SLIDING_WINDOW = _Kind(
    "SlidingWindow",
    SlidingWindow,
    {"max_messages": _At.whole, "per_turn": _At.whole_or_bool, "activation": _activation},
)
_SUMMARIZATION = _Kind(
    "Summarization",
    Summarization,
    {
        "summary_ratio": _At.number,
        "preserve_recent_messages": _At.whole,
        # Resolved through models= by the loader.
        "summary_model": lambda at: at.string("a model id (a string)"),
        "summarization_model_id": lambda at: at.string("a model id (a string)"),
        "activation": _activation,
    },
)
_IMAGE_LIMIT = _Kind("ImageLimit", ImageLimit, {"max_images": _At.whole, "activation": _activation})
_NULL = _Kind("Null", Null, {"activation": _activation})


def _amount(at: _At) -> int | dict[str, Any]:
    """A whole number, or Anthropic's amount object `{"type": "...", "value": N}` (its type
    is checked by the manager, which knows the kinds it takes)."""
    if not isinstance(at.value, Mapping):
        return at.whole()
    members = at.object()
    return {
        key: member.string() if key == "type" else member.whole() for key, member in members.items()
    }


def _names_or_bool(at: _At) -> bool | list[str]:
    """true, false or a list of tool names."""
    return at.value if isinstance(at.value, bool) else at.names()


def _thinking_keep(at: _At) -> str | int | dict[str, Any]:
    """'all', a whole number or Anthropic's `{"type": "thinking_turns", "value": N}`."""
    return at.value if at.value == "all" else _amount(at)


_CLEAR_TOOL_USES = _Kind(
    "ClearToolUses",
    ClearToolUses,
    {
        "trigger": _amount,
        "keep": _amount,
        "clear_at_least": _amount,
        "exclude_tools": _At.names,
        "clear_tool_inputs": _names_or_bool,
        "activation": _activation,
    },
)
_CLEAR_THINKING = _Kind(
    "ClearThinking", ClearThinking, {"keep": _thinking_keep, "activation": _activation}
)

MANAGER_TYPES: dict[str, _Kind] = {
    "ToolOutputOffload": _TOOL_OUTPUT_OFFLOAD,
    "ToolOutputTruncate": _TOOL_OUTPUT_TRUNCATE,
    "ToolsOutputTruncateManager": _TOOL_OUTPUT_TRUNCATE,
    "SlidingWindow": _SLIDING_WINDOW,
    "SlidingWindowManager": _SLIDING_WINDOW,
    "Summarization": _SUMMARIZATION,
    "SummarizationManager": _SUMMARIZATION,
    "ImageLimit": _IMAGE_LIMIT,
    "ClearToolUses": _CLEAR_TOOL_USES,
    "clear_tool_uses_20250919": _CLEAR_TOOL_USES,
    "ClearThinking": _CLEAR_THINKING,
    "clear_thinking_20251015": _CLEAR_THINKING,
    "Null": _NULL,
}
"""Template type names (ctxoffload's and OpenSearch's) to the manager each builds."""


def _summary_model(
    values: dict[str, Any], config: dict[str, _At], models: Mapping[str, ChatModel]
) -> None:
    """Replace a summary model's id in `values` by the model `models` gives for it."""
    if "summary_model" in values and "summarization_model_id" in values:
        config["summarization_model_id"].fail(
            "give summary_model or summarization_model_id, not both"
        )
    key = "summary_model" if "summary_model" in values else "summarization_model_id"
    model_id = values.pop(key, None)
    if model_id is None:
        return
    if model_id not in models:
        known = ", ".join(sorted(models)) or "none were given"
        config[key].fail(
            f"model id {_show(model_id)} is not in models= (known: {known}); pass "
            f"ContextPipeline.from_dict(..., models={{{_show(model_id)}: your_model}})"
        )
    values["summary_model"] = models[model_id]


def _manager(at: _At, models: Mapping[str, ChatModel]) -> ContextManager:
    entry = at.object("an object with 'type' and 'config'")
    for key, member in entry.items():
        if key not in ("type", "config"):
            member.fail("unknown key; a manager takes 'type' and 'config'")
    kind_at = at.key("type")
    kind_name = kind_at.value
    if not isinstance(kind_name, str) or kind_name not in MANAGER_TYPES:
        kind_at.fail(
            f"unknown manager type {_show(kind_name)}; the types are " + ", ".join(MANAGER_TYPES)
        )
    kind = MANAGER_TYPES[kind_name]
    config_at = at.key("config")
    config = {} if config_at.value is None else config_at.object()
    values = _settings(config, kind.settings, kind.name)
    if kind is _SUMMARIZATION:
        _summary_model(values, config, models)
    try:
        return kind.build(**values)
    except SettingError as exc:
        key = exc.key
        if key not in values:  # a default at odds with a setting given: name that one
            key = next((k for k in exc.others if k in values), key)
        config_at.key(key).fail(exc.problem)
    except ConfigError as exc:
        config_at.fail(str(exc))


def load_pipeline(data: Any, *, models: Mapping[str, ChatModel], source: str) -> Template:
    """The managers of a template (see `ContextPipeline.from_dict`)."""
    prefix = f"{source} " if source.endswith(":") else f"{source}: "
    try:
        return _load(_At(data, ""), models=models)
    except ConfigError as exc:
        raise ConfigError(prefix + str(exc)) from None


def _load(template: _At, *, models: Mapping[str, ChatModel]) -> Template:
    if not isinstance(template.value, Mapping):
        raise ConfigError(
            f"the template is a {type(template.value).__name__}, not an object with 'hooks': "
            'give {"hooks": {"pre_llm": [...], "post_tool": [...]}}'
        )
    for key, member in template.object().items():
        if key not in ("name", "description", "hooks") and key not in _METADATA:
            member.fail("unknown key; a template takes name, description and hooks")
    name = template.key("name").optional_string()
    description = template.key("description").optional_string()
    hooks_at = template.key("hooks")
    expected = "an object naming at least one hook (pre_llm, post_tool)"
    hooks = hooks_at.object(expected)
    if not hooks:
        hooks_at.wrong(expected)
    lists: dict[str, list[ContextManager]] = {"pre_llm": [], "post_tool": []}
    seen: dict[str, str] = {}
    for hook_name, entries in hooks.items():
        hook = hook_name.lower()
        if hook not in lists:
            entries.fail("unknown hook; the hooks are pre_llm and post_tool")
        if hook in seen:
            entries.fail(f"the same hook as hooks.{seen[hook]}")
        seen[hook] = hook_name
        for entry in entries.array("a list of managers"):
            manager = _manager(entry, models)
            if hook not in manager.HOOKS:
                where = " or ".join(sorted(manager.HOOKS))
                entry.key("type").fail(
                    f"{entry.key('type').value} cannot run at {hook}; it runs at {where}"
                )
            lists[hook].append(manager)
    return Template(name, description, lists["post_tool"], lists["pre_llm"])
