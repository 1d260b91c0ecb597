"""The message model's conversion to and from the OpenAI chat and Anthropic messages formats."""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from ctxoffload import (
    Base64Source,
    DataBlock,
    InvalidContent,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    from_anthropic,
    from_openai,
    to_anthropic,
    to_msg,
    to_msgs,
    to_openai,
)
from helpers import corpus_file, examples, install_hint

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake image bytes").decode()
WAV = base64.b64encode(b"RIFF fake wav").decode()
PDF = base64.b64encode(b"%PDF-1.7 fake").decode()


def _json_trip(msgs: list[Msg]) -> list[Msg]:
    """The messages as context.jsonl stores and reads them back."""
    return [Msg.model_validate_json(m.model_dump_json()) for m in msgs]


# --- OpenAI ----------------------------------------------------------------------------------


def openai_conversation() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a coding agent."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Why does this screenshot show an error?"},
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "high"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command":"ls -la"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "app.py", "limit": 20}'},
                },
                {
                    "id": "call_3",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls'},
                },
            ],
            "refusal": None,
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "total 8\n-rw-r--r-- app.py"},
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": [
                {"type": "text", "text": "1  import os"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_3", "content": "error: arguments are not JSON"},
        {
            "role": "assistant",
            "content": "The import fails.",
            "name": "coder",
            "extra": {"response": {"id": "gen-1", "usage": {"total_tokens": 42}}},
        },
        {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
        {"role": "developer", "content": "Be brief."},
    ]


def test_openai_round_trip_is_exact_for_a_tool_using_conversation() -> None:
    messages = openai_conversation()
    assert to_openai(from_openai(messages)) == messages


def test_openai_round_trip_survives_the_context_log() -> None:
    messages = openai_conversation()
    assert to_openai(_json_trip(from_openai(messages))) == messages


def test_from_openai_does_not_change_its_input() -> None:
    messages = openai_conversation()
    before = copy.deepcopy(messages)
    msgs = from_openai(messages)
    to_openai(msgs)[6]["extra"]["response"]["id"] = "changed"
    assert messages == before


def test_from_openai_turns_tool_calls_and_results_into_blocks() -> None:
    msgs = from_openai(openai_conversation())
    calls = msgs[2].tool_calls
    assert [(c.id, c.name, c.input) for c in calls] == [
        ("call_1", "bash", {"command": "ls -la"}),
        ("call_2", "read", {"path": "app.py", "limit": 20}),
        ("call_3", "bash", {"_raw_arguments": '{"command": "ls'}),
    ]
    assert [m.role for m in msgs[3:6]] == ["tool", "tool", "tool"]
    results = [m.tool_results[0] for m in msgs[3:6]]
    assert [(r.id, r.name) for r in results] == [
        ("call_1", "bash"),
        ("call_2", "read"),
        ("call_3", "bash"),
    ]
    output = results[1].output
    assert isinstance(output, list)
    assert isinstance(output[1], DataBlock)
    assert output[1].source == Base64Source(media_type="image/png", data=PNG)


def test_from_openai_keeps_unknown_keys_and_names() -> None:
    msgs = from_openai(openai_conversation())
    assert msgs[6].name == "coder"
    assert msgs[6].metadata["openai"]["keys"]["extra"]["response"]["id"] == "gen-1"
    assert msgs[8].role == "system"


def test_invalid_json_arguments_are_restored_byte_for_byte() -> None:
    raw = '{"command": "ls'
    msgs = from_openai(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "t", "arguments": raw}}
                ],
            }
        ]
    )
    assert msgs[0].tool_calls[0].input == {"_raw_arguments": raw}
    assert to_openai(msgs)[0]["tool_calls"][0]["function"]["arguments"] == raw


def test_to_openai_writes_one_tool_message_per_result() -> None:
    msg = Msg(
        role="tool",
        content=[
            ToolResultBlock(id="a", name="bash", output="one"),
            ToolResultBlock(id="b", name="bash", output="two"),
        ],
    )
    assert to_openai([msg]) == [
        {"role": "tool", "tool_call_id": "a", "content": "one"},
        {"role": "tool", "tool_call_id": "b", "content": "two"},
    ]


