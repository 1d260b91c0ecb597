"""Haystack `ChatMessage` objects as ctxoffload `Msg` objects, for the compactor.

One `ChatMessage` is one `Msg`, read part by part: text, an image (`ImageContent`) or a file
(`FileContent`) as a data block, the model's reasoning (`ReasoningContent`) as a thinking
block, a `ToolCall` as a tool call and a `ToolCallResult` (its text, images and files) as a
tool result. Nothing goes through OpenAI's format, which has no place for reasoning, for an
image or a file in a tool's result, or for a call without an id.

Haystack allows tool calls without ids. `CallIds` names each such call once (`haystack-call-`
and a random part) and gives its result the same name: the result whose `origin` is the
call itself, else the earliest unanswered call of the same tool with equal arguments (a
conversation loaded from saved messages holds equal objects, not the same ones).
"""

from __future__ import annotations

import importlib
import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from ..exceptions import ConfigError
from ..messages import (
    Base64Source,
    Block,
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ._haystack_store import INSTALL_HINT

__all__ = ["CallIds", "read_message", "result_parts"]

try:
    _dataclasses: Any = importlib.import_module("haystack.dataclasses")
except ImportError as exc:  # pragma: no cover - exercised where Haystack is absent
    raise ConfigError(INSTALL_HINT) from exc

_TextContent: Any = _dataclasses.TextContent
_ImageContent: Any = _dataclasses.ImageContent
_FileContent: Any = _dataclasses.FileContent
_ReasoningContent: Any = _dataclasses.ReasoningContent
_ToolCall: Any = _dataclasses.ToolCall
_ToolCallResult: Any = _dataclasses.ToolCallResult


class CallIds:
    """The names given to tool calls without ids, per `ToolCall` object (held, so an id is
    never reused while the name is known)."""

    def __init__(self) -> None:
        self._names: dict[int, tuple[Any, str]] = {}

    def name_calls(self, messages: Sequence[Any]) -> None:
        """Name every id-less call of `messages` and pair each id-less result with its call."""
        unanswered: list[Any] = []
        for message in messages:
            for call in message.tool_calls:
                if call.id is None:
                    self._name(call)
                    unanswered.append(call)
            for result in message.tool_call_results:
                origin = result.origin
                if origin.id is not None:
                    continue
                name = self._known(origin)
                if name is None:
                    same = next((c for c in unanswered if c is origin), None) or next(
                        (
                            c
                            for c in unanswered
                            if c.tool_name == origin.tool_name and c.arguments == origin.arguments
                        ),
                        None,
                    )
                    name = (
                        self.of(same)
                        if same is not None
                        else f"haystack-call-{uuid.uuid4().hex[:20]}"
                    )
                    self._names[id(origin)] = (origin, name)
                unanswered = [c for c in unanswered if self.of(c) != name]

    def of(self, call: Any) -> str:
        """The call's id: its own, else the name given to it."""
        if call.id is not None:
            return str(call.id)
        known = self._known(call)
        return known if known is not None else self._name(call)

    def keep_only(self, messages: Iterable[Any]) -> None:
        """Forget the names of calls none of `messages` holds (they left the conversation)."""
        held: dict[int, tuple[Any, str]] = {}
        for message in messages:
            calls = [*message.tool_calls, *(r.origin for r in message.tool_call_results)]
            for call in calls:
                entry = self._names.get(id(call))
                if entry is not None and entry[0] is call:
                    held[id(call)] = entry
        self._names = held

    def _known(self, call: Any) -> str | None:
        entry = self._names.get(id(call))
        return entry[1] if entry is not None and entry[0] is call else None

    def _name(self, call: Any) -> str:
        known = self._known(call)
        if known is None:
            known = f"haystack-call-{uuid.uuid4().hex[:20]}"
            self._names[id(call)] = (call, known)
        return known


def read_message(message: Any, calls: CallIds) -> Msg:
    """`message` as a `Msg` (a new id each reading; the caller keeps readings)."""
    role = str(getattr(message.role, "value", message.role))
    blocks: list[Block] = []
    for part in message._content:
        if isinstance(part, _TextContent):
            blocks.append(TextBlock(text=part.text))
        elif isinstance(part, _ReasoningContent):
            extra = _json_safe(part.extra)
            blocks.append(
                ThinkingBlock(thinking=part.reasoning_text, **({"extra": extra} if extra else {}))
            )
        elif isinstance(part, _ToolCall):
            arguments = part.arguments if isinstance(part.arguments, dict) else {}
            blocks.append(ToolCallBlock(id=calls.of(part), name=part.tool_name, input=arguments))
        elif isinstance(part, _ToolCallResult):
            blocks.append(
                ToolResultBlock(
                    id=calls.of(part.origin),
                    name=part.origin.tool_name,
                    output=_output(part.result),
                    is_error=bool(part.error),
                )
            )
        else:
            media = _media(part)
            blocks.append(
                media if media is not None else TextBlock(text=f"[{type(part).__name__}]")
            )
    if role not in ("system", "user", "assistant", "tool"):
        role = "user"
    content: str | list[Block] = blocks
    if all(isinstance(b, TextBlock) for b in blocks) and len(blocks) <= 1:
        content = blocks[0].text if blocks else ""  # type: ignore[union-attr]
    return Msg(
        id=f"haystack-{uuid.uuid4().hex[:20]}",
        role=role,  # type: ignore[arg-type]
        content=content,
        name=getattr(message, "name", None),
    )


def result_parts(original: Any, cut: str) -> Any:
    """What a `ToolCallResult` (`original`'s result) becomes when its text was cut to `cut`:
    the cut text, then the images and files it held, as they were (the model is still sent
    them; only the text was over the window)."""
    if isinstance(original, str):
        return cut
    kept = [part for part in original if not isinstance(part, _TextContent)]
    return [_TextContent(text=cut), *kept] if kept else cut


def _output(result: Any) -> str | list[TextBlock | DataBlock]:
    if isinstance(result, str):
        return result
    out: list[TextBlock | DataBlock] = []
    for part in result:
        if isinstance(part, _TextContent):
            out.append(TextBlock(text=part.text))
        else:
            media = _media(part)
            out.append(media if media is not None else TextBlock(text=str(part)))
    return out


def _media(part: Any) -> DataBlock | None:
    """An `ImageContent` or `FileContent` as a data block (None: neither)."""
    if isinstance(part, _ImageContent):
        return DataBlock(
            source=Base64Source(media_type=part.mime_type or "image/jpeg", data=part.base64_image)
        )
    if isinstance(part, _FileContent):
        return DataBlock(
            source=Base64Source(
                media_type=part.mime_type or "application/octet-stream", data=part.base64_data
            ),
            name=part.filename,
        )
    return None


def _json_safe(value: Any) -> Any:
    """`value` if it goes to JSON as it is, else its text (a provider's extra, on disk)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value
