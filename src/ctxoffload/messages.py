"""The message model: `Msg` and its content blocks.

A `Msg` has a role and either plain text or a list of blocks. Blocks are discriminated by
their `type` field so a message survives `model_dump_json()` / `model_validate_json()`
unchanged, which is how `context.jsonl` stores it. Conversion to and from the wire formats
(OpenAI, Anthropic, Converse) lives in `ctxoffload.formats`, which imports this module and is
never imported by it.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Base64Source",
    "Block",
    "DataBlock",
    "Msg",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "URLSource",
]

Role = Literal["system", "user", "assistant", "tool"]
"""Who a message is from; `tool` is a message carrying tool results."""


class _Model(BaseModel):
    # Unknown keys are kept rather than dropped: nothing that was given to us is lost when a
    # message goes to disk and comes back.
    model_config = ConfigDict(extra="allow")


class TextBlock(_Model):
    """Plain text.

    Args:
        text: the text.
    """

    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(_Model):
    """A model's visible reasoning (Anthropic `thinking`), kept so conversions round-trip.

    Args:
        thinking: the reasoning text.
        signature: the provider's signature of it, sent back unchanged; None when there is
            none.
    """

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class Base64Source(_Model):
    """Inline bytes, base64-encoded.

    Args:
        media_type: the bytes' media type (`image/png`, `application/pdf`...).
        data: the bytes, base64-encoded.
    """

    type: Literal["base64"] = "base64"
    media_type: str
    data: str


class URLSource(_Model):
    """Bytes that live elsewhere: an http(s) URL, a `file://` URL or a workspace path.

    Args:
        url: where the bytes are.
        media_type: their media type, when known.
    """

    type: Literal["url"] = "url"
    url: str
    media_type: str | None = None


class DataBlock(_Model):
    """An image, audio clip, PDF or other binary payload.

    Args:
        source: the bytes inline (`Base64Source`) or where to find them (`URLSource`).
        name: an optional file name shown to the model and kept in placeholders.
    """

    type: Literal["data"] = "data"
    source: Annotated[Base64Source | URLSource, Field(discriminator="type")]
    name: str | None = None

    @property
    def media_type(self) -> str | None:
        """The media type of the payload, when known."""
        return self.source.media_type


class ToolCallBlock(_Model):
    """A request from the model to run a tool.

    Args:
        id: the call's id, given by the provider; the `ToolResultBlock` answering it
            carries the same id.
        name: the tool's name.
        input: the arguments, parsed from JSON.
    """

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(_Model):
    """What a tool returned for one call.

    Args:
        id: the id of the `ToolCallBlock` this answers.
        name: the tool's name.
        output: text, or a list of text and data blocks.
        is_error: whether the tool failed.
    """

    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str = ""
    output: str | list[Annotated[TextBlock | DataBlock, Field(discriminator="type")]] = ""
    is_error: bool = False


Block = Annotated[
    TextBlock | ThinkingBlock | DataBlock | ToolCallBlock | ToolResultBlock,
    Field(discriminator="type"),
]
"""Any block of a message's content, told apart by its `type` field."""


# A message's id is a random version-4 UUID's hex, drawn from a generator of this module's own,
# seeded from the OS once per process and again in a forked child (a generator of its own, so a
# program that seeds `random` makes no two processes draw the same ids). `uuid.uuid4` asks the
# OS for every id: a system call that lets the GIL go, which cost a LangChain host 25-40 us of
# CPU a message converted, with the projector's threads about (bench_peers.py's replay).
_ids = random.Random(os.urandom(32))
if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=lambda: _ids.seed(os.urandom(32)))
_VARIANT_MASK, _VARIANT = ~(0xC000 << 48), 0x8000 << 48
_VERSION_MASK, _VERSION = ~(0xF000 << 64), 4 << 76


def _new_id() -> str:
    bits = (_ids.getrandbits(128) & _VARIANT_MASK | _VARIANT) & _VERSION_MASK | _VERSION
    return f"{bits:032x}"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class Msg(_Model):
    """One message in an agent's context.

    Args:
        role: `system`, `user`, `assistant`, or `tool` (a message carrying tool results).
        content: plain text or a list of blocks.
        name: the speaker's name, when the caller tracks one.
        id: a unique id; generated when not given.
        metadata: free-form data that travels with the message.
        timestamp: ISO-8601 creation time in UTC; generated when not given.
    """

    role: Role
    content: str | list[Block]
    name: str | None = None
    id: str = Field(default_factory=_new_id)
    metadata: dict[str, Any] = Field(default_factory=dict)
    timestamp: str = Field(default_factory=_now)

    @property
    def blocks(self) -> list[Block]:
        """The content as a list of blocks (plain text becomes one `TextBlock`)."""
        if isinstance(self.content, str):
            return [TextBlock(text=self.content)] if self.content else []
        return list(self.content)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines (tool calls, results and data excluded)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    def iter_blocks(self, kind: type[Any]) -> Iterator[Any]:
        """Yield the blocks of one class, for example `msg.iter_blocks(ToolCallBlock)`."""
        if isinstance(self.content, list):
            for block in self.content:
                if isinstance(block, kind):
                    yield block

    @property
    def tool_calls(self) -> list[ToolCallBlock]:
        """The tool calls this message makes."""
        return list(self.iter_blocks(ToolCallBlock))

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        """The tool results this message carries."""
        return list(self.iter_blocks(ToolResultBlock))