def test_to_openai_puts_images_of_a_tool_result_in_image_url_parts() -> None:
    image = DataBlock(source=Base64Source(media_type="image/png", data=PNG))
    msg = Msg(
        role="user",
        content=[
            ToolResultBlock(id="a", output=[TextBlock(text="shot:"), image]),
            TextBlock(text="what do you see?"),
        ],
    )
    assert to_openai([msg]) == [
        {
            "role": "tool",
            "tool_call_id": "a",
            "content": [
                {"type": "text", "text": "shot:"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
        {"role": "user", "content": "what do you see?"},
    ]


def test_to_openai_drops_thinking() -> None:
    msg = Msg(
        role="assistant",
        content=[
            ThinkingBlock(thinking="let me look", signature="sig"),
            TextBlock(text="Looking."),
            ToolCallBlock(id="a", name="ls", input={"path": "."}),
        ],
    )
    assert to_openai([msg]) == [
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "."}'},
                }
            ],
        }
    ]


def test_to_openai_maps_each_kind_of_data_block() -> None:
    msg = Msg(
        role="user",
        content=[
            DataBlock(source=URLSource(url="https://example.com/cat.jpg")),
            DataBlock(source=Base64Source(media_type="audio/wav", data=WAV)),
            DataBlock(source=Base64Source(media_type="application/pdf", data=PDF), name="a.pdf"),
            DataBlock(source=URLSource(url="/ws/data/ab.pdf", media_type="application/pdf")),
        ],
    )
    assert to_openai([msg])[0]["content"] == [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
        {
            "type": "file",
            "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"},
        },
        {"type": "text", "text": "<data url='/ws/data/ab.pdf' media_type='application/pdf'/>"},
    ]


def test_openai_parts_without_a_block_are_kept_in_place() -> None:
    messages = [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "partial"},
                {"type": "refusal", "refusal": "I can't help with that."},
            ],
        },
        {"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]},
    ]
    msgs = from_openai(messages)
    assert msgs[0].text == "partial"
    assert to_openai(msgs) == messages


# --- Anthropic -------------------------------------------------------------------------------


def anthropic_conversation() -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "Fix the failing test.",
                    "cache_control": {"type": "ephemeral"},
                },
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
                {"type": "document", "source": {"type": "url", "url": "https://example.com/spec"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Run the tests first.", "signature": "EqQBCkYI"},
                {"type": "redacted_thinking", "data": "EmwKAhgB"},
                {"type": "text", "text": "Running the tests."},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "pytest"}},
                {"type": "tool_use", "id": "toolu_2", "name": "screenshot", "input": {}},
            ],
            "id": "msg_01",
            "type": "message",
            "model": "claude-sonnet-4-5",
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 20},
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "1 failed",
                    "is_error": True,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [
                        {"type": "text", "text": "screen:"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG},
                        },
                    ],
                },
            ],
        },
        {"role": "assistant", "content": "The test expects UTC."},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "is_error": False}],
        },
    ]


def test_anthropic_round_trip_is_exact_for_a_tool_using_conversation() -> None:
    messages = anthropic_conversation()
    system = "You are a coding agent."
    assert to_anthropic(from_anthropic(messages, system)) == (system, messages)
    assert to_anthropic(_json_trip(from_anthropic(messages, system))) == (system, messages)


def test_anthropic_round_trip_without_system() -> None:
    messages = anthropic_conversation()
    assert to_anthropic(from_anthropic(messages)) == (None, messages)


def test_from_anthropic_turns_blocks_into_ours() -> None:
    msgs = from_anthropic(anthropic_conversation(), "sys")
    assert msgs[0].role == "system" and msgs[0].content == "sys"
    assistant = msgs[2]
    assert isinstance(assistant.content, list)
    assert [b.type for b in assistant.content] == ["thinking", "text", "tool_call", "tool_call"]
    thinking = assistant.content[0]
    assert isinstance(thinking, ThinkingBlock) and thinking.signature == "EqQBCkYI"
    results = msgs[3].tool_results
    assert msgs[3].role == "user"
    assert [(r.id, r.name, r.is_error) for r in results] == [
        ("toolu_1", "bash", True),
        ("toolu_2", "screenshot", False),
    ]
    image = results[1].output[1]
    assert isinstance(image, DataBlock) and image.media_type == "image/jpeg"


