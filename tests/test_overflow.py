"""`is_context_overflow` on the error bodies providers really send, and on SDK-shaped exceptions.

Where each wording comes from is in a comment beside it: the provider's documentation, or the
source of a library that recognises it (langchain-openai, langchain-anthropic,
langchain-google-genai and deepagents each carry such a list; Strands another).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx2
import openai
import pytest

from ctxoffload import ContextOverflowError, ModelError, is_context_overflow

ANTHROPIC_PROMPT_TOO_LONG = {
    # docs.anthropic.com/en/api/errors: the error shape; the message is langchain-anthropic's
    # `_handle_anthropic_bad_request` test ("prompt is too long").
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 210000 tokens > 200000 maximum",
    },
}

OPENAI_CONTEXT_LENGTH_EXCEEDED = {
    # OpenAI's chat completions, a 400 with this code (the openai SDK keeps the inner object
    # as `.body`).
    "message": "This model's maximum context length is 8192 tokens. However, your "
    "messages resulted in 9000 tokens. Please reduce the length of the messages.",
    "type": "invalid_request_error",
    "param": "messages",
    "code": "context_length_exceeded",
}


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(400, OPENAI_CONTEXT_LENGTH_EXCEEDED, id="openai-error-object"),
        pytest.param(
            400,
            {"error": {"message": "Too long.", "code": "context_length_exceeded"}},
            id="openai-code-only-full-body",
        ),
        pytest.param(
            # OpenAI's Responses API; langchain-openai's `_handle_openai_bad_request` lists it.
            400,
            {
                "error": {
                    "message": "Input tokens exceed the configured limit of 272000 tokens. "
                    "Your messages resulted in 300000 tokens. Please reduce the length of "
                    "the messages.",
                    "type": "invalid_request_error",
                    "code": None,
                }
            },
            id="openai-responses",
        ),
        pytest.param(
            # vLLM's OpenAI-compatible server (vllm/entrypoints/openai/serving_engine.py).
            400,
            "This model's maximum context length is 4096 tokens. However, you requested "
            "4500 tokens (4000 in the messages, 500 in the completion). Please reduce the "
            "length of the messages or completion.",
            id="vllm",
        ),
        pytest.param(
            400,
            {
                "object": "error",
                "message": "This model's maximum context length is 32768 tokens. However, "
                "your request has 40000 input tokens.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
            id="vllm-error-object",
        ),
        pytest.param(
            # vLLM with max_tokens over what is left of the window (reported in the wild as
            # `{"error": {... "type": "BadRequestError", "code": 400}}`).
            400,
            {
                "error": {
                    "message": "'max_tokens' or 'max_completion_tokens' is too large: 8000. "
                    "This model's maximum context length is 4096 tokens and your request "
                    "has 2778 input tokens (8000 > 4096 - 2778).",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            },
            id="vllm-max-tokens-over-what-is-left",
        ),
        pytest.param(
            # llama.cpp's llama-server (tools/server/utils.hpp, ERROR_TYPE_EXCEED_CONTEXT_SIZE).
            400,
            {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
            },
            id="llama.cpp",
        ),
        pytest.param(
            # LiteLLM's proxy maps every provider's overflow onto ContextWindowExceededError
            # and names it in the message (langchain-openai and deepagents look for it).
            400,
            {
                "error": {
                    "message": "litellm.ContextWindowExceededError: litellm.BadRequestError: "
                    "ContextWindowExceededError: OpenAIException - too long",
                    "type": None,
                    "param": None,
                    "code": "400",
                }
            },
            id="litellm",
        ),
        pytest.param(
            # Ollama, when it refuses rather than truncates (by default it truncates silently:
            # ollama/ollama#2208), and Ollama-fronting gateways.
            400,
            {"error": {"message": "prompt too long; exceeded max context length by 412 tokens"}},
            id="ollama",
        ),
        pytest.param(400, ANTHROPIC_PROMPT_TOO_LONG, id="anthropic"),
        pytest.param(
            # docs.anthropic.com/en/api/errors: 413, the request is over 32 MB.
            413,
            {
                "type": "error",
                "error": {
                    "type": "request_too_large",
                    "message": "Request exceeds the maximum allowed number of bytes.",
                },
            },
            id="anthropic-413",
        ),
        pytest.param(
            # Anthropic when input plus max_tokens is over the window (strands-agents/sdk-python
            # PR #1078 added it to Strands' list).
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "input length and `max_tokens` exceed context limit: 188240 + "
                    "21333 > 200000, decrease input length or `max_tokens` and try again",
                },
            },
            id="anthropic-input-plus-max-tokens",
        ),
        pytest.param(
            # Mistral's API.
            400,
            "Prompt contains 40000 tokens and 0 draft tokens, too large for model with "
            "32768 maximum context length",
            id="mistral",
        ),
        pytest.param(
            # Gemini's OpenAI-compatible endpoint: a list around the error object.
            400,
            [
                {
                    "error": {
                        "message": "The input token count (1200000) exceeds the maximum "
                        "number of tokens allowed (1048576)."
                    }
                }
            ],
            id="gemini-openai-endpoint",
        ),
        pytest.param(
            # Bedrock's ValidationException, as Strands' Bedrock model recognises it.
            400,
            "An error occurred (ValidationException) when calling the Converse operation: "
            "Input is too long for requested model.",
            id="bedrock",
        ),
        pytest.param(
            # LM Studio, Together AI, GitHub Copilot, OpenRouter (Poolside) and z.ai: the
            # wordings the pi-ai package's OVERFLOW_PATTERNS and its tests collect.
            400,
            "tokens to keep from the initial prompt is greater than the context length",
            id="lm-studio",
        ),
        pytest.param(
            400,
            "The input (516368 tokens) is longer than the model's context length (262144 tokens).",
            id="together-ai",
        ),
        pytest.param(
            400, "prompt token count of 200000 exceeds the limit of 128000", id="github-copilot"
        ),
        pytest.param(
            400,
            "Input length 300000 exceeds the maximum allowed input length of 262144 tokens.",
            id="openrouter-poolside",
        ),
        pytest.param(400, {"error": {"code": "model_context_window_exceeded"}}, id="z.ai"),
        pytest.param(
            # vLLM's engine when the prompt alone is over max_model_len.
            400,
            "The decoder prompt (length 5000) is longer than the maximum model length of 4096. "
            "Make sure that `max_model_len` is no smaller than the number of text tokens.",
            id="vllm-decoder-prompt",
        ),
        pytest.param(
            # xAI's API.
            400,
            "This model's maximum prompt length is 131072 but the request contains 537812 tokens.",
            id="xai",
        ),
        pytest.param(None, "Error: too many tokens in prompt", id="status-unknown"),
        pytest.param(
            400,
            b'{"error": {"code": "context_length_exceeded", "message": "too long"}}',
            id="raw-bytes",
        ),
    ],
)
def test_a_provider_overflow_is_recognised(status: int | None, body: Any) -> None:
    assert is_context_overflow(status, body)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(
            # OpenAI's rate limit on tokens per minute: "too large", and names tokens.
            429,
            "Request too large for gpt-4o in organization org-x on tokens per min (TPM): "
            "Limit 30000, Requested 50000.",
            id="rate-limit-tpm",
        ),
        pytest.param(
            # The same wording where the status was lost on the way.
            None,
            "Request too large for gpt-4o in organization org-x on tokens per min (TPM): "
            "Limit 30000, Requested 50000. The input or output tokens must be reduced.",
            id="rate-limit-tpm-status-unknown",
        ),
        pytest.param(
            None, {"message": "too many tokens per minute", "code": "rate_limit"}, id="429-text"
        ),
        pytest.param(
            # docs.anthropic.com/en/api/errors: rate_limit_error.
            429,
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "This request would exceed the rate limit for your "
                    "organization of 400,000 input tokens per minute.",
                },
            },
            id="anthropic-rate-limit",
        ),
        pytest.param(
            # Bedrock's throttling, as the pi-ai package's NON_OVERFLOW_PATTERNS quote it:
            # "too many tokens", but a wait helps, not a shorter prompt.
            None,
            "Throttling error: Too many tokens, please wait before trying again.",
            id="bedrock-throttling",
        ),
        pytest.param(500, "maximum context length while loading", id="server-fault"),
        pytest.param(
            # docs.anthropic.com/en/api/errors: 529 overloaded_error.
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            id="anthropic-overloaded",
        ),
        pytest.param(
            503, {"error": {"code": "context_length_exceeded"}}, id="5xx-even-with-the-code"
        ),
        pytest.param(400, {"message": "Invalid value for 'temperature'"}, id="bad-param"),
        pytest.param(401, {"message": "Incorrect API key provided"}, id="auth"),
        pytest.param(
            # docs.anthropic.com/en/api/errors: a key without the model, even with the wording.
            403,
            {"error": {"type": "permission_error", "message": "prompt is too long"}},
            id="permission",
        ),
        pytest.param(
            # Anthropic refusing max_tokens above the model's output limit: not the window.
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "max_tokens: 100000 > 64000, which is the maximum allowed "
                    "number of output tokens for claude-sonnet-4",
                },
            },
            id="anthropic-max-tokens-over-output-limit",
        ),
        pytest.param(400, None, id="no-body"),
    ],
)
def test_any_other_error_is_not_an_overflow(status: int | None, body: Any) -> None:
    assert not is_context_overflow(status, body)


class FakeAPIStatusError(Exception):
    """Shaped like the openai and anthropic SDKs' `APIStatusError`: `message`, `status_code`,
    `body` (openai keeps the inner error object there, anthropic the whole body)."""

    def __init__(self, message: str, *, status_code: int, body: object) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.body = body


def test_an_sdk_shaped_exception_is_read_by_its_attributes() -> None:
    error = FakeAPIStatusError(
        "Error code: 400 - prompt is too long", status_code=400, body=ANTHROPIC_PROMPT_TOO_LONG
    )
    assert is_context_overflow(error)


def test_an_sdk_shaped_exception_with_the_wording_in_its_message_only() -> None:
    error = FakeAPIStatusError(
        "Error code: 400 - {'error': {'code': 'context_length_exceeded'}}",
        status_code=400,
        body=None,
    )
    assert is_context_overflow(error)


def test_an_sdk_shaped_rate_limit_is_not_an_overflow() -> None:
    error = FakeAPIStatusError(
        "Error code: 429 - too many tokens", status_code=429, body={"code": "rate_limit"}
    )
    assert not is_context_overflow(error)


def test_an_exception_whose_response_carries_the_status() -> None:
    class HTTPError(Exception):
        def __init__(self, message: str, status: int) -> None:
            super().__init__(message)
            self.response = SimpleNamespace(status_code=status)

    assert not is_context_overflow(HTTPError("maximum context length", 500))
    assert is_context_overflow(HTTPError("maximum context length", 400))


def test_the_real_openai_sdk_error_is_recognised() -> None:
    # httpx2 is the openai SDK's HTTP client, which its errors are built on.
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx2.Response(400, request=request)
    error = openai.BadRequestError(
        "Error code: 400", response=response, body=OPENAI_CONTEXT_LENGTH_EXCEEDED
    )
    assert is_context_overflow(error)


def test_the_real_openai_sdk_rate_limit_is_not_an_overflow() -> None:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx2.Response(429, request=request)
    body = {"message": "Rate limit reached: tokens per min (TPM)", "code": "rate_limit_exceeded"}
    error = openai.RateLimitError("Error code: 429", response=response, body=body)
    assert not is_context_overflow(error)


@pytest.mark.parametrize(
    "class_name",
    [
        # langchain-core >= 1.2: langchain-openai, -anthropic and -google-genai raise
        # subclasses of it (OpenAIContextOverflowError, ...).
        "ContextOverflowError",
        # litellm.exceptions.ContextWindowExceededError.
        "ContextWindowExceededError",
        # strands.types.exceptions.ContextWindowOverflowException.
        "ContextWindowOverflowException",
        # pydantic_ai.exceptions.ModelContextWindowExceededError.
        "ModelContextWindowExceededError",
    ],
)
def test_a_frameworks_overflow_class_counts_by_its_name(class_name: str) -> None:
    framework_error = type(class_name, (Exception,), {})
    subclass = type("ProviderContextOverflowError", (framework_error,), {})
    assert is_context_overflow(framework_error("input too big"))
    assert is_context_overflow(subclass("input too big"))


def test_ctxoffloads_own_overflow_counts_and_its_model_error_does_not() -> None:
    assert is_context_overflow(ContextOverflowError("the prompt exceeds the window"))
    # The adapter decided with the status, which its message no longer carries.
    assert not is_context_overflow(
        ModelError("model 'm' failed with HTTP 500: maximum context length while loading")
    )


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: is_context_overflow("prompt is too long"), id="a-body-alone"),
        pytest.param(lambda: is_context_overflow(ValueError("x"), "body"), id="exception-and-body"),
        pytest.param(lambda: is_context_overflow(True, "body"), id="a-bool-for-a-status"),
        pytest.param(lambda: is_context_overflow(400), id="a-status-alone"),
    ],
)
def test_a_call_of_neither_form_is_a_type_error(call: Any) -> None:
    with pytest.raises(TypeError, match=r"is_context_overflow\(status, body\)"):
        call()


def _nested(levels: int, inner: Any) -> Any:
    """`inner` under `levels` objects of a gateway that wraps each upstream error in its own
    `{"error": ...}`, as `json.loads` gives it."""
    body = inner
    for _ in range(levels):
        body = {"error": body, "type": "upstream_error"}
    return body


@pytest.mark.parametrize("levels", [350, 5_000])
def test_an_error_body_nested_hundreds_deep_is_answered(levels: int) -> None:
    # json.loads of a gateway's deep JSON: the walk recursed, and RecursionError went into
    # the host's error path instead of an answer.
    import json

    text = json.dumps(_nested(min(levels, 350), {"message": "prompt is too long: 9 > 8"}))
    assert is_context_overflow(400, json.loads(text))
    assert is_context_overflow(400, _nested(levels, {"message": "prompt is too long"}))
    assert not is_context_overflow(400, _nested(levels, {"message": "bad key"}))
    assert not is_context_overflow(429, _nested(levels, {"message": "prompt is too long"}))


def test_an_error_body_that_holds_itself_is_answered() -> None:
    body: dict[str, Any] = {"message": "prompt is too long"}
    body["cause"] = body
    listed: list[Any] = ["input is too long"]
    listed.append(listed)
    assert is_context_overflow(400, body)
    assert is_context_overflow(None, listed)
    unrelated: dict[str, Any] = {"message": "bad key"}
    unrelated["cause"] = [unrelated]
    assert not is_context_overflow(400, unrelated)


def test_an_error_body_sharing_its_parts_is_read_once_each() -> None:
    # Each level holds the one below twice: 2**200 paths through 200 objects. Walked path by
    # path it never ends; each object is read once.
    body: Any = {"message": "bad gateway"}
    for _ in range(200):
        body = [body, body]
    assert not is_context_overflow(400, body)
    assert is_context_overflow(400, [body, "prompt is too long"])


def test_an_exception_whose_text_nests_too_deeply_is_answered() -> None:
    # str() of an exception holding a deep list recurses in repr; the SDK attributes still
    # decide.
    deep: Any = "x"
    for _ in range(5_000):
        deep = [deep]
    error = ValueError(deep)
    assert not is_context_overflow(error)
    error.status_code = 400  # type: ignore[attr-defined]
    error.body = _nested(5_000, {"code": "context_length_exceeded"})  # type: ignore[attr-defined]
    assert is_context_overflow(error)


def test_an_error_body_whose_str_raises_is_answered() -> None:
    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    assert not is_context_overflow(400, Broken())
    assert is_context_overflow(400, [Broken(), "prompt is too long"])
