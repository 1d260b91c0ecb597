"""`ContextConfig`: when history is compressed and what the summary looks like."""

from __future__ import annotations

import json
import math
import os
import string
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .._depth import MAX_DEPTH, TooDeep, load_json
from ..exceptions import ConfigError
from ._summary_model import SUMMARY_FIELDS, Summary
from ._tool_names import ReaderTools, how_to_search

__all__ = [
    "DEFAULT_COMPRESSION_PROMPT",
    "DEFAULT_SUMMARY_TEMPLATE",
    "SUMMARY_EXTRA_PLACEHOLDERS",
    "ContextConfig",
]

MAX_TRIGGER_RATIO = 0.9

SUMMARY_BUDGET_SHARE = 0.05
"""Share of the context window a summary may take when `summary_max_tokens` is not set."""

SUMMARY_BUDGET_FLOOR = 1_000
"""Tokens a summary may always take, however small the window."""

ARTIFACT_INDEX_SHARE = 1.0
"""The artifact index's budget when `artifact_index_tokens` is not set: this share of the
summary budget, on top of the summary."""

ARTIFACT_INDEX_FLOOR = 200
"""Tokens the artifact index may always take when `artifact_index_tokens` is not set."""

DEFAULT_PREVIEW_CAP = 2_000
"""`preview_tokens` when unset is `min(tool_result_limit, DEFAULT_PREVIEW_CAP)`, and within
the room of the window when it is known (see `ContextConfig.preview_budget`)."""

RESULT_FLOOR = 200
"""The fewest tokens a tool result left in the context is cut to, however small the
reserve: room for the notice that names the file and a few lines."""

CHARS_PER_TOKEN = 4
"""How summary budgets in tokens become characters: cutting by characters is exact and
cheap even for a reply of many megabytes, and four characters per token is what English
prose and code average with the common tokenizers."""

SUMMARY_EXTRA_PLACEHOLDERS: dict[str, str] = {
    "context_path": "the reference (path) of the context.jsonl holding the compressed messages",
    "line_span": "the lines of context.jsonl this summary covers, as `first-last` (1-based)",
    "artifacts": "the artifact trail: a list of offloaded files, newest last, one per line",
    "how_to_search": "how to search context.jsonl with the reader tools the agent has: "
    "'search it with Grep', 'search it with retrieve_offloaded_content(reference=..., "
    "pattern=...)', or 'search it with your file tools' when none is known",
}
"""Placeholders a summary template may use besides the five `Summary` fields."""

DEFAULT_COMPRESSION_PROMPT = """\
You are compressing the earlier part of a conversation between a user and an AI agent that \
works with tools. The agent will continue the task with only your summary and the most \
recent messages in its context; the full messages are saved in a file it can read back, \
but it should rarely need to.

Write the summary as JSON with exactly these five fields:

- task_overview: what the user asked for and why, with every constraint and preference they \
stated.
- current_state: what has been done and where things stand: files created or changed, \
commands run and their results, what works, what still fails.
- important_discoveries: facts that would be costly to rediscover: root causes, exact error \
messages, file paths with line numbers, ids, numbers, and approaches that failed and why.
- next_steps: the concrete next actions, in order, including any interrupted tool call or \
open question for the user.
- context_to_preserve: anything else that must survive verbatim: names, identifiers, URLs, \
configuration values, the user's own words where they matter, and the paths of offloaded \
files mentioned in the conversation.

Rules:
- Preserve file paths, ids, numbers, commands and error messages exactly as written; do not \
paraphrase them.
- Keep every user instruction and constraint, even ones given early and never repeated.
- Use only what the conversation says. Do not invent facts, results, or file contents; if \
something is unknown or unfinished, say so.
- Be dense: short sentences or bullet points, no pleasantries. Write "none" for a field with \
nothing to report.
"""

DEFAULT_SUMMARY_TEMPLATE = """\
<context_summary>
Earlier messages were moved out of the context into {context_path} (lines {line_span}). \
That file holds one JSON message per line, oldest first: {how_to_search} for a word, a path \
or an id, then read the lines around the match when you need exact details.

## Task overview
{task_overview}

## Current state
{current_state}

## Important discoveries
{important_discoveries}

## Next steps
{next_steps}

## Context to preserve
{context_to_preserve}

## Offloaded files
{artifacts}
</context_summary>"""