def test_to_anthropic_merges_consecutive_tool_results_only() -> None:
    msgs = [
        Msg(role="system", content="sys"),
        Msg(role="user", content="hi"),
        Msg(
            role="assistant",
            content=[ToolCallBlock(id="a", name="t"), ToolCallBlock(id="b", name="t")],
        ),
        Msg(role="tool", content=[ToolResultBlock(id="a", output="A")]),
        Msg(role="tool", content=[ToolResultBlock(id="b", output="B", is_error=True)]),
        Msg(role="user", content="next"),
        Msg(role="user", content="and more"),
    ]
    system, messages = to_anthropic(msgs)
    assert system == "sys"
    assert messages == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "a", "name": "t", "input": {}},
                {"type": "tool_use", "id": "b", "name": "t", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "A"},
                {"type": "tool_result", "tool_use_id": "b", "content": "B", "is_error": True},
            ],
        },
        {"role": "user", "content": "next"},
        {"role": "user", "content": "and more"},
    ]


def test_to_anthropic_rejects_an_image_in_a_system_message() -> None:
    msg = Msg(role="system", content=[DataBlock(source=URLSource(url="https://x/y.png"))])
    with pytest.raises(InvalidContent, match=r"msgs\[0\].*system prompt is text only"):
        to_anthropic([msg])


# --- across formats --------------------------------------------------------------------------


def test_openai_to_anthropic_keeps_every_tool_id_and_text() -> None:
    messages = openai_conversation()
    system, converted = to_anthropic(from_openai(messages))
    assert system == "You are a coding agent.\n\nBe brief."
    dumped = json.dumps(converted)
    for call_id in ("call_1", "call_2", "call_3"):
        assert dumped.count(f'"{call_id}"') == 2  # one tool_use, one tool_result
    for text in ("Why does this screenshot show an error?", "total 8\\n-rw-r--r-- app.py"):
        assert text in dumped
    assert [m["role"] for m in converted] == ["user", "assistant", "user", "assistant", "user"]
    results = converted[2]["content"]
    assert [b["tool_use_id"] for b in results] == ["call_1", "call_2", "call_3"]
    assert results[1]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
    }
    assert converted[1]["content"][2]["input"] == {"_raw_arguments": '{"command": "ls'}


def test_anthropic_to_openai_keeps_every_tool_id_and_text() -> None:
    converted = to_openai(from_anthropic(anthropic_conversation()))
    tool_ids = [m["tool_call_id"] for m in converted if m["role"] == "tool"]
    assert tool_ids == ["toolu_1", "toolu_2", "toolu_x"]
    assistant = converted[1]
    assert assistant["content"] == "Running the tests."
    assert [c["id"] for c in assistant["tool_calls"]] == ["toolu_1", "toolu_2"]
    assert from_openai(converted)[3].tool_results[0].name == "screenshot"


def test_empty_assistant_text_beside_tool_calls_is_no_block() -> None:
    messages = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        }
    ]
    msgs = from_openai(messages)
    assert msgs[0].content == [ToolCallBlock(id="c", name="ls")]
    assert to_openai(msgs) == messages
    # Anthropic rejects empty text blocks, so none may reach it.
    assert to_anthropic(msgs)[1] == [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c", "name": "ls", "input": {}}],
        }
    ]


def test_to_anthropic_sends_non_image_data_as_a_document() -> None:
    msg = Msg(
        role="user",
        content=[
            DataBlock(source=Base64Source(media_type="application/pdf", data=PDF)),
            DataBlock(source=URLSource(url="https://example.com/cat.jpg")),
        ],
    )
    assert to_anthropic([msg])[1][0]["content"] == [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ]


# --- to_msg / to_msgs ------------------------------------------------------------------------


class AgentScope:
    """Foreign models in AgentScope 2.x shape; class names match ours on purpose."""

    class Base64Source(BaseModel):
        type: Literal["base64"] = "base64"
        media_type: str
        data: str

    class URLSource(BaseModel):
        type: Literal["url"] = "url"
        url: str

    class TextBlock(BaseModel):
        type: Literal["text"] = "text"
        text: str

    class DataBlock(BaseModel):
        type: Literal["data"] = "data"
        source: AgentScope.Base64Source | AgentScope.URLSource
        name: str | None = None

    class ToolCallBlock(BaseModel):
        type: Literal["tool_call"] = "tool_call"
        id: str
        name: str
        input: dict[str, Any]

    class ToolResultBlock(BaseModel):
        type: Literal["tool_result"] = "tool_result"
        id: str
        name: str
        output: str | list[AgentScope.TextBlock | AgentScope.DataBlock]

    class Msg(BaseModel):
        id: str
        name: str
        role: Literal["system", "user", "assistant", "tool"]
        content: (
            str
            | list[
                AgentScope.TextBlock
                | AgentScope.DataBlock
                | AgentScope.ToolCallBlock
                | AgentScope.ToolResultBlock
            ]
        )
        metadata: dict[str, Any] | None = None
        timestamp: datetime


