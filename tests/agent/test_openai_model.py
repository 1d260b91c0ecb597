"""OpenAIChatModel against a real HTTP chat-completions server on loopback.

The server (`openai_server.py`) is scripted per test; the real `openai` client talks to it
over TCP, so what the tests assert is what goes over the wire.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from ctxoffload import (
    ChatModel,
    ConfigError,
    ContextOverflowError,
    ModelError,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
    to_openai,
)
from ctxoffload.agent import OpenAIChatModel
from ctxoffload.agent._openai_model import DEFAULT_CONTEXT_WINDOW, known_context_window
from openai_server import OpenAIServer, ScriptedReply, chat_completion, closed_port_url

READ_FILE_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file from the workspace.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}

SUMMARY_SCHEMA = {
    "title": "Summary",
    "type": "object",
    "properties": {"task_overview": {"type": "string"}, "next_steps": {"type": "string"}},
    "required": ["task_overview", "next_steps"],
}


@pytest.fixture(autouse=True)
def _no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The developer's own key or base URL must not leak into what the tests send.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
async def model(server: OpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    async with OpenAIChatModel("gpt-4o-mini", base_url=server.base_url, max_retries=0) as chat:
        yield chat


def _conversation() -> list[Msg]:
    return [
        Msg(role="system", content="You are terse."),
        Msg(role="user", content="Say hello."),
    ]


# --- replies --------------------------------------------------------------------------------


async def test_plain_text_reply_carries_text_and_usage(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_completion("Hello there.", usage=(12, 3))
    messages = _conversation()

    response = await model.generate(messages)

    assert response.message.role == "assistant"
    assert response.message.text == "Hello there."
    assert response.usage == Usage(input_tokens=12, output_tokens=3)
    sent = server.requests[0]
    assert sent["model"] == "gpt-4o-mini"
    assert sent["messages"] == to_openai(messages)
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert "Say hello." in json.dumps(sent["messages"][1])
    assert not {"tools", "response_format", "temperature"} & sent.keys()
    assert server.paths == ["/v1/chat/completions"]


async def test_reply_without_usage_reports_none(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_completion("ok", usage=None)

    response = await model.generate(_conversation())

    assert response.usage is None
    assert response.message.text == "ok"


async def test_tool_call_reply_becomes_tool_call_blocks(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_completion(
        None,
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "notes.txt"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "todo.txt"}'},
            },
        ],
    )

    response = await model.generate(_conversation(), tools=[READ_FILE_TOOL])

    calls = response.message.tool_calls
    assert [(c.id, c.name, c.input) for c in calls] == [
        ("call_1", "read_file", {"path": "notes.txt"}),
        ("call_2", "read_file", {"path": "todo.txt"}),
    ]
    assert response.message.metadata["finish_reason"] == "tool_calls"
    assert server.requests[0]["tools"] == [READ_FILE_TOOL]


async def test_tool_result_reaches_server_in_openai_format(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_completion(
        None,
        tool_calls=[
            {
                "id": "call_abc",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "notes.txt"}'},
            }
        ],
    )
    server.add_completion("The notes say: buy milk.")
    history = _conversation()

    first = await model.generate(history, tools=[READ_FILE_TOOL])
    history.append(first.message)
    history.append(
        Msg(
            role="tool",
            content=[ToolResultBlock(id="call_abc", name="read_file", output="buy milk")],
        )
    )
    second = await model.generate(history, tools=[READ_FILE_TOOL])

    assert second.message.text == "The notes say: buy milk."
    sent = server.requests[1]["messages"]
    assert sent == to_openai(history)
    assistant, tool = sent[-2], sent[-1]
    assert assistant["role"] == "assistant"
    [call] = assistant["tool_calls"]
    assert call["id"] == "call_abc"
    assert call["type"] == "function"
    assert call["function"]["name"] == "read_file"
    assert json.loads(call["function"]["arguments"]) == {"path": "notes.txt"}
    assert tool["role"] == "tool"
    assert tool["tool_call_id"] == "call_abc"
    assert "buy milk" in json.dumps(tool["content"])


async def test_assistant_tool_call_block_history_is_sent_as_tool_calls(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_completion("done")
    history = [
        *_conversation(),
        Msg(role="assistant", content=[ToolCallBlock(id="c9", name="ls", input={"dir": "."})]),
        Msg(role="tool", content=[ToolResultBlock(id="c9", name="ls", output="a.txt")]),
    ]

    await model.generate(history)

    assistant = server.requests[0]["messages"][2]
    assert assistant["tool_calls"][0]["function"]["name"] == "ls"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"dir": "."}


async def test_temperature_and_extra_body_reach_the_request(server: OpenAIServer) -> None:
    server.add_completion("ok")
    async with OpenAIChatModel(
        "gpt-4o",
        base_url=server.base_url,
        temperature=0.2,
        extra_body={"top_k": 20},
        max_retries=0,
    ) as chat:
        await chat.generate(_conversation())

    assert server.requests[0]["temperature"] == 0.2
    assert server.requests[0]["top_k"] == 20


async def test_reply_without_choices_is_model_error(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    body = chat_completion("unused")
    body["choices"] = []
    server.add(body)

    with pytest.raises(ModelError, match="no choices"):
        await model.generate(_conversation())


def _malformed(kind: str) -> Any:
    body = chat_completion("unused")
    if kind == "a JSON string, not an object":
        return "<html><body>502 Bad Gateway</body></html>"
    if kind == "a JSON list":
        return [body]
    if kind == "choices as an object":
        body["choices"] = {"0": body["choices"][0]}
    elif kind == "a null message":
        body["choices"][0]["message"] = None
    elif kind == "no message":
        del body["choices"][0]["message"]
    return body


@pytest.mark.parametrize(
    "kind",
    [
        "a JSON string, not an object",
        "a JSON list",
        "choices as an object",
        "a null message",
        "no message",
    ],
)
async def test_a_200_that_is_no_chat_completion_is_a_model_error(
    server: OpenAIServer, model: OpenAIChatModel, kind: str
) -> None:
    """A proxy's page or a broken body with status 200 is a `ModelError` naming the model,
    as the docs say, never a raw AttributeError or KeyError."""
    server.add(ScriptedReply(200, _malformed(kind)))

    with pytest.raises(ModelError, match="cannot be read"):
        await model.generate(_conversation())


@pytest.mark.parametrize("value", [12.6, [12], None, -3])
async def test_usage_of_the_wrong_type_is_read_as_a_count_or_zero(
    server: OpenAIServer, model: OpenAIChatModel, value: Any
) -> None:
    body = chat_completion("fine")
    body["usage"]["prompt_tokens"] = value
    server.add(body)

    response = await model.generate(_conversation())

    assert response.message.text == "fine"
    assert response.usage is not None
    assert response.usage.input_tokens == (13 if value == 12.6 else 0)


# --- structured output ----------------------------------------------------------------------


async def test_structured_output_request_carries_the_schema(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_completion('{"task_overview": "t", "next_steps": "n"}')

    response = await model.generate(_conversation(), response_schema=SUMMARY_SCHEMA)

    assert json.loads(response.message.text) == {"task_overview": "t", "next_steps": "n"}
    assert server.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Summary", "schema": SUMMARY_SCHEMA, "strict": False},
    }
    # The json_schema path leaves the messages alone.
    assert server.requests[0]["messages"] == to_openai(_conversation())


async def test_json_schema_rejection_falls_back_to_json_object(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_error(
        400,
        "response_format type 'json_schema' is not supported by this server",
        param="response_format",
    )
    server.add_completion('{"task_overview": "t", "next_steps": "n"}')

    response = await model.generate(_conversation(), response_schema=SUMMARY_SCHEMA)

    assert json.loads(response.message.text)["task_overview"] == "t"
    assert len(server.requests) == 2
    retry = server.requests[1]
    assert retry["response_format"] == {"type": "json_object"}
    system = retry["messages"][0]
    assert system["role"] == "system"
    assert "You are terse." in json.dumps(system["content"])
    assert json.dumps(SUMMARY_SCHEMA) in system["content"]
    assert [m["role"] for m in retry["messages"]] == ["system", "user"]


async def test_fallback_is_remembered_for_later_calls(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_error(400, "Unknown response_format type: json_schema")
    server.add_completion("{}")
    server.add_completion("{}")

    await model.generate(_conversation(), response_schema=SUMMARY_SCHEMA)
    await model.generate(_conversation(), response_schema=SUMMARY_SCHEMA)

    assert len(server.requests) == 3
    assert server.requests[2]["response_format"] == {"type": "json_object"}


async def test_fallback_adds_a_system_message_when_there_is_none(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_error(422, "json_schema: unsupported value")
    server.add_completion("{}")

    await model.generate([Msg(role="user", content="hi")], response_schema=SUMMARY_SCHEMA)

    messages = server.requests[1]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "JSON" in messages[0]["content"]


async def test_fallback_appends_a_part_to_a_system_prompt_made_of_parts(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_error(400, "response_format is not supported")
    server.add_completion("{}")
    system = Msg(role="system", content=[TextBlock(text="Rule one."), TextBlock(text="Two.")])

    await model.generate([system, Msg(role="user", content="hi")], response_schema=SUMMARY_SCHEMA)

    parts = server.requests[1]["messages"][0]["content"]
    assert parts[:-1] == to_openai([system])[0]["content"]
    assert parts[-1]["type"] == "text"
    assert json.dumps(SUMMARY_SCHEMA) in parts[-1]["text"]


async def test_other_bad_request_is_not_retried_as_json_object(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_error(400, "Invalid value for 'temperature'", code="invalid_value")

    with pytest.raises(ModelError, match="temperature") as raised:
        await model.generate(_conversation(), response_schema=SUMMARY_SCHEMA)

    assert not isinstance(raised.value, ContextOverflowError)
    assert len(server.requests) == 1


async def test_rejected_fallback_is_model_error(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_error(400, "response_format json_schema not supported")
    server.add_error(400, "response_format json_object not supported")

    with pytest.raises(ModelError, match="json_object"):
        await model.generate(_conversation(), response_schema=SUMMARY_SCHEMA)

    assert len(server.requests) == 2


# --- errors ---------------------------------------------------------------------------------


async def test_openai_context_overflow_is_context_overflow_error(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    message = (
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130512 tokens. Please reduce the length of the messages."
    )
    server.add_error(400, message, code="context_length_exceeded", param="messages")

    with pytest.raises(ContextOverflowError) as raised:
        await model.generate(_conversation())

    assert isinstance(raised.value, ModelError)
    assert isinstance(raised.value.__cause__, openai.BadRequestError)
    assert message in str(raised.value)
    assert "gpt-4o-mini" in str(raised.value)


async def test_llama_cpp_context_overflow_is_context_overflow_error(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add(
        (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 5000,
                    "n_ctx": 4096,
                }
            },
        )
    )

    with pytest.raises(ContextOverflowError, match="available context size"):
        await model.generate(_conversation())


async def test_server_error_is_model_error_naming_model_url_and_status(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add((500, {"error": {"message": "upstream exploded", "type": "server_error"}}))

    with pytest.raises(ModelError) as raised:
        await model.generate(_conversation())

    text = str(raised.value)
    assert not isinstance(raised.value, ContextOverflowError)
    assert isinstance(raised.value.__cause__, openai.InternalServerError)
    assert "gpt-4o-mini" in text
    assert server.base_url in text
    assert "500" in text
    assert "upstream exploded" in text
    assert len(server.requests) == 1  # max_retries=0


async def test_client_retries_server_errors_before_succeeding(server: OpenAIServer) -> None:
    server.add((503, {"error": {"message": "busy"}}))
    server.add_completion("second time lucky")

    async with OpenAIChatModel("gpt-4o", base_url=server.base_url, max_retries=1) as chat:
        response = await chat.generate(_conversation())

    assert response.message.text == "second time lucky"
    assert len(server.requests) == 2


async def test_unreachable_server_is_model_error() -> None:
    url = closed_port_url()

    async with OpenAIChatModel("gpt-4o", base_url=url, max_retries=0) as chat:
        with pytest.raises(ModelError, match="unreachable") as raised:
            await chat.generate(_conversation())

    assert url.rstrip("/") in str(raised.value)
    assert isinstance(raised.value.__cause__, openai.APIConnectionError)


async def test_timeout_is_model_error(server: OpenAIServer) -> None:
    server.add(ScriptedReply(200, chat_completion("too late"), delay=30))

    async with OpenAIChatModel(
        "gpt-4o", base_url=server.base_url, timeout=0.3, max_retries=0
    ) as chat:
        with pytest.raises(ModelError, match="did not answer") as raised:
            await chat.generate(_conversation())

    # The client's read timeout and the whole-request deadline are equal here; either may win.
    assert isinstance(raised.value.__cause__, (openai.APITimeoutError, asyncio.TimeoutError))


async def test_timeout_bounds_the_json_object_fallback_together_with_the_first_try(
    server: OpenAIServer,
) -> None:
    # Each request answers within the timeout; the refused one and the fallback together do not.
    rejection = {"error": {"message": "response_format json_schema is not supported"}}
    server.add(ScriptedReply(400, rejection, delay=0.4))
    server.add(ScriptedReply(200, chat_completion('{"task_overview": "t"}'), delay=0.4))

    async with OpenAIChatModel(
        "gpt-4o", base_url=server.base_url, timeout=0.6, max_retries=0
    ) as chat:
        with pytest.raises(ModelError, match=r"did not answer within 0\.6 s"):
            await asyncio.wait_for(
                chat.generate(_conversation(), response_schema=SUMMARY_SCHEMA), 20
            )


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
def test_impossible_timeout_is_config_error(timeout: float) -> None:
    with pytest.raises(ConfigError, match=f"timeout {timeout!r} is not a positive number"):
        OpenAIChatModel("gpt-4o", base_url="http://127.0.0.1:9/v1", timeout=timeout)


async def test_timeout_bounds_a_reply_that_drips_in_byte_by_byte(server: OpenAIServer) -> None:
    # Each byte arrives well within a per-read timeout, so only a deadline on the whole
    # request stops it; the full body would take about 30 s to arrive.
    body = chat_completion("too slow")
    server.add(ScriptedReply(200, body, drip=30 / len(json.dumps(body))))

    async with OpenAIChatModel(
        "gpt-4o", base_url=server.base_url, timeout=0.5, max_retries=0
    ) as chat:
        with pytest.raises(ModelError, match=r"did not answer within 0\.5 s") as raised:
            await asyncio.wait_for(chat.generate(_conversation()), 20)

    assert "timeout=" in str(raised.value)


async def test_timeout_bounds_the_client_retries_too(server: OpenAIServer) -> None:
    # Each attempt fails within the per-read timeout, but three of them (plus the client's
    # backoff between them) take longer than the timeout the caller asked for.
    for _ in range(3):
        server.add(ScriptedReply(500, {"error": {"message": "busy"}}, delay=0.4))

    async with OpenAIChatModel(
        "gpt-4o", base_url=server.base_url, timeout=0.6, max_retries=2
    ) as chat:
        with pytest.raises(ModelError, match=r"did not answer within 0\.6 s"):
            await asyncio.wait_for(chat.generate(_conversation()), 20)


# --- context window -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4o-mini-2024-07-18", 128_000),
        ("GPT-4o", 128_000),
        ("openai/gpt-4o", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-4.1-nano-2025-04-14", 1_047_576),
        ("o1", 200_000),
        ("o1-mini", 128_000),
        ("o3-2025-04-16", 200_000),
        ("o3-mini", 200_000),
        ("o4-mini", 200_000),
        ("gpt-5", 400_000),
        ("gpt-5-mini-2025-08-07", 400_000),
        ("gpt-5.1", 400_000),
        ("gpt-5-chat-latest", 128_000),
        ("gpt-3.5-turbo", 16_385),
        ("gpt-3.5-turbo-0125", 16_385),
        ("gpt-4", 8_192),
        ("gpt-4-0613", 8_192),
        ("gpt-4-turbo", 128_000),
        ("gpt-4-turbo-2024-04-09", 128_000),
        ("gpt-4-1106-preview", 128_000),
    ],
)
def test_known_context_window_matches_families(name: str, window: int) -> None:
    assert known_context_window(name) == window


@pytest.mark.parametrize("name", ["llama3.1:8b", "o100-local", "qwen2.5-7b-instruct", "gpt"])
def test_known_context_window_is_none_for_other_models(name: str) -> None:
    assert known_context_window(name) is None


async def test_context_window_comes_from_the_table(server: OpenAIServer) -> None:
    async with OpenAIChatModel("gpt-4.1-2025-04-14", base_url=server.base_url) as chat:
        assert chat.context_window == 1_047_576


async def test_context_window_parameter_overrides_the_table(server: OpenAIServer) -> None:
    async with OpenAIChatModel("gpt-4o", base_url=server.base_url, context_window=32_768) as chat:
        assert chat.context_window == 32_768


async def test_unknown_model_falls_back_to_default_window_with_a_warning(
    server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxoffload.agent._openai_model"):
        async with OpenAIChatModel("my-local-llama", base_url=server.base_url) as chat:
            assert chat.context_window == DEFAULT_CONTEXT_WINDOW == 128_000

    assert "my-local-llama" in caplog.text
    assert "context_window=" in caplog.text


async def test_unknown_model_with_window_logs_nothing(
    server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxoffload.agent._openai_model"):
        async with OpenAIChatModel(
            "my-local-llama", base_url=server.base_url, context_window=8_192
        ) as chat:
            assert chat.context_window == 8_192

    assert caplog.records == []


@pytest.mark.parametrize("window", [0, -5, True, 1.5])
def test_impossible_context_window_is_config_error(window: Any) -> None:
    with pytest.raises(ConfigError, match="context_window"):
        OpenAIChatModel("gpt-4o", base_url="http://127.0.0.1:9/v1", context_window=window)


# --- construction, keys, lifecycle ----------------------------------------------------------


async def test_placeholder_key_is_sent_to_a_local_server(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.add_completion("ok")

    await model.generate(_conversation())

    assert server.headers[0]["authorization"] == "Bearer not-needed"


async def test_environment_key_is_used_when_none_is_given(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.add_completion("ok")

    async with OpenAIChatModel("gpt-4o", base_url=server.base_url) as chat:
        await chat.generate(_conversation())

    assert server.headers[0]["authorization"] == "Bearer sk-from-env"


async def test_explicit_key_wins(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.add_completion("ok")

    async with OpenAIChatModel("gpt-4o", base_url=server.base_url, api_key="sk-given") as chat:
        await chat.generate(_conversation())

    assert server.headers[0]["authorization"] == "Bearer sk-given"


async def test_base_url_from_environment_gets_the_placeholder_key(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.add_completion("ok")

    async with OpenAIChatModel("gpt-4o") as chat:
        await chat.generate(_conversation())

    assert server.headers[0]["authorization"] == "Bearer not-needed"


def test_missing_key_for_openai_is_config_error() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o")


async def test_given_client_is_used_and_left_open(server: OpenAIServer) -> None:
    server.add_completion("via your client")
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-mine", max_retries=0)
    try:
        chat = OpenAIChatModel("gpt-4o", client=client)
        response = await chat.generate(_conversation())
        await chat.aclose()

        assert response.message.text == "via your client"
        assert server.headers[0]["authorization"] == "Bearer sk-mine"
        assert chat.base_url == server.base_url + "/"
        assert not client.is_closed()
    finally:
        await client.close()


async def test_async_with_closes_the_client(server: OpenAIServer) -> None:
    async with OpenAIChatModel("gpt-4o", base_url=server.base_url) as chat:
        client = chat._client
        assert not client.is_closed()

    assert client.is_closed()


async def test_model_satisfies_the_chat_model_protocol(model: OpenAIChatModel) -> None:
    assert isinstance(model, ChatModel)
    assert "gpt-4o-mini" in repr(model)
    assert "not-needed" not in repr(model)


def test_importing_ctxoffload_does_not_import_openai() -> None:
    code = (
        "import sys, ctxoffload, ctxoffload.agent, ctxoffload.agent._openai_model\n"
        "print('openai' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_missing_openai_package_raises_import_error_with_install_hint() -> None:
    # sys.modules[name] = None makes `import name` raise ImportError, as if not installed.
    code = (
        "import sys\n"
        "sys.modules['openai'] = None\n"
        "from ctxoffload.agent._openai_model import OpenAIChatModel\n"
        "try:\n"
        "    OpenAIChatModel('gpt-4o', base_url='http://127.0.0.1:9/v1')\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert "pip install 'ctxoffload[openai]'" in result.stdout
