"""Asking a model a probe the way the agent would meet it: the messages it was sent right
after the compaction, then the question; once with no tools, once with the read-back tools
the agent had and one round of calls, run for real against the workspace."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agent import Tool, as_tool
from ..messages import Msg, ToolCallBlock, ToolResultBlock
from ..model import ChatModel, ModelResponse
from ..readback import workspace_tools
from ..text import message_text
from ._probes import Probe

__all__ = ["READERS", "Answer", "ask", "context_messages", "reading_tools"]

READERS = ("Read", "Grep", "Glob")
"""The read-back tools on a folder workspace, in the order they are offered."""

_ASKING = (
    "A question about this session, asked to check what you still know. Answer from what "
    "you know{tools}. Reply with the answer only, no explanation.\n\nQuestion: {question}"
)


@dataclass
class Answer:
    """What the model replied to one probe in one mode.

    Attributes:
        text: its reply's text.
        calls: the model calls made (1, or 2 when it read once).
        read: the tools it called, as `name(arguments)`.
        input_tokens: prompt tokens the provider reported over those calls.
        output_tokens: reply tokens the provider reported.
    """

    text: str
    calls: int
    read: list[str]
    input_tokens: int
    output_tokens: int


def context_messages(sent: Sequence[dict[str, Any]]) -> list[Msg]:
    """The stored messages of a model call as `Msg`s (a foreign message as its text)."""
    messages = []
    for message in sent:
        try:
            messages.append(Msg.model_validate(message))
        except ValueError:
            role = message.get("role")
            messages.append(
                Msg(
                    role=role if role in ("system", "user", "assistant") else "user",
                    content=message_text(message),
                )
            )
    return messages


def reading_tools(workdir: str, had: Sequence[str]) -> list[Tool]:
    """Read, Grep and Glob on the workspace, those of them the agent had (Read and Grep when
    its record names none of them)."""
    wanted = [name for name in READERS if name in had] or ["Read", "Grep"]
    tools = {t.name: t for t in (as_tool(f) for f in workspace_tools(workdir))}
    return [tools[name] for name in wanted if name in tools]


def _count(response: ModelResponse) -> tuple[int, int]:
    usage = response.usage
    return (usage.input_tokens, usage.output_tokens) if usage is not None else (0, 0)


def _read_locally(value: Any, references: Mapping[str, str]) -> Any:
    """`value` (a call's arguments) with every string that starts with a key of
    `references` (a store's URL) starting with its value (the local copy's folder)."""
    if isinstance(value, str):
        for url, folder in references.items():
            if value.startswith(url):
                return folder + value[len(url) :]
        return value
    if isinstance(value, dict):
        return {k: _read_locally(v, references) for k, v in value.items()}
    if isinstance(value, list):
        return [_read_locally(v, references) for v in value]
    return value


async def ask(
    model: ChatModel,
    context: list[Msg],
    probe: Probe,
    tools: Sequence[Tool] | None,
    references: Mapping[str, str] | None = None,
) -> Answer:
    """Ask `model` one probe after `context`.

    With `tools`, one round of tool calls is allowed: the calls of its first reply are run
    against the workspace, and its second reply is the answer (a second round of calls is
    not run: the answer is that reply's text). With `references`, a store's URL in a call's
    arguments is read as the folder of its local copy.

    Raises:
        ModelError: the model call failed (a timeout, an HTTP error, a reply not read).
    """
    hint = " or can read with your tools (one round of calls)" if tools else ""
    question = Msg(role="user", content=_ASKING.format(tools=hint, question=probe.question))
    messages = [*context, question]
    schemas = [t.schema for t in tools] if tools else None
    first = await model.generate(messages, tools=schemas)
    tokens_in, tokens_out = _count(first)
    calls = first.message.tool_calls
    if not tools or not calls:
        return Answer(first.message.text, 1, [], tokens_in, tokens_out)
    by_name = {t.name: t for t in tools}
    results: list[ToolResultBlock] = []
    read = []
    for call in calls:
        read.append(f"{call.name}({_arguments(call)})")
        tool = by_name.get(call.name)
        if tool is None:
            results.append(
                ToolResultBlock(id=call.id, name=call.name, output=f"no tool {call.name!r}")
            )
        else:
            if references:
                call = call.model_copy(update={"input": _read_locally(call.input, references)})
            results.append(await tool.run(call))
    second = await model.generate(
        [*messages, first.message, Msg(role="tool", content=list(results))], tools=schemas
    )
    more_in, more_out = _count(second)
    return Answer(second.message.text, 2, read, tokens_in + more_in, tokens_out + more_out)


def _arguments(call: ToolCallBlock) -> str:
    text = json.dumps(call.input, ensure_ascii=False, default=str)
    return text if len(text) <= 160 else text[:157] + "..."
