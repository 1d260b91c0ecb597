"""A host's tool-result store on a workspace: the one rule for a door whose host hands it
single blocks to keep and references to read back (Strands' `ContextOffloader` storage,
Haystack's `ToolResultStore`).

- text becomes `sessions/<id>/tool_result-<key>.txt`, the file ctxoffload writes for its own
  truncations: whole, never overwritten (a second block under one key gets a new name),
  recorded in events.jsonl, readable with Read / Grep and `ctxoffload grep`;
- anything else (JSON, images, documents) goes to the content-addressed
  `data/<sha256>.<ext>`, stored once however often it comes, its media type kept in the
  extension, and a `data` event of the session names it, so `gc` keeps it as long as the
  session (the model holds only the reference);
- the session's record opens with the door's `door` event, before its first write;
- a reference is read back confined to the workspace and, with `isolate`, to the session
  (its sub-agents and fork origin stay readable).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .._disk.events import DataFile, EventKind
from .._disk.scope import SessionScoped, check_reference
from ..messages import ToolResultBlock
from ..workspace import Workspace, writing_as
from .doors import Door
from .opening import record_door

if TYPE_CHECKING:
    from ..tokens import TokenCounter

__all__ = ["BlockStore", "is_plain_text"]

_PAGE_TOKENS = 2_000
"""A stored text is counted whole up to many times this; past it, by its first lines."""


class BlockStore:
    """Blocks of one session of a workspace, stored whole under a key, read back by reference.

    Args:
        workspace: the workspace (checked by the door before).
        door: the door whose `door` event opens the session's record.
        session_id: the session (a plain name, checked by the door before).
        tool_name: what the `tool_result` files' events name as the tool.
        isolate: `retrieve` refuses a reference of another session.
    """

    def __init__(
        self, workspace: Workspace, door: Door, session_id: str, *, tool_name: str, isolate: bool
    ) -> None:
        self.workspace = workspace
        self.door = door
        self.session_id = session_id
        self.tool_name = tool_name
        self.isolate = isolate
        self._announced = False
        self._counter: TokenCounter | None = None  # made at the first text stored

    async def announce(self) -> None:
        """Open the session's record with the door's `door` event, once, before its first
        write (a workspace that cannot record it is passed over)."""
        if not self._announced:
            self._announced = True
            await record_door(self.workspace, self.door, self.session_id)

    async def store(
        self, key: str, data: bytes | str, content_type: str | None, *, tool_name: str = ""
    ) -> str:
        """Store one block and return its reference (a path, or a bucket's URI): text (a
        `str`, or `text/plain` bytes that are UTF-8) as a `tool_result` file, any other bytes
        in data/ named by a `data` event. `tool_name`: the tool that gave it, when the key
        says (else the store's `tool_name`).

        Raises:
            OffloadError: the workspace refused the write (disk full, store down).
        """
        await self.announce()
        with writing_as(self.door.name, self.session_id):  # each line names its writer
            if isinstance(data, str):
                return await self._text(key, data, tool_name)
            if is_plain_text(content_type):
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    pass  # not text after all: stored as bytes below, nothing altered
                else:
                    return await self._text(key, text, tool_name)
            reference = str(await self.workspace.store_bytes(data, content_type or None))
            stored = DataFile(
                reference=reference,
                bytes=len(data),
                media_type=content_type or None,
                key=str(key),
            )
            await self.workspace.record_event(self.session_id, stored.kind, **stored.fields())
            return reference

    async def _text(self, key: str, text: str, tool_name: str) -> str:
        name = tool_name or self.tool_name
        block = ToolResultBlock(id=str(key), name=name, output=text)
        reference = str(await self.workspace.offload_tool_result(self.session_id, block))
        # The host puts the reference where the result was: that is what the store kept out
        # of the context, recorded as an offload (stats' tokens kept out and its count, the
        # line show prints), counted as the door core counts: a text far over a page by its
        # first lines, scaled, and said to be an estimate.
        from .._tokens.counters import count_over, get_token_counter

        counter = self._counter = self._counter or get_token_counter()
        tokens, bounds = count_over(counter, text, _PAGE_TOKENS)
        estimated = (
            {}
            if bounds is None
            else {"tokens_before_exact": False, "tokens_before_range": list(bounds)}
        )
        await self.workspace.record_event(
            self.session_id,
            EventKind.OFFLOAD,
            tool_id=str(key),
            tool_name=name,
            blocks=1,
            references=[reference],
            bytes=len(text.encode("utf-8", "surrogatepass")),
            tokens_before=tokens,
            tokens_after=counter.count_text(reference),
            **estimated,
        )
        return reference

    async def retrieve(self, reference: str) -> tuple[bytes, str]:
        """The bytes and media type behind a reference `store` returned.

        Raises:
            InvalidReference: the reference names nothing in the workspace (or lies outside
                it), or, with `isolate`, it is another session's.
        """
        workspace = self.workspace
        if self.isolate and isinstance(workspace, SessionScoped):
            await check_reference(
                workspace, reference, workspace.reference_key(reference), self.session_id
            )
        with writing_as(None, self.session_id):
            data, media_type = await workspace.read_bytes(reference)
        if media_type == _UNKNOWN:
            media_type = await self._recorded_type(reference) or media_type
        return bytes(data), str(media_type)

    async def _recorded_type(self, reference: str) -> str | None:
        """The media type this session's `data` event gave `reference` when it was stored:
        a data/ file is named by its bytes and an extension, and a type with none of its own
        (Strands' `application/docx`, `application/xlsx`, ...) is a `.bin` there, which reads
        back as bytes of no type. None where the session recorded none."""
        read_events = getattr(self.workspace, "read_events", None)
        if read_events is None:
            return None
        name = os.path.basename(reference)
        for event in reversed(await read_events(self.session_id)):
            if (
                isinstance(event, dict)
                and event.get("kind") == EventKind.DATA
                and isinstance(event.get("reference"), str)
                and os.path.basename(event["reference"]) == name
                and isinstance(event.get("media_type"), str)
            ):
                return str(event["media_type"])
        return None


_UNKNOWN = "application/octet-stream"
"""What a data/ file of an extension ctxoffload does not know reads back as."""


def is_plain_text(content_type: str | None) -> bool:
    """Whether a media type is `text/plain` (any parameters, any case)."""
    return (content_type or "").split(";", 1)[0].strip().lower() == "text/plain"
