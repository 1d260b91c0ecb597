"""The `message` events of a session's record, written once per message and form, with their
inline payloads moved to data/ first: one home for the `Agent`'s recorder and the `Projector`
(a host that keeps its own history), so `ctxoffload show --step N` rebuilds what either sent.

A base64 image in the context would otherwise be written whole into the record at every step;
as a data/ reference it is stored once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ._disk import events
from ._disk.events import EventKind, is_event
from ._disk.payloads import storable_message
from ._disk.records import Event, is_count
from .exceptions import InvalidContent
from .messages import Base64Source, DataBlock, Msg, ToolResultBlock, URLSource
from .workspace import Offloader

__all__ = ["InlinePayloads", "MessageLog"]

logger = logging.getLogger("ctxoffload")


class InlinePayloads:
    """Moves a message's inline base64 payloads to data/ files of an offloader.

    Args:
        offloader: where payloads go; None keeps every payload inline.
    """

    def __init__(self, offloader: Offloader | None) -> None:
        self.offloader = offloader
        # Payloads already stored, by the identity of their base64 string (messages are never
        # mutated), so each image is decoded and hashed once per session rather than at every
        # step. The string is kept to pin its identity.
        self._stored: dict[int, tuple[str, DataBlock]] = {}

    async def moved_out(self, msg: Msg) -> Msg:
        """The message with inline base64 replaced by data/ references."""
        if isinstance(msg.content, str) or self.offloader is None:
            return msg
        changed = False
        content: list[Any] = []
        for block in msg.content:
            if isinstance(block, DataBlock) and isinstance(block.source, Base64Source):
                block = await self._store(block)
                changed = True
            elif isinstance(block, ToolResultBlock) and isinstance(block.output, list):
                parts = []
                for part in block.output:
                    if isinstance(part, DataBlock) and isinstance(part.source, Base64Source):
                        part = await self._store(part)
                        changed = True
                    parts.append(part)
                block = block.model_copy(update={"output": parts})
            content.append(block)
        return msg.model_copy(update={"content": content}) if changed else msg

    async def _store(self, block: DataBlock) -> DataBlock:
        assert isinstance(block.source, Base64Source) and self.offloader is not None
        data = block.source.data
        known = self._stored.get(id(data))
        if known is not None and known[0] is data:
            return known[1].model_copy(update={"name": block.name})
        try:
            stored: DataBlock = await self.offloader.offload_data_block(block)
        except InvalidContent as exc:
            # Not base64 in any spelling: the record keeps the block inline, as given.
            logger.warning("kept an inline payload inline: %s", exc)
            stored = block
        else:
            stored = moved_out_mark(stored)
        self._stored[id(data)] = (data, stored)
        return stored


MOVED_OUT = "moved_out"
"""The key, on a `URLSource` of a stored message, that says its payload was inline in the
context and was moved to data/ only for storing (`InlinePayloads`): a resumed agent inlines
such a block again, and leaves every other reference a reference (an audio clip or a PDF the
context named by its data/ file, as the model was sent it)."""


def moved_out_mark(block: DataBlock) -> DataBlock:
    """`block` (a data/ reference `offload_data_block` made) marked as moved out."""
    if not isinstance(block.source, URLSource):
        return block
    source = URLSource(**{**block.source.model_dump(), MOVED_OUT: True})
    return block.model_copy(update={"source": source})


class MessageLog:
    """Writes a `message` event for each message not yet written in its current form.

    Messages are never mutated in place, so the same object under an id means the same
    content; a new object under a known id is a change and is written again (the latest line
    before a model call is the one that call was sent).

    Args:
        emit: writes one event record (to the session's events.jsonl, the logger, a callback).
        prepare: turns a message into the form stored (`InlinePayloads.moved_out`).
    """

    def __init__(
        self,
        emit: Callable[[Event], Awaitable[None]],
        *,
        prepare: Callable[[Msg], Awaitable[Msg]] | None = None,
    ) -> None:
        self._emit = emit
        self._prepare = prepare
        self._written: dict[str, Msg] = {}
        # Per message id the record already held when this log started (`remember`): a hash
        # of its stored form without the timestamp.
        self._recorded: dict[str, int] = {}

    def remember(self, earlier: Iterable[Any]) -> None:
        """Take the messages a session's record already holds (`earlier`, its events): a
        message written later in the same form is not written again, so a session resumed
        (a new process, a new run of a host, an agent restored from its state) keeps each
        message once in its record. The form is compared without the timestamp, which a host
        converting its history anew stamps afresh; a message that changed under its id is
        written again."""
        for event in earlier:
            if not is_event(event):
                continue  # a line that is no event (`show` skips it too)
            message = event.get("message") if event["kind"] == EventKind.MESSAGE else None
            if isinstance(message, dict) and isinstance(message.get("id"), str):
                self._recorded[message["id"]] = _form(message)

    async def write(self, msgs: Iterable[Msg], *, is_context: bool = True) -> None:
        """Write a `message` event for each of `msgs` not yet written in this form.

        Args:
            msgs: messages that are (or are about to be) in the context.
            is_context: `msgs` is the whole context, so messages outside it are forgotten.
        """
        msgs = list(msgs)
        for msg in msgs:
            if self._written.get(msg.id) is msg:
                continue
            value = await self._stored(msg)
            if value is None:
                continue
            recorded = self._recorded.pop(msg.id, None)
            if recorded is not None and recorded == _form(value):
                continue  # the record holds it in this form already
            await self._emit(events.Message(message=value))
        if is_context:
            self._written = {m.id: m for m in msgs}
        else:
            self._written.update((m.id, m) for m in msgs)

    async def _stored(self, msg: Msg) -> Any | None:
        """The JSON value stored for `msg`; None (logged) when it cannot be made."""
        try:
            stored = await self._prepare(msg) if self._prepare is not None else msg
            value, _ = storable_message(stored, None, where=f"message {msg.id}")
        except Exception as exc:
            logger.warning("could not record message %s: %s", msg.id, exc)
            return None
        return value


def _form(value: Any) -> int:
    """A hash of a stored message's JSON without its timestamp (what it says, not when)."""
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "timestamp"}
    return hash(json.dumps(value, sort_keys=True, default=str))


