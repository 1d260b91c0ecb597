"""A LlamaIndex `LLM` as the model that writes a memory's summaries (DESIGN §18).

`summary_model=` of `OffloadingMemory` takes what LlamaIndex calls a model: an `LLM` (`OpenAI`,
`Anthropic`, `Ollama`, ...). A function-calling LLM is asked as LlamaIndex's own structured
prediction asks it (`FunctionCallingProgram`: one tool whose schema is the summary's, its call
required), through `achat_with_tools`, which keeps the provider's answer and what it cost;
any other LLM is asked with `achat` and the request's JSON instructions, its reply parsed by
ctxoffload. Never streamed, and no step of the agent's: the memory calls it itself.

`ctxoffload eval`'s read mode asks a function-calling LLM (a `FunctionCallingLLM` whose metadata
says so) with tools: its `achat_with_tools`, the tools as `FunctionTool`s of the schemas given
(never run: eval runs the calls), the messages as LlamaIndex's (`to_llama_index`), the calls read
back by the LLM's own `get_tool_calls_from_response`. Any other LLM is asked for text only.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from typing import Any

from .._doors.doors import DOORS
from .._doors.summary_replies import (
    HostSummaryModel,
    call_input,
    schema_for_host,
    summary_reply,
    usage_of,
)
from ..compression import Summary
from ..exceptions import ConfigError
from ..messages import Block, Msg, TextBlock, ToolCallBlock
from ..model import ChatModel, ModelResponse, Usage
from ._llama_index_messages import INSTALL_HINT, to_llama_index

__all__ = ["TAKES", "LlamaIndexSummaryModel", "llama_index_summary_model"]

try:
    _LLM: Any = importlib.import_module("llama_index.core.llms").LLM
    _ChatMessage: Any = importlib.import_module("llama_index.core.base.llms.types").ChatMessage
    _FunctionTool: Any = importlib.import_module("llama_index.core.tools").FunctionTool
    _ToolMetadata: Any = importlib.import_module("llama_index.core.tools").ToolMetadata
    _FunctionCallingLLM: Any = importlib.import_module(
        "llama_index.core.llms.function_calling"
    ).FunctionCallingLLM
    _pydantic: Any = importlib.import_module("pydantic")
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
        # eval's read mode: only an LLM that says it calls functions has `achat_with_tools`.
        self.asks_with_tools = self._calls_tools and isinstance(llm, _FunctionCallingLLM)
        if not self.asks_with_tools:
            self.text_only_reason = (
                f"{type(llm).__name__} is no function-calling LLM: its metadata's "
                "is_function_calling_model is False or it is no FunctionCallingLLM; a "
                "FunctionCallingLLM (OpenAI(...), Anthropic(...)) is asked with tools"
            )

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

    async def _ask_with_tools(self, messages: Any, tools: Any) -> ModelResponse:
        """The LLM's reply to `messages` (as LlamaIndex's `ChatMessage`s) with `tools` offered
        as `FunctionTool`s it never runs, through `achat_with_tools`, not streamed; the calls
        it made (its `get_tool_calls_from_response`), ids kept, as ctxoffload's."""
        offered = [_offered_tool(tool["function"]) for tool in tools]
        response = await self.llm.achat_with_tools(
            offered,
            chat_history=to_llama_index(messages),
            allow_parallel_tool_calls=True,  # eval runs every call of the round, as OpenAI's
        )
        calls = self.llm.get_tool_calls_from_response(response, error_on_no_tool_call=False)
        said = response.message.content
        blocks: list[Block] = [TextBlock(text=said)] if isinstance(said, str) and said else []
        blocks += [
            ToolCallBlock(
                id=str(call.tool_id or ""), name=call.tool_name, input=call_input(call.tool_kwargs)
            )
            for call in calls
        ]
        message = Msg(role="assistant", content=blocks)
        return ModelResponse(message=message, usage=_usage(response))


def _offered_tool(function: Mapping[str, Any]) -> Any:
    """An OpenAI `function` as a LlamaIndex `FunctionTool` whose parameters are the schema
    given, as it is: LlamaIndex reads a tool's schema from a pydantic model (`fn_schema`), so
    the model's JSON schema is replaced by the given one (pydantic's `json_schema_extra`)."""
    name = str(function["name"])
    given = dict(function.get("parameters") or {"type": "object", "properties": {}})

    def as_given(schema: dict[str, Any]) -> None:
        schema.clear()
        schema.update(given)

    config = _pydantic.ConfigDict(json_schema_extra=as_given)
    arguments = _pydantic.create_model(f"{name}_arguments", __config__=config)
    metadata = _ToolMetadata(
        description=str(function.get("description") or name), name=name, fn_schema=arguments
    )
    return _FunctionTool(fn=_run_elsewhere, metadata=metadata)


def _run_elsewhere(**arguments: Any) -> str:
    """A tool's call is run by its asker (`ctxoffload eval`), never by LlamaIndex."""
    raise RuntimeError("ctxoffload runs this tool's calls itself")


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
