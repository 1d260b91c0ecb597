"""A provider's own compaction, as its wire format carries it: `compaction_item`.

Two providers compact a conversation on their side and hand back an item that stands for
everything before it:

- Anthropic (`context_management.edits` with `compact_20260112`, beta `compact-2026-01-12`)
  answers with a `compaction` content block, `{"type": "compaction", "content": <summary>}`
  (`content` null when the compaction failed; `encrypted_content` opaque, when present), at
  the head of the assistant message. Sent back, it makes the API drop every block before it.
- OpenAI's Responses API (`context_management=[{"type": "compaction", "compact_threshold":
  N}]` on `/responses`, or `/responses/compact`) returns a `compaction` output item,
  `{"type": "compaction", "id": ..., "encrypted_content": ...}`, opaque; the items before the
  newest one may be dropped from the next input.

Neither has a block in ctxoffload's message model: the Anthropic block is kept verbatim
among the message's unknown parts (`formats/_shared.py`), the Responses item as an opaque
message (`responses.ITEM_KEY`), so both go back to the provider byte for byte. A host whose
messages give the item a part type of its own (pydantic-ai's `CompactionPart`) names it under
`HOST_ITEM_KEY` in the `Msg` it converts; the host sends its own object back. This module is
the one place that recognises them, in a `Msg` or in the provider's own dicts.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..messages import Msg
from .responses import ITEM_KEY

__all__ = ["COMPACTION_TYPE", "HOST_ITEM_KEY", "CompactionItem", "compaction_item"]

COMPACTION_TYPE = "compaction"
"""The `type` both providers give their compaction block or item."""

HOST_ITEM_KEY = "provider_compaction"
"""The `Msg.metadata` key under which a host's converter names the provider's compaction its
message holds: `{"provider": "openai" | "anthropic", "item": <the item as the provider
wrote it>}`."""


@dataclass(frozen=True)
class CompactionItem:
    """A provider's compaction found in a message.

    Attributes:
        provider: `anthropic` (a content block) or `openai` (a Responses-API item).
        item: the block or item as the provider wrote it (a copy).
    """

    provider: str
    item: dict[str, Any]

    @property
    def summary(self) -> str:
        """The summary the provider wrote in readable text (Anthropic's `content`); "" when
        it is opaque (OpenAI's `encrypted_content`) or the compaction failed."""
        content = self.item.get("content")
        return content if isinstance(content, str) else ""

    @property
    def item_id(self) -> str | None:
        """The item's id, when the provider gave one (OpenAI's `cmp_...`)."""
        given = self.item.get("id")
        return given if isinstance(given, str) else None


def compaction_item(message: Msg | Mapping[str, Any]) -> CompactionItem | None:
    """The provider's compaction `message` carries, or None.

    Args:
        message: a `Msg` (read from either format), an Anthropic message dict, or a
            Responses-API item dict.
    """
    if isinstance(message, Msg):
        if not message.metadata:  # most messages: looked at on every projected call
            return None
        named = message.metadata.get(HOST_ITEM_KEY)
        if isinstance(named, Mapping) and _is_compaction(named.get("item")):
            return CompactionItem(str(named.get("provider")), copy.deepcopy(dict(named["item"])))
        item = message.metadata.get(ITEM_KEY)
        if isinstance(item, Mapping) and _is_compaction(item):
            return CompactionItem("openai", copy.deepcopy(dict(item)))
        hint = message.metadata.get("anthropic")
        unknown = hint.get("unknown") if isinstance(hint, Mapping) else None
        for entry in unknown if isinstance(unknown, list) else ():
            if isinstance(entry, (list, tuple)) and len(entry) == 2 and _is_compaction(entry[1]):
                return CompactionItem("anthropic", copy.deepcopy(dict(entry[1])))
        return None
    if not isinstance(message, Mapping):
        return None
    if _is_compaction(message):
        return CompactionItem("openai", copy.deepcopy(dict(message)))
    content = message.get("content")
    for block in content if isinstance(content, list) else ():
        if _is_compaction(block):
            return CompactionItem("anthropic", copy.deepcopy(dict(block)))
    return None


def _is_compaction(value: object) -> bool:
    return isinstance(value, Mapping) and value.get("type") == COMPACTION_TYPE
