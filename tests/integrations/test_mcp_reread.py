"""The one rule for an answer the MCP SDK's parser refuses (`ctxoffload.mcp._reread`): each
lone surrogate escape of JSON text becomes `\\ufffd`, everything else stays byte for byte,
whether the text comes whole (a stdio line) or in pieces cut anywhere (an HTTP body)."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload.mcp._reread import LoneSurrogateEscapes, without_lone_surrogate_escapes
from helpers import examples

_LONE = re.compile("[\ud800-\udfff]")

# Characters that make escapes hard to tell apart: backslashes (runs of them), quotes, the
# halves of an emoji alone and together, text that looks like an escape, a line break.
_HARD = st.sampled_from(
    [
        *["a", "\\", "\\\\", '"', "\ud800", "\udc80", "\ud83d", "\ude00", "\U0001f600", "é"],
        *["\n", "u", "ud800", "\\ud800", "/"],
    ]
)
_STRINGS = st.lists(_HARD, max_size=30).map("".join)


def _replaced(value: Any) -> Any:
    """`value` with each lone surrogate of its strings (keys too) U+FFFD."""
    if isinstance(value, str):
        return _LONE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replaced(item) for item in value]
    if isinstance(value, dict):
        return {_replaced(key): _replaced(item) for key, item in value.items()}
    return value


def _in_pieces(data: bytes, cuts: list[int]) -> bytes:
    escapes = LoneSurrogateEscapes()
    out, start = [], 0
    for cut in sorted({min(c, len(data)) for c in cuts}):
        out.append(escapes.feed(data[start:cut]))
        start = cut
    out += [escapes.feed(data[start:]), escapes.end()]
    return b"".join(out)


@settings(max_examples=examples(400), deadline=None)
@given(
    lines=st.lists(
        st.dictionaries(_STRINGS, st.lists(_STRINGS, max_size=3), max_size=3),
        min_size=1,
        max_size=3,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=2_000), max_size=40),
)
def test_each_lone_surrogate_escape_becomes_a_replacement_character_whatever_the_pieces(
    lines: list[dict[str, list[str]]], cuts: list[int]
) -> None:
    text = "\n".join(json.dumps(line) for line in lines)
    data = text.encode("ascii")
    whole = without_lone_surrogate_escapes(data)
    assert _in_pieces(data, cuts) == whole
    # What `json` reads (which joins an escaped pair into one character), each surrogate
    # still alone made U+FFFD.
    read = [json.loads(line) for line in text.split("\n")]
    assert [json.loads(line) for line in whole.decode("ascii").split("\n")] == _replaced(read)
    if _replaced(read) == read:
        assert whole == data


def test_a_line_end_is_never_held_back() -> None:
    """An event of an event stream reaches the SDK as soon as it ends, even when the stream
    stays open after it (a server's notifications, its progress)."""
    escapes = LoneSurrogateEscapes()
    assert escapes.feed(b'data: {"a": "\\ud83d') == b'data: {"a": "'
    assert escapes.feed(b'\\ude00 \\ud800"}\n\n') == b'\\ud83d\\ude00 \\ufffd"}\n\n'
    assert escapes.feed(b'data: {"b": "' + b"\\" * 40 + b'"}\n\n').endswith(b"\n\n")
    assert escapes.end() == b""


def test_a_long_piece_without_a_line_end_holds_back_at_most_twelve_bytes() -> None:
    escapes = LoneSurrogateEscapes()
    piece = b'{"text": "' + b"x\\n" * 10_000
    settled = escapes.feed(piece)
    assert len(piece) - len(settled) <= 12
    assert settled + escapes.feed(b'"}') + escapes.end() == piece + b'"}'
