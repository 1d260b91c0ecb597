"""Google ADK's `google.genai.types.Content` <-> ctxoffload `Msg` objects.

A `Content` is one turn: role "model" (text, thoughts, function calls) or "user" (text, media,
function responses). It becomes one `Msg` per run of parts of one role: the model's parts an
"assistant" `Msg`, function responses a "tool" `Msg`, text and media a "user" `Msg`. Every part
is exactly one block, so a `Msg` maps back to the parts it came from; a part ctxoffload has no
block for (executable code and its result, a video's metadata) is read as its JSON text, so it
is counted and summarised, and the model is sent the original part.

A function call or response without an id (ADK strips its own `adk-` ids from a request to
Gemini) gets one in the `Msg` only: `call-<content>.<part>`, the response taking the id of the
call it answers in the content before it (by name, in order), so the split never separates
them. The request keeps the original parts: a projection replaces a part only where it cut it.
"""

from __future__ import annotations

import base64
import importlib
import json
from collections.abc import Sequence
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
    URLSource,
)
from ._message_ids import message_id

__all__ = [
    "INSTALL_HINT",
    "GenaiHistory",
    "GenaiRead",
    "from_genai",
    "response_text",
    "to_genai",
]

INSTALL_HINT = "Google ADK is not installed: pip install 'ctxoffload[google-adk]'"

try:
    _types: Any = importlib.import_module("google.genai.types")
except ImportError as exc:  # pragma: no cover - exercised where ADK is absent
    raise ConfigError(INSTALL_HINT) from exc


def from_genai(contents: Sequence[Any]) -> list[Msg]:
    """ctxoffload messages for `google.genai.types.Content` objects (an ADK `LlmRequest`'s
    `contents`), oldest first.

    Returns:
        The `Msg` objects, each with the id `<content index>.<run>.<digest>` (the content it came
        from, and what it says).
    """
    return GenaiHistory().read(contents).msgs


def to_genai(msgs: Sequence[Msg]) -> list[Any]:
    """`google.genai.types.Content` objects for ctxoffload messages: an assistant `Msg` a "model"
    content, any other a "user" one (a system `Msg` too: ADK keeps its instruction apart)."""
    return [
        _types.Content(role="model" if msg.role == "assistant" else "user", parts=_parts_of(msg))
        for msg in msgs
    ]


def response_key(response: Any) -> str:
    """The key a function response's text is under: "error" for a response that is a lone
    `error` (a failed call, read as one), "result" for any other."""
    return "error" if isinstance(response, dict) and set(response) == {"error"} else "result"


def response_text(response: Any) -> str:
    """The text of a function response as the model reads it: a lone string `result` or
    `error` as it is, anything else as its JSON."""
    if isinstance(response, dict) and len(response) == 1:
        value = response.get(response_key(response))
        if isinstance(value, str):
            return value
    return json.dumps(response, ensure_ascii=False, default=str)


class GenaiHistory:
    """Reads the contents of ADK's requests as `Msg` objects, each content once.

    ADK builds every request anew from the session's events, with shallow copies of their
    contents and parts: the payloads (a text, a call's arguments, a response) are the session's
    own objects, so a content read before is known by them in O(parts), and gives the same
    `Msg` objects (what the projector needs to do O(new) work)."""

    def __init__(self) -> None:
        # Content index -> the role of the content there, each of its parts' fields (a copy of
        # the part's `__dict__`), and its Msgs.
        self._read: dict[int, tuple[Any, list[dict[str, Any]], list[Msg]]] = {}
        # Msg id -> the index of the content it came from, and the part index of each block.
        self._where: dict[str, tuple[int, list[int]]] = {}

    def read(self, contents: Sequence[Any]) -> GenaiRead:
        """The `Msg` objects of `contents`, oldest first (the same objects for a content read
        before at the same position)."""
        msgs: list[Msg] = []
        known_at = self._read.get
        for index, content in enumerate(contents):
            fields = [part.__dict__ for part in content.parts or ()]
            known = known_at(index)
            # The copy ADK made shares its payloads with the session's event: comparing its
            # parts' fields with those read before is mostly comparing objects with themselves.
            if known is None or known[0] != content.role or known[1] != fields:
                previous = contents[index - 1] if index else None
                read = _read_content(index, content, previous)
                for msg, parts in read:
                    self._where[msg.id] = (index, parts)
                said = [dict(part) for part in fields]
                known = self._read[index] = (content.role, said, [msg for msg, _ in read])
            msgs.extend(known[2])
        if len(self._where) > 2 * len(msgs) + 64:  # bounded: forget what the host dropped
            self._read = {i: v for i, v in self._read.items() if i < len(contents)}
            ids = {msg.id for msg in msgs}
            self._where = {id_: where for id_, where in self._where.items() if id_ in ids}
        return GenaiRead(msgs, contents, self._where)


