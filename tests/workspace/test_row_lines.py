"""A message's context line and idempotence key do not depend on how its row was made.

A `Msg` without payloads is written from pydantic's own JSON text (no second
serialisation); a message read back from context.jsonl, or given as a dict, is written by
serialising its row. Both must give the same bytes and the same key, or a resumed agent
would write its messages twice.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ctxoffload import Msg, TextBlock, ToolCallBlock, ToolResultBlock
from ctxoffload.workspace._jsonl import dumps_row, row_line_and_key
from ctxoffload.workspace._payloads import JsonRow, message_json

_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)),  # no lone surrogates: Msg refuses
    max_size=60,
)
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_blocks = st.one_of(
    st.builds(TextBlock, text=_text),
    st.builds(
        ToolCallBlock,
        id=_text.filter(bool),
        name=_text,
        input=st.dictionaries(_text, _json_values, max_size=4),
    ),
    st.builds(ToolResultBlock, id=_text.filter(bool), name=_text, output=_text),
)
_messages = st.builds(
    Msg,
    role=st.sampled_from(["user", "assistant", "tool", "system"]),
    content=_text | st.lists(_blocks, max_size=4),
    name=st.none() | _text,
    metadata=st.dictionaries(_text, _json_values, max_size=3),
)


def _slow(row: dict[str, Any]) -> tuple[bytes, str | None]:
    return row_line_and_key(dict(row))  # a plain dict: the serialising path


@settings(max_examples=300, deadline=None)
@given(msg=_messages)
def test_a_msg_row_gives_the_line_and_key_of_its_serialised_row(msg: Msg) -> None:
    row = message_json(msg, lambda raw, media_type: "unused", where="msg")
    # Text that looks like a payload ("input_audio", "data:...") takes the full path.
    assume(isinstance(row, JsonRow))
    fast = row_line_and_key(row)
    assert fast == _slow(row)
    # And the line read back from the log gives the same again (a resumed agent).
    reread = json.loads(fast[0])
    assert row_line_and_key(reread) == fast


def test_a_row_laid_out_otherwise_takes_the_serialising_path() -> None:
    msg = Msg(role="user", content="hello")
    row = message_json(msg, lambda raw, media_type: "unused", where="msg")
    # A text that does not end with the timestamp field (not what pydantic wrote): the
    # fast path must notice and serialise the row instead of trusting the text.
    row.json_text = row.json_text.replace('"timestamp"', '"timestamp" ')
    assert row_line_and_key(row) == _slow(row)
    moved = JsonRow({"timestamp": row["timestamp"], **{k: v for k, v in row.items()}})
    moved.json_text = row.json_text
    assert row_line_and_key(moved) == row_line_and_key(dict(moved))
    assert dumps_row(row) == row_line_and_key(dict(row))[0]


def test_a_msg_row_is_written_from_its_own_text() -> None:
    # The line is the text pydantic wrote, not a second serialisation: a text whose first
    # fields are laid out with spaces (which pydantic never writes) shows which was used.
    msg = Msg(role="user", content="hello")
    row = message_json(msg, lambda raw, media_type: "unused", where="msg")
    stable = {k: v for k, v in row.items() if k != "timestamp"}
    spaced = json.dumps(stable)[:-1] + ',"timestamp":' + json.dumps(row["timestamp"]) + "}"
    row.json_text = spaced
    assert row_line_and_key(row)[0] == spaced.encode() + b"\n"
    assert row_line_and_key(dict(row))[0] != spaced.encode() + b"\n"
