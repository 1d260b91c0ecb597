"""What every door's summary adapter shares (DESIGN §18): the host's model as a `ChatModel`
(`HostSummaryModel`), the request as turns of text, the summary schema in the form hosts take,
the window a summary model is given, the host's answer handed back as the compressor reads it,
and a model name fit for an error message.

A door's adapter (`SummaryWriter`'s `adapt`) asks the host's own model, in the host's own
types, for the five fields; what it answers (the object its structured output parsed, or the
text of a reply the compressor's parser reads) goes back as one `ModelResponse` whose text is
that object as JSON, with the tokens the host reported.

A summary request is a system prompt and one user message (`compression._summarize`): an
adapter sends it as text turns, offers no tool, and never streams (a summary is no turn of the
agent's). What the host's model raises goes to the summariser as it is: an error saying the
request is over the model's window (`is_context_overflow`) is read there as an overflow, and
the request is halved and asked again.

An adapter that can also offer tools (`asks_with_tools`) serves `ctxoffload eval`, whose read
mode gives the model Read and Grep and one round of calls.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from .._depth import MAX_DEPTH, RAW_ARGUMENTS, load_json
from .._secrets import Secrets
from ..compression import Summary
from ..exceptions import ConfigError
from ..messages import Msg
from ..model import ModelResponse, Usage
from ..text import message_text

__all__ = [
    "SUMMARY_WINDOW",
    "HostSummaryModel",
    "call_input",
    "masked_name",
    "name_refused",
    "schema_for_host",
    "summary_reply",
    "summary_turns",
    "summary_window",
    "unresolved",
    "usage_of",
]

logger = logging.getLogger("ctxoffload")

SUMMARY_WINDOW = 128_000
"""The window a summary model is taken to have when neither it nor the door's config says
(the compressor splits what it sends into chunks of half of it)."""

Turns = list[tuple[str, str]]
"""A summary request's turns: ("user" or "assistant", text) each, oldest first."""