for _model in (
    AgentScope.DataBlock,
    AgentScope.ToolResultBlock,
    AgentScope.Msg,
):
    _model.model_rebuild()


def test_to_msg_returns_a_msg_as_is() -> None:
    msg = Msg(role="user", content="hi")
    assert to_msg(msg) is msg


def test_to_msg_validates_a_foreign_pydantic_message() -> None:
    foreign = AgentScope.Msg(
        id="m1",
        name="tool",
        role="tool",
        timestamp=datetime(2025, 1, 2, tzinfo=timezone.utc),
        content=[
            AgentScope.ToolResultBlock(
                id="call_9",
                name="screenshot",
                output=[
                    AgentScope.TextBlock(text="done"),
                    AgentScope.DataBlock(
                        source=AgentScope.Base64Source(media_type="image/png", data=PNG),
                        name="shot.png",
                    ),
                    AgentScope.DataBlock(source=AgentScope.URLSource(url="https://x/y.png")),
                ],
            )
        ],
    )
    msg = to_msg(foreign)
    assert (msg.id, msg.name, msg.role, msg.metadata) == ("m1", "tool", "tool", {})
    result = msg.tool_results[0]
    assert (result.id, result.name) == ("call_9", "screenshot")
    assert isinstance(result.output, list)
    assert result.output[1] == DataBlock(
        source=Base64Source(media_type="image/png", data=PNG), name="shot.png"
    )
    assert result.output[2] == DataBlock(source=URLSource(url="https://x/y.png"))


def test_to_msg_detects_openai_and_anthropic_dicts() -> None:
    openai_tool = to_msg({"role": "tool", "tool_call_id": "c1", "content": "ok"})
    assert openai_tool.tool_results[0].id == "c1"
    anthropic = to_msg(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
    )
    assert anthropic.role == "user" and anthropic.tool_results[0].id == "t1"
    ours = Msg(role="assistant", content=[ToolCallBlock(id="x", name="t")])
    assert to_msg(json.loads(ours.model_dump_json())) == ours


def test_to_msg_reads_an_openai_sdk_message_as_the_sdk_sends_it() -> None:
    chat = pytest.importorskip("openai.types.chat", reason=f"no openai: {install_hint('openai')}")
    sdk_message = chat.ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        }
    )
    msg = to_msg(sdk_message)
    assert msg.tool_calls == [ToolCallBlock(id="c1", name="ls")]
    assert to_openai([msg]) == [sdk_message.model_dump(mode="json", exclude_unset=True)]


def test_to_msgs_fills_tool_names_from_earlier_calls_across_formats() -> None:
    msgs = to_msgs(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "cat", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}],
            },
        ]
    )
    assert [r.name for m in msgs for r in m.tool_results] == ["ls", "cat"]


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "match"),
    [
        ({"content": "hi"}, r"messages\[0\] has no 'role'"),
        ({"role": "robot", "content": "hi"}, r"messages\[0\] has role 'robot'.*use one of"),
        (
            {"role": "tool", "content": "ok"},
            r"messages\[0\] is a tool message without.*tool_call_id",
        ),
        ({"role": "user", "content": 3}, r"messages\[0\]\.content is a int: use a string"),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {}}]},
            r"messages\[0\]\.tool_calls\[0\] has no function\.name",
        ),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": "x"}]},
            r"messages\[0\]\.content\[0\] is an image_url part without image_url\.url",
        ),
        ("hello", r"messages\[0\] is a str, not a message"),
    ],
)
def test_from_openai_rejects_malformed_messages(message: Any, match: str) -> None:
    with pytest.raises(InvalidContent, match=match):
        from_openai([message])


