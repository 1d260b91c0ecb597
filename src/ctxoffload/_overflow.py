"""Telling a provider's context-window error from any other error: `is_context_overflow`.

Its one home: ctxoffload's own model adapters call it to raise `ContextOverflowError`, and a
host that keeps its own history (LangChain, deepagents, pydantic-ai, a loop of one's own)
calls it from its reactive compaction, the retry that compresses the context and sends it
again. That retry helps only when the prompt did not fit: on a rate limit, a server fault or
a bad key it would throw history away for nothing, so those never count.

No SDK is imported: an exception is read by the attributes the openai and anthropic SDKs
(and the wrappers built on them) give it, `status_code`, `body` and `message`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import TypeGuard, overload

from .exceptions import ContextOverflowError, ModelError

__all__ = ["error_text", "is_context_overflow"]

# Phrases providers use when a prompt does not fit, each naming the context, the prompt or
# its length, so that a rate limit's "tokens per minute" does not match.
_OVERFLOW_PATTERNS = re.compile(
    "|".join(
        [
            r"context[_ ]length[_ ]exceeded",  # OpenAI, Groq, LiteLLM: the error code
            r"maximum context length",  # OpenAI, vLLM, Mistral, DeepSeek, OpenRouter
            r"prompt is too long",  # Anthropic and Anthropic-compatible proxies
            r"request_too_large",  # Anthropic's 413: the request is over 32 MB
            r"exceed (your )?context limit",  # Anthropic: input and max_tokens over the window
            r"prompt too long",  # Ollama
            r"exceeded max context length",  # Ollama
            r"too many tokens",  # several gateways
            r"token limit exceeded",  # several gateways
            r"exceeded model token limit",  # Kimi
            r"exceed_context_size",  # llama.cpp: the error type
            r"exceeds? (the )?(available )?context (size|window|length|limit)",  # llama.cpp, ...
            r"context window exceeds limit",  # MiniMax
            r"context[_ ]?window[_ ]?exceeded",  # LiteLLM's ContextWindowExceededError, z.ai
            r"context limit exceeded",
            r"greater than the context length",  # LM Studio
            r"longer than the (model'?s |maximum )?(context|model) length",  # Together AI, vLLM
            r"input tokens exceed the configured limit",  # OpenAI's Responses API
            r"input token count .{0,40}exceeds the maximum",  # Gemini's OpenAI endpoint
            r"exceeds the maximum number of tokens allowed",  # Gemini
            r"prompt token count .{0,40}exceeds the limit",  # GitHub Copilot
            r"exceeds the maximum allowed input length",  # OpenRouter (Poolside)
            r"maximum prompt length",  # xAI
            r"input is too long",  # Bedrock and Bedrock-style proxies
            r"reduce the length of the messages",  # OpenAI's hint sentence
        ]
    ),
    re.IGNORECASE,
)

# A rate limit can name tokens and be too large ("Request too large for gpt-4o ... on tokens
# per min (TPM)", Bedrock's "Too many tokens, please wait before trying again"); with no
# status to tell, its wording does.
_RATE_LIMIT_PATTERNS = re.compile(
    r"rate[_ ]limit|per min(ute)?\b|\b[TR]PM\b|quota|throttl|too many requests|please wait",
    re.IGNORECASE,
)

# 4xx statuses that are never an overflow: a bad key, an unpaid bill, a forbidden model, an
# unknown one, a request that timed out, a rate limit.
_NEVER_AN_OVERFLOW = frozenset({401, 402, 403, 404, 408, 429})

# Exception classes that are overflows by their name alone, whichever package defines them:
# ctxoffload's and langchain-core's `ContextOverflowError` (langchain-openai and
# langchain-anthropic raise subclasses of it), LiteLLM's `ContextWindowExceededError`,
# Strands' `ContextWindowOverflowException`.
_OVERFLOW_CLASS_NAMES = frozenset(
    {
        "ContextOverflowError",
        "ContextWindowExceededError",
        "ContextWindowOverflowException",
        "ModelContextWindowExceededError",  # pydantic-ai
    }
)


@overload
def is_context_overflow(error: BaseException, /) -> bool: ...


@overload
def is_context_overflow(status: int | None, body: object, /) -> bool: ...


def is_context_overflow(error_or_status: BaseException | int | None, *body: object) -> bool:
    """Whether an error says the prompt is larger than the model's context window.

    Call it with the exception a model call raised, `is_context_overflow(error)`, or with
    what came over the wire, `is_context_overflow(status, body)`. It is True for OpenAI's
    `context_length_exceeded` code, the wordings of OpenAI-compatible servers (vLLM's "This
    model's maximum context length is 4096 tokens", llama.cpp's "the request exceeds the
    available context size", LiteLLM's `ContextWindowExceededError`, Ollama's "prompt too
    long", Gemini's "input token count ... exceeds the maximum"), Anthropic's "prompt is
    too long: N tokens > M maximum" and its 413 `request_too_large`. It is False for
    everything else, and always for a rate limit (429, or "tokens per minute" wording), a
    server fault (5xx) and an auth or billing error (401, 402, 403). It answers for any
    body, in bounded time and memory (see `error_text`): never a RecursionError, whatever
    the nesting.

    An exception is read without importing any SDK: the class of ctxoffload's, LangChain's,
    LiteLLM's or Strands' overflow error (by name; any other `ModelError` of ctxoffload's is
    not an overflow, its model adapter having decided so), else its `status_code` (or
    `status`) and its `body`, `message` and text, as the openai and anthropic SDKs'
    `APIStatusError` and the wrappers built on them carry. A wrapper's `__cause__` is not
    followed: pass the provider's error itself.

    Args:
        error_or_status: the exception; or the HTTP status, None when unknown.
        *body: with a status, the error body: a mapping such as `{"error": {...}}` or the
            inner error object (nested in lists or not), the message text, or raw bytes.

    Returns:
        True when the error is a context overflow.

    Raises:
        TypeError: neither an exception alone nor a status and a body was given.
    """
    if isinstance(error_or_status, BaseException) and not body:
        return _exception_is_overflow(error_or_status)
    if (error_or_status is None or _is_status(error_or_status)) and len(body) == 1:
        return _says_overflow(error_or_status, body[0])
    raise TypeError(
        f"is_context_overflow takes an exception, or a status and a body, not "
        f"{type(error_or_status).__name__} and {len(body)} more: call "
        "is_context_overflow(error) or is_context_overflow(status, body)"
    )


_MOST_TEXT = 1 << 20
"""Characters of an error body read: a provider's error is a few hundred; a gateway that
echoes the whole prompt back is read no further than this."""

_MOST_VALUES = 100_000
"""Values of an error body visited (strings, numbers, objects, lists)."""


def error_text(body: object) -> str:
    """All the strings of an error body, joined, so its code, type and message are all read.

    The body is walked without recursion (a gateway's JSON may nest hundreds of levels), each
    object once (one that holds itself, or shares its parts, is read once per object), and
    no further than `_MOST_TEXT` characters and `_MOST_VALUES` values: any body costs
    bounded time and memory, and a value whose `str()` raises reads as nothing.

    Args:
        body: a mapping, a list, a string, raw bytes, None or anything with a `str()`.

    Returns:
        The text, empty for None.
    """
    parts: list[str] = []
    size = 0
    seen: set[int] = set()
    stack: list[object] = [body]
    visited = 0
    while stack and size < _MOST_TEXT and visited < _MOST_VALUES:
        value = stack.pop()
        visited += 1
        if isinstance(value, (Mapping, list, tuple)):
            if id(value) in seen:
                continue
            seen.add(id(value))
            values = value.values() if isinstance(value, Mapping) else value
            # Pushed in reverse, so the stack pops them in order.
            stack.extend(reversed(list(itertools.islice(values, _MOST_VALUES))))
            continue
        text = _text_of(value)[: _MOST_TEXT - size]
        if text:
            parts.append(text)
            size += len(text)
    return " ".join(parts)


def _text_of(value: object) -> str:
    """One leaf of an error body as text: "" for None, or for a value whose `str()` raises
    (a repr that recurses past the stack, a broken `__str__`)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value[:_MOST_TEXT]).decode("utf-8", errors="replace")
    try:
        return str(value)
    except Exception:
        return ""


def _is_status(value: object) -> TypeGuard[int]:
    # bool is an int to Python, never a status.
    return isinstance(value, int) and not isinstance(value, bool)


def _exception_is_overflow(error: BaseException) -> bool:
    if any(cls.__name__ in _OVERFLOW_CLASS_NAMES for cls in type(error).__mro__):
        return True
    if isinstance(error, ModelError):
        # ctxoffload's own model adapters decided with the status in hand, which their
        # message alone no longer carries ("HTTP 500: maximum context length while ...").
        return isinstance(error, ContextOverflowError)
    return _says_overflow(
        _status_of(error),
        [getattr(error, "body", None), getattr(error, "message", None), error],
    )


def _status_of(error: BaseException) -> int | None:
    """The HTTP status an exception carries: the SDKs' `status_code`, or `status`, or its
    `response`'s; None when it carries none."""
    for holder in (error, getattr(error, "response", None)):
        for attribute in ("status_code", "status"):
            value = getattr(holder, attribute, None)
            if _is_status(value):
                return value
    return None


def _says_overflow(status: int | None, body: object) -> bool:
    if status is not None and not (400 <= status < 500 and status not in _NEVER_AN_OVERFLOW):
        return False
    text = error_text(body)
    return _OVERFLOW_PATTERNS.search(text) is not None and not _RATE_LIMIT_PATTERNS.search(text)
