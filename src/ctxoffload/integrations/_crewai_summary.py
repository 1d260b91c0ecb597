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
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

from .._doors.doors import DOORS
from .._doors.summary_replies import HostSummaryModel, schema_for_host, summary_reply, usage_of
from .._overflow import is_context_overflow
from ..compression import Summary
from ..exceptions import ConfigError
from ..model import ChatModel, ModelResponse

__all__ = ["TAKES", "CrewAISummaryModel", "crewai_summary_model"]

INSTALL_HINT = "CrewAI is not installed: pip install 'ctxoffload[crewai]'"

try:
    _crewai: Any = importlib.import_module("crewai")
    _base_llm: Any = importlib.import_module("crewai.llms.base_llm")
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

    async def _ask(
        self, system: str, turns: list[tuple[str, str]], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """Ask the LLM once (on a worker thread), not streamed, with `response_model=Summary`
        where the schema is ctxoffload's own; its tokens are what its usage grew by."""
        chat = [{"role": "system", "content": system}] if system else []
        chat += [{"role": role, "content": text} for role, text in turns]
        structured = response_schema is not None and schema_for_host(response_schema) is Summary
        before = _usage(self.llm)
        answer = await asyncio.to_thread(self._call, chat, structured)
        after = _usage(self.llm)
        given = used = None
        if before is not None and after is not None:
            given, used = after[0] - before[0], after[1] - before[1]
        return summary_reply(_text(answer), usage_of(given, used))

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
