"""The agent's saved state (state.json), and its inline payloads as data/ files: moved out
of a message before it is recorded or saved, inlined again when a saved state is resumed.

A base64 image in the context would otherwise be written whole into the session's record
at every step and into every state.json; as a data/ reference it is stored once.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from typing import Any

from .._disk.payloads import storable_message
from .._lease_lost import logged_unless_lease_lost
from .._message_log import MOVED_OUT, InlinePayloads
from ..exceptions import InvalidReference
from ..messages import Base64Source, DataBlock, Msg, ToolResultBlock, URLSource
from ..workspace import Offloader, ReferenceReader, StateStore

__all__ = ["SavedState"]

logger = logging.getLogger("ctxoffload")

_MARKED = "moved_out_marked"
"""The key of a state.json whose inlined payloads carry the `MOVED_OUT` mark."""


class SavedState:
    """An agent's state.json in its offloader, when that is a `StateStore`, and the data/
    files its inline payloads move to.

    Args:
        offloader: the agent's offloader; None keeps every payload inline and saves nothing.
    """

    def __init__(self, offloader: Offloader | None) -> None:
        self.offloader = offloader
        self._payloads = InlinePayloads(offloader)

    async def moved_out(self, msg: Msg) -> Msg:
        """The message with inline base64 replaced by data/ references."""
        return await self._payloads.moved_out(msg)

    async def save(
        self, session_id: str, messages: list[Msg], facts: Callable[[], dict[str, Any]]
    ) -> None:
        """Save `messages` as the state of `session_id`, with `facts` about the agent (its
        name, model, steps, tokens). A store's failure is logged, never raised: the agent
        goes on without a fresh state.

        Raises:
            SessionBusyError: the agent's lease lapsed and another writer took the session
                over: nothing was written.
        """
        store = self.offloader
        if not isinstance(store, StateStore):
            return
        with logged_unless_lease_lost("could not save the state of session %s", session_id):
            saved = await self._saved_messages(messages)
            state = {"session_id": session_id, **facts(), "messages": saved}
            # (What says that the references a resume inlines again are the marked ones.)
            state[_MARKED] = True
            await store.write_state(session_id, state)

    async def restore(self, session_id: str) -> list[Msg] | None:
        """The messages of the state saved for `session_id` but its system prompt (the
        agent's own), their payloads inlined; None when nothing is saved."""
        store = self.offloader
        if not isinstance(store, StateStore):
            return None
        state = await store.read_state(session_id)
        if not state:
            return None
        messages = await self._restored_messages(state)
        # Counted as the record's session_start counts them: the system prompt is this
        # agent's own, not restored.
        logger.info(
            "resumed session %s from its saved state: %d messages restored; pass another "
            "session_id to start afresh",
            session_id,
            len(messages),
        )
        return messages

    async def _saved_messages(self, messages: list[Msg]) -> list[Any]:
        """`messages` as state.json holds them: payloads moved out, each message's JSON."""
        saved: list[Any] = []
        for i, msg in enumerate(messages):
            # One message that cannot be stored must not cost the state of all the others:
            # it is saved as a stand-in that holds its text form (see storable_message).
            value, problem = storable_message(
                await self.moved_out(msg), None, where=f"messages[{i}]"
            )
            if problem is not None:
                logger.warning("state.json holds a stand-in for a message: %s", problem)
            saved.append(value)
        return saved

    async def _restored_messages(self, state: dict[str, Any]) -> list[Msg]:
        """The messages of a saved state but its system prompt, their payloads inlined."""
        messages = [Msg.model_validate(m) for m in state.get("messages", [])]
        every = state.get(_MARKED) is not True
        return [await self.inlined(m, every=every) for m in messages if m.role != "system"]

    async def inlined(self, msg: Msg, *, every: bool = False) -> Msg:
        """Inline again the data/ payloads that `moved_out` replaced (marked so); with
        `every`, each data/ reference with a media type (a state saved before the mark, or
        a fork's, whose messages may be unmarked)."""
        reader = self.offloader
        if not isinstance(reader, ReferenceReader) or isinstance(msg.content, str):
            return msg

        async def inline(block: DataBlock) -> DataBlock:
            if not isinstance(block.source, URLSource) or block.source.media_type is None:
                return block
            if not every and (block.source.model_extra or {}).get(MOVED_OUT) is not True:
                return block  # a reference in the context as the model was sent it
            try:
                raw = await reader.read_reference(block.source.url)
            except InvalidReference:
                return block
            source = Base64Source(
                media_type=block.source.media_type, data=base64.b64encode(raw).decode()
            )
            return block.model_copy(update={"source": source})

        content: list[Any] = []
        for block in msg.content:
            if isinstance(block, DataBlock):
                block = await inline(block)
            elif isinstance(block, ToolResultBlock) and isinstance(block.output, list):
                parts = [await inline(p) if isinstance(p, DataBlock) else p for p in block.output]
                block = block.model_copy(update={"output": parts})
            content.append(block)
        return msg.model_copy(update={"content": content})
