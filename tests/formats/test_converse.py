"""Bedrock Converse messages (Strands Agents' history): read, counted, offloaded, written back."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Base64Source,
    DataBlock,
    LocalWorkspace,
    TextBlock,
    ToolCallBlock,
    from_converse,
    to_converse,
    to_msgs,
)
from ctxoffload._depth import STORE_DEPTH
from ctxoffload.exceptions import InvalidContent
from ctxoffload.tokens import TiktokenCounter

PNG = b"\x89PNG\r\n\x1a\n" + zlib.compress(b"a chart" * 30)
PDF = b"%PDF-1.7\n" + bytes(range(256))
LONG = "\n".join(f"{i:05d} INFO exported ORD-{10000 + i} rows={i % 400}" for i in range(1, 1101))


def history() -> list[dict[str, Any]]:
    """A Strands agent.messages after a tool call with a mixed result (as Strands holds it)."""
    return [
        {"role": "user", "content": [{"text": "Which order failed?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "reasoningContent": {
                        "reasoningText": {"text": "Check the log.", "signature": "sig"}
                    }
                },
                {"text": "Fetching the log."},
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "fetch_logs",
                        "input": {"job": "n"},
                    }
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "tooluse_1",
                        "status": "success",
                        "content": [
                            {"text": LONG},
                            {"json": {"series": [1, 2, 3], "unit": "rows"}},
                            {"image": {"format": "png", "source": {"bytes": PNG}}},
                            {
                                "document": {
                                    "format": "pdf",
                                    "name": "report",
                                    "source": {"bytes": PDF},
                                }
                            },
                        ],
                    }
                },
                {"cachePoint": {"type": "default"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "tooluse_2",
                        "status": "error",
                        "content": [{"text": "boom"}],
                    }
                }
            ],
        },
        {"role": "assistant", "content": [{"text": "Order ORD-58213 failed."}]},
    ]


def test_to_msgs_reads_strands_history_block_by_block() -> None:
    msgs = to_msgs(history())
    thinking, text, call = msgs[1].content  # type: ignore[misc]
    assert text == TextBlock(text="Fetching the log.")
    assert thinking.thinking == "Check the log." and thinking.signature == "sig"  # type: ignore[union-attr]
    assert isinstance(call, ToolCallBlock) and call.input == {"job": "n"}
    (result,) = msgs[2].tool_results
    assert result.name == "fetch_logs" and not result.is_error
    assert isinstance(result.output, list)
    long_text, as_json, image, document = result.output
    assert isinstance(long_text, TextBlock) and long_text.text == LONG
    assert json.loads(as_json.text) == {"series": [1, 2, 3], "unit": "rows"}  # type: ignore[union-attr]
    assert isinstance(image, DataBlock) and isinstance(image.source, Base64Source)
    assert image.source.media_type == "image/png"
    assert base64.b64decode(image.source.data) == PNG
    assert isinstance(document, DataBlock) and document.name == "report"
    assert document.source.media_type == "application/pdf"  # type: ignore[union-attr]
    assert msgs[3].tool_results[0].is_error


def test_a_long_converse_message_is_counted_whole() -> None:
    # Read as an OpenAI message with unknown parts, this history counted a few tokens.
    counter = TiktokenCounter()
    msgs = to_msgs(history())
    tokens = counter.count_message(msgs[2])
    assert tokens > counter.count_text(LONG) > 10_000


def test_round_trip_is_exact() -> None:
    original = history()
    system = [{"text": "You are careful."}]
    msgs = from_converse(copy.deepcopy(original), system=system)
    assert msgs[0].role == "system"
    # Through JSON, as the messages are stored in context.jsonl and read back.
    stored = [type(m).model_validate_json(m.model_dump_json()) for m in msgs]
    assert to_converse(stored) == (system, original)


def test_raw_bytes_are_offloaded_to_data_and_the_log_is_json(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    ref = asyncio.run(ws.offload_context("run-1", to_msgs(history())))
    assert (ref.first_line, ref.last_line) == (1, 5)
    names = sorted(p.name for p in (tmp_path / "ws" / "data").iterdir())
    assert [n.rsplit(".", 1)[1] for n in names] == sorted(["png", "pdf"])
    stored = {(tmp_path / "ws" / "data" / n).read_bytes() for n in names}
    assert stored == {PNG, PDF}
    lines = (tmp_path / "ws/sessions/run-1/context.jsonl").read_text().splitlines()
    assert all(json.loads(line) for line in lines)
    assert LONG in json.loads(lines[2])["content"][0]["output"][0]["text"]


def test_offloaded_payloads_become_a_line_naming_the_file() -> None:
    msgs = to_msgs(history())
    result = msgs[2].tool_results[0]
    assert isinstance(result.output, list)
    result.output[2] = DataBlock(
        source={"type": "url", "url": "ws/data/abc.png", "media_type": "image/png"}  # type: ignore[arg-type]
    )
    _, messages = to_converse(msgs)
    items = messages[2]["content"][0]["toolResult"]["content"]
    assert items[2] == {"text": "<data url='ws/data/abc.png' media_type='image/png'/>"}


def test_openai_tool_messages_join_the_converse_user_turn() -> None:
    msgs = to_msgs(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "t", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "content": "two"},
        ]
    )
    _, messages = to_converse(msgs)
    assert [m["role"] for m in messages] == ["assistant", "user"]
    assert [b["toolResult"]["toolUseId"] for b in messages[1]["content"]] == ["c1", "c2"]


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "user", "content": [{"toolUse": {"name": "x", "input": {}}}]}, "toolUseId"),
        (
            {
                "role": "user",
                "content": [{"image": {"format": "png", "source": {"bytes": "not base64!"}}}],
            },
            "not base64",
        ),
        ({"role": "user", "content": [{"toolResult": {"content": []}}]}, "toolUseId"),
    ],
)
def test_malformed_converse_blocks_are_clear_errors(message: dict[str, Any], expected: str) -> None:
    with pytest.raises(InvalidContent, match=expected):
        to_msgs([message])


def test_text_only_converse_messages_are_read_too() -> None:
    # OpenAI parts and Anthropic blocks carry "type"; a typeless {"text": ...} is Converse.
    (msg,) = to_msgs([{"role": "user", "content": [{"text": "hi"}]}])
    assert msg.content == [TextBlock(text="hi")]
    (openai,) = to_msgs([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert openai.content == [TextBlock(text="hi")]


@pytest.mark.parametrize("levels", [STORE_DEPTH + 1, 400, 5_000])
def test_a_message_nested_too_deeply_is_refused_naming_it(levels: int) -> None:
    # Reading it copies the tool's input (copy.deepcopy recurses three frames a level):
    # 400 levels, which a provider's JSON parser reads, raised RecursionError.
    deep: Any = "x"
    for _ in range(levels):
        deep = {"a": deep}
    call = {"toolUse": {"toolUseId": "c1", "name": "f", "input": deep}}
    messages = [
        {"role": "user", "content": [{"text": "go"}]},
        {"role": "assistant", "content": [call]},
    ]
    with pytest.raises(InvalidContent, match=r"messages\[1\] is nested deeper than 108 levels"):
        from_converse(messages)