class GenaiRead:
    """The `Msg` objects read of one request's contents, and the way back from a projection of them.

    Attributes:
        msgs: the `Msg` objects, oldest first.
    """

    def __init__(
        self,
        msgs: list[Msg],
        contents: Sequence[Any],
        where: dict[str, tuple[int, list[int]]],
    ) -> None:
        self.msgs = msgs
        self._contents = contents
        self._where = where

    def back(self, projected: Sequence[Msg]) -> list[Any]:
        """The contents for a projection of `msgs`: the original content wherever the
        projection kept all of it as it was, a copy with the parts it cut replaced (or without
        those a summary stands for), a new content for each summary `Msg`; a system `Msg` left
        out (ADK holds its instruction apart)."""
        out: list[Any] = []
        group: list[Msg] = []
        origin = -1
        for msg in [*projected, None]:
            where = None if msg is None else self._where.get(msg.id)
            if group and (where is None or where[0] != origin):
                out.append(self._content(origin, group))
                group = []
            if msg is None:
                break
            if where is None:
                if msg.role != "system":
                    (made,) = to_genai([msg])
                    out.append(made)
                continue
            origin = where[0]
            group.append(msg)
        return out

    def _content(self, origin: int, msgs: list[Msg]) -> Any:
        """The content at `origin` for its `Msgs` as projected (`msgs`, in order)."""
        original = self._contents[origin]
        previous = self._contents[origin - 1] if origin else None
        whole = [msg for msg, _ in _read_content(origin, original, previous)]
        if len(msgs) == len(whole) and all(
            m.content == w.content for m, w in zip(msgs, whole, strict=True)
        ):
            return original
        given = {msg.id: msg for msg in whole}
        parts: list[Any] = []
        for msg in msgs:
            _, indices = self._where[msg.id]
            before = given[msg.id].content
            blocks = msg.content if isinstance(msg.content, list) else [TextBlock(text=msg.content)]
            for index, block, was in zip(indices, blocks, before, strict=True):
                part = original.parts[index]
                parts.append(part if block == was else _replaced(part, block))
        return original.model_copy(update={"parts": parts})


def _read_content(index: int, content: Any, previous: Any) -> list[tuple[Msg, list[int]]]:
    """The `Msg` objects of the content at `index`, each with the part index of each of its
    blocks."""
    model = content.role == "model"
    answered = _call_ids(index - 1, previous) if not model else {}
    runs: list[tuple[str, list[Block], list[int]]] = []
    for number, part in enumerate(content.parts or ()):
        role, block = _block(index, number, part, model, answered)
        if runs and runs[-1][0] == role:
            runs[-1][1].append(block)
            runs[-1][2].append(number)
        else:
            runs.append((role, [block], [number]))
    return [
        (Msg(role=role, content=blocks, id=message_id(index, run, blocks)), parts)  # type: ignore[arg-type]
        for run, (role, blocks, parts) in enumerate(runs)
    ]


def _call_ids(index: int, content: Any) -> dict[str, list[str]]:
    """The ids the function calls without one of a model content get, by name, in order."""
    ids: dict[str, list[str]] = {}
    if content is None or content.role != "model":
        return ids
    for number, part in enumerate(content.parts or ()):
        call = part.function_call
        if call is not None and not call.id:
            ids.setdefault(call.name or "", []).append(f"call-{index}.{number}")
    return ids


