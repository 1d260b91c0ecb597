"""One bad message never poisons a batch: too deep, not JSON, or a payload that is not base64.

A batch given to `offload_context` is written whole; a message that cannot be stored as its
own JSON becomes a stand-in line that keeps its role and id, says what was wrong, and holds
the message's text form. The single-item calls (`offload_tool_result`, `offload_data_block`)
refuse such input with `InvalidContent`, never `RecursionError`.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxoffload as co
from ctxoffload import InvalidContent
from ctxoffload._depth import MAX_DEPTH, STORE_DEPTH, text_form
from ctxoffload._disk.payloads import decode_base64
from ctxoffload.workspace import Workspace
from helpers import examples


def nested(depth: int, leaf: Any = "bottom") -> Any:
    value: Any = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def deep_call_msg(depth: int) -> co.Msg:
    call = co.ToolCallBlock(id="call-1", name="search", input=nested(depth))
    return co.Msg(role="assistant", content=[co.TextBlock(text="let me look"), call], id="m-deep")


async def _lines(workspace: Workspace, session: str = "s") -> list[Any]:
    return await workspace.read_context(session)


@pytest.mark.parametrize("depth", [STORE_DEPTH + 1, 300, 5000])
async def test_a_too_deep_tool_call_does_not_stop_the_rest_of_the_batch(
    workspace: Workspace, depth: int
) -> None:
    msgs = [
        co.Msg(role="user", content="first", id="m1"),
        deep_call_msg(depth),
        co.Msg(role="user", content="last", id="m3"),
    ]
    ref = await workspace.offload_context("s", msgs=msgs)
    assert (ref.first_line, ref.last_line) == (1, 3)
    lines = await _lines(workspace)
    assert [line["id"] for line in lines] == ["m1", "m-deep", "m3"]
    assert lines[0]["content"] == "first" and lines[2]["content"] == "last"
    stand_in = co.Msg.model_validate(lines[1])
    assert stand_in.role == "assistant"
    assert stand_in.metadata["ctxoffload"]["kind"] == "unstored"
    assert f"deeper than {STORE_DEPTH}" in stand_in.metadata["ctxoffload"]["error"]
    # The call stays a call (so its result still has a partner), its input kept as JSON text.
    (call,) = stand_in.tool_calls
    assert (call.id, call.name) == ("call-1", "search")
    raw = call.input["_raw_arguments"]
    assert raw.count('{"a":') == depth and '"bottom"' in raw
    assert stand_in.text == "let me look"


async def test_a_deep_dict_message_becomes_a_stand_in_line(workspace: Workspace) -> None:
    deep = {"role": "user", "id": "d1", "content": [nested(5000)]}
    ref = await workspace.offload_context("s", msgs=[deep, {"role": "user", "content": "ok"}])
    assert (ref.first_line, ref.last_line) == (1, 2)
    first, second = await _lines(workspace)
    assert second == {"role": "user", "content": "ok"}
    assert (first["role"], first["id"]) == ("user", "d1")
    assert first["metadata"]["ctxoffload"]["kind"] == "unstored"
    assert "could not be stored as JSON" in first["content"]
    assert first["content"].count('{"a":') == 5000


async def test_a_payload_that_is_not_base64_is_kept_as_text_and_the_batch_written(
    workspace: Workspace,
) -> None:
    bad = co.DataBlock(source=co.Base64Source(media_type="image/png", data="!!not base64!!"))
    msgs = [co.Msg(role="user", content=[bad], id="b1"), co.Msg(role="user", content="after")]
    await workspace.offload_context("s", msgs=msgs)
    first, second = await _lines(workspace)
    assert second["content"] == "after"
    assert "not valid base64" in first["metadata"]["ctxoffload"]["error"]
    assert "!!not base64!!" in json.dumps(first)


async def test_a_value_without_a_json_form_is_kept_by_its_repr(workspace: Workspace) -> None:
    msg = {"role": "user", "content": [{"type": "text", "text": "x", "extra": {1, 2}}]}
    await workspace.offload_context("s", msgs=[msg])
    (line,) = await _lines(workspace)
    assert "{1, 2}" in line["content"]
    assert "not JSON-serialisable" in line["metadata"]["ctxoffload"]["error"]


async def test_something_that_is_not_a_message_is_still_refused(workspace: Workspace) -> None:
    with pytest.raises(InvalidContent, match="is a int"):
        await workspace.offload_context("s", msgs=[co.Msg(role="user", content="x"), 12])
    assert await _lines(workspace) == []


async def test_a_deep_tool_result_is_refused_with_invalid_content(workspace: Workspace) -> None:
    result = {"role": "tool", "tool_call_id": "c1", "content": [nested(5000)]}
    with pytest.raises(InvalidContent, match=f"deeper than {STORE_DEPTH}"):
        await workspace.offload_tool_result("s", result)
    ours = co.ToolResultBlock(id="c2", output=[co.TextBlock(text="x", deep=nested(300))])
    with pytest.raises(InvalidContent, match=f"deeper than {STORE_DEPTH}"):
        await workspace.offload_tool_result("s", ours)
    assert await workspace.list_files("s") == []


async def test_a_deep_data_block_is_refused_with_invalid_content(workspace: Workspace) -> None:
    block = {"type": "image", "source": {"type": "url", "url": "x"}, "meta": nested(5000)}
    with pytest.raises(InvalidContent, match=f"deeper than {STORE_DEPTH}"):
        await workspace.offload_data_block(block)


async def test_content_at_the_depth_limit_is_stored_whole(workspace: Workspace) -> None:
    # A value within MAX_DEPTH fits, with the envelope of the message around it.
    deep = nested(MAX_DEPTH)
    msg = co.Msg(role="assistant", content=[co.ToolCallBlock(id="c", name="t", input=deep)])
    await workspace.offload_context("s", msgs=[msg])
    (line,) = await _lines(workspace)
    assert line["content"][0]["input"] == deep


# -- tolerant base64 ---------------------------------------------------------------------


RAW = bytes([0xFB, 0xFF, 0xBF, 0x00, 0x10]) * 101  # '+', '/' and padding in standard base64


@pytest.mark.parametrize(
    "encoded",
    [
        base64.b64encode(RAW).decode(),
        base64.urlsafe_b64encode(RAW).decode(),
        base64.urlsafe_b64encode(RAW).decode().rstrip("="),
        base64.b64encode(RAW).decode().rstrip("="),
        " \n".join(base64.b64encode(RAW).decode()[i : i + 60] for i in range(0, 700, 60)),
        "\t" + base64.urlsafe_b64encode(RAW).decode().rstrip("=") + "\r\n",
    ],
    ids=["standard", "url-safe", "url-safe-unpadded", "unpadded", "wrapped", "padded-space"],
)
def test_base64_is_decoded_in_every_common_spelling(encoded: str) -> None:
    assert decode_base64(encoded, what="x") == RAW


@pytest.mark.parametrize("encoded", ["abcde", "ab$c", "a"])
def test_base64_that_cannot_be_decoded_is_named(encoded: str) -> None:
    with pytest.raises(InvalidContent, match="not valid base64"):
        decode_base64(encoded, what="the image")


async def test_an_unpadded_url_safe_image_is_stored_in_data(
    workspace: Workspace, tmp_path: Path
) -> None:
    data = base64.urlsafe_b64encode(RAW).decode().rstrip("=")
    block = co.DataBlock(source=co.Base64Source(media_type="image/png", data=data))
    stored = await workspace.offload_data_block(block)
    assert await workspace.read_reference(stored.source.url) == RAW
    await workspace.offload_context("s", msgs=[co.Msg(role="user", content=[block])])
    (line,) = await _lines(workspace)
    assert line["content"][0]["source"]["url"] == stored.source.url


# -- the text form -----------------------------------------------------------------------


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


@pytest.mark.slow
def test_text_form_writes_anything_without_recursing() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    text = text_form({"deep": nested(20_000), "odd": Unprintable(), "big": 10**5000, "c": cyclic})
    assert text.count('{"a":') == 20_000
    assert "Unprintable" in text and "RuntimeError" in text
    assert "0x" in text
    assert "cycle" in text


async def test_a_bad_tool_result_keeps_its_id_and_the_stand_in_converts(
    workspace: Workspace,
) -> None:
    bad = co.DataBlock(source=co.Base64Source(media_type="image/png", data="!!not base64!!"))
    result = co.ToolResultBlock(id="call-7", name="shot", output=[co.TextBlock(text="ok"), bad])
    calling = co.Msg(
        role="assistant", content=[co.ToolCallBlock(id="call-7", name="shot", input={})]
    )
    await workspace.offload_context("s", msgs=[calling, co.Msg(role="tool", content=[result])])
    _, line = await _lines(workspace)
    stand_in = co.Msg.model_validate(line)
    (kept,) = stand_in.tool_results
    assert (kept.id, kept.name) == ("call-7", "shot")
    assert isinstance(kept.output, str)
    assert "not valid base64" in kept.output and "!!not base64!!" in kept.output
    wire = co.to_openai([calling, stand_in])  # still a valid call/result pair
    assert wire[1]["tool_call_id"] == "call-7"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)


@pytest.mark.slow
@given(JSON_VALUES)
@settings(max_examples=examples(200), deadline=None)
def test_the_text_form_of_a_json_value_is_its_compact_json(value: Any) -> None:
    assert text_form(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(text_form(value)) == value


class CountedList(list[Any]):
    """A list that counts how many of its kind were read (`text_form` iterates each)."""

    read = 0

    def __iter__(self) -> Any:
        CountedList.read += 1
        return super().__iter__()


@pytest.mark.slow
def test_text_form_with_a_limit_reads_only_the_start_of_a_deep_value() -> None:
    deep: Any = CountedList()
    for _ in range(50_000):
        deep = CountedList([deep, "x"])
    CountedList.read = 0
    text = text_form(deep, limit=60)
    assert 60 <= len(text) < 200 and text.startswith("[[[[")
    assert CountedList.read < 200  # a few levels, not 50,000
    assert text_form(deep, limit=10**9) == text_form(deep)  # a limit not reached changes nothing
