"""LangChain messages <-> ctxoffload `Msg`, through OpenAI-shaped dicts.

LangChain's own `convert_to_openai_messages` / `convert_to_messages` and ctxoffload's
`to_msgs` / `to_openai` meet at the OpenAI chat format, so neither side's model is
re-implemented here. The round trip keeps roles, text, tool calls, tool_call_id and name, but
not a LangChain message's `id`, `status`, `artifact` or `response_metadata`: the id is carried
as the `Msg`'s id, and a message whose content is only replaced is rebuilt from the original
LangChain object (`model_copy`), so the rest survives.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Sequence
from typing import Any

from ..exceptions import ConfigError
from ..formats import to_msgs, to_openai
from ..messages import Msg

__all__ = ["from_langchain", "message_key", "to_langchain", "with_content_of"]

INSTALL_HINT = "LangChain is not installed: pip install 'ctxoffload[langchain]'"

# LangChain is imported with this module: `ctxoffload.integrations.langchain` imports it only
# on first use of a name that needs it.
try:
    _messages: Any = importlib.import_module("langchain_core.messages")
except ImportError as exc:  # pragma: no cover - exercised where LangChain is absent
    raise ConfigError(INSTALL_HINT) from exc


def message_key(message: Any) -> str:
    """A LangChain message's name across calls: its id (LangGraph's `add_messages` gives
    every message one), else a hash of its OpenAI form (a host that builds messages itself)."""
    if isinstance(message.id, str) and message.id:
        return str(message.id)
    openai = _messages.convert_to_openai_messages(message)
    text = json.dumps(openai, sort_keys=True, default=str, ensure_ascii=False)
    return "sha256-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def from_langchain(messages: Sequence[Any]) -> list[Msg]:
    """ctxoffload messages for LangChain messages, one `Msg` each, oldest first.

    Args:
        messages: LangChain `BaseMessage` objects (`HumanMessage`, `AIMessage`,
            `ToolMessage`, `SystemMessage`).

    Returns:
        One `Msg` per message, whose `id` is the LangChain message's id (or, for a message
        without one, a hash of its content), so a projection maps back to the originals.
    """
    out: list[Msg] = []
    for message in messages:
        (msg,) = to_msgs([_messages.convert_to_openai_messages(message)])
        out.append(msg.model_copy(update={"id": message_key(message)}))
    return out


def to_langchain(msgs: Sequence[Msg]) -> list[Any]:
    """LangChain messages for ctxoffload messages (a `Msg` holding several tool results
    becomes one `ToolMessage` each), with each `Msg`'s id as the message id."""
    out: list[Any] = []
    for msg in msgs:
        converted = _messages.convert_to_messages(to_openai([msg]))
        for index, message in enumerate(converted):
            suffix = f"-{index}" if len(converted) > 1 else ""
            out.append(message.model_copy(update={"id": f"{msg.id}{suffix}"}))
    return out


def with_content_of(original: Any, msg: Msg) -> list[Any]:
    """`[original]` (a LangChain message) with the content `msg` holds for it, everything
    else (id, status, artifact, tool calls) kept; `to_langchain([msg])` where the kind of
    message differs."""
    converted = _messages.convert_to_messages(to_openai([msg]))
    if len(converted) == 1 and converted[0].type == original.type:
        return [original.model_copy(update={"content": converted[0].content})]
    return to_langchain([msg])
