"""What a message costs in tokens, given how to count a text: the one rule both counters
apply (the module docstring of `ctxoffload.tokens` says what counts), the constants it uses
and the `TokenCounter` protocol."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._depth import json_text
from ..text import data_line

if TYPE_CHECKING:
    from ..messages import DataBlock, Msg

__all__ = [
    "DEFAULT_DATA_BLOCK_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "REPLY_PRIMING_TOKENS",
    "TokenCounter",
    "dumps_json",
    "message_tokens",
]

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens per message for the role and the delimiters around it (OpenAI chat format)."""

REPLY_PRIMING_TOKENS = 3
"""Tokens of the assistant header that every reply is primed with."""

DEFAULT_DATA_BLOCK_TOKENS = 1000
"""Cost of one image / audio / document block sent to the model."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way a model will see a context.

    Attributes:
        name: the encoding name (`o200k_base`, `cl100k_base`) or `heuristic`.
        is_exact: True when the counts are the model's own: an OpenAI model counted with
            its encoding (`get_token_counter`). False for an estimate: the characters
            heuristic, an encoding standing in for another family's tokenizer, or a
            calibrated bound (`CalibratedCounter`).
    """

    name: str
    is_exact: bool

    def count_text(self, text: str) -> int:
        """Tokens in a plain string."""
        ...

    def count_message(self, msg: Msg) -> int:
        """Tokens one message costs in a context, overhead included."""
        ...

    def count_messages(self, msgs: Sequence[Msg]) -> int:
        """Tokens a list of messages costs, the reply priming included."""
        ...

    def count_tools(self, tools: Sequence[dict[str, Any]]) -> int:
        """Tokens the tool JSON schemas cost."""
        ...


# ensure_ascii=False: providers send UTF-8, and \uXXXX escapes would inflate counts. One
# encoder for every call: `json.dumps` with options builds a new one each time, which costs
# as much as encoding a tool call's input.
_encode_json = json.JSONEncoder(ensure_ascii=False, default=str).encode


def dumps_json(value: Any) -> str:
    """`value` as the JSON text that is counted, at any depth (`_depth.json_text`)."""
    return json_text(value, _encode_json)


def _data_block_tokens(
    block: DataBlock, count_text: Callable[[str], int], data_block_tokens: int
) -> int:
    source = block.source
    if source.type == "base64" or source.url.startswith(("http://", "https://", "data:")):
        return data_block_tokens
    # A local path or file:// URL cannot be sent as-is: adapters show this placeholder line,
    # the same one tool_result files use (DESIGN.md section 3).
    return count_text(data_line(source.url, block.name, source.media_type))


def message_tokens(
    msg: Msg,
    count_text: Callable[[str], int],
    count_json: Callable[[str], int],
    data_block_tokens: int,
) -> int:
    """Tokens `msg` costs, its text counted by `count_text`, its tool calls' arguments (as
    JSON) by `count_json`, and each data block sent inline at `data_block_tokens`."""
    total = MESSAGE_OVERHEAD_TOKENS
    if msg.name:
        total += count_text(msg.name) + 1
    if isinstance(msg.content, str):
        return total + count_text(msg.content)
    # Blocks are told apart by their `type`, the field that discriminates them in `Msg`: this
    # module needs no pydantic model to count a text, and loads none.
    blocks: list[Any] = msg.content
    for block in blocks:
        kind = block.type
        if kind == "text":
            total += count_text(block.text)
        elif kind == "thinking":
            total += count_text(block.thinking)
        elif kind == "tool_call":
            total += count_text(block.name) + count_json(dumps_json(block.input))
        elif kind == "tool_result":
            if isinstance(block.output, str):
                total += count_text(block.output)
            else:
                for part in block.output:
                    if part.type == "text":
                        total += count_text(part.text)
                    else:
                        total += _data_block_tokens(part, count_text, data_block_tokens)
        else:
            total += _data_block_tokens(block, count_text, data_block_tokens)
    return total
