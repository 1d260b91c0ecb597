"""LangChain messages read as `Msg`s: an AI message's tool calls are taken from their
arguments as they are, not written as JSON text and parsed back, and the `Msg` is the one
the OpenAI round trip (LangChain's `convert_to_openai_messages`, then `to_msgs`) makes."""

from __future__ import annotations

import json
import math
from typing import Any

from frameworks import require_framework
from hypothesis import given, settings
from hypothesis import strategies as st

require_framework("langchain", "langchain")

from langchain_core.messages import AIMessage, convert_to_openai_messages  # noqa: E402

from ctxoffload import Msg, ToolCallBlock  # noqa: E402
from ctxoffload.formats import to_msgs  # noqa: E402
from ctxoffload.integrations.langchain import from_langchain  # noqa: E402
from helpers import examples  # noqa: E402


def _round_trip(message: AIMessage) -> Msg:
    (msg,) = to_msgs([convert_to_openai_messages(message)])
    return msg.model_copy(update={"id": message.id})  # from_langchain keeps the id


def _form(msg: Msg) -> str:
    """A `Msg` as text, without its timestamp (NaN written as NaN, so it equals itself)."""
    return json.dumps(msg.model_dump(exclude={"timestamp"}), sort_keys=True, default=repr)


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        # Values JSON writes otherwise: tuples (lists), int keys (strings).
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.integers(0, 9), inner, max_size=2)
    ),
    max_leaves=12,
)
_args = st.dictionaries(st.text(max_size=10), _json, max_size=5) | st.just({"_raw_arguments": "x"})


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        value = {"in": value}
    return value


@settings(max_examples=examples(300), deadline=None)
@given(
    text=st.text(max_size=30) | st.just(""),
    name=st.none() | st.text(min_size=1, max_size=8),
    refusal=st.none() | st.text(max_size=8),
    calls=st.lists(
        st.tuples(st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=8), _args),
        min_size=1,
        max_size=3,
        unique_by=lambda c: c[0],
    ),
)
def test_an_ai_message_with_tool_calls_reads_as_its_openai_round_trip(
    text: str, name: str | None, refusal: str | None, calls: list[tuple[str, str, Any]]
) -> None:
    message = AIMessage(
        text,
        id="ai-1",
        name=name,
        additional_kwargs={"refusal": refusal} if refusal is not None else {},
        tool_calls=[{"id": i, "name": n, "args": a, "type": "tool_call"} for i, n, a in calls],
    )
    try:
        expected = _round_trip(message)
    except (TypeError, ValueError):  # LangChain cannot write these arguments as JSON
        return
    assert _form(from_langchain([message])[0]) == _form(expected)


def test_arguments_too_deep_or_not_json_read_as_the_round_trip_reads_them() -> None:
    for args in (
        _deep(40),
        _deep(120),
        {"n": math.inf},
        {"when": (1, 2)},
        {"big": 2**80, "ok": True},
    ):
        message = AIMessage("", id="ai-2", tool_calls=[{"id": "c1", "name": "f", "args": args}])
        assert _form(from_langchain([message])[0]) == _form(_round_trip(message))


def test_a_written_file_is_taken_from_the_call_not_parsed_back() -> None:
    text = "def handler(event):\n    return event\n" * 20_000  # ~740 KB
    message = AIMessage(
        "Writing it.",
        id="ai-3",
        tool_calls=[{"id": "c1", "name": "Write", "args": {"path": "app.py", "content": text}}],
    )
    (msg,) = from_langchain([message])
    (call,) = [b for b in msg.content if isinstance(b, ToolCallBlock)]
    # The same string object: the text was neither written as JSON nor read back.
    assert call.input["content"] is text
    # The input is a copy: changing the LangChain message's arguments leaves the Msg alone.
    message.tool_calls[0]["args"]["path"] = "other.py"
    assert call.input["path"] == "app.py"
    assert _form(msg) == _form(
        _round_trip(
            AIMessage(
                "Writing it.",
                id="ai-3",
                tool_calls=[
                    {"id": "c1", "name": "Write", "args": {"path": "app.py", "content": text}}
                ],
            )
        )
    )