_INIT_SOURCE = "ContextConfig(...)"

_AGENTSCOPE_ONLY = {
    "context_buffer_ratio": (
        "ctxoffload does not warn the agent ahead of compression; remove it, or lower "
        "trigger_ratio to compress earlier"
    ),
    "compression_fallback_to_truncation": (
        "ctxoffload never truncates when a summary fails: the older messages are on disk and "
        "an extractive summary is used; remove it"
    ),
    "compression_tool_enabled": (
        "ctxoffload offers no compression tool to the agent; remove it, and call "
        "Agent.compress_context() from your own code when you want to compress"
    ),
}
"""AgentScope `ContextConfig` fields refused with a reason rather than as unknown."""


_MINIMUMS: dict[str, tuple[int, str]] = {
    "tool_result_limit": (1, "it is a token count, e.g. 3000"),
    "preview_tokens": (
        50,
        "the preview holds the notice that names the file; use e.g. 1000, or leave it unset",
    ),
    "context_window": (
        1,
        "give the model's window in tokens, e.g. 128000, or leave it unset to use the one the "
        "model reports",
    ),
    "summary_max_tokens": (
        100,
        "a summary needs room for its five fields; use e.g. 2000, or leave it unset for 5% of "
        "the window",
    ),
    "summary_input_tokens": (
        1_000,
        "the summary model would see almost nothing of what leaves; use e.g. 100000, or leave "
        "it unset for the context window",
    ),
}
"""The least value of each integer setting that has one (unset, None, is always allowed), and
what the error message tells the user who gives less."""


def _show(value: float) -> str:
    """A ratio as the user most likely wrote it: 0 rather than 0.0."""
    return str(int(value)) if value.is_integer() else str(value)


def _default_summary_schema() -> dict[str, Any]:
    return Summary.model_json_schema()


