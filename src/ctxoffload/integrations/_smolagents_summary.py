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
from typing import Any

from .._doors.doors import DOORS
from .._doors.summary_replies import HostSummaryModel, schema_for_host, summary_reply, usage_of
from .._overflow import is_context_overflow
from ..compression import Summary
from ..model import ChatModel, ModelResponse
from ._smolagents_steps import MODELS

__all__ = ["TAKES", "SmolagentsSummaryModel", "smolagents_summary_model"]

TAKES = "a smolagents Model (InferenceClientModel(...), LiteLLMModel(...), the agent's model)"
"""What `summary_model=` of the callbacks takes, as its refusal says it."""


class SmolagentsSummaryModel(HostSummaryModel):
    """A smolagents `Model` as a `ChatModel` that writes summaries.

    Args:
        model: the smolagents model.
        window: the callbacks' configured window (smolagents' models declare none).
    """

    door = DOORS["smolagents"].name  # the record says the summary came through it

    def __init__(self, model: Any, window: int | None) -> None:
        self.model = model
        super().__init__(str(getattr(model, "model_id", None) or type(model).__name__), window)

    async def _ask(
        self, system: str, turns: list[tuple[str, str]], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """Ask the model once (on a worker thread), not streamed, with `response_schema` as
        smolagents' `response_format`."""
        role = MODELS.MessageRole
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
        answer = await asyncio.to_thread(self._generate, chat, response_format)
        usage = answer.token_usage
        return summary_reply(
            _text(answer.content),
            usage_of(getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None)),
        )

    def _generate(self, chat: list[Any], response_format: dict[str, Any] | None) -> Any:
        """smolagents' `generate`; without `response_format` where the model refuses it."""
        if response_format is not None:
            try:
                return self.model.generate(chat, response_format=response_format)
            except ValueError as exc:  # smolagents' "does not support structured outputs"
                if is_context_overflow(exc):
                    raise  # the summariser halves the request: no second call of it
        return self.model.generate(chat)


def _message(role: Any, text: str) -> Any:
    return MODELS.ChatMessage(role=role, content=[{"type": "text", "text": text}])


def _text(content: Any) -> str:
    """A smolagents answer's content as text: a string, or its text parts joined."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def smolagents_summary_model(model: object, window: int | None) -> ChatModel | None:
    """`model` as the summary `ChatModel` (the callbacks' adapter, `SummaryWriter`): a
    smolagents `Model`; None for anything else."""
    return SmolagentsSummaryModel(model, window) if isinstance(model, MODELS.Model) else None
