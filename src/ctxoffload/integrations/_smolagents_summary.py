"""A smolagents `Model` as the model that writes a run's summaries (DESIGN §18).

`summary_model=` of `OffloadingStepCallbacks` takes what smolagents calls a model: a `Model`
(`InferenceClientModel`, `LiteLLMModel`, `OpenAIModel`, `TransformersModel`, one of the user's
own). It is asked with `generate(messages, response_format=...)`, smolagents' structured
output (a JSON schema), and, where the model refuses it (smolagents' `ValueError` "does not
support structured outputs"), with the request's JSON instructions, its reply parsed by
ctxoffload. `generate` is called directly, on a worker thread (it is synchronous): never
`generate_stream`, no step, no log line of the agent's, so the summary is neither shown nor
kept in the agent's memory; its `token_usage` is the answer's usage.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Sequence
from typing import Any

from .._doors.doors import DOORS
from .._doors.host_models import (
    overflow_of,
    replied,
    schema_for_host,
    summary_turns,
    summary_window,
)
from ..compression import Summary
from ..exceptions import ConfigError
from ..messages import Msg
from ..model import ChatModel, ModelResponse

__all__ = ["TAKES", "SmolagentsSummaryModel", "smolagents_summary_model"]

INSTALL_HINT = "smolagents is not installed: pip install 'ctxoffload[smolagents]'"

try:
    _models: Any = importlib.import_module("smolagents.models")
except ImportError as exc:  # pragma: no cover - exercised where smolagents is absent
    raise ConfigError(INSTALL_HINT) from exc

TAKES = "a smolagents Model (InferenceClientModel(...), LiteLLMModel(...), the agent's model)"
"""What `summary_model=` of the callbacks takes, as its refusal says it."""


class SmolagentsSummaryModel:
    """A smolagents `Model` as a `ChatModel` that writes summaries.

    Args:
        model: the smolagents model.
        window: the callbacks' configured window (smolagents' models declare none).
    """

    door = DOORS["smolagents"].name  # the record says the summary came through it

    def __init__(self, model: Any, window: int | None) -> None:
        self.model = model
        self.model_name: str = str(getattr(model, "model_id", None) or type(model).__name__)
        self.context_window = summary_window(None, window)

    async def generate(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> ModelResponse:
        """Ask the model once (on a worker thread), not streamed, for the summary of
        `messages`, with `response_schema` as smolagents' `response_format`.

        Raises:
            ContextOverflowError: the model said the request is over its window.
        """
        system, turns = summary_turns(messages)
        role = _models.MessageRole
        chat = [_message(role.SYSTEM, system)] if system else []
        chat += [
            _message(role.ASSISTANT if said == "assistant" else role.USER, text)
            for said, text in turns
        ]
        response_format = None
        if response_schema is not None:
            response_format = {
                "type": "json_schema",
                "json_schema": {
                    "name": "summary",
                    "schema": response_schema,
                    # Strict where every field is required and none other allowed (ours).
                    "strict": schema_for_host(response_schema) is Summary,
                },
            }
        try:
            answer = await asyncio.to_thread(self._generate, chat, response_format)
        except Exception as exc:
            overflow = overflow_of(exc, self.model_name)
            if overflow is not None:
                raise overflow from exc
            raise
        usage = answer.token_usage
        return replied(
            _text(answer.content),
            input_tokens=getattr(usage, "input_tokens", None),
            output_tokens=getattr(usage, "output_tokens", None),
        )

    def _generate(self, chat: list[Any], response_format: dict[str, Any] | None) -> Any:
        """smolagents' `generate`; without `response_format` where the model refuses it."""
        if response_format is not None:
            try:
                return self.model.generate(chat, response_format=response_format)
            except ValueError as exc:  # smolagents' "does not support structured outputs"
                if overflow_of(exc, self.model_name) is not None:
                    raise
        return self.model.generate(chat)


def _message(role: Any, text: str) -> Any:
    return _models.ChatMessage(role=role, content=[{"type": "text", "text": text}])


def _text(content: Any) -> str:
    """A smolagents answer's content as text: a string, or its text parts joined."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def smolagents_summary_model(model: object, window: int | None) -> ChatModel | None:
    """`model` as the summary `ChatModel` (the callbacks' adapter, `SummaryWriter`): a
    smolagents `Model`; None for anything else."""
    return SmolagentsSummaryModel(model, window) if isinstance(model, _models.Model) else None