class ContextConfig(BaseModel):
    """When the context is compressed and what replaces the compressed part.

    Compression starts when the tokens about to be sent exceed `trigger_ratio` of the
    window; it keeps the newest messages that fit in `reserve_ratio` of the window and
    replaces the rest with a summary rendered from `summary_template`.

    An impossible value raises `ConfigError` (a `CtxOffloadError` and a `ValueError`), with
    one line per problem and a "did you mean" for a misspelt field, whether the config is
    built directly, with `from_dict` or with `from_json_file`.

    A config is frozen, because the agent and the compressor share it during a run. For a
    changed copy, validate again what was given:
    `ContextConfig.from_dict({**config.model_dump(exclude_unset=True), ...})`
    (`model_copy(update=...)` would skip validation; without `exclude_unset` every default
    would count as a value the user chose, and defaults derived from the window would not be).

    Args:
        trigger_ratio: fraction of the window at which compression starts; in (0, 0.9].
        reserve_ratio: fraction of the window kept as recent messages; in (0, trigger_ratio).
        tool_result_limit: a tool result over this many tokens is offloaded whole to a file
            and only a preview stays in the context.
        preview_tokens: the size of that preview in tokens, the notice included; None (the
            default) means `min(tool_result_limit, 2000)`, cut to the reserve of the window
            (at least 200 tokens) so the default fits every window. A value the user chose
            (this or `tool_result_limit`) that does not fit is cut too, and said once.
        preview: "head" keeps the first lines of an offloaded result; "head_tail" keeps
            about two thirds of the preview from the start and one third from the end, with
            the notice between them saying which lines are shown.
        reader_tools: the names of the agent's tools for reading offloaded content back,
            used in notices (see `ReaderTools`); for frameworks whose tools are called
            `view_text_file` or `read_file`. A name given to the `Compressor` (as the
            `Agent` does) takes precedence; with none, notices say "your file tools".
        context_window: the window in tokens; overrides the one the model reports.
        compression_prompt: instructions to the summary model.
        summary_template: a `str.format` template turned into the summary message. It may
            use `{task_overview}`, `{current_state}`, `{important_discoveries}`,
            `{next_steps}`, `{context_to_preserve}` (the `Summary` fields),
            `{context_path}` (the file holding the compressed messages), `{line_span}`
            (their lines there, as `first-last`), `{artifacts}` (the trail of offloaded
            files, one per line) and `{how_to_search}` (how to search that file with the
            reader tools the agent has, `reader_tools`); write literal braces as `{{` and
            `}}`.
        summary_schema: the JSON schema the summary model must answer in; by default the
            schema of `Summary`.
        summary_max_retries: extra attempts when the summary model's reply is invalid,
            before falling back to an extractive summary.
        artifact_trail_limit: how many offloaded files the summary lists, newest first.
        summary_timeout: seconds a whole compaction may take: the summary model (every
            chunk and every retry together) has what is left of them less a tenth, kept for
            the artifact index, whose search for the layout that names the most stops a
            twentieth before the end; past it, the extractive summary is used. The older
            messages are already on disk by then, so a summary model that hangs never loses
            them.
        max_image_num: keep at most this many images in the context (AgentScope's field);
            older ones go to data/ and leave a placeholder naming the file (an `ImageLimit`
            manager in the default pipeline). None (the default) sets no limit; AgentScope's
            default is 5.
        summary_max_tokens: the summary budget: a summary (model-written or extractive) is
            cut to this many tokens, counted as four characters each, before it is stored,
            rendered or folded into the next summary request; no field may take more than
            half of it. None (the default) means 5% of the window, and at least 1,000
            tokens.
        summary_input_tokens: the most tokens of the messages that leave that one compaction
            sends the summary model (the newest of them, in as many requests as the summary
            model's window needs). Messages older than that, which leave only when a long
            history leaves at once (a session resumed, a history given whole), are folded in
            as an extractive summary, without a model; their lines, artifacts and files are
            named as the others are. None (the default) means the context window: every
            message that leaves in an agent's own compactions is sent, as what leaves was in
            the window one call before.
        artifact_index_tokens: the budget of the artifact index that follows a summary: the
            paths, URLs, commands and ids of what left that the summary and the messages
            kept do not name, each with its line of context.jsonl. None (the default) means
            as much as the summary budget, and at least 200 tokens, and then what the
            summary leaves unused of its own budget may also name what left with the
            compaction, when this budget cannot (never what earlier indexes carried, but for the
            files the workspace stored, which hold what left whole): the
            summary and its index never take more than their two budgets. A number set here
            is the index's whole budget; 0 lists them only in events.jsonl (the index then
            says how many and where).
        background_compaction: start the summary before the trigger, in the background:
            once the context passes `trigger_ratio - background_lead` of the window, what
            would leave is stored and its summary starts in an asyncio task while the agent
            goes on; at the trigger, a ready summary that still covers the messages to drop
            (or the oldest of them, when the rest still fits under the trigger) is applied
            without waiting, else the summary is made as usual. Off by default.
        background_lead: how far below the trigger (a share of the window, in (0,
            trigger_ratio)) the background summary starts.
        pin_ratio: the most of the window pinned messages may take together, in (0, 1];
            a pin that would take them over it is refused (`PinError`) when it is made.
        over_window: what happens to a request still over the window once the `pre_llm`
            managers have run (what never leaves is more than the window holds: the system
            prompt, the tool schemas, pins, the newest turn). "warn" (the default) sends it
            and reports it: an `over_window` event naming the sizes, and a WARNING log line.
            "refuse" reports it and raises `ContextOverflowError` instead of sending it; the
            error's `messages` is the context as the managers left it.

    A window too small to hold what a compaction leaves at the least (the summary template's
    own text and one tool result cut to its preview) under the trigger is refused when the
    config is built with `context_window`, and by the `Agent` for a window its model
    reports (`check_window`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    def __init__(self, /, **data: Any) -> None:
        # pydantic raises its ValidationError from __init__; turn it into the same ConfigError
        # that from_dict gives (model_validate, which from_dict uses, does not come here).
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(_describe(exc, _INIT_SOURCE)) from None

    trigger_ratio: float = 0.8
    reserve_ratio: float = 0.1
    tool_result_limit: int = 3000
    preview_tokens: int | None = None
    preview: Literal["head", "head_tail"] = "head"
    reader_tools: ReaderTools | None = None
    context_window: int | None = None
    compression_prompt: str = DEFAULT_COMPRESSION_PROMPT
    summary_template: str = DEFAULT_SUMMARY_TEMPLATE
    summary_schema: dict[str, Any] = Field(default_factory=_default_summary_schema)
    summary_max_retries: int = 2
    artifact_trail_limit: int = 20
    summary_timeout: float = 120.0
    summary_max_tokens: int | None = None
    summary_input_tokens: int | None = None
    max_image_num: int | None = None
    artifact_index_tokens: int | None = None
    background_compaction: bool = False
    background_lead: float = Field(default=0.1, gt=0, lt=1)
    pin_ratio: float = Field(default=0.3, gt=0, le=1)
    over_window: Literal["warn", "refuse"] = "warn"

    @model_validator(mode="before")
    @classmethod
    def _refuse_agentscope_only(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for key, why in _AGENTSCOPE_ONLY.items():
                if key in data:
                    raise ValueError(
                        f"{key!r} is an AgentScope ContextConfig field that ctxoffload does not "
                        f"implement: {why}"
                    )
        return data

    @field_validator("trigger_ratio")
    @classmethod
    def _check_trigger_ratio(cls, value: float) -> float:
        if value > MAX_TRIGGER_RATIO:
            raise ValueError(
                f"trigger_ratio {_show(value)} is above {MAX_TRIGGER_RATIO}: compression must "
                "start while there is still room for the summary and the reply; use a value in "
                f"(0, {MAX_TRIGGER_RATIO}], e.g. 0.8"
            )
        if not value > 0:  # also rejects NaN
            raise ValueError(
                f"trigger_ratio {_show(value)} is not above 0: use a value in "
                f"(0, {MAX_TRIGGER_RATIO}], e.g. 0.8"
            )
        return value

    @field_validator("reserve_ratio")
    @classmethod
    def _check_reserve_ratio(cls, value: float) -> float:
        if not 0 < value < 1:  # also rejects NaN
            raise ValueError(
                f"reserve_ratio {_show(value)} is not in (0, 1): it is the fraction of the window "
                "kept as recent messages and must be below trigger_ratio, e.g. 0.1"
            )
        return value

    @field_validator(*_MINIMUMS)
    @classmethod
    def _check_minimum(cls, value: int | None, info: ValidationInfo) -> int | None:
        least, advice = _MINIMUMS[str(info.field_name)]
        if value is not None and value < least:
            raise ValueError(f"{info.field_name} {value} is below {least}: {advice}")
        return value

    @field_validator(
        "summary_max_retries", "artifact_trail_limit", "max_image_num", "artifact_index_tokens"
    )
    @classmethod
    def _check_not_negative(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value < 0:
            raise ValueError(f"{info.field_name} {value} is negative: use 0 or more")
        return value

    @field_validator("summary_timeout")
    @classmethod
    def _check_summary_timeout(cls, value: float) -> float:
        if not (value > 0 and math.isfinite(value)):  # also rejects NaN
            raise ValueError(
                f"summary_timeout {_show(value)} is not a positive number of seconds: it bounds "
                "a whole compaction, the extractive fallback included, e.g. 120"
            )
        return value

    @field_validator("compression_prompt")
    @classmethod
    def _check_compression_prompt(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(
                "compression_prompt is empty: give the summary model instructions, or leave "
                "it unset for the default"
            )
        return value

    @field_validator("summary_template")
    @classmethod
    def _check_summary_template(cls, value: str) -> str:
        allowed = (*SUMMARY_FIELDS, *SUMMARY_EXTRA_PLACEHOLDERS)
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
        except ValueError as exc:
            raise ValueError(
                f"summary_template is not a valid format string ({exc}): write literal "
                "braces as {{ and }}"
            ) from None
        for field in fields:
            if field not in allowed:
                raise ValueError(
                    f"summary_template placeholder {{{field}}} is unknown: use only "
                    + ", ".join(f"{{{name}}}" for name in allowed)
                    + "; write literal braces as {{ and }}"
                )
        return value

    @field_validator("summary_schema")
    @classmethod
    def _check_summary_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError(
                f"summary_schema has type {value.get('type')!r}, not 'object': the summary "
                "model answers with a JSON object; start from Summary.model_json_schema()"
            )
        return value

    @model_validator(mode="after")
    def _check_preview_within_limit(self) -> ContextConfig:
        if self.preview_tokens is not None and self.preview_tokens > self.tool_result_limit:
            raise ValueError(
                f"preview_tokens {self.preview_tokens} is above tool_result_limit "
                f"{self.tool_result_limit}: the preview of an offloaded result must be smaller "
                "than the size that triggers offloading; lower preview_tokens or leave it unset"
            )
        return self

    @model_validator(mode="after")
    def _check_preview_within_reserve(self) -> ContextConfig:
        # Only when both are given: a window known only at run time is checked (and an
        # unset preview adjusted, with a warning) by the Compressor.
        if self.preview_tokens is None or self.context_window is None:
            return self
        reserve = self.reserve_tokens(self.context_window)
        if self.preview_tokens > reserve:
            raise ValueError(
                f"preview_tokens {self.preview_tokens} does not fit the reserve of {reserve} "
                f"tokens (reserve_ratio {_show(self.reserve_ratio)} × context_window "
                f"{self.context_window}): a truncated result could never stay beside its call; "
                f"lower preview_tokens to at most {reserve} or raise reserve_ratio"
            )
        return self

    @model_validator(mode="after")
    def _check_window_holds_a_compaction(self) -> ContextConfig:
        if self.context_window is not None:
            problem = self._window_problem(self.context_window, "context_window")
            if problem is not None:
                raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _check_background_lead(self) -> ContextConfig:
        if self.background_lead >= self.trigger_ratio:
            raise ValueError(
                f"background_lead {self.background_lead} is not below trigger_ratio "
                f"{self.trigger_ratio}: the background summary would start at an empty "
                "context; use a lead under the trigger (0.1 is the default)"
            )
        return self

    @model_validator(mode="after")
    def _check_reserve_below_trigger(self) -> ContextConfig:
        if self.reserve_ratio >= self.trigger_ratio:
            raise ValueError(
                f"reserve_ratio {_show(self.reserve_ratio)} is not below trigger_ratio "
                f"{_show(self.trigger_ratio)}: after compression the kept messages must fit under "
                "the trigger, or every call would compress again; lower reserve_ratio "
                "(e.g. 0.1) or raise trigger_ratio"
            )
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "context config") -> ContextConfig:
        """Build a config from a mapping, such as a parsed JSON or YAML file.

        Args:
            data: field names to values; missing fields take their defaults.
            source: how to name the input in error messages.

        Raises:
            ConfigError: `data` is not a mapping, has an unknown key, or an impossible value.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"{source} is a {type(data).__name__}, not a mapping: give an object such as "
                '{"trigger_ratio": 0.8}'
            )
        try:
            return cls(**{str(key): value for key, value in data.items()})
        except ConfigError as exc:
            # __init__ names the input "ContextConfig(...)"; here it came from `source`.
            message = str(exc).replace(_INIT_SOURCE, source, 1)
            raise ConfigError(message) from None

    @classmethod
    def from_json_file(cls, path: str | os.PathLike[str]) -> ContextConfig:
        """Read a config from a JSON file holding one object.

        This is a small synchronous read meant for start-up, not for an event loop's hot path.

        Raises:
            ConfigError: the file is missing or unreadable, is not valid JSON, or holds an
                impossible value.
        """
        name = os.fspath(path)
        data = read_json_file(
            name, "context config", missing="or build the config in code with ContextConfig(...)"
        )
        return cls.from_dict(data, source=f"context config file {name!r}")

    def window(self, model_window: int | None) -> int:
        """The context window in effect: `context_window` if set, else the model's.

        Raises:
            ConfigError: neither is known, or the model's is not a positive number.
        """
        if self.context_window is not None:
            return self.context_window
        if model_window is None:
            raise ConfigError(
                "no context window is known: the model does not report one; set "
                "ContextConfig(context_window=...) to the model's window in tokens"
            )
        if model_window < 1:
            raise ConfigError(
                f"the model reports a context window of {model_window} tokens: set "
                "ContextConfig(context_window=...) to the model's real window"
            )
        return model_window

    def compaction_floor(self, window: int) -> int:
        """The fewest tokens the context holds after a compaction in a `window`-token window:
        the summary template's own text (its placeholders empty, four characters a token)
        and one tool result cut to its preview (`preview_budget`)."""
        return self._template_tokens() + self.preview_budget(window)

    def _template_tokens(self) -> int:
        # The template's own text, and the search phrase at its shortest (the agent's reader
        # tools are not known here; with a path and a tool's call it is longer).
        parts = list(string.Formatter().parse(self.summary_template))
        literal = "".join(text for text, _, _, _ in parts)
        searches = sum(field == "how_to_search" for _, field, _, _ in parts)
        return math.ceil((len(literal) + searches * len(how_to_search("", None))) / CHARS_PER_TOKEN)

    def check_window(self, window: int) -> None:
        """Refuse a window too small for this config: one whose trigger is below what a
        compaction leaves at the least (`compaction_floor`), so that every compaction would
        leave the context over the trigger, and every request over the window.

        Args:
            window: the context window in tokens (the model's, when the config sets none).

        Raises:
            ConfigError: the window cannot hold what a compaction leaves, naming both.
        """
        problem = self._window_problem(window, "the context window")
        if problem is not None:
            raise ConfigError(problem)

    def _window_problem(self, window: int, name: str) -> str | None:
        floor = self.compaction_floor(window)
        trigger = self.trigger_tokens(window)
        if floor <= trigger:
            return None
        template = self._template_tokens()
        # The smallest window that holds the floor: the preview may grow with the window (up
        # to its cap), so step up from the first candidate until it holds.
        least = max(window + 1, math.ceil(floor / self.trigger_ratio))
        while self.compaction_floor(least) > self.trigger_tokens(least):
            least = math.ceil(self.compaction_floor(least) / self.trigger_ratio)
        return (
            f"{name} {window} cannot hold what a compaction leaves: the summary template's own "
            f"text (~{template} tokens) and one tool result's preview ({floor - template} "
            f"tokens) take {floor} tokens, over the trigger of {trigger} tokens (trigger_ratio "
            f"{_show(self.trigger_ratio)} × {window}); give the model's real window (at least "
            f"{least} tokens here), or raise trigger_ratio, or lower preview_tokens"
        )

    def trigger_tokens(self, window: int) -> int:
        """Token count above which the context is compressed."""
        return int(window * self.trigger_ratio)

    def reserve_tokens(self, window: int) -> int:
        """Tokens of recent messages kept when the context is compressed."""
        return int(window * self.reserve_ratio)

    def result_room(self, window: int) -> int:
        """Tokens a tool result may keep in the context of a `window`-token window: the
        reserve, and never less than `RESULT_FLOOR`."""
        return max(RESULT_FLOOR, self.reserve_tokens(window))

    def calls_room(self, window: int) -> int:
        """Tokens the newest turn may keep, its answered tool calls included, before the long
        arguments of those calls are cut (a call that wrote a whole file): what the trigger
        leaves beside the reserve, and never less than the reserve."""
        reserve = self.reserve_tokens(window)
        return max(reserve, self.trigger_tokens(window) - reserve)

    def chose(self, field: str) -> bool:
        """Whether `field` was given (to the constructor or `from_dict`) rather than left to
        its default; a default may be derived from the window, a chosen value never is."""
        return field in self.model_fields_set

    def preview_budget(self, window: int | None = None) -> int:
        """Tokens an offloaded tool result keeps in the context (see `preview_tokens`).

        The `preview_tokens` given; unset, `min(tool_result_limit, 2000)`, and within the
        room of the window (`result_room`) when the window is known, so the default fits
        every window. (`tool_result_limit` itself is not scaled: a result under it stays
        whole until a compression, which cuts fresh results that exceed the reserve.)
        """
        if self.preview_tokens is not None:
            return self.preview_tokens
        budget = min(self.tool_result_limit, DEFAULT_PREVIEW_CAP)
        return budget if window is None else min(budget, self.result_room(window))

    def misfit(self, window: int) -> bool:
        """Whether a value the user chose (`tool_result_limit`, `preview_tokens`) makes the
        previews of a `window`-token window larger than its room: said once, then cut."""
        if self.chose("preview_tokens") or self.chose("tool_result_limit"):
            chosen = self.preview_tokens
            if chosen is None:
                chosen = min(self.tool_result_limit, DEFAULT_PREVIEW_CAP)
            return chosen > self.result_room(window)
        return False

    def summary_budget_tokens(self, window: int | None) -> int:
        """The most tokens a summary may take (see `summary_max_tokens`)."""
        if self.summary_max_tokens is not None:
            return self.summary_max_tokens
        if window is None:
            return SUMMARY_BUDGET_FLOOR
        return max(SUMMARY_BUDGET_FLOOR, int(window * SUMMARY_BUDGET_SHARE))

    def summary_input_budget(self, window: int | None) -> int | None:
        """The most tokens of what leaves sent to the summary model (see
        `summary_input_tokens`); None (no bound) when neither it nor the window is known."""
        return self.summary_input_tokens if self.summary_input_tokens is not None else window

    def artifact_index_budget(self, window: int | None) -> int:
        """The most tokens the artifact index may take (see `artifact_index_tokens`)."""
        if self.artifact_index_tokens is not None:
            return self.artifact_index_tokens
        share = int(ARTIFACT_INDEX_SHARE * self.summary_budget_tokens(window))
        return max(ARTIFACT_INDEX_FLOOR, share)