@pytest.mark.parametrize(
    ("message", "match"),
    [
        ({"role": "system", "content": "hi"}, r"messages\[0\] has role 'system'.*system=\.\.\."),
        ({"content": "hi"}, r"messages\[0\] has no 'role'"),
        ({"role": "user"}, r"messages\[0\] has no 'content'"),
        (
            {"role": "user", "content": [{"type": "tool_result", "content": "x"}]},
            r"messages\[0\]\.content\[0\] is a tool_result without a string 'tool_use_id'",
        ),
        (
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "a", "name": "t", "input": "x"}],
            },
            r"tool_use 'a'\) has input str",
        ),
    ],
)
def test_from_anthropic_rejects_malformed_messages(message: Any, match: str) -> None:
    with pytest.raises(InvalidContent, match=match):
        from_anthropic([message])


def test_to_openai_rejects_a_tool_message_without_a_result() -> None:
    with pytest.raises(InvalidContent, match=r"msgs\[0\] has role 'tool'.*ToolResultBlock"):
        to_openai([Msg(role="tool", content="orphan output")])


def test_to_msg_rejects_what_is_not_a_message() -> None:
    with pytest.raises(InvalidContent, match="message is a int"):
        to_msg(42)
    with pytest.raises(InvalidContent, match="to_msgs takes an iterable of messages"):
        to_msgs({"role": "user", "content": "hi"})
    with pytest.raises(InvalidContent, match="from_openai takes a list of messages"):
        from_openai({"role": "user", "content": "hi"})  # type: ignore[arg-type]


def test_to_msg_reports_a_foreign_model_that_does_not_validate() -> None:
    class Broken(BaseModel):
        role: str = "user"
        content: list[dict[str, Any]] = [{"type": "data", "source": {"type": "base64"}}]

    with pytest.raises(InvalidContent, match=r"message \(Broken\) is shaped like a ctxoffload"):
        to_msg(Broken())


# --- property: the OpenAI round trip ---------------------------------------------------------

_text = st.text(max_size=30)
_b64 = st.binary(max_size=24).map(lambda b: base64.b64encode(b).decode())
_json_value = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_arguments = st.one_of(
    st.tuples(
        st.dictionaries(_text, _json_value, max_size=4),
        st.sampled_from(
            [
                {},
                {"ensure_ascii": False},
                {"separators": (",", ":")},
                {"ensure_ascii": False, "separators": (",", ":")},
                {"indent": 2},
            ]
        ),
    ).map(lambda pair: json.dumps(pair[0], **pair[1])),
    _text,  # mostly not a JSON object: kept as _raw_arguments
)
_text_part = st.builds(lambda t: {"type": "text", "text": t}, _text) | st.builds(
    lambda t: {"type": "text", "text": t, "cache_control": {"type": "ephemeral"}}, _text
)
_image_part = st.builds(
    lambda url, detail: {"type": "image_url", "image_url": {"url": url, **detail}},
    st.sampled_from(["image/png", "image/jpeg", "application/pdf"]).flatmap(
        lambda mt: _b64.map(lambda d: f"data:{mt};base64,{d}")
    )
    | st.sampled_from(["https://example.com/a.png", "http://x/y"]),
    st.sampled_from([{}, {"detail": "low"}, {"detail": "auto"}]),
)
_audio_part = st.builds(
    lambda d, f: {"type": "input_audio", "input_audio": {"data": d, "format": f}},
    _b64,
    st.sampled_from(["wav", "mp3"]),
)
_file_part = st.builds(
    lambda mt, d, name: {
        "type": "file",
        "file": {"file_data": f"data:{mt};base64,{d}", **name},
    },
    st.sampled_from(["application/pdf", "image/png", "text/csv"]),
    _b64,
    st.sampled_from([{}, {"filename": "report.pdf"}]),
)
_user_part = _text_part | _image_part | _audio_part | _file_part
_tool_part = _text_part | _image_part


