"""A LlamaIndex `LLM` as the model that writes a memory's summaries (DESIGN §18).

`summary_model=` of `OffloadingMemory` takes what LlamaIndex calls a model: an `LLM` (`OpenAI`,
`Anthropic`, `Ollama`, ...). A function-calling LLM is asked as LlamaIndex's own structured
prediction asks it (`FunctionCallingProgram`: one tool whose schema is the summary's, its call
required), through `achat_with_tools`, which keeps the provider's answer and what it cost;
any other LLM is asked with `achat` and the request's JSON instructions, its reply parsed by
ctxoffload. Never streamed, and no step of the agent's: the memory calls it itself.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from typing import Any

from .._doors.doors import DOORS
from .._doors.summary_replies import HostSummaryModel, schema_for_host, summary_reply, usage_of
from ..compression import Summary
from ..exceptions import ConfigError
from ..model import ChatModel, ModelResponse, Usage
from ._llama_index_messages import INSTALL_HINT

__all__ = ["TAKES", "LlamaIndexSummaryModel", "llama_index_summary_model"]

try:
    _LLM: Any = importlib.import_module("llama_index.core.llms").LLM
    _ChatMessage: Any = importlib.import_module("llama_index.core.base.llms.types").ChatMessage
    _FunctionTool: Any = importlib.import_module("llama_index.core.tools").FunctionTool
except ImportError as exc:  # pragma: no cover - exercised where LlamaIndex is absent
    raise ConfigError(INSTALL_HINT) from exc

TAKES = "a LlamaIndex LLM (OpenAI(...), Anthropic(...), the agent's llm)"
"""What `summary_model=` of the memory takes, as its refusal says it."""

_TOOL = "write_summary"
"""The name of the one tool a function-calling LLM is asked to call with the summary."""


class LlamaIndexSummaryModel(HostSummaryModel):
    """A LlamaIndex `LLM` as a `ChatModel` that writes summaries.

    Args:
        llm: the LlamaIndex LLM.
        window: the memory's window, for an LLM whose metadata names none.
    """

    door = DOORS["llama-index"].name  # the record says the summary came through it

    def __init__(self, llm: Any, window: int | None) -> None:
        self.llm = llm
        metadata = llm.metadata
        name = str(getattr(metadata, "model_name", "") or type(llm).__name__)
        super().__init__(name, getattr(metadata, "context_window", None), window)
        self._calls_tools = bool(getattr(metadata, "is_function_calling_model", False))

    async def _ask(
        self, system: str, turns: list[tuple[str, str]], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """Ask the LLM once, not streamed: by a required call of a tool shaped as the summary
        where the LLM calls tools and the schema is ctxoffload's own, else as a chat whose
        reply is parsed."""
        chat = [_ChatMessage(role="system", content=system)] if system else []
        chat += [_ChatMessage(role=role, content=text) for role, text in turns]
        structured = (
            response_schema is not None
            and schema_for_host(response_schema) is Summary
            and self._calls_tools
        )
        if structured:
            response = await self.llm.achat_with_tools(
                [_summary_tool()], chat_history=chat, tool_required=True
            )
            text = _called_with(self.llm, response)
        else:
            response = await self.llm.achat(chat)
            text = response.message.content or ""
        return summary_reply(text, _usage(response))


def _summary_tool() -> Any:
    """The tool a function-calling LLM is asked to call: its arguments are the summary."""

    def write_summary(**fields: str) -> str:
        return json.dumps(fields)

    return _FunctionTool.from_defaults(
        fn=write_summary,
        name=_TOOL,
        description="Write the summary of the earlier conversation, every field filled.",
        fn_schema=Summary,
    )


def _called_with(llm: Any, response: Any) -> str:
    """The arguments the LLM called the summary tool with, as JSON; its text when it called
    none (the summariser parses what it can of it)."""
    calls = llm.get_tool_calls_from_response(response, error_on_no_tool_call=False)
    for call in calls:
        if call.tool_name == _TOOL and isinstance(call.tool_kwargs, Mapping):
            return json.dumps(dict(call.tool_kwargs))
    return str(response.message.content or "")


def _usage(response: Any) -> Usage | None:
    """The input and output tokens a LlamaIndex answer reports: in its `additional_kwargs`
    (OpenAI's integration puts them there) or in the provider's `raw` answer's `usage`."""
    raw = response.raw
    usage = raw.get("usage") if isinstance(raw, Mapping) else getattr(raw, "usage", None)
    for place in (response.additional_kwargs or {}, usage):
        given = _count(place, "prompt_tokens", "input_tokens")
        used = _count(place, "completion_tokens", "output_tokens")
        if given is not None or used is not None:
            return usage_of(given, used)
    return None


def _count(place: Any, *names: str) -> int | None:
    """The first of `names` that `place` (a mapping or an object) holds as an int."""
    for name in names:
        value = place.get(name) if isinstance(place, Mapping) else getattr(place, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def llama_index_summary_model(model: object, window: int | None) -> ChatModel | None:
    """`model` as the summary `ChatModel` (the memory's adapter, `SummaryWriter`): a
    LlamaIndex `LLM`; None for anything else."""
    return LlamaIndexSummaryModel(model, window) if isinstance(model, _LLM) else None
