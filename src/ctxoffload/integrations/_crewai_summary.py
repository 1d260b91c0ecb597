"""A CrewAI LLM as the model that writes a run's summaries (DESIGN §18).

`summary_model=` of `ContextOffloadHooks` takes what CrewAI calls a model: an `LLM` (any
`BaseLLM`, CrewAI's native providers and the user's own) or a model string, made into
`crewai.LLM(model=...)` as an agent's `llm=` string is. The LLM is asked with `response_model`
(CrewAI's structured output: the provider's, or instructor's), else, where the LLM refuses
it, with the request's JSON instructions, its reply parsed by ctxoffload.

The call is CrewAI's own `LLM.call`, run on a worker thread (it is synchronous), streaming
off for it (`call_stream_override`: nothing reaches the console or a streaming UI), with no
agent and no task: CrewAI's events of it name neither, and it is no step of any executor.
Its tokens are what the LLM's usage grew by during the call (`get_token_usage_summary`).

`ctxoffload eval`'s read mode asks an LLM that calls functions (CrewAI's own test: its
`supports_function_calling()`) with tools, as CrewAI's executor does: the messages as OpenAI
chat messages (CrewAI's `LLMMessage`), the tools in OpenAI's function form, `call` with no
`available_functions`, so that it hands the calls back and runs none. CrewAI offers a tool by
a sanitised name (`Read` as `read`): its calls are read back by the names they were given.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

from .._doors.doors import DOORS
from .._doors.summary_replies import (
    HostSummaryModel,
    call_input,
    schema_for_host,
    summary_reply,
    usage_of,
)
from .._loop import off_loop_long
from .._overflow import is_context_overflow
from ..compression import Summary
from ..exceptions import ConfigError
from ..formats import to_openai
from ..messages import Block, Msg, TextBlock, ToolCallBlock
from ..model import ChatModel, ModelResponse, Usage

__all__ = ["TAKES", "CrewAISummaryModel", "crewai_summary_model"]

INSTALL_HINT = "CrewAI is not installed: pip install 'ctxoffload[crewai]'"

try:
    _crewai: Any = importlib.import_module("crewai")
    _base_llm: Any = importlib.import_module("crewai.llms.base_llm")
    _agent_utils: Any = importlib.import_module("crewai.utilities.agent_utils")
    _string_utils: Any = importlib.import_module("crewai.utilities.string_utils")
    _pydantic: Any = importlib.import_module("pydantic")
except ImportError as exc:  # pragma: no cover - exercised where CrewAI is absent
    raise ConfigError(INSTALL_HINT) from exc

TAKES = "a CrewAI LLM (crewai.LLM(model=...), any BaseLLM) or a model string crewai.LLM takes"
"""What `summary_model=` of the hooks takes, as its refusal says it."""


class CrewAISummaryModel(HostSummaryModel):
    """A CrewAI `BaseLLM` as a `ChatModel` that writes summaries.

    Args:
        llm: the CrewAI LLM.
        window: the hooks' configured window, for an LLM that reports none.
    """

    door = DOORS["crewai"].name  # the record says the summary came through it

    def __init__(self, llm: Any, window: int | None) -> None:
        self.llm = llm
        try:
            reported = llm.get_context_window_size()
        except Exception:  # a user's LLM whose window lookup fails: the configured one
            reported = None
        super().__init__(str(getattr(llm, "model", "") or type(llm).__name__), reported, window)
        self.asks_with_tools = _calls_functions(llm)
        if not self.asks_with_tools:
            self.text_only_reason = (
                f"{type(llm).__name__}.supports_function_calling() is not True, so CrewAI "
                "sends it no tools either"
            )

    async def _ask(
        self, system: str, turns: list[tuple[str, str]], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """Ask the LLM once (on a worker thread), not streamed, with `response_model=Summary`
        where the schema is ctxoffload's own; its tokens are what its usage grew by."""
        chat = [{"role": "system", "content": system}] if system else []
        chat += [{"role": role, "content": text} for role, text in turns]
        structured = response_schema is not None and schema_for_host(response_schema) is Summary
        before = _usage(self.llm)
        answer = await off_loop_long(self._call, chat, structured)
        return summary_reply(_text(answer), _grown(before, _usage(self.llm)))

    async def _ask_with_tools(self, messages: Any, tools: Any) -> ModelResponse:
        """The LLM's reply to `messages` (OpenAI chat messages) with `tools` offered, through
        `call` with no `available_functions` (on a worker thread, not streamed): the calls it
        hands back, ids kept and named as `tools` name them, or its text."""
        names = {_offered_as(tool["function"]["name"]): tool["function"]["name"] for tool in tools}
        chat = [_named_as_offered(message, names) for message in to_openai(messages)]
        before = _usage(self.llm)
        answer = await off_loop_long(self._call_with_tools, chat, [dict(t) for t in tools])
        usage = _grown(before, _usage(self.llm))
        blocks: list[Block] = []
        if isinstance(answer, list):  # the calls, run by none (no available_functions)
            for call in answer:
                found = _agent_utils.extract_tool_call_info(call)
                if found is not None:
                    call_id, name, arguments = found
                    blocks.append(
                        ToolCallBlock(
                            id=str(call_id), name=names.get(name, name), input=call_input(arguments)
                        )
                    )
        elif said := _text(answer):
            blocks.append(TextBlock(text=said))
        return ModelResponse(message=Msg(role="assistant", content=blocks), usage=usage)

    def _call_with_tools(self, chat: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        with _not_streamed(self.llm):
            return self.llm.call(chat, tools=tools, available_functions=None)

    def _call(self, chat: list[dict[str, str]], structured: bool) -> Any:
        """CrewAI's `call`, its stream off; without `response_model` where the LLM refuses
        it (a provider or a model without structured output)."""
        with _not_streamed(self.llm):
            if structured:
                try:
                    return self.llm.call([dict(m) for m in chat], response_model=Summary)
                except (TypeError, ValueError, NotImplementedError) as exc:
                    if is_context_overflow(exc):
                        raise  # the summariser halves the request: no second call of it
            return self.llm.call([dict(m) for m in chat])


@contextlib.contextmanager
def _not_streamed(llm: Any) -> Iterator[None]:
    """CrewAI's call-scoped override of the LLM's `stream` (where this CrewAI has it)."""
    override = getattr(_base_llm, "call_stream_override", None)
    if override is None:
        yield
        return
    with override(llm, False):
        yield


def _calls_functions(llm: Any) -> bool:
    """Whether CrewAI would send `llm` tools: its own test (`check_native_tool_support`), a
    `supports_function_calling` that says so (a `BaseLLM` of the user's may have none)."""
    supports = getattr(llm, "supports_function_calling", None)
    try:
        return callable(supports) and supports() is True
    except Exception:  # a user's LLM whose check fails: asked for text only
        return False


def _offered_as(name: str) -> str:
    """The name CrewAI offers a tool by (its providers sanitise every tool's name)."""
    return str(_string_utils.sanitize_tool_name(name))


def _named_as_offered(message: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """An OpenAI chat message whose calls of an offered tool name it as CrewAI offers it."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    offered = {given: sanitised for sanitised, given in names.items()}
    renamed = []
    for call in calls:
        function = dict(call["function"])
        function["name"] = offered.get(function["name"], function["name"])
        renamed.append({**call, "function": function})
    return {**message, "tool_calls": renamed}


def _grown(before: tuple[int, int] | None, after: tuple[int, int] | None) -> Usage | None:
    """The tokens a call cost: what the LLM's lifetime usage grew by during it."""
    if before is None or after is None:
        return None
    return usage_of(after[0] - before[0], after[1] - before[1])


def _text(answer: Any) -> str:
    """A `call`'s answer as text: a pydantic model (instructor's) as its JSON."""
    if isinstance(answer, _pydantic.BaseModel):
        return str(answer.model_dump_json())
    return answer if isinstance(answer, str) else str(answer)


def _usage(llm: Any) -> tuple[int, int] | None:
    """The LLM's lifetime prompt and completion tokens, where it keeps them."""
    try:
        summary = llm.get_token_usage_summary()
        return int(summary.prompt_tokens), int(summary.completion_tokens)
    except Exception:  # an LLM of the user's that keeps none
        return None


def crewai_summary_model(model: object, window: int | None) -> ChatModel | None:
    """`model` as the summary `ChatModel` (the hooks' adapter, `SummaryWriter`): a CrewAI
    `BaseLLM` as it is, a string as `crewai.LLM(model=...)`; None for anything else.

    Raises:
        ConfigError: a string CrewAI makes no LLM of (a provider it does not know, or one
            whose package is not installed).
    """
    if isinstance(model, str):
        try:
            llm = _crewai.LLM(model=model)
        except Exception as exc:  # CrewAI raises ImportError, ValueError, its own errors
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(
                f"summary_model {model!r} is no model CrewAI makes an LLM of ({reason}): pass "
                f"{TAKES}, leave it out for the agent's own llm, or summary_model=False for "
                "the extractive summary"
            ) from None
        return CrewAISummaryModel(llm, window)
    if isinstance(model, _base_llm.BaseLLM):
        return CrewAISummaryModel(model, window)
    return None
