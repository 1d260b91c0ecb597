"""`Activation`: when a context manager runs, and the checks every manager's settings share.

Rules mean the same wherever they are written (Python, a JSON template, an OpenSearch
template): `message_count_exceed` counts the context's messages other than the system
prompt; `tokens_exceed` and `ratio_exceed` count everything the model would be sent
(system prompt, summary, messages, tool schemas), the ratio against the window;
`idle_seconds_exceed` measures the time since the run's last model call (the provider's
prompt cache has expired past its lifetime, so rewriting the middle of the context then
breaks no cached prefix). Each fires when the value is strictly greater than the limit;
several rules combine with AND.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...exceptions import ConfigError

__all__ = ["Activation", "SettingError", "check_int", "check_ratio", "unknown_keys"]


class SettingError(ConfigError):
    """One impossible setting; `key` is its name, so a loader can prefix the JSON path.

    `others`: the other settings a problem between settings involves (a preview above the
    limit). A loader names the one its config set when the config left `key` at its default,
    so the path points at what the user wrote.
    """

    def __init__(self, key: str, problem: str, *, others: tuple[str, ...] = ()) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem
        self.others = others


def check_int(key: str, value: Any, *, minimum: int) -> int:
    """`value` if it is an int of at least `minimum` (a bool is not an int here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingError(key, f"{value!r} is not a whole number")
    if value < minimum:
        raise SettingError(key, f"{value} is below {minimum}")
    return value


def check_ratio(key: str, value: Any, *, low: float, high: float, low_open: bool = False) -> float:
    """`value` as a float in [low, high] (or (low, high] when `low_open`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SettingError(key, f"{value!r} is not a number")
    number = float(value)
    if number != number:  # NaN
        raise SettingError(key, "NaN is not a ratio")
    if number > high:
        raise SettingError(key, f"{value} is above {high}")
    if number < low or (low_open and number == low):
        bound = f"above {low}" if low_open else f"at least {low}"
        raise SettingError(key, f"{value} is not {bound}")
    return number


def unknown_keys(given: Mapping[str, Any], known: set[str], what: str) -> None:
    """Raise for the first key of `given` that is not in `known`, naming the known ones."""
    for key in given:
        if key not in known:
            raise SettingError(
                str(key), f"unknown setting for {what}; it takes: {', '.join(sorted(known))}"
            )


# The stored form of "always" in OpenSearch templates.
_ALWAYS = {"rule_type": "always"}


@dataclass(frozen=True)
class Activation:
    """When a manager runs: always (no rule), or when every rule given holds (AND).

    Args:
        message_count_exceed: runs when the context holds more messages than this, the
            system prompt not counted.
        tokens_exceed: runs when what the model would be sent costs more tokens than this.
        ratio_exceed: runs when that cost is more than this share of the window; in (0, 1].
        idle_seconds_exceed: runs when more than this many seconds passed since the run's
            last model call (and before its first): set it to the provider's prompt cache
            lifetime (300, five minutes, at Anthropic and OpenAI; 3600 for Anthropic's
            one-hour cache) so
            that a manager rewriting the middle of the context (`ClearToolUses`) runs only
            when the cache has expired anyway, and breaks no cached prefix.

    Raises:
        ConfigError: a negative count or time, or a ratio outside (0, 1].

    Example::

        # Clear old tool outputs early, but only once the cache is cold; always past 0.9.
        ContextPipeline(pre_llm=[
            ClearToolUses(activation=Activation(ratio_exceed=0.5, idle_seconds_exceed=300)),
            ClearToolUses(activation=Activation(ratio_exceed=0.9)),
        ])
    """

    message_count_exceed: int | None = None
    tokens_exceed: int | None = None
    ratio_exceed: float | None = None
    idle_seconds_exceed: float | None = None

    def __post_init__(self) -> None:
        if self.message_count_exceed is not None:
            check_int("message_count_exceed", self.message_count_exceed, minimum=0)
        if self.tokens_exceed is not None:
            check_int("tokens_exceed", self.tokens_exceed, minimum=0)
        if self.ratio_exceed is not None:
            ratio = check_ratio("ratio_exceed", self.ratio_exceed, low=0, high=1, low_open=True)
            object.__setattr__(self, "ratio_exceed", ratio)
        if self.idle_seconds_exceed is not None:
            idle = self.idle_seconds_exceed
            if isinstance(idle, bool) or not isinstance(idle, int | float) or idle != idle:
                raise SettingError("idle_seconds_exceed", f"{idle!r} is not a number of seconds")
            if idle < 0:
                raise SettingError("idle_seconds_exceed", f"{idle} is below 0")
            object.__setattr__(self, "idle_seconds_exceed", float(idle))

    @classmethod
    def from_value(cls, value: Any) -> Activation:
        """An `Activation` from an `Activation`, None (always) or a template's mapping.

        The mapping takes `message_count_exceed`, `tokens_exceed`, `ratio_exceed`,
        `idle_seconds_exceed`, and the `{"rule_type": "always"}` that OpenSearch stores for a
        manager without rules.

        Args:
            value: the activation, None, or the mapping.

        Raises:
            ConfigError: not a mapping, an unknown key, or an impossible value.
        """
        if value is None or isinstance(value, Activation):
            return value or cls()
        if not isinstance(value, Mapping):
            raise SettingError("activation", f"{value!r} is not an object of rules")
        if dict(value) == _ALWAYS:
            return cls()
        unknown_keys(
            value,
            {"message_count_exceed", "tokens_exceed", "ratio_exceed", "idle_seconds_exceed"},
            "an activation",
        )
        return cls(**{str(k): v for k, v in value.items()})

    @property
    def is_always(self) -> bool:
        """Whether no rule is set."""
        return (
            self.message_count_exceed is None
            and self.tokens_exceed is None
            and (self.ratio_exceed is None)
            and self.idle_seconds_exceed is None
        )

    def holds(
        self, *, messages: int, tokens: int, window: int | None, idle: float | None = None
    ) -> bool:
        """Whether every rule holds for a context of `messages` messages and `tokens` tokens.

        Args:
            messages: messages other than the system prompt.
            tokens: tokens of everything the model would be sent.
            window: the context window; needed only by `ratio_exceed`.
            idle: seconds since the run's last model call; None before the first (nothing
                is cached yet: `idle_seconds_exceed` holds).

        Raises:
            ConfigError: `ratio_exceed` is set and the window is unknown.
        """
        if self.message_count_exceed is not None and messages <= self.message_count_exceed:
            return False
        if self.tokens_exceed is not None and tokens <= self.tokens_exceed:
            return False
        if self.ratio_exceed is not None:
            if window is None:
                raise ConfigError(
                    "activation ratio_exceed needs the context window: give the model a "
                    "context_window or set ContextConfig(context_window=...)"
                )
            if tokens <= self.ratio_exceed * window:
                return False
        return not (
            self.idle_seconds_exceed is not None
            and idle is not None
            and idle <= self.idle_seconds_exceed
        )

    def describe(self) -> str:
        """The rules in a few words, for logs and errors."""
        parts = []
        if self.message_count_exceed is not None:
            parts.append(f"more than {self.message_count_exceed} messages")
        if self.tokens_exceed is not None:
            parts.append(f"more than {self.tokens_exceed} tokens")
        if self.ratio_exceed is not None:
            parts.append(f"more than {self.ratio_exceed:g} of the window")
        if self.idle_seconds_exceed is not None:
            parts.append(f"more than {self.idle_seconds_exceed:g} s since the last model call")
        return " and ".join(parts) or "always"
