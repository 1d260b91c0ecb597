"""The OpenAI Agents SDK's input items and ctxoffload's messages: the items of a call as
`Msg`s named by a key stable across calls (`as_history`), a projection back to items with
each kept item the very original (`projected_items`), and the facts of an item the door
looks up (its key, its call id, the tool names of its calls).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ..formats.responses import from_responses, to_responses
from ..messages import Msg, ToolCallBlock, ToolResultBlock

__all__ = [
    "INSTALL_HINT",
    "as_history",
    "as_item",
    "call_names",
    "cut_item",
    "item_key",
    "output_call",
    "projected_items",
    "tool_schemas",
]

INSTALL_HINT = "The OpenAI Agents SDK is not installed: pip install 'ctxoffload[openai-agents]'"
"""What a door of the SDK says where the SDK is missing."""


def call_names(items: Sequence[Any]) -> dict[str, str]:
    """The tool name of each `function_call` among `items`, by call id."""
    return {
        item["call_id"]: str(item.get("name", ""))
        for item in items
        if isinstance(item, dict)
        and item.get("type") == "function_call"
        and isinstance(item.get("call_id"), str)
    }


def output_call(item: dict[str, Any]) -> str | None:
    """The call id of a `function_call_output` item; None for any other item."""
    call_id = item.get("call_id")
    return (
        call_id if item.get("type") == "function_call_output" and isinstance(call_id, str) else None
    )


def as_item(item: Any) -> dict[str, Any]:
    """An input item as the JSON dict the SDK itself stores."""
    if isinstance(item, dict):
        return item
    return dict(item.model_dump(exclude_unset=True, mode="json"))


def as_history(instructions: Any, items: Sequence[Any]) -> tuple[list[Msg], dict[str, Any]]:
    """The instructions and the items as `Msg`s, each item's `Msg` named by a key stable
    across calls, and the item behind each key."""
    history: list[Msg] = []
    if isinstance(instructions, str) and instructions:
        history.append(Msg(role="system", content=instructions, id="instructions"))
    originals: dict[str, Any] = {}
    for item, msg in zip(items, from_responses(items), strict=True):
        key = base = item_key(item)
        count = 1
        while key in originals:  # the same item twice (two "ok"s): each its own name
            count += 1
            key = f"{base}-{count}"
        originals[key] = item
        history.append(msg.model_copy(update={"id": key}))
    return history, originals


def item_key(item: Any) -> str:
    """An item's name across calls: a call's or an output's call id, else a hash of it."""
    fields = as_item(item)
    kind, call_id = fields.get("type"), fields.get("call_id")
    if kind in ("function_call", "function_call_output") and isinstance(call_id, str):
        return f"{kind}-{call_id}"
    text = json.dumps(fields, sort_keys=True, default=str, ensure_ascii=False)
    return "sha256-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def tool_schemas(agent: Any) -> list[dict[str, Any]]:
    """The agent's function tools as OpenAI schemas (they count against the window)."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": getattr(tool, "description", ""),
                "parameters": tool.params_json_schema,
            },
        }
        for tool in getattr(agent, "tools", ())
        if hasattr(tool, "params_json_schema")
    ]


def projected_items(
    projected: Sequence[Msg], history: Sequence[Msg], originals: dict[str, Any]
) -> list[Any]:
    """The input items for a projection: the original item wherever the projection kept it,
    an output with the projection's text where it cut one, new items for a summary; the
    instructions, which the SDK holds apart, left out."""
    given = {msg.id: msg for msg in history}
    out: list[Any] = []
    for msg in projected:
        original = originals.get(msg.id)
        if msg.id == "instructions" and msg.role == "system":
            continue
        if original is None:
            out.extend(to_responses([msg]))
        elif msg is given[msg.id] or msg.content == given[msg.id].content:
            out.append(original)
        else:
            out.extend(cut_item(original, msg))
    return out


def cut_item(original: Any, msg: Msg) -> list[Any]:
    """`original` with the output `msg` holds for it where both are one tool output, or the
    arguments where both are one call (a call that wrote a whole file, its long strings cut),
    the rest of the item kept (a call's item id and status, which the Responses API pairs
    with the reasoning before it); else the items for `msg`."""
    fields = as_item(original)
    blocks = msg.content if isinstance(msg.content, list) else []
    if len(blocks) == 1:
        (block,) = blocks
        kind = fields.get("type")
        if kind == "function_call_output" and isinstance(block, ToolResultBlock):
            return [{**fields, "output": to_responses([msg])[0]["output"]}]
        if (
            kind == "function_call"
            and isinstance(block, ToolCallBlock)
            and block.id == fields.get("call_id")
        ):
            return [{**fields, "arguments": to_responses([msg])[0]["arguments"]}]
    return to_responses([msg])
