"""What the format modules share: the hints that make conversions round-trip exactly.

`to_openai(from_openai(x)) == x` and `to_anthropic(from_anthropic(m, s)) == (s, m)` for
well-formed input (`s` a string or None), and likewise for Converse. Whatever the message model
has no field for is stashed, and put back on the way out, under a key named for the format:

- `Msg.metadata["openai"]` / `Msg.metadata["anthropic"]`: a dict with `keys` (message keys the
  model has no field for, e.g. mini-swe-agent's `extra` or Anthropic's `usage`, merged back
  verbatim), `content` (OpenAI only: `"list"`, `"null"`, `"absent"` or `"empty"` when the
  content had a form the default output would not give) and `unknown` (`[index, part]` pairs
  for content parts with no ctxoffload block, e.g. `refusal` or `redacted_thinking`,
  re-inserted at their index).
- the same key as an extra field on a block (`block.openai`, `block.anthropic`): `keys` (merged
  into the block's default output, e.g. `detail` or `cache_control`), `drop` (keys the original
  did not have), `as` (the part type when it is not the default for the media type),
  `arguments` / `arguments_raw` (how a tool call's JSON arguments were spelled), `file_data`
  (`"raw"`: a file part without a data: URL) and `unknown` (tool_result content items).

The hints describe the message as it was read. Those that depend on the content (raw
arguments, the content form, the part type) are used only while they still fit it, so an
edited message converts sensibly; the other format's hints are never used.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from .._depth import STORE_DEPTH, depth_error, json_text, too_deep
from ..exceptions import InvalidContent
from ..messages import Base64Source, DataBlock, Msg, TextBlock, ToolCallBlock, URLSource

Format = Literal["openai", "anthropic", "converse"]
Hint = dict[str, Any]
_Block = TypeVar("_Block")


def msg_hint(msg: Msg, fmt: Format) -> Hint:
    hint = msg.metadata.get(fmt)
    return hint if isinstance(hint, dict) else {}


def block_hint(block: BaseModel, fmt: Format) -> Hint:
    hint = (block.model_extra or {}).get(fmt)
    return hint if isinstance(hint, dict) else {}


def hinted(fmt: Format, hint: Hint) -> dict[str, Any]:
    """Keyword arguments that attach `hint` to a new block, or none when it is empty."""
    return {fmt: hint} if hint else {}


def extra_keys(value: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    known = frozenset(known)
    return {k: copy.deepcopy(v) for k, v in value.items() if k not in known}


def merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def apply(out: dict[str, Any], hint: Hint) -> dict[str, Any]:
    keys = hint.get("keys")
    if isinstance(keys, Mapping):
        out = merge(out, keys)
    drop = hint.get("drop")
    if isinstance(drop, list):
        for key in drop:
            out.pop(key, None)
    return out


def with_unknown(items: list[Any], hint: Hint) -> list[Any]:
    """`items` with the verbatim parts recorded in `hint["unknown"]` put back at their index."""
    unknown = hint.get("unknown")
    if not isinstance(unknown, list):
        return items
    out = list(items)
    for entry in unknown:
        if isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[0], int):
            out.insert(min(entry[0], len(out)), copy.deepcopy(entry[1]))
    return out


def text_block(part: Mapping[str, Any], fmt: Format, where: str) -> TextBlock:
    text = part.get("text")
    if not isinstance(text, str):
        raise InvalidContent(
            f"{where} is a text part whose 'text' is {type(text).__name__}: make it a string"
        )
    keys = extra_keys(part, ("type", "text"))
    return TextBlock(text=text, **hinted(fmt, {"keys": keys} if keys else {}))


def data_block(
    source: Base64Source | URLSource,
    name: str | None,
    fmt: Format,
    kind: str,
    hint: Hint,
    default_kind: Callable[[DataBlock], str],
) -> DataBlock:
    """A DataBlock, recording the part type `kind` only when it is not `default_kind`'s."""
    block = DataBlock(source=source, name=name)
    if kind != default_kind(block):
        hint["as"] = kind
    if not hint:
        return block
    return DataBlock(source=source, name=name, **hinted(fmt, hint))


def read_parts(
    parts: Iterable[Any], read: Callable[[Any, str], _Block | None], where: str, hint: Hint
) -> list[_Block]:
    """The parts `read` converts, in order; those it does not (None) are kept verbatim in
    `hint["unknown"]` as `[index, part]` pairs, which `with_unknown` puts back.

    `read` is called with each part and how errors name it (`where[index]`).
    """
    blocks: list[_Block] = []
    unknown: list[Any] = []
    for j, part in enumerate(parts):
        block = read(part, f"{where}[{j}]")
        if block is None:
            unknown.append([j, copy.deepcopy(part)])
        else:
            blocks.append(block)
    if unknown:
        hint["unknown"] = unknown
    return blocks


def result_output(
    content: Any,
    read: Callable[[Any, str], TextBlock | DataBlock | None],
    where: str,
    hint: Hint,
) -> str | list[TextBlock | DataBlock]:
    """A tool result's output from the `content` its message or block holds: a string as it
    is, a list of parts as `read` converts them (see `read_parts`); anything else is refused.

    Raises:
        InvalidContent: `content` is neither a string nor a list.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return read_parts(content, read, f"{where}.content", hint)
    raise bad_content(where, content)


def check_messages(messages: Any, caller: str) -> None:
    """Refuse one message (a dict) or a string where `caller` takes a list of messages."""
    if isinstance(messages, (Mapping, str, bytes)):
        raise InvalidContent(
            f"{caller} takes a list of messages, got a {type(messages).__name__}: wrap one "
            "message in a list, or use to_msg"
        )


def check_message(message: Any, where: str) -> Mapping[str, Any]:
    """`message` if it is a message dict that is not nested too deeply; else InvalidContent."""
    if not isinstance(message, Mapping):
        raise InvalidContent(
            f"{where} is a {type(message).__name__}, not a message: pass dicts like "
            "{'role': 'user', 'content': 'hi'}"
        )
    check_depth(message, where)
    return message


def check_msg(msg: Any, where: str) -> Msg:
    """`msg` if it is a `Msg` (what every `to_*` converts); else InvalidContent."""
    if not isinstance(msg, Msg):
        raise InvalidContent(
            f"{where} is a {type(msg).__name__}, not a Msg: convert it with to_msgs first"
        )
    return msg


def check_depth(message: Mapping[str, Any], where: str) -> None:
    # Conversion copies and walks values recursively: refuse what nests too deeply first.
    if too_deep(message, STORE_DEPTH):
        raise depth_error(where, STORE_DEPTH)


def arguments_text(block: ToolCallBlock, where: str, **options: Any) -> str:
    """A tool call's input as the JSON text of its arguments (`json.dumps` with `options`), at
    any depth (`_depth.json_text`): the one rule of every format that sends arguments as text.

    Raises:
        InvalidContent: the input holds a value JSON has no text for (a set, itself, an int
            too long to write), named with the call.
    """
    try:
        return json_text(block.input, exact=True, **options)
    except (TypeError, ValueError) as exc:
        raise InvalidContent(
            f"{where} tool call {block.id!r} has input that is not JSON ({exc}): "
            "use only JSON values (str, int, float, bool, None, list, dict) in ToolCallBlock.input"
        ) from None


def bad_content(where: str, content: Any) -> InvalidContent:
    return InvalidContent(
        f"{where}.content is a {type(content).__name__}: use a string or a list of content parts"
    )
