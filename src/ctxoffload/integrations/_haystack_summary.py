"""A Haystack chat generator as the model that writes ctxoffload's summaries.

`summary_writer` is the Haystack door's `SummaryWriter`: its `summary_model` is a chat generator
component (any whose `run` takes `messages`, a list of `ChatMessage`, and returns
`{"replies": [...]}`: `OpenAIChatGenerator`, `AnthropicChatGenerator`, a `@component` of one's
own). Haystack's `CompactionHook` hands its compactor the messages only, never the Agent's
generator, so left out, no model writes the summary: the extract does. Haystack has no general
structured output, so the generator is asked with the compressor's JSON instructions and its
reply read by ctxoffload's parser; an `OpenAIChatGenerator` (or a subclass) is also given the
summary's schema as its `response_format`.

The generator's `run` is called on a worker thread: the compactor works on its store's own
event loop, not the one the Agent's `run_async` uses, and a generator's async client belongs
to that one. A generator that streams (a `streaming_callback` given to it) streams the summary
into a callback of ours, never into the user's; no Haystack pipeline or Agent runs the call, so
no trace or message of theirs holds it.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from typing import Any

from .._doors.doors import DOORS
from .._doors.summaries import SummaryWriter
from .._doors.summary_replies import HostSummaryModel, name_refused, summary_reply, usage_of
from .._loop import off_loop_long
from ..messages import Msg, TextBlock, ToolCallBlock, ToolResultBlock
from ..model import ModelResponse, Usage
from ._model_name import model_name_of

__all__ = ["HaystackSummaryModel", "summary_writer"]

_ChatMessage: Any = importlib.import_module("haystack.dataclasses").ChatMessage

TAKES = (
    "a Haystack chat generator (a component whose run takes messages=[ChatMessage, ...]: "
    "OpenAIChatGenerator, AnthropicChatGenerator, ...)"
)
"""What the Haystack door takes as `summary_model`, in its refusal's words."""


def summary_writer(given: object, context_window: int | None) -> SummaryWriter:
    """The Haystack door's `SummaryWriter` for its `summary_model` argument.

    Args:
        given: `summary_model` as the user gave it.
        context_window: the config's window, the generator's.

    Raises:
        ConfigError: `given` is none of what the door takes (a model name: Haystack names
            a model only inside a generator).
    """

    def adapt(model: object) -> HaystackSummaryModel | None:
        if isinstance(model, str):
            raise name_refused(model, TAKES, "Haystack names a model only inside a chat generator")
        if not is_chat_generator(model):
            return None
        return HaystackSummaryModel(model, context_window)

    return SummaryWriter(given, adapt=adapt, takes=TAKES)


def is_chat_generator(component: object) -> bool:
    """Whether `component` is a chat generator: its `run` takes `messages`."""
    run = getattr(component, "run", None)
    if isinstance(component, (str, bytes, type)) or not callable(run):
        return False
    try:
        return "messages" in inspect.signature(run).parameters
    except (TypeError, ValueError):
        return False