class HostSummaryModel:
    """A host's model in ctxoffload's `ChatModel` protocol, for summaries only: the base of
    every door's adapter.

    It names the model and its window once; `generate` turns the request into its system
    prompt and text turns (`summary_turns`) and asks the subclass's `_ask`. An adapter whose
    host converts ctxoffload's messages itself (LangChain's, pydantic-ai's) overrides
    `_ask_messages` instead, which is given the messages as they are.

    Args:
        model_name: what the host calls the model (a secret it holds is masked).
        *windows: the windows known for it, the first positive one taken: the model's own
            (where its host reports one), then the door's configured window.
    """

    door: ClassVar[str]
    """The door the summaries come through, as the record names it (`DOORS[...].name`)."""

    asks_with_tools: bool = False
    """Whether `generate` offers the host's model tools and hands back the calls it makes
    (`_ask_with_tools`); an adapter that sends text only refuses tools. Where the host says
    per model whether it calls tools (LlamaIndex, CrewAI), the adapter sets it per model."""

    text_only_reason: str = ""
    """Why this model, not its door, is asked for text only ("" where the door is the cause):
    said in the refusal, with what would be asked with tools."""

    def __init__(self, model_name: str, *windows: object) -> None:
        self.model_name = masked_name(model_name)
        self.context_window = summary_window(*windows, model_name=self.model_name)

    async def generate(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> ModelResponse:
        """Ask the host's model once for the summary of `messages` (no tool is offered: a
        summary calls none), with `response_schema` through the host's structured output
        where it has one. With `tools` (OpenAI function format) and no `response_schema`
        (not a summary: `ctxoffload eval`'s read mode), `_ask_with_tools`; a summary request
        that carries the agent's tools (one shaped as the agent's last, for its cache) is
        asked without them, as ever.

        Raises:
            ConfigError: `tools` were given, outside a summary, to an adapter that sends
                text only.
            Exception: what the host's model raised, as it is: the summariser reads an
                overflow (`is_context_overflow`) as one and halves the request; any other
                error is retried, then the extractive summary is used.
        """
        if tools and response_schema is None:
            if not self.asks_with_tools:
                why = f" ({self.text_only_reason})" if self.text_only_reason else ""
                raise ConfigError(
                    f"the {self.door} door's model adapter sends text only{why} and offers no "
                    "tools: give a model of the same provider that calls functions, or an "
                    "OpenAIChatModel (--model URL/NAME)"
                )
            return await self._ask_with_tools(messages, tools)
        return await self._ask_messages(messages, response_schema)

    async def _ask_with_tools(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """The host's reply to `messages` with `tools` offered: its text and the calls it
        made, as a ctxoffload assistant message (an adapter with `asks_with_tools`)."""
        raise NotImplementedError(f"{type(self).__name__} offers its host's model no tools")

    async def _ask_messages(
        self, messages: Sequence[Msg], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """The host's answer to `messages`: by default, `_ask` of their turns."""
        system, turns = summary_turns(messages)
        return await self._ask(system, turns, response_schema)

    async def _ask(
        self, system: str, turns: Turns, response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """The host's answer to a system prompt ("" for none) and text turns."""
        raise NotImplementedError(
            f"{type(self).__name__} asks its host's model with neither _ask nor _ask_messages"
        )


def summary_turns(messages: Sequence[Msg]) -> tuple[str, Turns]:
    """The system prompt and the turns of a summary request: ("user" or "assistant", text)
    each, a tool's call or result as its text form (no tool is offered to a summary call),
    a turn without text left out."""
    system = "\n\n".join(m.text for m in messages if m.role == "system" and m.text)
    turns = [
        (
            "assistant" if m.role == "assistant" else "user",
            message_text(m) if m.tool_calls or m.tool_results else m.text,
        )
        for m in messages
        if m.role != "system"
    ]
    return system, [(role, text) for role, text in turns if text]


def schema_for_host(schema: dict[str, Any]) -> type[Summary] | dict[str, Any]:
    """The summary schema as a host's structured output takes it: the `Summary` model where
    it is ctxoffload's own (every host turns a pydantic model into its provider's schema),
    else the JSON schema the config gives."""
    return Summary if schema == Summary.model_json_schema() else schema


def summary_reply(answer: object, usage: Usage | None = None) -> ModelResponse:
    """The host's answer as the compressor reads a summary model's: a parsed object (a dict,
    a pydantic model) as its JSON, a text as it is (the compressor's parser reads it).

    Args:
        answer: what the host's model answered: the object its structured output parsed,
            or the reply's text.
        usage: the tokens the host reported for the call, if it did.
    """
    if isinstance(answer, BaseModel):
        text = answer.model_dump_json()
    elif isinstance(answer, Mapping):
        text = json.dumps(dict(answer), default=str)
    else:
        text = "" if answer is None else str(answer)
    return ModelResponse(message=Msg(role="assistant", content=text), usage=usage)


def call_input(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as a host's model gave them (its provider's JSON text, or a
    mapping) as a `ToolCallBlock`'s input: a JSON object as it is; anything else (text that
    is no JSON, JSON that is no object, or nested deeper than `MAX_DEPTH`) kept as the text
    under `RAW_ARGUMENTS`, as every format's reader keeps it."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, default=str)
    try:
        value = load_json(arguments or "{}", MAX_DEPTH)
    except ValueError:
        return {RAW_ARGUMENTS: arguments}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS: arguments}


def usage_of(input_tokens: Any, output_tokens: Any, cached: Any = None) -> Usage | None:
    """A `Usage` of the counts a host reported, None when it reported neither. A count is
    an int; anything else (None, a float, a bool, which Python takes for an int) is no
    count."""
    given, used, read = _count(input_tokens), _count(output_tokens), _count(cached)
    if given is None and used is None:
        return None
    return Usage(input_tokens=given or 0, output_tokens=used or 0, cached_input_tokens=read)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def summary_window(*windows: object, model_name: str = "") -> int:
    """The first of `windows` that is a positive int (the model's own, the config's, the
    agent's), else `SUMMARY_WINDOW`, said in a log record naming the fix.

    Why 128,000 and said, rather than a smaller guess kept quiet: where the door's config
    has no window either, this one is the agent's too (the compressor's last resort), so a
    guess must be a window agents run in and the user must hear of it. 128,000 is what
    `OpenAIChatModel`, `ScriptedModel` and the CrewAI and smolagents doors take an unknown
    window to be; a guess too large costs an overflow the
    summariser answers by halving the request and asking again, where a guess too small
    would cost more requests and more folded summaries on every compaction, unseen. A
    summary model given a window of 0 would never be sent a chunk, and every summary would
    be the extract.
    """
    for window in windows:
        count = _count(window)
        if count is not None and count > 0:
            return count
    # A log record rather than warnings.warn, as for OpenAIChatModel: test suites that run
    # with warnings as errors must still be able to build a door on a fake model.
    logger.warning(
        "context window of summary model %r is unknown; assuming %d tokens. Set "
        "ContextConfig(context_window=...) to the model's window",
        model_name,
        SUMMARY_WINDOW,
    )
    return SUMMARY_WINDOW


def masked_name(name: str, text: str | None = None) -> str:
    """`text` (default: `name`) with what `name` holds of a secret masked: a model name can be
    a URL with a user part (`https://user:key@host/v1`) or carry `?api_key=...`."""
    return Secrets.of_url(name).mask(name if text is None else text)


def unresolved(name: str, host: str, takes: str, reason: BaseException) -> ConfigError:
    """The refusal of a summary model name the host cannot resolve, with the host's reason,
    neither quoting a secret the name holds.

    Args:
        name: the model name given as `summary_model`.
        host: the host's resolver, as its users know it (`init_chat_model`).
        takes: what the door takes as `summary_model`, in the refusal's words.
        reason: what the host raised.
    """
    # The host's first line: LangChain's, for one, goes on to list thirty providers and a URL.
    first = next((line.strip() for line in str(reason).splitlines() if line.strip()), "")
    said = masked_name(name, f"{type(reason).__name__}: {first}")
    return ConfigError(
        f"summary_model {masked_name(name)!r} cannot be resolved by {host} ({said}): pass "
        f"{takes}, install the provider's package and set its key, or leave summary_model "
        "out for the agent's own model (summary_model=False for the extractive summary)"
    )


def name_refused(name: str, takes: str, why: str) -> ConfigError:
    """The refusal of a model name by a door whose host takes none, naming what it takes
    and never quoting a secret the name holds.

    Args:
        name: the model name given as `summary_model`.
        takes: what the door takes as `summary_model`, in the refusal's words.
        why: why a name does not do (where the host names its models).
    """
    return ConfigError(
        f"summary_model is the string {masked_name(name)!r}, not {takes}, or a ctxoffload "
        f"ChatModel ({why}): pass one of those, leave it out for the agent's own model, or "
        "summary_model=False for the extractive summary"
    )
