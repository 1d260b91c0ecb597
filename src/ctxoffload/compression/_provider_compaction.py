"""Beside a provider's own compaction: keep on disk what the provider's item replaces.

Anthropic's server-side compaction and the Responses API's put an item in a response (a
`compaction` block, a `compaction` item; `formats/provider_compaction.py` recognises them)
that stands for everything before it: the provider no longer reads those messages (Anthropic
drops them when the item is sent back; OpenAI's guide drops them from the next input). Left
alone, they would be gone from the context with no copy and nothing naming their files.

`absorb` does what a compaction of ctxoffload's own does, around the provider's item: the
messages before it are appended to the session's context.jsonl first (persist before drop),
a note is put right after the item's turn (the item, then the tool results that answer its
calls: nothing may stand between a call and its result), naming the file and lines and
followed by the artifact index of what left, and a `provider_compaction` event records the
span and the note. The context then continues from the item. The `Agent` calls it after each
model reply; a `Projector` decides once per item and re-applies the note on every call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .._disk.events import EventKind, ProviderCompaction
from .._disk.layout import mark_of
from .._disk.records import Event
from .._disk.wording import spans_text
from ..formats.provider_compaction import CompactionItem, compaction_item
from ..messages import Msg
from ._notes import NOTE_MARK, is_context_note
from ._persisted import Persisted
from ._tool_names import ReaderTools, how_to_read

__all__ = [
    "PROVIDER_NOTE",
    "Absorbed",
    "Keeper",
    "absorb",
    "absorb_in_context",
    "is_provider_note",
    "leading_system",
    "newest_compaction",
    "note_position",
]

PROVIDER_NOTE = EventKind.PROVIDER_COMPACTION
"""The mark's kind on the note put after a provider's compaction item."""

_PROVIDER_NAMES = {"anthropic": "Anthropic", "openai": "OpenAI"}


def is_provider_note(msg: Msg) -> bool:
    """Whether `msg` is the note ctxoffload put after a provider's compaction item."""
    marker = mark_of(msg.metadata) if msg.metadata else None
    return marker is not None and marker.get("kind") == PROVIDER_NOTE


def newest_compaction(messages: Sequence[Msg | Mapping[str, Any]]) -> int | None:
    """The index of the newest message carrying a provider's compaction item, or None."""
    for i in range(len(messages) - 1, -1, -1):
        if compaction_item(messages[i]) is not None:
            return i
    return None


def note_position(messages: Sequence[Msg], holder: int) -> int:
    """Where the note goes: right after the message holding the item and the tool results
    that answer its calls (an Anthropic assistant turn may call tools in the same message as
    its compaction block; a call must be followed by its result)."""
    calls = {call.id for call in messages[holder].tool_calls}
    at = holder + 1
    while calls and at < len(messages):
        results = messages[at].tool_results
        if not results or any(r.id not in calls for r in results):
            break
        at += 1
    return at


class Keeper(Protocol):
    """What `absorb` needs of a `Compressor` (which calls it: this module cannot import
    it back)."""

    async def persist(self, messages: Sequence[Msg], *, on_failure: str = ...) -> Persisted:
        """Append `messages` to the session's context.jsonl (`Compressor.persist`)."""
        ...

    async def index_note(
        self,
        note: Msg,
        leaving: Sequence[Msg],
        persisted: Persisted,
        *,
        earlier: Mapping[str, Any],
        summary_text: str,
        kept: Sequence[Msg],
    ) -> tuple[Msg, dict[str, Any]]:
        """`note` followed by the artifact index of `leaving` (`Compressor.index_note`)."""
        ...

    async def event(self, record: Event) -> None:
        """Write an event of the session (`Compressor.event`)."""
        ...

    def reader_tools(self) -> ReaderTools | None:
        """The reader tools notices name (`Compressor.reader_tools`)."""
        ...


def leading_system(messages: Sequence[Msg | Mapping[str, Any]]) -> int:
    """How many system messages lead `messages` (they never leave the context)."""
    n = 0
    for msg in messages:
        role = msg.role if isinstance(msg, Msg) else msg.get("role")
        if role not in ("system", "developer"):
            break
        n += 1
    return n