class HaystackSummaryModel(HostSummaryModel):
    """A Haystack chat generator in ctxoffload's `ChatModel` protocol, for summaries only.

    Args:
        generator: the chat generator component.
        context_window: the window of its model (the config's), for the summary's chunks.
    """

    door = DOORS["haystack"].name  # the record says the summary came through it
    asks_with_tools = True  # Haystack `Tool`s in `run`: ctxoffload eval's read mode

    def __init__(self, generator: Any, context_window: int | None = None) -> None:
        self.generator = generator
        super().__init__(model_name_of(generator) or type(generator).__name__, context_window)
        parameters = inspect.signature(generator.run).parameters
        self._takes_kwargs = "generation_kwargs" in parameters
        self._takes_callback = "streaming_callback" in parameters
        self._openai = _is_openai(generator)
        self._warm = threading.Lock()
        self._warmed = False

    async def _ask(
        self, system: str, turns: list[tuple[str, str]], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """Ask the generator (its `run`, on a worker thread), its stream into a callback of
        ours, with the schema as `response_format` where it is OpenAI's."""
        asked = [_ChatMessage.from_system(system)] if system else []
        asked += [
            _ChatMessage.from_assistant(text)
            if role == "assistant"
            else _ChatMessage.from_user(text)
            for role, text in turns
        ]
        options: dict[str, Any] = {"messages": asked}
        if self._takes_callback and getattr(self.generator, "streaming_callback", None):
            options["streaming_callback"] = _quiet  # never the user's own callback
        if self._openai and self._takes_kwargs and response_schema is not None:
            named = str(response_schema.get("title") or "Summary")
            options["generation_kwargs"] = {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": named, "schema": response_schema, "strict": True},
                }
            }
        answer = await off_loop_long(self._run, options)
        replies = answer.get("replies") if isinstance(answer, dict) else None
        reply = replies[0] if replies else None
        text = getattr(reply, "text", None) or ""
        return summary_reply(text, _usage(getattr(reply, "meta", None)))

    async def _ask_with_tools(self, messages: Any, tools: Any) -> ModelResponse:
        """The generator's reply to `messages` (as Haystack's `ChatMessage`s) with `tools`
        offered as Haystack `Tool`s it never invokes; its tool calls as ctxoffload's."""
        tool_class = importlib.import_module("haystack.tools").Tool
        offered = [
            tool_class(
                name=tool["function"]["name"],
                description=tool["function"].get("description") or "",
                parameters=tool["function"].get("parameters") or {},
                function=_run_elsewhere,
            )
            for tool in tools
        ]
        options: dict[str, Any] = {"messages": _to_haystack(messages), "tools": offered}
        if self._takes_callback and getattr(self.generator, "streaming_callback", None):
            options["streaming_callback"] = _quiet
        answer = await off_loop_long(self._run, options)
        replies = answer.get("replies") if isinstance(answer, dict) else None
        reply = replies[0] if replies else None
        said = getattr(reply, "text", None)
        blocks: list[Any] = [TextBlock(text=said)] if isinstance(said, str) and said else []
        blocks += [
            ToolCallBlock(id=str(call.id or ""), name=call.tool_name, input=call.arguments or {})
            for call in getattr(reply, "tool_calls", None) or ()
        ]
        message = Msg(role="assistant", content=blocks)
        return ModelResponse(message=message, usage=_usage(getattr(reply, "meta", None)))

    def _run(self, options: dict[str, Any]) -> Any:
        with self._warm:
            if not self._warmed:
                warm_up = getattr(self.generator, "warm_up", None)  # Haystack's optional step
                if callable(warm_up):
                    warm_up()
                self._warmed = True
        return self.generator.run(**options)


def _to_haystack(messages: Any) -> list[Any]:
    """ctxoffload's messages as Haystack's: text turns, an assistant's tool calls as its
    `ToolCall`s, each tool result as a tool message naming the call it answers."""
    dataclasses = importlib.import_module("haystack.dataclasses")
    calls: dict[str, Any] = {}
    out: list[Any] = []
    for msg in messages:
        blocks = msg.content if isinstance(msg.content, list) else []
        text = msg.text
        if msg.role == "system":
            out.append(_ChatMessage.from_system(text))
        elif msg.role == "assistant":
            made = [
                dataclasses.ToolCall(tool_name=b.name, arguments=b.input, id=b.id)
                for b in blocks
                if isinstance(b, ToolCallBlock)
            ]
            calls.update({call.id: call for call in made})
            out.append(_ChatMessage.from_assistant(text or None, tool_calls=made or None))
        elif msg.role == "tool":
            for block in blocks:
                if isinstance(block, ToolResultBlock):
                    origin = calls.get(block.id) or dataclasses.ToolCall(
                        tool_name=block.name, arguments={}, id=block.id
                    )
                    result = (
                        block.output
                        if isinstance(block.output, str)
                        else "".join(p.text for p in block.output if isinstance(p, TextBlock))
                    )
                    out.append(_ChatMessage.from_tool(result, origin, error=block.is_error))
        else:
            out.append(_ChatMessage.from_user(text))
    return out


def _run_elsewhere(**arguments: Any) -> str:
    """A tool's call is run by its asker (`ctxoffload eval`), never by Haystack."""
    raise RuntimeError("ctxoffload runs this tool's calls itself")


def _quiet(chunk: Any) -> None:
    """The streaming callback of a summary call: its chunks go nowhere (the reply is whole
    in what `run` returns)."""


def _is_openai(generator: object) -> bool:
    """Whether `generator` is Haystack's `OpenAIChatGenerator` (or a subclass, Azure's), whose
    `generation_kwargs` take OpenAI's `response_format`."""
    try:
        openai_generator = importlib.import_module(
            "haystack.components.generators.chat"
        ).OpenAIChatGenerator
    except (ImportError, AttributeError):  # pragma: no cover - a Haystack without it
        return False
    return isinstance(generator, openai_generator)


def _usage(meta: Any) -> Usage | None:
    """The tokens a reply's `meta["usage"]` reports (OpenAI's `prompt_tokens`, ...; others'
    `input_tokens`, ...)."""
    usage = meta.get("usage") if isinstance(meta, dict) else None
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return usage_of(
        usage.get("prompt_tokens", usage.get("input_tokens")),
        usage.get("completion_tokens", usage.get("output_tokens")),
        cached,
    )
