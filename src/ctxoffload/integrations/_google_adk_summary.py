"""A Google ADK model as the model that writes a session's summaries (DESIGN §18).

`summary_model=` of `ContextOffloadPlugin` takes what ADK calls a model: a `BaseLlm`
(`Gemini`, `LiteLlm`, `AnthropicLlm`, one of the user's own) or a model string ADK's
`LLMRegistry` resolves, as an `LlmAgent` takes it. The model is asked with ADK's own structured
output (the request's `response_schema` and `response_mime_type="application/json"`), through
`generate_content_async(request, stream=False)` called directly: no flow, no callback, no
event, so the summary is never streamed to the user nor written as a turn of the agent's.

`ctxoffload eval`'s read mode asks the same way, with the read-back tools as function
declarations in the request's config (ADK runs none of them: no flow is there to run them) and
the conversation as ADK's contents (`to_genai`). A call the model made without an id is given
one of ADK's own client ids (`adk-...`), which is stripped from the next request as an ADK
flow strips it, and a call's thought signature (Gemini asks it back with every call of a
thinking model) goes back with the call.
"""

from __future__ import annotations

import base64
import importlib
from collections.abc import Sequence
from typing import Any

from .._doors.doors import DOORS
from .._doors.summary_replies import HostSummaryModel, schema_for_host, summary_reply, usage_of
from ..exceptions import ConfigError, ModelError
from ..messages import Block, Msg, TextBlock, ThinkingBlock, ToolCallBlock
from ..model import ChatModel, ModelResponse, Usage
from ._google_adk_messages import INSTALL_HINT, to_genai

__all__ = ["TAKES", "AdkSummaryModel", "adk_summary_model"]

try:
    _BaseLlm: Any = importlib.import_module("google.adk.models.base_llm").BaseLlm
    _LlmRequest: Any = importlib.import_module("google.adk.models.llm_request").LlmRequest
    _LLMRegistry: Any = importlib.import_module("google.adk.models.registry").LLMRegistry
    _types: Any = importlib.import_module("google.genai.types")
    _functions: Any = importlib.import_module("google.adk.flows.llm_flows.functions")
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
    asks_with_tools = True  # function declarations in the config: ctxoffload eval's read mode

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
        final = await self._answer(contents, config, "the summary request")
        parts = final.content.parts if final.content is not None else None
        text = "".join(part.text for part in parts or () if part.text and not part.thought)
        return summary_reply(text, _usage(final))

    async def _ask_with_tools(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """The model's reply to `messages` (as ADK's contents, the system prompt as the
        config's instruction) with `tools` as function declarations; its text, thoughts and
        function calls (ids and thought signatures kept) as one ctxoffload assistant message.

        Raises:
            ModelError: it answered with an error, or not at all.
        """
        system = "\n\n".join(m.text for m in messages if m.role == "system" and m.text)
        asked = [m for m in messages if m.role != "system"]
        contents = to_genai(asked)
        for msg, content in zip(asked, contents, strict=True):
            _sign_calls(msg, content)
            _functions.remove_client_function_call_id(content)  # as an ADK flow sends it
        declarations = [
            _types.FunctionDeclaration(
                name=tool["function"]["name"],
                description=tool["function"].get("description") or "",
                parameters_json_schema=tool["function"].get("parameters") or {"type": "object"},
            )
            for tool in tools
        ]
        config = _types.GenerateContentConfig(
            system_instruction=system or None,
            tools=[_types.Tool(function_declarations=declarations)],
        )
        final = await self._answer(contents, config, "the request")
        parts = final.content.parts if final.content is not None else None
        message = Msg(role="assistant", content=_reply_blocks(parts or ()))
        return ModelResponse(message=message, usage=_usage(final))

    async def _answer(self, contents: list[Any], config: Any, asked: str) -> Any:
        """The model's last whole response to `contents` with `config`, not streamed.

        Raises:
            ModelError: it answered with an error, or not at all.
        """
        request = _LlmRequest(model=self.llm.model, contents=contents, config=config)
        final = None
        async for response in self.llm.generate_content_async(request, stream=False):
            if not response.partial:
                final = response
        if final is None:
            raise ModelError(f"{self.model_name} gave no answer to {asked}")
        if final.error_code:
            raise ModelError(
                f"{self.model_name} answered {asked} with {final.error_code}: "
                f"{final.error_message or 'no message'}"
            )
        return final


def _reply_blocks(parts: Sequence[Any]) -> list[Block]:
    """The blocks of the model's reply: each function call (an ADK client id where the model
    gave none, its thought signature kept on the block), thought and text."""
    blocks: list[Block] = []
    for part in parts:
        call, signature = part.function_call, part.thought_signature
        encoded = base64.b64encode(signature).decode("ascii") if signature else None
        if call is not None:
            fields = {
                "id": call.id or _functions.generate_client_function_call_id(),
                "name": call.name or "",
                "input": dict(call.args or {}),
            }
            blocks.append(
                ToolCallBlock.model_validate(
                    {**fields, "thought_signature": encoded} if encoded else fields
                )
            )
        elif part.text and part.thought:
            blocks.append(ThinkingBlock(thinking=part.text, signature=encoded))
        elif part.text:
            blocks.append(TextBlock(text=part.text))
    return blocks


def _sign_calls(msg: Msg, content: Any) -> None:
    """The thought signature each call of `msg` came with, back on its part of `content`
    (`to_genai` made one part of each block)."""
    if not isinstance(msg.content, list):
        return  # text: one part, no call
    for block, part in zip(msg.content, content.parts or (), strict=True):
        signature = (block.model_extra or {}).get("thought_signature")
        if isinstance(block, ToolCallBlock) and isinstance(signature, str):
            part.thought_signature = base64.b64decode(signature)


def _usage(response: Any) -> Usage | None:
    """The tokens ADK's response reports (`usage_metadata`)."""
    usage = response.usage_metadata
    return usage_of(
        getattr(usage, "prompt_token_count", None),
        getattr(usage, "candidates_token_count", None),
        getattr(usage, "cached_content_token_count", None),
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
