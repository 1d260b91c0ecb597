"""The chat-model interface shared by the compressor (summaries) and the agent (replies).

It lives at the top of the package rather than in `agent/` because `compression` needs it
and must not import `agent` (see DESIGN.md section 1).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from .exceptions import ModelError
from .messages import Msg, TextBlock, ToolCallBlock

__all__ = ["ChatModel", "ModelResponse", "ScriptStep", "ScriptedModel", "Usage", "model_label"]


class Usage(BaseModel):
    """Token usage a provider reported for one call.

    Args:
        input_tokens: the tokens of the whole prompt, as the provider counted them; the
            next decision starts from this figure (`ContextTokenTracker.anchor`). With
            Anthropic, add its `cache_read_input_tokens` and `cache_creation_input_tokens`
            to its `input_tokens`, which counts only the uncached part.
        output_tokens: the tokens of the reply.
        cached_input_tokens: the tokens of the prompt the provider's prompt cache served
            (OpenAI's `usage.prompt_tokens_details.cached_tokens`); None when not reported.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int | None = None


class ModelResponse(BaseModel):
    """One model reply: an assistant message and, when reported, the usage.

    Args:
        message: the assistant message (text, tool calls, thinking).
        usage: the tokens the provider reported; None when it reported none.
    """

    message: Msg
    usage: Usage | None = None


@runtime_checkable
class ChatModel(Protocol):
    """Anything that can answer a list of messages.

    Attributes:
        model_name: the provider's model name; also used to pick a tokenizer.
        context_window: the model's context window in tokens. A model may lack it when
            `ContextConfig(context_window=...)` gives the window instead.

    `generate` must be a coroutine function (`async def`): `Agent` checks this when it is
    constructed.
    """

    model_name: str
    context_window: int

    async def generate(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> ModelResponse:
        """Answer `messages`.

        Args:
            messages: the context, oldest first; a system prompt, if any, comes first.
            tools: JSON schemas of the tools the model may call (OpenAI function format).
            response_schema: when given, the reply's text must be JSON matching this schema.

        Raises:
            ContextOverflowError: the provider says the prompt is larger than the window.
            ModelError: any other failure.
        """
        ...


ScriptStep = (
    Msg | str | BaseException | Callable[[Sequence[Msg]], "Msg | str | Awaitable[Msg | str]"]
)
"""One step of a `ScriptedModel`'s script: a reply `Msg`, a plain text reply, an exception to
raise, or a function of the messages that returns a reply (or awaits one). `ScriptedModel`
also takes a `dict` (a JSON reply) and tool calls; see there."""


class ScriptedModel:
    """A deterministic `ChatModel` that plays back a script; for tests, examples and the demo.

    Each call consumes one step. A step is a reply `Msg`, a string (a plain text reply), a
    `dict` (a JSON reply, handy for structured summaries), a `ToolCallBlock` or a list of
    `ToolCallBlock` and `TextBlock` objects (an assistant message calling tools), an
    exception to raise, or a function of the messages that returns (or awaits) one of those.
    When the script runs out, the model raises `ModelError` (or, with `default` set, returns
    `default`).

    Args:
        script: the steps, in order.
        model_name: reported name; picks the tokenizer when counting.
        context_window: reported window in tokens.
        default: reply used once the script is exhausted, instead of raising.

    Attributes:
        calls: every list of messages the model was called with, for assertions.
    """

    def __init__(
        self,
        script: Sequence[Any] = (),
        *,
        model_name: str = "scripted",
        context_window: int = 128_000,
        default: Any = None,
    ) -> None:
        self.model_name = model_name
        self.context_window = context_window
        self._script = list(script)
        self._default = default
        self.calls: list[list[Msg]] = []
        self.tools_seen: list[list[dict[str, Any]] | None] = []
        self.schemas_seen: list[dict[str, Any] | None] = []

    def add(self, *steps: Any) -> None:
        """Append steps to the script.

        Args:
            *steps: the steps, in order (see the class docstring for what a step may be).
        """
        self._script.extend(steps)

    @property
    def remaining(self) -> int:
        """How many scripted steps have not been played yet."""
        return len(self._script)

    async def generate(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> ModelResponse:
        """Play the next step of the script.

        Args:
            messages: the context; kept in `calls`.
            tools: the tool schemas; kept in `tools_seen`.
            response_schema: the requested JSON schema; kept in `schemas_seen`.

        Returns:
            The step's reply.

        Raises:
            ModelError: the script ran out (and no `default` was given), or a step is not
                something the model can reply with.
            BaseException: a step that is an exception is raised as it is.
        """
        self.calls.append(list(messages))
        self.tools_seen.append(list(tools) if tools is not None else None)
        self.schemas_seen.append(response_schema)
        if self._script:
            step = self._script.pop(0)
        elif self._default is not None:
            step = self._default
        else:
            raise ModelError(
                f"ScriptedModel {self.model_name!r} has no steps left after "
                f"{len(self.calls) - 1} calls: add more with .add(...) or pass default="
            )
        if callable(step) and not isinstance(step, (Msg, BaseException)):
            step = step(messages)
            if isinstance(step, Awaitable):
                step = await step
        if isinstance(step, BaseException):
            raise step
        return ModelResponse(message=_as_reply(step))


def model_label(model: Any) -> str:
    """How the record names a model: its `model_name`, else its class; a `ScriptedModel` is
    named as such (`scripted`, or `scripted (gpt-4o-mini)` for one given a provider's name),
    so that a record never passes a script off as a provider's model."""
    name = getattr(model, "model_name", None)
    if isinstance(model, ScriptedModel):
        return "scripted" if name in (None, "scripted") else f"scripted ({name})"
    return name if isinstance(name, str) else type(model).__name__


def _as_reply(step: Any) -> Msg:
    if isinstance(step, Msg):
        return step
    if isinstance(step, str):
        return Msg(role="assistant", content=step)
    if isinstance(step, dict):
        return Msg(role="assistant", content=json.dumps(step))
    if isinstance(step, ToolCallBlock):
        return Msg(role="assistant", content=[step])
    if isinstance(step, list) and all(isinstance(b, (ToolCallBlock, TextBlock)) for b in step):
        return Msg(role="assistant", content=list(step))
    raise ModelError(f"ScriptedModel step {step!r} is not a Msg, str, dict or tool call list")
