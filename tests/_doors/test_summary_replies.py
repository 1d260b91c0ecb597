"""What every door's summary adapter shares (`summary_replies`): the host's answer as the
compressor reads it, the request as text turns, the window a summary model is given, and a
model name kept out of error messages where it holds a secret."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from ctxoffload import ConfigError, ModelResponse, Msg, Summary, ToolCallBlock
from ctxoffload._doors.summary_replies import (
    SUMMARY_WINDOW,
    HostSummaryModel,
    call_input,
    summary_reply,
    summary_turns,
    summary_window,
    unresolved,
    usage_of,
)
from helpers import summary_reply as fields


def test_a_parsed_object_is_its_json_and_a_text_is_itself() -> None:
    parsed = Summary.model_validate(fields("p"))
    assert json.loads(summary_reply(parsed).message.text) == fields("p")
    assert json.loads(summary_reply(fields("d")).message.text) == fields("d")
    assert summary_reply("Here it is: {...}").message.text == "Here it is: {...}"
    assert summary_reply(None).message.text == ""


def test_the_tokens_reported_come_back_and_none_reported_is_none() -> None:
    usage = usage_of(900, 60, 12)
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (900, 60)
    assert usage.cached_input_tokens == 12
    assert summary_reply("x", usage).usage == usage
    assert usage_of(None, None) is None


def test_a_bool_is_no_count() -> None:
    """Python takes True for 1: a host's flag where a count belongs is no count."""
    assert usage_of(True, False) is None
    usage = usage_of(True, 60, False)
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (0, 60)
    assert usage.cached_input_tokens is None


def test_a_request_is_a_system_prompt_and_text_turns() -> None:
    call = ToolCallBlock(id="c1", name="grep", input={"pattern": "x"})
    system, turns = summary_turns(
        [
            Msg(role="system", content="Summarise."),
            Msg(role="user", content="the transcript"),
            Msg(role="assistant", content=""),
            Msg(role="assistant", content=[call]),
        ]
    )
    assert system == "Summarise."
    assert turns[0] == ("user", "the transcript")  # as it is, no role tag
    assert len(turns) == 2 and turns[1][0] == "assistant" and "grep" in turns[1][1]


async def test_an_adapter_names_its_model_once_and_is_asked_in_turns() -> None:
    class Host(HostSummaryModel):
        door = "host"

        async def _ask(
            self, system: str, turns: list[tuple[str, str]], response_schema: dict[str, Any] | None
        ) -> ModelResponse:
            return summary_reply(f"{system}|{turns}")

    host = Host("https://ana:sk-live-0123456789@llm.example.com/v1", None, 64_000)
    assert "sk-live-0123456789" not in host.model_name and host.context_window == 64_000
    reply = await host.generate([Msg(role="system", content="S"), Msg(role="user", content="U")])
    assert reply.message.text == "S|[('user', 'U')]"


def test_an_unknown_window_is_assumed_and_said(caplog: pytest.LogCaptureFixture) -> None:
    assert summary_window(None, 0, 32_000) == 32_000
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        assert summary_window(None, True, model_name="local-llm") == SUMMARY_WINDOW
    assert "local-llm" in caplog.text and "context_window" in caplog.text


def test_a_name_that_cannot_be_resolved_is_refused_without_its_secrets() -> None:
    name = "https://ana:sk-live-0123456789@llm.example.com/v1?api_key=sk-other-98765"
    reason = ValueError(f"cannot reach {name}")
    refused = unresolved(name, "the host's resolver", "a Host model", reason)
    said = str(refused)
    assert isinstance(refused, ConfigError)
    assert "sk-live-0123456789" not in said and "sk-other-98765" not in said
    assert "a Host model" in said and "summary_model=False" in said


def test_a_hosts_long_reason_is_said_in_its_first_line() -> None:
    """LangChain's reason for a name it cannot resolve lists thirty providers and a URL on
    the lines after its first: the refusal stays one line."""
    reason = ValueError(
        "Unable to infer model provider for model='x'.\n\nSupported providers: a, b, c\n\n"
        "For help, see: https://docs.example.com"
    )
    said = str(unresolved("x", "init_chat_model", "a LangChain chat model", reason))
    assert "\n" not in said
    assert "Unable to infer model provider for model='x'." in said
    assert "Supported providers" not in said


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ('{"path": "a.txt", "limit": 2}', {"path": "a.txt", "limit": 2}),
        ({"path": "a.txt"}, {"path": "a.txt"}),
        ("", {}),
        ("not json {", {"_raw_arguments": "not json {"}),
        ('["a", "b"]', {"_raw_arguments": '["a", "b"]'}),
        ("[" * 200 + "]" * 200, {"_raw_arguments": "[" * 200 + "]" * 200}),
        (7, {"_raw_arguments": "7"}),
    ],
    ids=["json", "mapping", "empty", "no json", "a list", "too deep", "a number"],
)
def test_a_hosts_call_arguments_become_an_input_losing_nothing(given: Any, expected: Any) -> None:
    """Whatever a host's model gave as a call's arguments is the call's input: a JSON object
    as it is, anything else kept as its text (as every format's reader keeps it), never
    an exception in the middle of an evaluation and never a recursion through deep JSON."""
    made = call_input(given)
    assert made == expected
    ToolCallBlock(id="c", name="Read", input=made)  # a valid input for the message model
