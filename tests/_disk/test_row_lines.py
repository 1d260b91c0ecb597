"""A message's context line and idempotence key do not depend on how its row was made.

A `Msg` without payloads is written from pydantic's own JSON (a `TextRow`: no second
serialisation, no parse back); another model's from its JSON parsed once (a `JsonRow`); a
message read back from context.jsonl, or given as a dict, by serialising its row. All must
give the same bytes and the same key, or a resumed agent would write its messages twice.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from ctxoffload import Msg, TextBlock, ToolCallBlock, ToolResultBlock
from ctxoffload._disk.payloads import JsonRow, message_json
from ctxoffload._disk.rows import TextRow, dumps_row, row_line_and_key
from helpers import examples

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


def _slow(row: Any) -> tuple[bytes, str | None]:
    value = json.loads(row.raw) if isinstance(row, TextRow) else dict(row)
    return row_line_and_key(value)  # a plain dict: the serialising path


def _row(msg: BaseModel) -> Any:
    return message_json(msg, lambda raw, media_type: "unused", where="msg")


class Foreign(BaseModel):
    """Another framework's message model (not a ctxoffload `Msg`)."""

    role: str
    content: str
    id: str
    timestamp: str


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(msg=_messages)
def test_a_msg_row_gives_the_line_and_key_of_its_serialised_row(msg: Msg) -> None:
    row = _row(msg)
    # Text that looks like a payload ("input_audio", "data:...") takes the full path.
    assume(isinstance(row, TextRow))
    fast = row_line_and_key(row)
    assert fast == _slow(row)
    assert fast[0] == msg.model_dump_json().encode() + b"\n" == dumps_row(row)
    # And the line read back from the log gives the same again (a resumed agent).
    reread = json.loads(fast[0])
    assert row_line_and_key(reread) == fast


@settings(max_examples=examples(100), deadline=None)
@given(content=_text, msg_id=_text.filter(bool))
def test_another_models_row_gives_the_line_and_key_of_its_serialised_row(
    content: str, msg_id: str
) -> None:
    row = _row(Foreign(role="user", content=content, id=msg_id, timestamp="2026-11-24T00:00Z"))
    assume(isinstance(row, JsonRow))
    assert row_line_and_key(row) == _slow(row)


def test_a_row_laid_out_otherwise_takes_the_serialising_path() -> None:
    msg = Msg(role="user", content="hello")
    row = _row(msg)
    assert isinstance(row, TextRow)
    # JSON that does not end with the timestamp field as pydantic writes it: the fast path
    # must notice and serialise the row instead of trusting the text.
    for raw in (
        row.raw.replace(b'"timestamp"', b'"timestamp" '),
        row.raw[:-1] + b',"x":1}',
        row.raw.replace(b'+00:00"', b'\\u002b00:00"'),
    ):
        odd = TextRow(raw, msg.id)
        assert row_line_and_key(odd) == _slow(odd)
    parsed = json.loads(row.raw)
    moved = JsonRow({"timestamp": parsed["timestamp"], **parsed})
    moved.json_text = row.raw.decode()
    assert row_line_and_key(moved) == row_line_and_key(dict(moved))


def test_a_msg_row_is_written_from_its_own_text() -> None:
    # The line is the JSON pydantic wrote, not a second serialisation: JSON whose first
    # fields are laid out with spaces (which pydantic never writes) shows which was used.
    msg = Msg(role="user", content="hello")
    row = _row(msg)
    parsed = json.loads(row.raw)
    stable = {k: v for k, v in parsed.items() if k != "timestamp"}
    spaced = json.dumps(stable)[:-1] + ',"timestamp":' + json.dumps(parsed["timestamp"]) + "}"
    spaced_row = TextRow(spaced.encode(), msg.id)
    assert row_line_and_key(spaced_row)[0] == spaced.encode() + b"\n"
    assert dumps_row(spaced_row) == spaced.encode() + b"\n"
    assert row_line_and_key(parsed)[0] != spaced.encode() + b"\n"


def _as_stored_before(msg: BaseModel) -> Any:
    """What a message's record (no payload store) held before its fast path: the model's
    JSON text parsed by json.loads (pydantic's own writing of NaN, bytes and all)."""
    return json.loads(msg.model_dump_json())


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(msg=_messages)
def test_a_message_stored_without_a_payload_store_is_the_value_of_its_json(msg: Msg) -> None:
    # The session's record and state.json keep payloads inline: the value is read from the
    # model's JSON text once (a `JsonRow`), not parsed by json.loads and walked for depth.
    value = message_json(msg, None, where="msg")
    assert value == _as_stored_before(msg)
    assert isinstance(value, JsonRow)
    assert json.loads(value.json_text) == value


def test_a_message_too_deep_or_unwritable_without_a_store_takes_the_full_path() -> None:
    from ctxoffload._depth import STORE_DEPTH
    from ctxoffload.exceptions import InvalidContent

    # Many brackets inside a string only look deep: the full path stores it all the same.
    bracketed = Msg(role="user", content="[" * (STORE_DEPTH + 5))
    assert message_json(bracketed, None, where="msg") == _as_stored_before(bracketed)
    # Truly too deep: refused, naming where, as before.
    nested: Any = "leaf"
    for _ in range(STORE_DEPTH + 2):
        nested = [nested]
    deep = Msg(role="assistant", content=[ToolCallBlock(id="c", name="t", input={"x": nested})])
    try:
        message_json(deep, None, where="messages[3]")
    except InvalidContent as exc:
        assert "messages[3]" in str(exc)
    else:
        raise AssertionError("a message nested past STORE_DEPTH was stored")
    # NaN, which JSON text cannot hold: pydantic writes it as null on either path.
    nan = Msg(role="assistant", content=[ToolCallBlock(id="c", name="t", input={"x": 1e999})])
    assert message_json(nan, None, where="msg") == _as_stored_before(nan)


