"""The tool outputs ctxoffload stored whole and replaced in the context by a stand-in (a head
and a notice, an offload's preview and references), and where each whole output is.

A manager that would store an output before it leaves the context (`ClearToolUses`) asks
here first: a stand-in is not stored again (a copy of a notice, one more hop from the whole
output), its placeholder names the files that hold the whole output and its size instead.

What is a stand-in is known from ctxoffload's own record, never from the text (a tool can
write a notice): the call id and the sha256 of the text ctxoffload put in the context, noted
when it was made, and, for a session resumed in another process (or a host whose messages
lose their metadata between calls), read back once from the `truncation` and `offload`
events, which carry that digest (`kept_sha256`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._disk.events import EventKind
from .._disk.records import is_count
from ..messages import TextBlock

__all__ = ["StoredOutputs", "WholeOutput", "kept_digest"]

logger = logging.getLogger("ctxoffload")

_REMEMBERED = 4096
"""How many stand-ins one run remembers (the oldest are forgotten first; the session's
record still holds them)."""


@dataclass(frozen=True)
class WholeOutput:
    """Where a tool's whole output is, as a placeholder names it.

    Attributes:
        references: the files holding it (one tool_result file, or one per block).
        bytes: its size in bytes, as stored.
        tokens: its tokens when it was stored.
    """

    references: tuple[str, ...]
    bytes: int
    tokens: int


def kept_digest(text: str) -> str:
    """The sha256 of the text a stand-in left in the context (the `kept_sha256` field)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class StoredOutputs:
    """The stand-ins of one compressor's session, by call id and digest.

    Args:
        read_events: reads the session's events (None: the offloader keeps none).
    """

    def __init__(self, read_events: Callable[[], Awaitable[list[Any]]] | None) -> None:
        self._read_events = read_events
        self._known: dict[tuple[str, str], WholeOutput] = {}
        # The same stand-ins by digest alone: a host that gives a call an id at its tool hook
        # and another in its requests (ADK strips the `adk-` id it made up for a call the
        # model gave none) names the stand-in's call otherwise; its bytes are still the ones
        # ctxoffload made, notice and all.
        self._by_digest: dict[str, WholeOutput] = {}
        self._read = False

    def note(self, tool_id: str, kept: str, whole: WholeOutput) -> None:
        """The context keeps `kept` for call `tool_id`, whose whole output is `whole`."""
        self._remember((tool_id, kept_digest(kept)), whole)

    async def whole_of(self, tool_id: str, output: Any) -> WholeOutput | None:
        """Where the whole output is when `output` is a stand-in ctxoffload left for call
        `tool_id` (or, byte for byte, for a call the host names otherwise now); None for any
        other output (one the tool wrote, even one that reads like a notice). The session's
        record is read on the first miss, once."""
        text = _text_of(output)
        if text is None:
            return None  # every stand-in is text
        digest = kept_digest(text)
        key = (tool_id, digest)
        found = self._known.get(key) or self._by_digest.get(digest)
        if found is None and not self._read and self._read_events is not None:
            self._read = True
            try:
                self._learn(await self._read_events())
            except Exception as exc:  # the record unreadable: the output is stored again
                logger.warning("could not read the session's record of stored outputs: %s", exc)
            found = self._known.get(key) or self._by_digest.get(digest)
        return found

    def _remember(self, key: tuple[str, str], whole: WholeOutput) -> None:
        self._known.pop(key, None)
        self._known[key] = whole
        self._by_digest.pop(key[1], None)
        self._by_digest[key[1]] = whole
        while len(self._known) > _REMEMBERED:
            del self._known[next(iter(self._known))]
        while len(self._by_digest) > _REMEMBERED:
            del self._by_digest[next(iter(self._by_digest))]

    def _learn(self, events: Iterable[Any]) -> None:
        """Take the stand-ins the record holds (a line of another shape is skipped)."""
        for event in events:
            found = _stand_in(event) if isinstance(event, Mapping) else None
            if found is not None:
                self._remember(*found)


def _text_of(output: Any) -> str | None:
    """An output's text when it is text alone: a string, or one text block (what a host
    that holds results as blocks, Bedrock's Converse, gives a stand-in back as)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list) and len(output) == 1 and isinstance(output[0], TextBlock):
        return output[0].text
    return None


def _stand_in(event: Mapping[str, Any]) -> tuple[tuple[str, str], WholeOutput] | None:
    """The stand-in a `truncation` or `offload` event records, or None."""
    kind, tool_id, digest = event.get("kind"), event.get("tool_id"), event.get("kept_sha256")
    if not (isinstance(tool_id, str) and isinstance(digest, str)):
        return None
    if kind == EventKind.TRUNCATION:
        reference = event.get("reference")
        references = [reference] if isinstance(reference, str) else []
        size = event.get("bytes_total")
    elif kind == EventKind.OFFLOAD:
        listed = event.get("references")
        references = listed if isinstance(listed, list) else []
        size = event.get("bytes")
    else:
        return None
    tokens = event.get("tokens_before")
    if (
        not references
        or not all(isinstance(r, str) for r in references)
        or not is_count(size)
        or not is_count(tokens)
    ):
        return None
    return (tool_id, digest), WholeOutput(tuple(references), size, tokens)