@st.composite
def openai_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        system: dict[str, Any] = {
            "role": draw(st.sampled_from(["system", "developer"])),
            "content": draw(_text | st.lists(_text_part, max_size=2)),
        }
        if draw(st.booleans()):
            system["name"] = draw(_text)
        messages.append(system)
    for turn in range(draw(st.integers(0, 4))):
        messages.append({"role": "user", "content": draw(_text | st.lists(_user_part, max_size=3))})
        assistant: dict[str, Any] = {"role": "assistant"}
        form = draw(st.sampled_from(["absent", "null", "text", "parts"]))
        if form == "null":
            assistant["content"] = None
        elif form == "text":
            assistant["content"] = draw(_text)
        elif form == "parts":
            refusal = st.builds(lambda t: {"type": "refusal", "refusal": t}, _text)
            assistant["content"] = draw(st.lists(_text_part | refusal, max_size=2))
        ids = [f"call_{turn}_{k}" for k in range(draw(st.integers(0, 3)))]
        if ids:
            assistant["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": draw(_text), "arguments": draw(_arguments)},
                }
                for call_id in ids
            ]
        if draw(st.booleans()):
            assistant["refusal"] = None
        if draw(st.booleans()):
            assistant["extra"] = {"response": {"cost": draw(_json_value)}}
        messages.append(assistant)
        for call_id in ids:
            tool: dict[str, Any] = {
                "role": "tool",
                "tool_call_id": call_id,
                "content": draw(_text | st.lists(_tool_part, max_size=2)),
            }
            if draw(st.booleans()):
                tool["name"] = draw(_text)
            messages.append(tool)
    return messages


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(openai_conversations())
def test_openai_round_trip_holds_for_generated_conversations(
    messages: list[dict[str, Any]],
) -> None:
    before = copy.deepcopy(messages)
    msgs = from_openai(messages)
    assert to_openai(msgs) == messages
    assert to_openai(_json_trip(msgs)) == messages
    assert messages == before


_anthropic_text = st.builds(lambda t: {"type": "text", "text": t}, _text)
_anthropic_image = st.builds(
    lambda kind, source: {"type": kind, "source": source},
    st.sampled_from(["image", "document"]),
    st.builds(
        lambda mt, data: {"type": "base64", "media_type": mt, "data": data},
        st.sampled_from(["image/png", "application/pdf"]),
        _b64,
    )
    | st.builds(lambda url: {"type": "url", "url": url}, st.sampled_from(["https://x/a.pdf"])),
)


@st.composite
def anthropic_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(0, 4))):
        user_blocks = st.lists(_anthropic_text | _anthropic_image, max_size=3)
        messages.append({"role": "user", "content": draw(_text | user_blocks)})
        content: list[dict[str, Any]] = []
        if draw(st.booleans()):
            content.append({"type": "thinking", "thinking": draw(_text), "signature": "sig"})
        if draw(st.booleans()):
            content.append({"type": "redacted_thinking", "data": "opaque"})
        content.extend(draw(st.lists(_anthropic_text, max_size=2)))
        ids = [f"toolu_{turn}_{k}" for k in range(draw(st.integers(0, 3)))]
        for call_id in ids:
            tool_input = draw(st.dictionaries(_text, _json_value, max_size=3))
            content.append({"type": "tool_use", "id": call_id, "name": "t", "input": tool_input})
        messages.append({"role": "assistant", "content": content})
        results = []
        for call_id in ids:
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
            if draw(st.booleans()):
                result["content"] = draw(
                    _text | st.lists(_anthropic_text | _anthropic_image, max_size=2)
                )
            if draw(st.booleans()):
                result["is_error"] = draw(st.booleans())
            results.append(result)
        if results:
            messages.append({"role": "user", "content": results})
    return messages


@pytest.mark.slow
@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anthropic_conversations(), st.none() | _text)
def test_anthropic_round_trip_holds_for_generated_conversations(
    messages: list[dict[str, Any]], system: str | None
) -> None:
    msgs = from_anthropic(messages, system)
    assert to_anthropic(msgs) == (system, messages)
    assert to_anthropic(_json_trip(msgs)) == (system, messages)


# --- real transcripts ------------------------------------------------------------------------


def test_openai_round_trip_of_a_real_mini_swe_agent_run() -> None:
    path = corpus_file("minisweagent-django__django-15629.traj.json")
    messages = json.loads(path.read_text(encoding="utf-8"))["messages"]
    msgs = from_openai(messages)
    assert len(msgs) == len(messages)
    assert to_openai(msgs) == messages


