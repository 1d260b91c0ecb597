"""A Google ADK model as the model that writes a session's summaries (DESIGN §18).

`summary_model=` of `ContextOffloadPlugin` takes what ADK calls a model: a `BaseLlm`
(`Gemini`, `LiteLlm`, `AnthropicLlm`, one of the user's own) or a model string ADK's
`LLMRegistry` resolves, as an `LlmAgent` takes it. The model is asked with ADK's own structured
output (the request's `response_schema` and `response_mime_type="application/json"`), through
`generate_content_async(request, stream=False)` called directly: no flow, no callback, no
event, so the summary is never streamed to the user nor written as a turn of the agent's.
"""

from __future__ import annotations

import importlib
from typing import Any

from .._doors.doors import DOORS
from .._doors.summary_replies import HostSummaryModel, schema_for_host, summary_reply, usage_of
from ..exceptions import ConfigError, ModelError
from ..model import ChatModel, ModelResponse
from ._google_adk_messages import INSTALL_HINT

__all__ = ["TAKES", "AdkSummaryModel", "adk_summary_model"]

try:
    _BaseLlm: Any = importlib.import_module("google.adk.models.base_llm").BaseLlm
    _LlmRequest: Any = importlib.import_module("google.adk.models.llm_request").LlmRequest
    _LLMRegistry: Any = importlib.import_module("google.adk.models.registry").LLMRegistry
    _types: Any = importlib.import_module("google.genai.types")
except ImportError as exc:  # pragma: no cover - exercised where ADK is absent
    raise ConfigError(INSTALL_HINT) from exc

TAKES = "a Google ADK BaseLlm or a model string ADK's LLMRegistry resolves"
"""What `summary_model=` of the plugin takes, as its refusal says it."""


class AdkSummaryModel(HostSummaryModel):
    """An ADK `BaseLlm` as a `ChatModel` that writes summaries.

    Args:
        llm: the ADK model.
        window: the door's configured window (ADK reports none for a model).
    """

    door = DOORS["google-adk"].name  # the record says the summary came through it

    def __init__(self, llm: Any, window: int | None) -> None:
        self.llm = llm
        super().__init__(llm.model, window)

    async def _ask(
        self, system: str, turns: list[tuple[str, str]], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """Ask the model once, not streamed, with `response_schema` as ADK's structured output.

        Raises:
            ModelError: it answered with an error, or not at all.
        """
        config = _types.GenerateContentConfig(system_instruction=system or None)
        if response_schema is not None:
            config.response_mime_type = "application/json"
            config.response_schema = schema_for_host(response_schema)
        contents = [
            _types.Content(
                role="model" if role == "assistant" else "user", parts=[_types.Part(text=text)]
            )
            for role, text in turns
        ]
        request = _LlmRequest(model=self.llm.model, contents=contents, config=config)
        final = None
        async for response in self.llm.generate_content_async(request, stream=False):
            if not response.partial:
                final = response
        if final is None:
            raise ModelError(f"{self.model_name} gave no answer to the summary request")
        if final.error_code:
            raise ModelError(
                f"{self.model_name} answered the summary request with {final.error_code}: "
                f"{final.error_message or 'no message'}"
            )
        parts = final.content.parts if final.content is not None else None
        text = "".join(part.text for part in parts or () if part.text and not part.thought)
        usage = final.usage_metadata
        return summary_reply(
            text,
            usage_of(
                getattr(usage, "prompt_token_count", None),
                getattr(usage, "candidates_token_count", None),
                getattr(usage, "cached_content_token_count", None),
            ),
        )


def adk_summary_model(model: object, window: int | None) -> ChatModel | None:
    """`model` as the summary `ChatModel` (the door's adapter, `SummaryWriter`): a `BaseLlm`
    as it is, a string through ADK's registry as an `LlmAgent` resolves it; None for
    anything else.

    Raises:
        ConfigError: a string ADK's registry resolves to no model.
    """
    if isinstance(model, str):
        try:
            llm = _LLMRegistry.new_llm(model)
        except (ValueError, ImportError, TypeError) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(
                f"summary_model {model!r} is no model Google ADK resolves ({reason}): pass "
                f"{TAKES} (Gemini(model=...), LiteLlm(model='provider/name')), leave it out "
                "for the agent's own model, or summary_model=False for the extractive summary"
            ) from None
        return AdkSummaryModel(llm, window)
    if isinstance(model, _BaseLlm):
        return AdkSummaryModel(model, window)
    return None
