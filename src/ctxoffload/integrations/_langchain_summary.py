"""A LangChain chat model as the model that writes ctxoffload's summaries.

`summary_writer` is the LangChain door's `SummaryWriter`: its `summary_model` is a LangChain
chat model or an `init_chat_model` string (resolved when the middleware is built, as
LangChain's own `SummarizationMiddleware` resolves one), and left out, the model of each
request writes them. The model is asked as LangChain's structured output
(`with_structured_output(schema, method="json_schema", include_raw=True)`) binds it where it
has one (the provider's JSON mode, or the schema as a forced tool), else with the compressor's
JSON instructions; ctxoffload's parser reads the reply. Where that structured output is the
bound model followed by LangChain's parsers, the bound model is called alone and its reply read
by ctxoffload's parser: LangChain's `include_raw` chain runs its two branches in a thread pool
made for each call (4-6 ms of CPU a summary, against 0.5 ms for the model's own call). Every call
carries LangChain's marks for a call internal to a middleware (tag `nostream`, metadata
`lc_source: summarization` and `internal_call_metadata()`), so a summary is never streamed
into the user's UI nor shown in `run.messages`.
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Sequence
from typing import Any

from .._doors.doors import DOORS
from .._doors.summaries import SummaryWriter
from .._doors.summary_replies import HostSummaryModel, summary_reply, unresolved, usage_of
from .._loop import off_loop_long
from ..messages import Msg
from ..model import ModelResponse, Usage
from ._langchain_messages import from_langchain, to_langchain
from ._model_name import model_name_of

__all__ = ["LangChainSummaryModel", "declared_window", "summary_writer"]

_BaseChatModel: Any = importlib.import_module("langchain_core.language_models").BaseChatModel
_internal: Any = importlib.import_module("langchain.agents.middleware.internal_call_transformer")
_TAG_NOSTREAM: str = importlib.import_module("langgraph.constants").TAG_NOSTREAM

TAKES = "a LangChain chat model (BaseChatModel) or an init_chat_model string ('openai:gpt-4o')"
"""What the LangChain door takes as `summary_model`, in its refusal's words."""


def summary_writer(given: object, context_window: int | None) -> SummaryWriter:
    """The LangChain door's `SummaryWriter` for its `summary_model` argument.

    Args:
        given: `summary_model` as the user gave it.
        context_window: the config's window, the summary model's when it declares none.

    Raises:
        ConfigError: `given` is none of what the door takes, or a string `init_chat_model`
            cannot resolve (its provider's package is missing, no key is set), with
            LangChain's reason.
    """

    def adapt(model: object) -> LangChainSummaryModel | None:
        if isinstance(model, str):
            model = _resolved(model)
        if not isinstance(model, _BaseChatModel):
            return None
        return LangChainSummaryModel(model, context_window)

    return SummaryWriter(given, adapt=adapt, takes=TAKES)


def _resolved(name: str) -> Any:
    """The chat model `init_chat_model` makes of `name`, now rather than at the first
    compaction: a name it cannot resolve is refused with its reason."""
    init_chat_model = importlib.import_module("langchain.chat_models").init_chat_model
    try:
        return init_chat_model(name)
    except Exception as exc:  # ImportError, ValueError, a provider's missing-key error
        raise unresolved(name, "langchain's init_chat_model", TAKES, exc) from None