class LongNumber:
    """A whole number of a configuration file too long to be a setting (over `LONG_DIGITS`
    digits), kept as its length: Python refuses to parse one of over 4,300 digits, and no
    setting needs more than a dozen. It is not an `int`, so every check refuses it by name.
    """

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"a {self.digits}-digit number"


LONG_DIGITS = 40
"""Whole numbers of a configuration file with more digits than this are read as `LongNumber`."""


def _parse_int(text: str) -> int | LongNumber:
    digits = len(text.lstrip("-"))
    return LongNumber(digits) if digits > LONG_DIGITS else int(text)


def read_json_file(name: str, what: str, *, missing: str = "") -> Any:
    """The value in a JSON file, for configuration read at start-up (a small sync read).

    Bounded on hostile input: a value nested more than `MAX_DEPTH` levels deep is refused
    (Python's parser would raise `RecursionError` a few hundred levels later), and a whole
    number of more than `LONG_DIGITS` digits is read as a `LongNumber` that every check
    refuses with the path of its field.

    Raises:
        ConfigError: the file is missing or unreadable, is not valid JSON, or is nested too
            deeply, naming `what`.
    """
    try:
        with open(name, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        hint = f"check the path, {missing}" if missing else "check the path"
        raise ConfigError(f"{what} file {name!r} does not exist: {hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what} file {name!r} cannot be read: {exc}") from None
    too_deep_error = ConfigError(
        f"{what} file {name!r} is nested more than {MAX_DEPTH} levels deep: a configuration "
        "needs a few; check that the file is the one you meant"
    )
    try:
        data = load_json(text, MAX_DEPTH, parse_int=_parse_int, object_pairs_hook=_object)
    except TooDeep:
        raise too_deep_error from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{what} file {name!r} is not valid JSON: {exc.msg} at line {exc.lineno} column "
            f"{exc.colno}"
        ) from None
    repeated = _repeated_key(data)
    if repeated is not None:
        raise ConfigError(
            f"{what} file {name!r}: {repeated} is given twice in one object; JSON would keep "
            "only the last: give it once"
        )
    return data


