"""Who writes a door's summaries: one rule for every door that writes one (DESIGN §18).

`summary_model` is what the host calls a model, adapted into the `ChatModel` protocol by the
door's own adapter (a LangChain chat model, a pydantic-ai `Model`, ...), or a ctxoffload
`ChatModel`. Left out, the agent's own model writes them, as ctxoffload's `Agent` does,
wherever the door sees that model; `summary_model=False` keeps the extractive summary.
Anything else is refused when the door is built, never at the first compaction.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable

from ..exceptions import ConfigError
from ..model import ChatModel

__all__ = ["Adapter", "SummaryWriter", "is_chat_model"]

Adapter = Callable[[object], "ChatModel | None"]
"""A door's adapter: the host's model (or model name) as a `ChatModel`, or None when what
it was given is not one. It may raise `ConfigError` for a model name its host cannot
resolve, with the host's reason."""


ADAPTED_KEPT = 16
"""How many agent models a door keeps adapted (a server that builds a model per request
would otherwise keep every one it was given)."""


def is_chat_model(model: object) -> bool:
    """Whether `model` is a ctxoffload `ChatModel` (its `generate` a coroutine function)."""
    return not isinstance(model, (str, bytes)) and inspect.iscoroutinefunction(
        getattr(model, "generate", None)
    )


def _no_adapter(model: object) -> ChatModel | None:
    return None


class SummaryWriter:
    """A door's choice of summary model, checked when the door is built and resolved at each
    session's first compaction (`model`).

    Args:
        given: the door's `summary_model` argument: None (the agent's own model, where the
            door sees it), False (the extractive summary), a ctxoffload `ChatModel`, or what
            `adapt` takes.
        adapt: the door's adapter from its host's model type (`Adapter`); none by default.
        takes: what `adapt` takes, in the refusal's words ("a LangChain chat model or an
            init_chat_model string").

    Raises:
        ConfigError: `given` is none of those (a model name the host cannot resolve, an
            object of another framework, a sync `generate`), naming what the door takes.
    """

    def __init__(self, given: object, *, adapt: Adapter = _no_adapter, takes: str = "") -> None:
        self.given = given
        self._adapt = adapt
        self._guard = threading.Lock()
        self._adapted: dict[int, tuple[object, ChatModel | None]] = {}
        self.fixed: ChatModel | None = None
        if given is None or given is False:
            return
        if given is True:
            raise ConfigError(
                "summary_model=True is not a model: leave it out for the agent's own model, "
                "pass a model for another one, or summary_model=False for the extractive "
                "summary"
            )
        self.fixed = given if is_chat_model(given) else adapt(given)  # type: ignore[assignment]
        if self.fixed is None:
            what = f"the string {given!r}" if isinstance(given, str) else type(given).__name__
            host = f"{takes}, or " if takes else ""
            raise ConfigError(
                f"summary_model is {what}, not {host}a ctxoffload ChatModel (an object with an "
                "async generate(messages)): pass one of those, leave it out for the agent's "
                "own model, or summary_model=False for the extractive summary"
            )

    @property
    def opted_out(self) -> bool:
        """Whether the user asked for the extractive summary (`summary_model=False`)."""
        return self.given is False

    def model(self, agent_model: object = None) -> ChatModel | None:
        """The model that writes a session's summaries: the one given, else the agent's own
        (`agent_model`, as the door sees it, adapted once per object), else None (the
        extractive summary: opted out, or the door cannot see the agent's model)."""
        if self.opted_out:
            return None
        if self.fixed is not None:
            return self.fixed
        if agent_model is None:
            return None
        if is_chat_model(agent_model):
            return agent_model  # type: ignore[return-value]
        with self._guard:
            kept = self._adapted.get(id(agent_model))
            if kept is not None and kept[0] is agent_model:
                return kept[1]
            try:
                adapted = self._adapt(agent_model)
            except ConfigError:
                adapted = None  # a model the host itself runs, but no summary: the extract
            self._adapted[id(agent_model)] = (agent_model, adapted)
            while len(self._adapted) > ADAPTED_KEPT:  # a model made per request: the oldest go
                del self._adapted[next(iter(self._adapted))]
            return adapted

    def who(self, agent_model: object = None) -> str:
        """Who writes the summaries, in the record's words."""
        if self.opted_out:
            return "extractive (summary_model=False)"
        if self.fixed is not None:
            return "summary_model"
        if self.model(agent_model) is not None:
            return "the agent's model"
        return "extractive (no model the door can see)"