def _block(
    index: int, number: int, part: Any, model: bool, answered: dict[str, list[str]]
) -> tuple[str, Block]:
    """The role of a part's run and its one block."""
    user = "assistant" if model else "user"
    if part.function_call is not None:
        call = part.function_call
        name = call.name or ""
        return "assistant", ToolCallBlock(
            id=call.id or f"call-{index}.{number}", name=name, input=dict(call.args or {})
        )
    if part.function_response is not None:
        response = part.function_response
        name = response.name or ""
        call_id = response.id
        if not call_id:
            pending = answered.get(name)
            call_id = pending.pop(0) if pending else f"call-{index}.{number}"
        given = response.response
        failed = isinstance(given, dict) and set(given) == {"error"}
        block = ToolResultBlock(id=call_id, name=name, output=response_text(given), is_error=failed)
        return "tool", block
    if part.text is not None:
        if part.thought:
            signature = part.thought_signature
            encoded = base64.b64encode(signature).decode("ascii") if signature else None
            return user, ThinkingBlock(thinking=part.text, signature=encoded)
        return user, TextBlock(text=part.text)
    if part.inline_data is not None and part.inline_data.data is not None:
        blob = part.inline_data
        data = base64.b64encode(blob.data).decode("ascii")
        media = blob.mime_type or "application/octet-stream"
        return user, DataBlock(source=Base64Source(media_type=media, data=data))
    if part.file_data is not None and part.file_data.file_uri:
        file = part.file_data
        return user, DataBlock(source=URLSource(url=file.file_uri, media_type=file.mime_type))
    dumped = part.model_dump(mode="json", exclude_none=True)
    return user, TextBlock(text=json.dumps(dumped, ensure_ascii=False, sort_keys=True))


def _replaced(part: Any, block: Block) -> Any:
    """`part` saying what the projection made of its block (a tool result cut to its head and
    notice, a call's arguments cut: a call that wrote a whole file), everything else of it
    kept (a call's own id, none where the model gave none, and its thought signature, which
    Gemini asks back with every call of a thinking model)."""
    if isinstance(block, ToolCallBlock) and part.function_call is not None:
        call = part.function_call.model_copy(update={"args": block.input})
        return part.model_copy(update={"function_call": call})
    if isinstance(block, ToolResultBlock) and part.function_response is not None:
        text = _output_text(block)
        kept = {_key_of(block): text}
        response = part.function_response.model_copy(update={"response": kept})
        return part.model_copy(update={"function_response": response})
    (made,) = _parts_of(Msg(role="user", content=[block]))
    return made


def _parts_of(msg: Msg) -> list[Any]:
    blocks = [TextBlock(text=msg.content)] if isinstance(msg.content, str) else msg.content
    parts: list[Any] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append(_types.Part(text=block.text))
        elif isinstance(block, ThinkingBlock):
            signature = base64.b64decode(block.signature) if block.signature else None
            parts.append(
                _types.Part(text=block.thinking, thought=True, thought_signature=signature)
            )
        elif isinstance(block, ToolCallBlock):
            call = _types.FunctionCall(id=block.id, name=block.name, args=block.input)
            parts.append(_types.Part(function_call=call))
        elif isinstance(block, ToolResultBlock):
            response = _types.FunctionResponse(
                id=block.id, name=block.name, response={_key_of(block): _output_text(block)}
            )
            parts.append(_types.Part(function_response=response))
        elif isinstance(block.source, Base64Source):
            blob = _types.Blob(
                data=base64.b64decode(block.source.data), mime_type=block.source.media_type
            )
            parts.append(_types.Part(inline_data=blob))
        else:
            file = _types.FileData(file_uri=block.source.url, mime_type=block.source.media_type)
            parts.append(_types.Part(file_data=file))
    return parts


def _key_of(block: ToolResultBlock) -> str:
    """The key a result's text goes back under: a failed call's under `error`, as it came."""
    return "error" if block.is_error else "result"


def _output_text(block: ToolResultBlock) -> str:
    if isinstance(block.output, str):
        return block.output
    return "".join(item.text for item in block.output if isinstance(item, TextBlock))