class _Repeated(dict[str, Any]):
    """A JSON object of a configuration file that gave a key twice (`key`)."""

    key = ""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; one that gives a key twice is marked (`_Repeated`): Python's
    json keeps the last silently, and a configuration would lose the first."""
    value = dict(pairs)
    if len(value) == len(pairs):
        return value
    seen: set[str] = set()
    marked = _Repeated(value)
    for key, _ in pairs:
        if key in seen:
            marked.key = key
            break
        seen.add(key)
    return marked


def _repeated_key(data: Any) -> str | None:
    """The JSON path of the first key given twice in `data` (within `MAX_DEPTH`), or None."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Repeated):
            return f"{path}.{value.key}" if path else value.key
        if isinstance(value, dict):
            items = [(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()]
            stack.extend(reversed(items))
        elif isinstance(value, list):
            stack.extend(reversed([(v, f"{path}[{i}]") for i, v in enumerate(value)]))
    return None


def _describe(exc: ValidationError, source: str) -> str:
    """One line per problem, with our own messages as written and pydantic's made plain."""
    import difflib  # only needed on this error path; keeps `import ctxoffload` lighter

    lines = [f"{source} is invalid:"]
    known = list(ContextConfig.model_fields)
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(field, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "the fields are " + ", ".join(known)
            lines.append(f"- unknown field {field!r}: {hint}")
        elif error["type"] == "value_error":
            lines.append(f"- {error['ctx']['error']}")
        else:
            where = field or "value"
            lines.append(f"- {where} {error.get('input')!r}: {error['msg']}")
    return "\n".join(lines)
