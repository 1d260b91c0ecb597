"""Responses-API input items <-> ctxoffload messages: each kind of item read, and the round
trip giving back the items as they were."""

from __future__ import annotations

from typing import Any

import pytest

from ctxoffload._depth import MAX_DEPTH, STORE_DEPTH
from ctxoffload.exceptions import InvalidContent
from ctxoffload.formats.responses import ITEM_KEY, from_responses, to_responses
from ctxoffload.messages import (
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
)

REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "look at the log"}],
    "encrypted_content": "gAAAA...",
}

ITEMS: list[dict[str, Any]] = [
    {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "Be brief."}],
    },
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What failed?"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
            {"type": "input_image", "image_url": "https://example.com/chart.png"},
        ],
    },
    REASONING,
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "fetch_logs",
        "arguments": '{"job": "nightly"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "batch 7 failed"},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Batch 7."}],
    },
]


def test_each_kind_of_item_is_read_into_one_msg() -> None:
    developer, user, reasoning, call, output, answer = from_responses(ITEMS)
    assert developer.role == "system" and developer.metadata == {"role": "developer"}
    assert user.content == [
        TextBlock(text="What failed?"),
        DataBlock(source=Base64Source(media_type="image/png", data="iVBORw0KGgo=")),
        DataBlock(source=URLSource(url="https://example.com/chart.png")),
    ]
    assert reasoning.role == "assistant" and reasoning.content == []
    assert reasoning.metadata[ITEM_KEY] == REASONING
    assert call.content == [ToolCallBlock(id="call_1", name="fetch_logs", input={"job": "nightly"})]
    assert output.role == "tool"
    assert output.content == [
        ToolResultBlock(id="call_1", name="fetch_logs", output="batch 7 failed")
    ]
    assert answer.content == [TextBlock(text="Batch 7.")]


def test_the_round_trip_gives_back_the_items() -> None:
    assert to_responses(from_responses(ITEMS)) == ITEMS


def test_a_plain_string_message_and_arguments_that_are_no_json_survive() -> None:
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "not json"},
    ]
    user, call = from_responses(items)
    assert user.content == "hi"
    assert to_responses([user, call]) == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        items[1],
    ]


def test_a_msg_of_several_blocks_becomes_one_item_each() -> None:
    msg = Msg(
        role="assistant",
        content=[
            ThinkingBlock(thinking="check the log"),
            TextBlock(text="Fetching."),
            ToolCallBlock(id="c1", name="fetch_logs", input={}),
        ],
    )
    assert to_responses([msg]) == [
        {
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "check the log"},
                {"type": "output_text", "text": "Fetching."},
            ],
        },
        {"type": "function_call", "call_id": "c1", "name": "fetch_logs", "arguments": "{}"},
    ]


def _nested_text(levels: int, kind: str) -> str:
    if kind == "array":
        return "[" * levels + "]" * levels
    return '{"a":' * levels + "1" + "}" * levels


@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 990, 5_000])
def test_arguments_nested_too_deeply_are_kept_as_the_text_sent(kind: str, levels: int) -> None:
    # json.loads raised RecursionError for 5,000 levels; what a tool's arguments may not be
    # (`_depth.MAX_DEPTH`) is kept as the text the model sent, as the chat format keeps it.
    arguments = _nested_text(levels, kind)
    item = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": arguments}
    [msg] = from_responses([item])
    [call] = msg.tool_calls
    assert call.input == {"_raw": arguments}
    assert to_responses([msg]) == [item]


def test_arguments_within_the_depth_are_read() -> None:
    arguments = _nested_text(MAX_DEPTH - 1, "object")
    item = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": arguments}
    [msg] = from_responses([item])
    assert msg.tool_calls[0].input["a"]["a"]


@pytest.mark.parametrize("levels", [STORE_DEPTH + 1, 5_000])
@pytest.mark.parametrize("where", ["part", "output", "opaque"])
def test_an_item_nested_too_deeply_is_refused_naming_it(levels: int, where: str) -> None:
    # Reading an item copies and walks it: json.dumps of a 5,000-deep part raised
    # RecursionError; it is refused at the edge, as `to_msgs` refuses a message.
    deep: Any = "x"
    for _ in range(levels):
        deep = {"a": deep}
    part = {"type": "input_file", "file": deep}
    item: dict[str, Any] = {
        "part": {"type": "message", "role": "user", "content": [part]},
        "output": {"type": "function_call_output", "call_id": "c1", "output": [part]},
        "opaque": {"type": "reasoning", "id": "rs_1", "summary": [deep]},
    }[where]
    with pytest.raises(InvalidContent, match=r"items\[1\] is nested deeper than"):
        from_responses([ITEMS[1], item])


@pytest.mark.parametrize("item", [None, 5, "hi", b"hi", ["x"]])
def test_what_is_no_item_is_refused_naming_it(item: Any) -> None:
    with pytest.raises(InvalidContent, match=r"items\[0\] is a "):
        from_responses([item])