class LangChainSummaryModel(HostSummaryModel):
    """A LangChain chat model in ctxoffload's `ChatModel` protocol, for summaries only.

    Args:
        model: the LangChain chat model.
        context_window: the window to assume when the model declares none in its profile.
    """

    door = DOORS["langchain"].name  # the record says the summary came through it
    asks_with_tools = True  # `bind_tools`: ctxoffload eval's read mode

    def __init__(self, model: Any, context_window: int | None = None) -> None:
        self.model = model
        name = model_name_of(model) or type(model).__name__
        super().__init__(name, declared_window(model), context_window)
        self._guard = threading.Lock()
        # Per schema (as JSON): the model with LangChain's structured output, or None when
        # the model has none (its `bind_tools` is BaseChatModel's, which raises).
        self._structured: dict[str, tuple[Any, Any] | None] = {}

    async def _ask_messages(
        self, messages: Sequence[Msg], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """Ask the model with the messages as LangChain's (`to_langchain`), marked as a call
        internal to a middleware, through its structured output where it has one."""
        config = {
            "tags": [_TAG_NOSTREAM],
            "metadata": {"lc_source": "summarization", **_internal.internal_call_metadata()},
            "run_name": "ctxoffload_summary",
        }
        asked = to_langchain(messages)
        structured = self._structured_for(response_schema) if response_schema else None
        if structured is None:
            reply = await _invoked(self.model, asked, config)
            return summary_reply(_text_of(reply), _usage(reply))
        bound, whole = structured
        if bound is not None:
            # The bound model alone; its reply read as LangChain's parsers would: the
            # arguments of its tool call, else its text (a provider's JSON mode).
            reply = await _invoked(bound, asked, config)
            return summary_reply(_call_arguments(reply) or _text_of(reply), _usage(reply))
        answer = await whole.ainvoke(asked, config=config)
        raw = answer.get("raw") if isinstance(answer, dict) else None
        parsed = answer.get("parsed") if isinstance(answer, dict) else answer
        if parsed is None:
            # LangChain could not parse it (a provider that answered in prose, a call cut
            # off): the arguments of its tool call, else its text, go to ctxoffload's parser.
            parsed = _call_arguments(raw) or _text_of(raw)
        return summary_reply(parsed, _usage(raw))

    async def _ask_with_tools(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """The model's reply with `tools` bound (LangChain's `bind_tools`), its calls as
        ctxoffload's (`from_langchain`)."""
        config = {"tags": [_TAG_NOSTREAM], "run_name": "ctxoffload_eval"}
        reply = await self.model.bind_tools(list(tools)).ainvoke(
            to_langchain(messages), config=config
        )
        (message,) = from_langchain([reply])
        return ModelResponse(message=message, usage=_usage(reply))

    def _structured_for(self, schema: dict[str, Any]) -> tuple[Any, Any] | None:
        """For `schema`: (the model bound for structured output, or None where LangChain's
        chain is not of the shape known, then the whole chain), or None where the model has
        no structured output."""
        key = json.dumps(schema, sort_keys=True, default=str)
        with self._guard:
            if key in self._structured:
                return self._structured[key]
        titled = schema if schema.get("title") else {**schema, "title": "Summary"}
        structured = None
        # `method="json_schema"`: the provider's own JSON mode where it has one (OpenAI,
        # Anthropic, Gemini, Ollama); a model whose `with_structured_output` takes no method
        # (BaseChatModel's own ignores it) is asked again without.
        for method in ({"method": "json_schema"}, {}):
            try:
                structured = self.model.with_structured_output(titled, include_raw=True, **method)
                break
            except NotImplementedError:
                break  # no structured output: JSON instructions and ctxoffload's parser
            except (TypeError, ValueError):
                continue
        made = None if structured is None else (_bound_model(structured), structured)
        with self._guard:
            self._structured[key] = made
        return made


def _bound_model(structured: Any) -> Any:
    """The model bound for structured output in what `with_structured_output(...,
    include_raw=True)` made (`{"raw": bound} | parsers`), or None for any other shape."""
    first = getattr(structured, "first", None)
    steps = getattr(first, "steps__", None)
    if not isinstance(steps, dict) or set(steps) != {"raw"}:
        return None
    bound = steps["raw"]
    return bound if callable(getattr(bound, "invoke", None)) else None


def declared_window(model: Any) -> int | None:
    """The input window a LangChain chat model declares (`model.profile`, LangChain 1.x)."""
    profile = getattr(model, "profile", None)
    window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return window if isinstance(window, int) and window > 0 else None


def _text_of(reply: Any) -> str:
    text = getattr(reply, "text", None)
    if isinstance(text, str):
        return text
    content = getattr(reply, "content", "")
    return content if isinstance(content, str) else json.dumps(content, default=str)


def _call_arguments(reply: Any) -> dict[str, Any] | None:
    """The arguments of the first tool call of `reply`, when structured output asked for
    the summary as a tool call."""
    for call in getattr(reply, "tool_calls", None) or ():
        args = call.get("args") if isinstance(call, dict) else None
        if isinstance(args, dict) and args:
            return args
    return None


def _usage(reply: Any) -> Usage | None:
    """The tokens LangChain reported for the call (`usage_metadata`)."""
    usage = getattr(reply, "usage_metadata", None)
    if not isinstance(usage, dict):
        return None
    details = usage.get("input_token_details")
    cached = details.get("cache_read") if isinstance(details, dict) else None
    return usage_of(usage.get("input_tokens"), usage.get("output_tokens"), cached)


async def _invoked(runnable: Any, asked: list[Any], config: dict[str, Any]) -> Any:
    """The reply of `runnable` (a chat model, or one bound by `bind`) to `asked`.

    A chat model with no async code of its own (LangChain's `_agenerate` and `_astream` left
    as they are, as a local or scripted model has) is called with its sync `invoke`, as every
    door calls a sync model (`off_loop_long`: inline where a sync agent waits for the call,
    in a worker thread elsewhere); its `ainvoke` would run that same `_generate` in a thread
    of the loop's executor at each summary. Any other is awaited with `ainvoke`.
    """
    if _sync_only(runnable):
        return await off_loop_long(runnable.invoke, asked, config)
    return await runnable.ainvoke(asked, config=config)


def _sync_only(runnable: Any) -> bool:
    """Whether the chat model of `runnable` (itself, or the one a `bind` wraps) has no async
    generation of its own."""
    model = runnable if isinstance(runnable, _BaseChatModel) else getattr(runnable, "bound", None)
    if not isinstance(model, _BaseChatModel):
        return False
    kind = type(model)
    return kind._agenerate is _BaseChatModel._agenerate and kind._astream is _BaseChatModel._astream