def test_anthropic_round_trip_of_a_real_claude_code_session() -> None:
    path = corpus_file("claudecode-agentcmd-full-session-two.jsonl")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    messages = [r["message"] for r in records if r.get("type") in ("user", "assistant")]
    msgs = from_anthropic(messages)
    assert to_anthropic(msgs) == (None, messages)
    images = [
        block
        for msg in msgs
        for result in msg.tool_results
        if isinstance(result.output, list)
        for block in result.output
        if isinstance(block, DataBlock)
    ]
    assert len(images) == 1
    assert images[0].media_type == "image/png"
    assert all(r.name for msg in msgs for r in msg.tool_results)


# -- depth: conversion never raises RecursionError ---------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("depth", [150, 5000])
def test_too_deep_openai_arguments_stay_the_text_the_model_sent(depth: int) -> None:
    raw = '{"a":' * depth + "1" + "}" * depth
    wire = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "t", "arguments": raw}}
        ],
    }
    (msg,) = from_openai([wire])
    assert msg.tool_calls[0].input == {"_raw_arguments": raw}
    assert to_openai([msg])[0]["tool_calls"][0]["function"]["arguments"] == raw


def test_a_too_deep_message_dict_is_refused_with_invalid_content() -> None:
    anthropic = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c", "name": "t", "input": _nested(5000)}],
        }
    ]
    with pytest.raises(InvalidContent, match=r"messages\[0\] is nested deeper than"):
        from_anthropic(anthropic)
    with pytest.raises(InvalidContent, match=r"objs\[0\] is nested deeper than"):
        to_msgs([{"role": "user", "content": [{"type": "text", "text": "x", "m": _nested(5000)}]}])
    openai = {"role": "user", "content": "x", "extra": _nested(300)}
    with pytest.raises(InvalidContent, match="nested deeper than"):
        from_openai([openai])


class _OursModel(BaseModel):
    role: str
    content: list[dict[str, Any]]


class _ForeignModel(BaseModel):
    role: str
    content: str
    tool_calls: list[dict[str, Any]]


_DEEP = _nested(5000)


@pytest.mark.parametrize(
    "message",
    [
        # each format to_msgs tells apart, then reads
        {"role": "user", "content": "x", "name": "n", "extra": _DEEP},  # OpenAI
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c", "name": "t", "input": _DEEP}],
        },
        {"role": "user", "content": [{"text": "x"}, {"json": _DEEP}]},  # Converse
        {"role": "user", "content": [{"type": "data", "data": _DEEP}]},  # ours, as a dict
        {"id": "i", "timestamp": "t", "metadata": _DEEP, "role": "user", "content": "x"},
        # (a model dumps up to pydantic's own depth: past it, it cannot be read as JSON)
        _OursModel(role="user", content=[{"type": "data", "data": _nested(150)}]),
        _ForeignModel(role="assistant", content="x", tool_calls=[{"id": "c", "x": _nested(150)}]),
    ],
    ids=["openai", "anthropic", "converse", "ours", "ours-logged", "ours-model", "sdk-model"],
)
def test_to_msgs_refuses_a_too_deep_message_in_every_format_it_reads(message: Any) -> None:
    """The format is told apart from the top of a message; whichever reads it then refuses
    what nests too deeply before walking it (never a RecursionError)."""
    with pytest.raises(InvalidContent, match=r"objs\[0\] .*nested deeper than"):
        to_msgs([message])


# -- message ids ------------------------------------------------------------------------------


def _ids(n: int) -> list[str]:
    return [Msg(role="user", content="hi").id for _ in range(n)]


def test_message_ids_are_distinct_version_4_uuids() -> None:
    ids = _ids(20_000)
    assert len(set(ids)) == len(ids)
    for value in ids[:500]:
        parsed = uuid.UUID(value)
        assert (parsed.hex, parsed.version, parsed.variant) == (value, 4, uuid.RFC_4122)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")
def test_a_forked_child_draws_ids_of_its_own() -> None:
    before = set(_ids(10))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids, one a line, then out without running the test's teardown
        try:
            os.write(write, "\n".join(_ids(200)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    parent = set(_ids(200))
    assert len(child) == 200
    assert not child & parent
    assert not child & before


@pytest.mark.slow
def test_programs_that_seed_random_alike_still_draw_different_ids() -> None:
    program = (
        "import random; random.seed(0); from ctxoffload import Msg; "
        "print(*(Msg(role='user', content='x').id for _ in range(50)))"
    )
    runs = [
        subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    first, second = (set(run.stdout.split()) for run in runs)
    assert len(first) == len(second) == 50
    assert not first & second