class ModelCalls:
    """The model calls a door sees in one session, numbered over the session and each
    recorded as the `Agent` records its own: every message not recorded yet in its form
    (`MessageLog`), then a `model_call` event naming the messages in order, so `ctxoffload
    show --step N` rebuilds what call N was sent. The one home of that numbering for the
    projection engine and the doors that edit their host's history.

    Args:
        emit: writes one event record.
        prepare: turns a message into the form stored (`InlinePayloads.moved_out`).
    """

    def __init__(
        self,
        emit: Callable[[Event], Awaitable[None]],
        *,
        prepare: Callable[[Msg], Awaitable[Msg]] | None = None,
    ) -> None:
        self._emit = emit
        self._log = MessageLog(emit, prepare=prepare)
        self.step = 0
        self._attempt = 0
        self._last_keys: list[str] | None = None

    def remember(self, earlier: Iterable[Any]) -> None:
        """Take what the session's record already holds (its events): its messages are not
        written again, and the steps go on from its last `model_call`."""
        earlier = list(earlier)
        self._log.remember(earlier)
        for event in earlier:
            step = event.get("step")
            if event.get("kind") == EventKind.MODEL_CALL and is_count(step):
                self.step = max(self.step, step)

    async def record(self, sent: list[Msg], *, keys: list[str] | None = None, **fields: Any) -> int:
        """Record one call that was (or is about to be) sent `sent`; its step number.

        Args:
            sent: the messages the call was sent, in order.
            keys: what makes the history this call was made for the same as the last one's
                (a retry: the same step's next attempt); by default the ids of `sent`.
            **fields: the rest of the `model_call` event (`tokens_counted`, `duration_ms`,
                `outcome`, `summary`, `input_tokens`, ...).
        """
        keys = [m.id for m in sent] if keys is None else keys
        if keys == self._last_keys:
            self._attempt += 1
        else:
            self.step, self._attempt = self.step + 1, 1
        self._last_keys = keys
        await self._log.write(sent)
        await self._emit(
            events.ModelCall(
                step=self.step, attempt=self._attempt, messages=[m.id for m in sent], **fields
            )
        )
        return self.step
