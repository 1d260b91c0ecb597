"""pydantic-ai `ModelMessage`s <-> ctxoffload `Msg`s.

A pydantic-ai `ModelRequest` mixes parts ctxoffload keeps in messages of different roles
(system prompt, user prompt, tool returns, retry prompts), so a request becomes one `Msg` per
run of parts of one role, and a `ModelResponse` one assistant `Msg`. Each `Msg` id is
`<message index>.<run index>`, so a projection maps back to the message it came from. A tool
return that is no success (`outcome` retried, failed, denied, interrupted) is an error result
whose outcome `metadata["outcomes"]` keeps by call id; retry feedback that answers no call is
user text. What a tool sent beside its result (a `ToolReturn`'s `content`, which pydantic-ai
puts in a user prompt part after the request's tool returns) is in the tool run's `Msg`, never
a user's request of its own (`_runs`).
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
from collections.abc import Sequence
from typing import Any, TypeGuard

from ..exceptions import ConfigError
from ..formats.provider_compaction import COMPACTION_TYPE, HOST_ITEM_KEY
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
    "from_pydantic_ai",
    "holds_files",
    "projected_copy",
    "to_pydantic_ai",
    "tool_return_text",
]

INSTALL_HINT = "pydantic-ai is not installed: pip install 'ctxoffload[pydantic-ai]'"

try:
    _m: Any = importlib.import_module("pydantic_ai.messages")
except ImportError as exc:  # pragma: no cover - exercised where pydantic-ai is absent
    raise ConfigError(INSTALL_HINT) from exc


def from_pydantic_ai(messages: Sequence[Any]) -> list[Msg]:
    """ctxoffload messages for pydantic-ai messages, oldest first.

    Args:
        messages: pydantic-ai `ModelRequest` and `ModelResponse` objects.

    Returns:
        The `Msg`s, whose ids (`<index>.<run>.<digest>`) name the message each came from and
        what it says: pydantic-ai's messages have no ids, and an id made of the position alone
        would let a history that changed shape (a history processor dropping old messages)
        take another history's decisions (a summary standing for messages it never saw).
    """
    out: list[Msg] = []
    for index, message in enumerate(messages):
        if isinstance(message, _m.ModelResponse):
            blocks = [block for part in message.parts for block in _response_blocks(part)]
            compaction = _compaction(message)
            metadata = {HOST_ITEM_KEY: compaction} if compaction is not None else {}
            msg_id = message_id(index, 0, blocks)
            out.append(Msg(role="assistant", content=blocks, id=msg_id, metadata=metadata))
            continue
        previous = messages[index - 1] if index else None
        for run, (role, given, outcomes) in enumerate(_runs(message, previous)):
            blocks = [block for _, part_blocks in given for block in part_blocks]
            said: dict[str, Any] = {"outcomes": outcomes} if outcomes else {}
            if role == "tool" and (content := _tool_content(given)):
                said[TOOL_CONTENT] = content
            msg_id = message_id(index, run, blocks)
            msg = Msg(role=role, content=blocks, id=msg_id, metadata=said)  # type: ignore[arg-type]
            out.append(msg)
    return out


def to_pydantic_ai(msgs: Sequence[Msg]) -> list[Any]:
    """pydantic-ai messages for ctxoffload messages: an assistant `Msg` a `ModelResponse`,
    consecutive others from one message (one id before the dot) one `ModelRequest`."""
    out: list[Any] = []
    request: list[Any] = []
    origin = None
    for msg in msgs:
        if request and (msg.role == "assistant" or msg.id.split(".")[0] != origin):
            out.append(_m.ModelRequest(parts=request))
            request = []
        origin = msg.id.split(".")[0]
        if msg.role == "assistant":
            out.append(_m.ModelResponse(parts=_response_parts(msg)))
        else:
            request.extend(_request_parts(msg))
    if request:
        out.append(_m.ModelRequest(parts=request))
    return out


def projected_copy(original: Any, msgs: Sequence[Msg], previous: Any = None) -> Any:
    """A copy of the pydantic-ai message `original` saying what its `Msg`s say after a
    projection changed them (`msgs`: those it kept of the message, in order; `previous`: the
    message before it in the history, which `from_pydantic_ai` read it beside).

    A request's parts whose `Msg` the projection left out (a summary stands for it) are
    left out; a part whose blocks it kept is the original part, and a user prompt's item it
    kept the original item, so what has no block of its own (a `DocumentUrl`'s
    `force_download`, a `CachePoint`) goes to the model as it was. A tool return whose text
    was cut keeps its files (an image the tool returned beside its text: pydantic-ai sends
    those as parts of their own, so no text of them was cut) and its metadata.
    """
    if not isinstance(original, _m.ModelRequest):
        kept_parts = _response_parts_with_arguments(original, msgs)
        if kept_parts is not None:
            return dataclasses.replace(original, parts=kept_parts)
        (rebuilt,) = to_pydantic_ai(msgs)
        return dataclasses.replace(original, parts=rebuilt.parts)
    kept = {int(msg.id.split(".")[1]): msg for msg in msgs}
    parts: list[Any] = []
    for run, (_, given, _) in enumerate(_runs(original, previous)):
        msg = kept.get(run)
        if msg is not None:
            parts.extend(_projected_parts(given, msg))
    return dataclasses.replace(original, parts=parts)


def _projected_parts(given: list[tuple[Any, list[Block]]], msg: Msg) -> list[Any]:
    """The parts of one run of a request (each with its blocks) after a projection made
    their `Msg` `msg`: each part it kept as it was, the others made again."""
    blocks = msg.blocks
    if len(blocks) != sum(len(olds) for _, olds in given):
        return _request_parts(msg)  # the blocks no longer line up with the parts
    parts: list[Any] = []
    start = 0
    for part, olds in given:
        news = blocks[start : start + len(olds)]
        start += len(olds)
        if news == olds:
            parts.append(part)
        elif isinstance(part, _m.ToolReturnPart) and isinstance(news[0], ToolResultBlock):
            text, files = _output_text(news[0]), part.files
            parts.append(dataclasses.replace(part, content=[text, *files] if files else text))
        elif isinstance(part, _m.UserPromptPart) and _text_or_data(news):
            given_items = [part.content] if isinstance(part.content, str) else part.content
            items = [
                item if new == old else _user_item(new)
                for item, old, new in zip(given_items, olds, news, strict=True)
            ]
            content = items[0] if isinstance(part.content, str) else items
            parts.append(dataclasses.replace(part, content=content))
        else:
            parts.extend(_request_parts(msg.model_copy(update={"content": news})))
    return parts


def _response_parts_with_arguments(original: Any, msgs: Sequence[Msg]) -> list[Any] | None:
    """The parts of the `ModelResponse` `original` when a projection changed only its calls'
    arguments (a call that wrote a whole file, its long strings cut): each `ToolCallPart`
    with the arguments its `Msg` holds, every other part as it was (a thinking part's id and
    signature, a native tool's parts, which have no block); None when it changed more."""
    if len(msgs) != 1:
        return None
    (msg,) = msgs
    news = msg.blocks
    parts: list[Any] = []
    at = 0
    for part in original.parts:
        olds = _response_blocks(part)
        if not olds:
            parts.append(part)
            continue
        if at >= len(news):
            return None
        new = news[at]
        at += 1
        if new == olds[0]:
            parts.append(part)
        elif (
            isinstance(part, _m.ToolCallPart)
            and isinstance(new, ToolCallBlock)
            and new.id == part.tool_call_id
        ):
            parts.append(dataclasses.replace(part, args=new.input))
        else:
            return None
    return parts if at == len(news) else None


_Run = tuple[str, list[tuple[Any, list[Block]]], dict[str, str]]
"""A run of a request's parts of one role (one `Msg`): its role, its parts each with its
blocks, and the outcomes of its tool returns that are no success."""


TOOL_CONTENT = "tool_content"
"""The `Msg` metadata of a tool run holding what tools sent beside their results (a
`ToolReturn`'s `content`, a user prompt part of its own): one entry per such part, in order,
the number of its blocks (None for a text)."""


def _runs(request: Any, previous: Any) -> list[_Run]:
    """A request's parts as runs of parts of one role, as `from_pydantic_ai` makes `Msg`s.

    A user prompt part after a tool's return is what a tool sent beside its result (a
    `ToolReturn`'s `content`: pydantic-ai puts it after the request's tool returns), so it is
    part of the tool run, never a request of the user's: a compaction keeping it as the
    latest request summarised the user's own prompt away. The one exception is the last part
    of a request that opens a run (`_opens_run`): pydantic-ai puts the prompt of a run resumed
    with deferred tool results there, after the tools' returns and content.
    """
    parts = request.parts
    prompt_at = len(parts) - 1 if _opens_run(request, previous) else -1
    runs: list[_Run] = []
    answered = False
    for at, part in enumerate(parts):
        role, blocks, outcomes = _request_blocks(part)
        answered = answered or role == "tool"
        if answered and isinstance(part, _m.UserPromptPart) and at != prompt_at:
            role = "tool"
        if runs and runs[-1][0] == role:
            runs[-1][1].append((part, blocks))
            runs[-1][2].update(outcomes)
        else:
            runs.append((role, [(part, blocks)], dict(outcomes)))
    return runs


def _opens_run(request: Any, previous: Any) -> bool:
    """Whether a request is the first of a run (its `run_id` is not the message's before it,
    both known, or nothing is before it): only such a request may carry the user's prompt
    after tool returns."""
    if previous is None:
        return True
    run, before = getattr(request, "run_id", None), getattr(previous, "run_id", None)
    return run is not None and before is not None and run != before


def _tool_content(given: list[tuple[Any, list[Block]]]) -> list[int | None]:
    """The `TOOL_CONTENT` of a tool run: each user prompt part's number of blocks."""
    return [
        None if isinstance(part.content, str) else len(blocks)
        for part, blocks in given
        if isinstance(part, _m.UserPromptPart)
    ]


def _compaction(response: Any) -> dict[str, Any] | None:
    """The provider's compaction a `ModelResponse` holds (a `CompactionPart` a provider
    wrote: it names the provider), as `HOST_ITEM_KEY` names it; None when it holds none."""
    for part in response.parts:
        if isinstance(part, _m.CompactionPart) and part.provider_name:
            item: dict[str, Any] = {"type": COMPACTION_TYPE}
            if part.id is not None:
                item["id"] = part.id
            if part.content is not None:
                item["content"] = part.content
            item.update(part.provider_details or {})
            return {"provider": part.provider_name, "item": item}
    return None


def _response_blocks(part: Any) -> list[Block]:
    if isinstance(part, _m.TextPart):
        return [TextBlock(text=part.content)]
    if isinstance(part, _m.ThinkingPart):
        return [ThinkingBlock(thinking=part.content, signature=part.signature)]
    if isinstance(part, _m.ToolCallPart):
        return [ToolCallBlock(id=part.tool_call_id, name=part.tool_name, input=part.args_as_dict())]
    return []  # a native tool's or a file part: the provider's own, not the agent's context


def tool_return_text(tool_name: str, tool_call_id: str, content: Any) -> str:
    """A tool's return value as the text pydantic-ai sends the model for it (a value that is
    not a string as its JSON)."""
    if isinstance(content, str):
        return content
    part = _m.ToolReturnPart(tool_name=tool_name, content=content, tool_call_id=tool_call_id)
    return str(part.model_response_str())


def holds_files(content: Any) -> bool:
    """Whether a tool's return value is an image or a file, or a list holding one (pydantic-ai
    sends those to the model as parts of their own, not as text)."""
    items = content if isinstance(content, (list, tuple)) else [content]
    return any(isinstance(item, (_m.FileUrl, _m.BinaryContent)) for item in items)


def _request_blocks(part: Any) -> tuple[str, list[Block], dict[str, str]]:
    if isinstance(part, _m.SystemPromptPart):
        return "system", [TextBlock(text=part.content)], {}
    if isinstance(part, _m.UserPromptPart):
        items = [part.content] if isinstance(part.content, str) else part.content
        return "user", [block for item in items for block in _user_blocks(item)], {}
    if isinstance(part, _m.ToolReturnPart):
        text = tool_return_text(part.tool_name, part.tool_call_id, part.content)
        failed = part.outcome != "success"
        block = ToolResultBlock(
            id=part.tool_call_id, name=part.tool_name, output=text, is_error=failed
        )
        return "tool", [block], {part.tool_call_id: part.outcome} if failed else {}
    if isinstance(part, (_m.RetryFeedbackPart, _m.RetryPromptPart)):
        text = part.content if isinstance(part.content, str) else part.model_response()
        if getattr(part, "tool_name", None) is None:
            return "user", [TextBlock(text=text)], {}
        block = ToolResultBlock(
            id=part.tool_call_id, name=part.tool_name, output=text, is_error=True
        )
        return "tool", [block], {part.tool_call_id: "retried"}
    return "user", [], {}


def _user_blocks(item: Any) -> list[Block]:
    if isinstance(item, str):
        return [TextBlock(text=item)]
    if isinstance(item, _m.BinaryContent):
        data = base64.b64encode(item.data).decode("ascii")
        inline = Base64Source(media_type=item.media_type, data=data)
        return [DataBlock(source=inline, **_file_fields(item))]
    if isinstance(item, _m.FileUrl):
        source = URLSource(url=item.url, media_type=_media_type(item))
        fields = _file_fields(item)
        if not isinstance(item, _m.ImageUrl):
            fields["kind"] = item.kind  # its class, whatever its type
        return [DataBlock(source=source, **fields)]
    return [TextBlock(text=json.dumps(item, default=str))]


_FILE_FIELDS = ("force_download", "vendor_metadata", "identifier")
"""What a pydantic-ai file says that a `DataBlock` has no field for: how the provider is to
fetch it (`force_download`), what it is told of it (`vendor_metadata`: an image's `detail`),
and the name the model calls it by (`identifier`, when one was given)."""


def _file_fields(item: Any) -> dict[str, Any]:
    """The `pydantic_ai` field of a file's block: those of `_FILE_FIELDS` the file sets (a
    block for a file that sets none has no such field, as a block made elsewhere)."""
    given = {
        "force_download": getattr(item, "force_download", False) or None,
        "vendor_metadata": item.vendor_metadata,
        "identifier": item._identifier,
    }
    fields = {name: value for name, value in given.items() if value is not None}
    return {"pydantic_ai": fields} if fields else {}


def _media_type(item: Any) -> str | None:
    """A file URL's media type: as given, else as its URL's extension says; None when
    neither says (pydantic-ai raises then)."""
    try:
        return str(item.media_type)
    except ValueError:
        return None


def _response_parts(msg: Msg) -> list[Any]:
    if isinstance(msg.content, str):
        return [_m.TextPart(content=msg.content)]
    parts: list[Any] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            parts.append(_m.TextPart(content=block.text))
        elif isinstance(block, ThinkingBlock):
            parts.append(_m.ThinkingPart(content=block.thinking, signature=block.signature))
        elif isinstance(block, ToolCallBlock):
            parts.append(
                _m.ToolCallPart(tool_name=block.name, args=block.input, tool_call_id=block.id)
            )
    return parts


def _request_parts(msg: Msg) -> list[Any]:
    blocks = [TextBlock(text=msg.content)] if isinstance(msg.content, str) else msg.content
    if msg.role == "system":
        return [_m.SystemPromptPart(content="".join(_texts(blocks)))]
    outcomes = msg.metadata.get("outcomes", {})
    parts: list[Any] = []
    user: list[Any] = []
    for block in blocks:
        if isinstance(block, ToolResultBlock):
            output = _output_text(block)
            outcome = outcomes.get(block.id, "failed" if block.is_error else "success")
            parts.append(
                _m.ToolReturnPart(
                    tool_name=block.name, content=output, tool_call_id=block.id, outcome=outcome
                )
            )
        elif isinstance(block, (TextBlock, DataBlock)):
            user.append(_user_item(block))
    if not user:
        return parts
    content = msg.metadata.get(TOOL_CONTENT) if msg.role == "tool" else None
    if not _splits(content, len(user)):
        text_only = all(isinstance(item, str) for item in user)
        content = [None] if text_only and len(user) == 1 else [len(user)]
    start = 0
    for size in content:
        items = user[start : start + (size or 1)]
        start += size or 1
        parts.append(_m.UserPromptPart(content=items[0] if size is None else items))
    return parts


def _splits(content: Any, items: int) -> TypeGuard[list[int | None]]:
    """Whether `TOOL_CONTENT` metadata says how to part `items` items into user prompt parts
    (the projection may have changed the blocks since)."""
    return (
        isinstance(content, list)
        and all(size is None or (isinstance(size, int) and size > 0) for size in content)
        and sum(size or 1 for size in content) == items
    )


def _text_or_data(blocks: list[Block]) -> TypeGuard[list[TextBlock | DataBlock]]:
    return all(isinstance(block, (TextBlock, DataBlock)) for block in blocks)


def _output_text(block: ToolResultBlock) -> str:
    return block.output if isinstance(block.output, str) else "".join(_texts(block.output))


def _user_item(block: TextBlock | DataBlock) -> Any:
    """The item of a user prompt's content for a text or data block."""
    return _file(block) if isinstance(block, DataBlock) else block.text


def _texts(blocks: Sequence[Any]) -> list[str]:
    return [block.text for block in blocks if isinstance(block, TextBlock)]


def _file(block: DataBlock) -> Any:
    source = block.source
    given = getattr(block, "pydantic_ai", None)
    fields = {
        name: value
        for name, value in (given if isinstance(given, dict) else {}).items()
        if name in _FILE_FIELDS
    }
    if isinstance(source, Base64Source):
        fields.pop("force_download", None)  # (a URL's alone)
        data = base64.b64decode(source.data)
        return _m.BinaryContent(data=data, media_type=source.media_type, **fields)
    kind = getattr(block, "kind", None)
    if kind is None:  # made elsewhere: the class its media type names
        kind = (source.media_type or "image/").split("/")[0] + "-url"
    url_class = _FILE_URLS.get(kind, _m.DocumentUrl)
    return url_class(url=source.url, media_type=source.media_type, **fields)


_FILE_URLS: dict[str, Any] = {
    url_class.kind: url_class
    for url_class in (_m.ImageUrl, _m.AudioUrl, _m.VideoUrl, _m.DocumentUrl)
}
"""pydantic-ai's file URL classes by their `kind`."""