def test_a_long_tool_message_is_stored_from_its_own_json_without_a_depth_walk() -> None:
    # Thousands of results hold far more brackets than STORE_DEPTH, yet nest a few levels:
    # their brackets bound the depth, so the fast path keeps them (a step of 100,000 calls
    # walked its whole tool message for depth at every save).
    outputs = ["ok", 'a "quoted" [text] {x}', "back\\slash\\", "\\\\[[[", "line\nbreak"]
    msg = Msg(
        role="tool",
        content=[
            ToolResultBlock(id=f"c{i}", name="t", output=outputs[i % len(outputs)])
            for i in range(2_000)
        ],
    )
    value = message_json(msg, None, where="msg")
    assert isinstance(value, JsonRow)
    assert value == _as_stored_before(msg)


_deep_text = st.text(alphabet='[]{}"\\ax', max_size=8)


@settings(max_examples=examples(300), deadline=None)
@given(
    depth=st.integers(min_value=0, max_value=130),
    leaf=_deep_text,
    keys=st.lists(_deep_text, min_size=1, max_size=3),
    width=st.integers(min_value=0, max_value=150),
)
def test_brackets_never_bound_a_message_shallower_than_it_nests(
    depth: int, leaf: str, keys: list[str], width: int
) -> None:
    from ctxoffload._depth import STORE_DEPTH, too_deep
    from ctxoffload._disk.payloads import _deeper

    # Strings full of brackets, quotes and backslashes, lists and dicts in turn, and many
    # shallow brackets beside them to pass the bracket count.
    nested: Any = leaf
    for level in range(depth):
        nested = [nested, leaf] if level % 2 else {keys[level % len(keys)]: nested}
    value = {"wide": [[leaf]] * width, "deep": nested}
    raw = json.dumps(value, ensure_ascii=False).encode()
    if too_deep(value, STORE_DEPTH):
        assert _deeper(raw)


# -- a message's depth told from its fields ------------------------------------------------------


def _nested(depth: int, leaf: Any = "leaf") -> Any:
    """A value `depth` levels deep: dicts and lists in turn, `leaf` innermost."""
    for level in range(depth):
        leaf = [leaf] if level % 2 else {"k": leaf}
    return leaf


def test_a_plain_message_is_stored_without_counting_its_brackets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ctxoffload._disk.payloads as payloads

    # Texts, tool calls and text results nest three levels and their fields (the input, the
    # metadata) are walked: a long output full of brackets is never counted for depth.
    def counted(raw: bytes) -> bool:
        raise AssertionError("the JSON text was counted for depth")

    monkeypatch.setattr(payloads, "_deeper", counted)
    msg = Msg(
        role="assistant",
        content=[
            TextBlock(text="[{" * 500),
            ToolCallBlock(id="c1", name="bash", input={"command": "ls", "env": [{"A": 1}]}),
            ToolResultBlock(id="c1", name="bash", output="{[" * 5_000),
        ],
        metadata={"step": {"n": [1, 2]}},
    )
    row = payloads.message_json(msg, _NoPayloads(), where="msg")
    assert isinstance(row, TextRow) and row.raw == msg.__pydantic_serializer__.to_json(msg)


class _NoPayloads:
    """A payload store that must not be asked (the messages hold no payload)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the payload store was used: {name}")


@settings(max_examples=examples(200), deadline=None)
@given(
    msg=_messages,
    depth=st.integers(min_value=90, max_value=115),
    where=st.sampled_from(["input", "metadata", "none"]),
)
def test_fields_called_shallow_never_nest_past_the_store_depth(
    msg: Msg, depth: int, where: str
) -> None:
    from ctxoffload._depth import STORE_DEPTH, too_deep
    from ctxoffload._disk.payloads import _fields_shallow

    # Deep values around the limit, in a call's input or the metadata: a message told
    # shallow by its fields is never one the full path would refuse as too deep.
    if where == "input":
        msg.content = [*([] if isinstance(msg.content, str) else msg.content)]
        msg.content.append(ToolCallBlock(id="c", name="t", input={"x": _nested(depth)}))
    elif where == "metadata":
        msg.metadata = {"x": _nested(depth)}
    if _fields_shallow(msg):
        assert not too_deep(msg.model_dump(mode="json"), STORE_DEPTH)


def test_a_call_input_past_the_store_depth_is_not_called_shallow() -> None:
    from ctxoffload._depth import STORE_DEPTH, too_deep
    from ctxoffload._disk.payloads import _fields_shallow

    for depth in (STORE_DEPTH - 4, STORE_DEPTH - 3, STORE_DEPTH - 2, STORE_DEPTH + 5):
        msg = Msg(
            role="assistant",
            content=[ToolCallBlock(id="c", name="t", input={"x": _nested(depth - 1)})],
        )
        deep = too_deep(msg.model_dump(mode="json"), STORE_DEPTH)
        assert _fields_shallow(msg) is (not deep)
    # Values pydantic writes otherwise than they are (a tuple, a set) are left to the text.
    assert not _fields_shallow(
        Msg(role="assistant", content=[ToolCallBlock(id="c", name="t", input={"x": (1, 2)})])
    )
    assert not _fields_shallow(Msg(role="user", content="hi", metadata={"s": {1}}))
    # A field of many values is left to the text too: counting bytes costs less than a walk.
    wide = Msg(role="user", content="hi", metadata={"v": list(range(5_000))})
    assert not _fields_shallow(wide)
    assert isinstance(message_json(wide, _NoPayloads(), where="msg"), TextRow)