@dataclass(frozen=True)
class Absorbed:
    """What `absorb` did.

    Attributes:
        note: the note put after the item (where the replaced messages went, and the
            artifact index of what left).
        replaced: how many messages were appended to context.jsonl and left the context.
        event: the `provider_compaction` event written.
    """

    note: Msg
    replaced: int
    event: ProviderCompaction


async def absorb_in_context(
    keeper: Keeper, messages: Sequence[Msg]
) -> tuple[list[Msg], Absorbed | None]:
    """A context (ctxoffload's own, changed in place by the caller) after the newest
    provider compaction item it holds: the messages before the item's message (the system
    prompt apart) stored and gone, the note right after the item's turn. The context as it
    is, and None, when no item has messages before it (none, or absorbed already), or when
    they could not be stored."""
    holder = newest_compaction(messages)
    system = leading_system(messages)
    if holder is None or holder <= system:
        return list(messages), None
    done = await absorb(keeper, messages[system:holder], messages[holder], messages[holder + 1 :])
    if done is None:
        return list(messages), None
    at = note_position(messages, holder)
    return [*messages[:system], *messages[holder:at], done.note, *messages[at:]], done


async def absorb(
    compressor: Keeper,
    before: Sequence[Msg],
    holder: Msg,
    kept: Sequence[Msg],
    *,
    item_key: str | None = None,
) -> Absorbed | None:
    """Keep what a provider's compaction item replaces, and write the note that follows it.

    Args:
        compressor: the session's compressor (its offloader, counter, events).
        before: the messages before the item's message, after the leading system prompt:
            they leave the context. ctxoffload's own notes among them are not stored again
            (what they named is carried on in the new index).
        holder: the message carrying the item.
        kept: the messages that stay after it (the item's turn and what follows).
        item_key: how the caller knows the holder across calls (a `Projector`'s key).

    Returns:
        What was done; None when the item's message carries no compaction, or when the
        messages could not be stored: then nothing may leave the context (a warning is
        logged by `persist`).
    """
    item = compaction_item(holder)
    if item is None:
        return None
    leaving = [m for m in before if not (is_context_note(m) or is_provider_note(m))]
    earlier = _earlier_mark(before)
    persisted = await compressor.persist(
        leaving, on_failure="keeping them in the context beside the provider's compaction"
    )
    if persisted.failure is not None:
        return None
    note = _note(item, len(leaving), persisted.reference, persisted.spans, compressor)
    note, fidelity = await compressor.index_note(
        note,
        leaving,
        persisted,
        earlier=earlier,
        summary_text=item.summary,
        kept=[holder, *kept],
    )
    event = ProviderCompaction(
        provider=item.provider,
        item_id=item.item_id,
        message_id=holder.id,
        item_key=item_key if item_key is not None else f"id:{holder.id}",
        reference=persisted.reference,
        lines=persisted.lines,
        **persisted.apart,
        messages=len(leaving),
        note=note.model_dump(mode="json"),
        **fidelity,
    )
    await compressor.event(event)
    return Absorbed(note, len(leaving), event)


def _earlier_mark(before: Sequence[Msg]) -> dict[str, Any]:
    """The mark of the newest ctxoffload note among the messages that leave (a summary, a
    window note, an earlier provider note): its index state is carried on."""
    for msg in reversed(before):
        if is_context_note(msg) or is_provider_note(msg):
            marker = mark_of(msg.metadata)
            return dict(marker) if marker is not None else {}
    return {}


def _note(
    item: CompactionItem,
    count: int,
    reference: str | None,
    spans: Sequence[tuple[int, int]],
    compressor: Keeper,
) -> Msg:
    """What the context after the provider's item is told of the messages it replaced."""
    provider = _PROVIDER_NAMES.get(item.provider, item.provider)
    if reference is not None:
        where = f" (lines {spans_text(spans)})" if spans else ""
        text = (
            f"[{provider} compacted this conversation: its compaction above stands for the "
            f"{count} earlier messages. They are kept whole in {reference}{where}, one JSON "
            "message per line, for what the compaction left out. "
            f"{how_to_read(reference, None, compressor.reader_tools())}]"
        )
    else:
        text = (
            f"[{provider} compacted this conversation: its compaction above stands for the "
            f"{count} earlier messages; no offloader was configured, so they were not kept.]"
        )
    mark = {"kind": PROVIDER_NOTE, "provider": item.provider, "reference": reference}
    return Msg(role="user", content=text, metadata={NOTE_MARK: mark})
