"""A Strands `Model` as the model that writes ctxoffload's summaries.

`summary_writer` is the Strands door's `SummaryWriter`: its `summary_model` is a Strands
`Model`, and left out, the agent's own (`agent.model`, which the conversation manager is handed
at each reduction) writes them. The model is asked through Strands' structured output
(`model.structured_output(Summary, messages, system_prompt)`) where it has one; a model without
(its `structured_output` raises `NotImplementedError`), or a config whose summary schema is
not `Summary`'s, is streamed and its text read by ctxoffload's parser. The call is the
model's own, made by the manager: no callback handler of the agent sees its events, and no
message of `agent.messages` holds it.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from .._doors.doors import DOORS
from .._doors.summaries import SummaryWriter
from .._doors.summary_replies import HostSummaryModel, name_refused, summary_reply, usage_of
from ..compression import Summary
from ..exceptions import ConfigError
from ..formats import from_converse, to_converse
from ..model import ModelResponse, Usage
from ._model_name import model_name_of

__all__ = ["StrandsSummaryModel", "summary_writer"]

try:
    _Model: Any = importlib.import_module("strands.models.model").Model
except ImportError as exc:  # pragma: no cover - exercised where Strands is absent
    raise ConfigError("Strands is not installed: pip install 'ctxoffload[strands]'") from exc

TAKES = "a Strands Model (BedrockModel, AnthropicModel, OpenAIModel, ...)"
"""What the Strands door takes as `summary_model`, in its refusal's words."""


def summary_writer(given: object, context_window: int | None) -> SummaryWriter:
    """The Strands door's `SummaryWriter` for its `summary_model` argument.

    Args:
        given: `summary_model` as the user gave it.
        context_window: the manager's window, the summary model's.

    Raises:
        ConfigError: `given` is none of what the door takes.
    """

    def adapt(model: object) -> StrandsSummaryModel | None:
        if isinstance(model, str):
            raise name_refused(
                model, TAKES, "Strands builds a model from an id only inside Agent(model=...)"
            )
        if not isinstance(model, _Model):
            return None
        return StrandsSummaryModel(model, context_window)

    return SummaryWriter(given, adapt=adapt, takes=TAKES)


class StrandsSummaryModel(HostSummaryModel):
    """A Strands `Model` in ctxoffload's `ChatModel` protocol, for summaries only.

    Args:
        model: the Strands model.
        context_window: the window of the model (the manager's), for the summary's chunks.
    """

    door = DOORS["strands"].name  # the record says the summary came through it
    asks_with_tools = True  # tool specs in `stream`: ctxoffload eval's read mode

    def __init__(self, model: Any, context_window: int | None = None) -> None:
        self.model = model
        super().__init__(model_name_of(model) or type(model).__name__, context_window)
        # Whether the model has structured output; None until its first summary says.
        self._structured: bool | None = None

    async def _ask(
        self, system: str, turns: list[tuple[str, str]], response_schema: dict[str, Any] | None
    ) -> ModelResponse:
        """Ask through Strands' structured output where the model has it and the schema is
        `Summary`'s, else stream the reply and hand its text to the parser."""
        asked = [{"role": role, "content": [{"text": text}]} for role, text in turns]
        if self._structured is not False and _is_summary_schema(response_schema):
            try:
                return await self._structured_output(asked, system or None)
            except NotImplementedError:
                self._structured = False  # no structured output: stream it, parse the text
        return await self._streamed(asked, system or None)

    async def _structured_output(self, asked: list[Any], system: str | None) -> ModelResponse:
        answer: object = None
        usage: Usage | None = None
        async for event in self.model.structured_output(Summary, asked, system_prompt=system):
            if isinstance(event, dict):
                answer = event.get("output", answer)
                usage = _usage(event) or usage
        self._structured = True
        return summary_reply(answer, usage)

    async def _streamed(self, asked: list[Any], system: str | None) -> ModelResponse:
        texts: list[str] = []
        usage: Usage | None = None
        async for event in self.model.stream(asked, None, system):
            if not isinstance(event, dict):
                continue
            delta = event.get("contentBlockDelta", {}).get("delta", {})
            if isinstance(delta, dict) and isinstance(delta.get("text"), str):
                texts.append(delta["text"])
            usage = _usage(event) or usage
        return summary_reply("".join(texts), usage)

    async def _ask_with_tools(self, messages: Any, tools: Any) -> ModelResponse:
        """The model's streamed reply to `messages` (as Converse messages, Strands' own) with
        `tools` as its tool specs; its text and tool uses as ctxoffload's."""
        system, asked = to_converse(messages)
        specs = [
            {
                "name": tool["function"]["name"],
                "description": tool["function"].get("description") or "",
                "inputSchema": {"json": tool["function"].get("parameters") or {}},
            }
            for tool in tools
        ]
        prompt = "\n\n".join(str(b.get("text", "")) for b in system) or None
        reply = _Reply()
        async for event in self.model.stream(asked, specs, prompt):
            if isinstance(event, dict):
                reply.add(event)
        (message,) = from_converse([reply.message()])
        return ModelResponse(message=message, usage=reply.usage)


class _Reply:
    """A Strands model's streamed reply, put together as one Converse message: its text and
    each tool use, whose input comes in pieces of JSON."""

    def __init__(self) -> None:
        self.blocks: list[dict[str, Any]] = []
        self.usage: Usage | None = None
        self._text: list[str] = []
        self._use: dict[str, Any] | None = None
        self._input: list[str] = []

    def add(self, event: dict[str, Any]) -> None:
        started = event.get("contentBlockStart", {}).get("start", {}).get("toolUse")
        if isinstance(started, dict):
            self._use, self._input = dict(started), []
        delta = event.get("contentBlockDelta", {}).get("delta", {})
        if isinstance(delta.get("text"), str):
            self._text.append(delta["text"])
        if isinstance(delta.get("toolUse"), dict) and self._use is not None:
            self._input.append(str(delta["toolUse"].get("input", "")))
        if "contentBlockStop" in event and self._use is not None:
            arguments = "".join(self._input)
            self._use["input"] = json.loads(arguments) if arguments.strip() else {}
            self.blocks.append({"toolUse": self._use})
            self._use = None
        self.usage = _usage(event) or self.usage

    def message(self) -> dict[str, Any]:
        text = "".join(self._text)
        return {"role": "assistant", "content": [*([{"text": text}] if text else []), *self.blocks]}


def _is_summary_schema(schema: dict[str, Any] | None) -> bool:
    """Whether `schema` asks for `Summary`'s fields (Strands' structured output takes a
    pydantic model, and ctxoffload's is `Summary`)."""
    properties = schema.get("properties") if schema is not None else None
    return isinstance(properties, dict) and set(properties) == set(Summary.model_fields)


def _usage(event: dict[str, Any]) -> Usage | None:
    """The tokens a stream's `metadata` event reports (Strands' `inputTokens`, ...)."""
    usage = event.get("metadata", {}).get("usage") if isinstance(event, dict) else None
    if not isinstance(usage, dict):
        return None
    return usage_of(
        usage.get("inputTokens"), usage.get("outputTokens"), usage.get("cacheReadInputTokens")
    )
