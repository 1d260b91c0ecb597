"""`OpenAIChatModel`: a `ChatModel` for OpenAI and any OpenAI-compatible chat-completions server.

Works against api.openai.com and against local or hosted servers that speak the same wire
format (vLLM, llama.cpp's `llama-server`, Ollama, LM Studio, LiteLLM, OpenRouter, ...). The
`openai` package is an optional extra (`pip install 'ctxoffload[openai]'`) and is imported
only when a model is constructed, so `import ctxoffload` never pays for it.

Errors are mapped onto ctxoffload's own: a provider saying the prompt does not fit becomes
`ContextOverflowError` (so the agent can compress and retry), everything else `ModelError`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .._overflow import error_text, is_context_overflow
from ..exceptions import ConfigError, ContextOverflowError, ModelError
from ..messages import Msg
from ..model import ModelResponse, Usage

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "OpenAIChatModel",
    "known_context_window",
]

logger = logging.getLogger(__name__)

#: The window assumed for a model that is neither in the table nor given `context_window=`.
DEFAULT_CONTEXT_WINDOW = 128_000

#: Sent when `base_url` points at a server that ignores keys and none was given: the openai
#: client refuses to start without some key.
PLACEHOLDER_API_KEY = "not-needed"

# Context windows (input + output tokens) of common OpenAI models, from OpenAI's model pages.
# Looked up by prefix, longest first, so dated snapshots ("gpt-4o-2024-08-06") and suffixed
# variants ("gpt-4.1-mini") find their family; entries that would otherwise be shadowed by a
# shorter prefix ("gpt-4-turbo" under "gpt-4") are listed explicitly.
_CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-3.5-turbo": 16_385,
    # The first two gpt-3.5-turbo snapshots predate the 16k window.
    "gpt-3.5-turbo-0301": 4_096,
    "gpt-3.5-turbo-0613": 4_096,
    "gpt-3.5-turbo-instruct": 4_096,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4-1106": 128_000,
    "gpt-4-0125": 128_000,
    "gpt-4-vision": 128_000,
    "gpt-4.5": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o1-pro": 200_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o3-pro": 200_000,
    "o4-mini": 200_000,
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    # The ChatGPT-facing snapshots have the smaller window.
    "gpt-5-chat": 128_000,
    "gpt-5.1-chat": 128_000,
}

# What may follow a table prefix for the name to still belong to that family: "o1" must
# match "o1-2024-12-17" but not a local model called "o100".
_FAMILY_SEPARATORS = ("-", ".", ":", "@", "_")


def known_context_window(model_name: str) -> int | None:
    """The context window of a well-known model, or None when the name is not in the table.

    Matching is case-insensitive, ignores a routing prefix such as `openai/` (OpenRouter,
    LiteLLM), and picks the longest table entry that is a prefix of the name at a word
    boundary, so `gpt-4o-2024-08-06` is `gpt-4o` and `gpt-4.1-mini` is `gpt-4.1-mini`.

    Args:
        model_name: the provider's model name.

    Returns:
        The window in tokens, or None.
    """
    name = model_name.strip().lower().rsplit("/", 1)[-1]
    for prefix in sorted(_CONTEXT_WINDOWS, key=len, reverse=True):
        if name == prefix or (name.startswith(prefix) and name[len(prefix)] in _FAMILY_SEPARATORS):
            return _CONTEXT_WINDOWS[prefix]
    return None


def _rejects_response_format(error: BaseException | None) -> bool:
    """Whether an openai error is a server refusing the `json_schema` response_format."""
    status = getattr(error, "status_code", None)
    # 422 as well as 400: servers built on FastAPI report request-validation failures so.
    if status not in (400, 422):
        return False
    text = error_text([error, getattr(error, "body", None)]).lower()
    return "response_format" in text or "json_schema" in text


def _schema_name(schema: Mapping[str, Any]) -> str:
    # OpenAI requires the name to match ^[a-zA-Z0-9_-]{1,64}$.
    title = str(schema.get("title") or "response")
    return re.sub(r"[^A-Za-z0-9_-]", "_", title)[:64] or "response"


def _json_schema_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    # strict=False: strict mode demands additionalProperties=false and every property
    # required, which arbitrary user schemas (and pydantic's output) rarely satisfy.
    return {
        "type": "json_schema",
        "json_schema": {"name": _schema_name(schema), "schema": dict(schema), "strict": False},
    }


def _schema_instruction(schema: Mapping[str, Any]) -> str:
    # OpenAI's json_object mode also requires the word "JSON" somewhere in the messages.
    return (
        "Reply with a single JSON object and nothing else. The object must match this "
        f"JSON schema:\n{json.dumps(schema, ensure_ascii=False)}"
    )


def _with_schema_instruction(
    messages: list[dict[str, Any]], schema: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """A copy of `messages` whose system prompt ends with the schema instruction.

    The instruction is appended to the leading system message rather than sent as a new
    system message after the conversation, because the chat templates of many local
    models (served by vLLM or llama.cpp) reject a system message anywhere but first.
    """
    instruction = _schema_instruction(schema)
    result = [dict(message) for message in messages]
    if result and result[0].get("role") == "system":
        content = result[0].get("content")
        if isinstance(content, list):
            result[0]["content"] = [*content, {"type": "text", "text": instruction}]
        else:
            result[0]["content"] = f"{content}\n\n{instruction}" if content else instruction
    else:
        result.insert(0, {"role": "system", "content": instruction})
    return result


class OpenAIChatModel:
    """A `ChatModel` backed by the OpenAI chat-completions API or any compatible server.

    Example::

        async with OpenAIChatModel("gpt-4o-mini") as model:          # OPENAI_API_KEY
            reply = await model.generate([Msg(role="user", content="hi")])

        local = OpenAIChatModel(
            "qwen2.5-7b-instruct", base_url="http://127.0.0.1:8000/v1", context_window=32_768
        )

    The API key is `api_key`, else the `OPENAI_API_KEY` environment variable, else - when
    `base_url` (or `OPENAI_BASE_URL`) is set - the placeholder "not-needed", because local
    servers ignore the key but the openai client will not start without one. Note that an
    `OPENAI_API_KEY` in the environment is sent to `base_url` too, as the openai client
    itself does.

    The context window is `context_window` when given, else looked up in a table of
    well-known OpenAI models (see `known_context_window`). For any other model it is
    assumed to be `DEFAULT_CONTEXT_WINDOW` (128,000) and a warning is logged: pass
    `context_window=` for local models, whose window depends on how the server was started.

    Structured output (`response_schema`) is requested with `response_format` of type
    `json_schema` (non-strict). Servers that reject that with a 400 (or 422) mentioning
    `response_format` or `json_schema` are asked once more with `{"type": "json_object"}`
    and the schema written into the system prompt; the model then remembers that the
    server lacks `json_schema` and goes straight to `json_object` on later calls.

    Args:
        model_name: the model name the server expects.
        base_url: the server's base URL, for example `http://127.0.0.1:8000/v1`; None for
            OpenAI (or `OPENAI_BASE_URL`).
        api_key: the API key; see above for the fallbacks.
        context_window: the model's window in tokens; overrides the table.
        client: an `openai.AsyncOpenAI` to use instead of building one. `base_url`,
            `api_key` and `max_retries` are then ignored (`timeout` is still the deadline),
            and `aclose()` leaves the client open: whoever made it closes it.
        temperature: sampling temperature; None leaves the server's default.
        timeout: seconds after which one `generate` call is abandoned with `ModelError`: a
            deadline on the whole request (connecting, a reply that arrives slowly, and the
            client's retries), also given to the HTTP client as its per-read timeout. With
            `client=`, the deadline still applies.
        max_retries: how often the openai client retries connection errors, 408, 409, 429
            and 5xx responses (with backoff) before giving up.
        extra_body: extra JSON fields merged into every request body, for server-specific
            options (for example `{"top_k": 20}` for vLLM).
        images_in_tool_messages: send a tool result's images inside its `tool` message.
            False (the default): OpenAI's chat completions take only text in a tool message,
            so the images go in a `user` message right after the tool messages of that turn,
            and each tool message says so; the model sees them either way.

    Raises:
        ImportError: the `openai` package is not installed.
        ConfigError: `context_window` is not a positive integer, `timeout` is not a positive
            number, or no API key can be found for api.openai.com.
    """

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        context_window: int | None = None,
        client: Any = None,
        temperature: float | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        extra_body: dict[str, Any] | None = None,
        images_in_tool_messages: bool = False,
    ) -> None:
        try:
            import openai
        except ImportError as error:
            raise ImportError(
                "OpenAIChatModel needs the 'openai' package, which is an optional extra: "
                "pip install 'ctxoffload[openai]'"
            ) from error

        if context_window is not None and (
            isinstance(context_window, bool)
            or not isinstance(context_window, int)
            or context_window <= 0
        ):
            raise ConfigError(
                f"context_window {context_window!r} is not a positive number of tokens: "
                "pass the model's window, for example context_window=32_768"
            )
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not (0 < timeout < float("inf"))
        ):
            raise ConfigError(
                f"timeout {timeout!r} is not a positive number of seconds: pass the longest a "
                "model call may take, for example timeout=120"
            )
        self.model_name = model_name
        self.context_window = (
            context_window if context_window is not None else self._default_window(model_name)
        )
        self.temperature = temperature
        self.extra_body = dict(extra_body) if extra_body else None
        self.images_in_tool_messages = images_in_tool_messages
        self._timeout = timeout
        # Flipped the first time the server refuses json_schema, so later structured calls
        # do not pay for a request that is known to fail.
        self._supports_json_schema = True

        self._client: AsyncOpenAI
        if client is not None:
            self._client = client
            self._owns_client = False
            return
        resolved_base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        resolved_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if resolved_key is None and resolved_base_url is not None:
            resolved_key = PLACEHOLDER_API_KEY
        if resolved_key is None:
            raise ConfigError(
                f"OpenAIChatModel {model_name!r} has no API key for api.openai.com: pass "
                "api_key=, set OPENAI_API_KEY, or pass base_url= for a server that needs none"
            )
        self._client = openai.AsyncOpenAI(
            base_url=resolved_base_url,
            api_key=resolved_key,
            timeout=timeout,
            max_retries=max_retries,
        )
        self._owns_client = True

    @staticmethod
    def _default_window(model_name: str) -> int:
        window = known_context_window(model_name)
        if window is not None:
            return window
        # A log record rather than warnings.warn: test suites that run with warnings as
        # errors must still be able to build a model for a local server.
        logger.warning(
            "context window of model %r is unknown; assuming %d tokens. Pass "
            "context_window= to OpenAIChatModel with the real value.",
            model_name,
            DEFAULT_CONTEXT_WINDOW,
        )
        return DEFAULT_CONTEXT_WINDOW

    @property
    def base_url(self) -> str:
        """The base URL requests go to."""
        return str(self._client.base_url)

    def __repr__(self) -> str:
        return (
            f"OpenAIChatModel(model_name={self.model_name!r}, base_url={self.base_url!r}, "
            f"context_window={self.context_window})"
        )

    async def generate(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> ModelResponse:
        """Send `messages` to the chat-completions endpoint and return the reply.

        Args:
            messages: the context, oldest first; a system prompt, if any, comes first.
            tools: tools in the OpenAI function format,
                `{"type": "function", "function": {"name", "description", "parameters"}}`.
            response_schema: a JSON schema the reply's text must match.

        Returns:
            The assistant message (text and `ToolCallBlock` objects) and the reported usage.

        Raises:
            ContextOverflowError: the server says the prompt exceeds the context window.
            ModelError: any other failure: HTTP error, unreachable server, timeout, or a
                reply that cannot be read.
            InvalidContent: a message cannot be written in the OpenAI format (raised by
                `to_openai` before anything is sent).
        """
        from ..formats import to_openai

        sent = to_openai(messages)
        if not self.images_in_tool_messages:
            sent = images_after_tool_messages(sent)
        request: dict[str, Any] = {"model": self.model_name, "messages": sent}
        if tools:  # never `tools: []`, which OpenAI rejects as an empty array
            request["tools"] = list(tools)
        if self.temperature is not None:
            request["temperature"] = self.temperature
        if self.extra_body:
            request["extra_body"] = dict(self.extra_body)

        # One deadline for the whole call, the json_object fallback included.
        deadline = asyncio.get_running_loop().time() + self._timeout
        if response_schema is None:
            completion = await self._complete(request, deadline)
        elif self._supports_json_schema:
            try:
                completion = await self._complete(
                    {**request, "response_format": _json_schema_format(response_schema)},
                    deadline,
                )
            except ContextOverflowError:
                raise
            except ModelError as error:
                if not _rejects_response_format(error.__cause__):
                    raise
                self._supports_json_schema = False
                logger.info(
                    "%s rejected response_format json_schema (%s); retrying with json_object "
                    "and the schema in the system prompt",
                    self.base_url,
                    error.__cause__,
                )
                completion = await self._complete(
                    _json_object_request(request, response_schema), deadline
                )
        else:
            completion = await self._complete(
                _json_object_request(request, response_schema), deadline
            )
        try:
            return self._to_response(completion)
        except ModelError:
            raise
        except Exception as error:
            # A 200 whose body is not a chat completion (a proxy's page, a cut body, a field
            # of the wrong type): the reply cannot be read, which is a ModelError like any.
            raise ModelError(
                f"model {self.model_name!r} at {self.base_url} returned a reply that cannot "
                f"be read ({type(error).__name__}: {str(error)[:300]})"
            ) from error

    async def _complete(self, request: dict[str, Any], deadline: float) -> ChatCompletion:
        """One chat-completions call before `deadline` (event-loop time), errors mapped."""
        import openai

        remaining = max(0.0, deadline - asyncio.get_running_loop().time())

        try:
            # The client's own timeout is per socket read, so a server that drips its reply
            # a byte at a time, or fails slowly enough to be retried, never trips it: the
            # deadline bounds the whole call, retries included.
            completion: ChatCompletion = await asyncio.wait_for(
                self._client.chat.completions.create(**request), remaining
            )
        except asyncio.TimeoutError as error:
            raise ModelError(
                f"model {self.model_name!r} at {self.base_url} did not answer within "
                f"{self._timeout:g} s (status: timeout, the whole call including retries): "
                "raise timeout= or check the server"
            ) from error
        except openai.APIStatusError as error:
            provider_message = _provider_message(error)
            if is_context_overflow(error):
                raise ContextOverflowError(
                    f"model {self.model_name!r} at {self.base_url}: the prompt exceeds the "
                    f"context window (HTTP {error.status_code}): {provider_message}. Compress "
                    "the context or set context_window= to the server's real window"
                ) from error
            raise ModelError(
                f"model {self.model_name!r} at {self.base_url} failed with HTTP "
                f"{error.status_code}: {provider_message}"
            ) from error
        except openai.APITimeoutError as error:
            raise ModelError(
                f"model {self.model_name!r} at {self.base_url} did not answer within "
                f"{self._timeout:g} s (status: timeout): raise timeout= or check the server"
            ) from error
        except openai.APIConnectionError as error:
            cause = error.__cause__ or error.__context__
            detail = f": {cause}" if cause is not None else ""
            raise ModelError(
                f"model {self.model_name!r} at {self.base_url} is unreachable (status: "
                f"connection error{detail}): check that the server runs and base_url is right"
            ) from error
        except openai.OpenAIError as error:
            raise ModelError(
                f"model {self.model_name!r} at {self.base_url} failed: {error}"
            ) from error
        except ValueError as error:  # a body that is not JSON (the client decodes it raw)
            raise ModelError(
                f"model {self.model_name!r} at {self.base_url} returned a body that is not "
                f"JSON ({str(error)[:300]}): is base_url an OpenAI-compatible server?"
            ) from error
        return completion

    def _to_response(self, completion: ChatCompletion) -> ModelResponse:
        """Turn a chat completion into a `ModelResponse` through `from_openai`."""
        from ..formats import from_openai

        if not completion.choices:
            raise ModelError(
                f"model {self.model_name!r} at {self.base_url} returned no choices: "
                f"{completion.model_dump_json()[:500]}"
            )
        choice = completion.choices[0]
        # Unset optional fields (refusal, audio, function_call, ...) are left out so they are
        # not echoed back to servers that reject them; content stays, as null, because that
        # is how every server spells "tool calls only".
        wire_message = choice.message.model_dump(mode="json", exclude_none=True)
        wire_message.setdefault("content", None)
        try:
            parsed = from_openai([wire_message])
        except (ValueError, TypeError, KeyError) as error:
            raise ModelError(
                f"model {self.model_name!r} at {self.base_url} returned a message that "
                f"cannot be read ({error}): {json.dumps(wire_message)[:500]}"
            ) from error
        if len(parsed) != 1:
            raise ModelError(
                f"model {self.model_name!r} at {self.base_url} returned a message that became "
                f"{len(parsed)} messages instead of one: {json.dumps(wire_message)[:500]}"
            )
        message = parsed[0]
        if choice.finish_reason:
            # Kept so callers can tell a reply cut at max_tokens ("length") from a full one.
            message.metadata.setdefault("finish_reason", choice.finish_reason)
        usage = None
        if completion.usage is not None:
            details = getattr(completion.usage, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None)
            usage = Usage(
                input_tokens=_tokens(getattr(completion.usage, "prompt_tokens", None)),
                output_tokens=_tokens(getattr(completion.usage, "completion_tokens", None)),
                cached_input_tokens=cached if isinstance(cached, int) else None,
            )
        return ModelResponse(message=message, usage=usage)

    async def aclose(self) -> None:
        """Close the HTTP client, unless it was passed in as `client=`."""
        if self._owns_client:
            await self._client.close()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def _json_object_request(request: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **request,
        "messages": _with_schema_instruction(request["messages"], schema),
        "response_format": {"type": "json_object"},
    }


def _provider_message(error: Any, limit: int = 1_000) -> str:
    """The provider's own error message: `body["message"]` when present, else the text.

    Cut at `limit` characters: a proxy's HTML error page should not flood a log line.
    """
    body = getattr(error, "body", None)
    message = str(getattr(error, "message", "") or error)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            message = str(inner["message"])
    elif isinstance(body, str) and body:
        message = body
    return message if len(message) <= limit else message[:limit] + "…"


def images_after_tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Move the images of `tool` messages into one `user` message after each run of them.

    OpenAI's chat completions accept only text in a tool message, and every tool message of
    a turn must directly follow the assistant message that made the calls; so the images
    wait until the run of tool messages ends. Each tool message keeps its text and says
    where its images went.
    """
    out: list[dict[str, Any]] = []
    waiting: list[dict[str, Any]] = []  # the user message's parts, while tool messages run
    for message in messages:
        content = message.get("content")
        if message.get("role") == "tool" and isinstance(content, list):
            images = [p for p in content if isinstance(p, dict) and p.get("type") == "image_url"]
            if images:
                call = message.get("tool_call_id", "?")
                note = f"[{len(images)} image(s) of this result follow in the next user message]"
                text = [p for p in content if p not in images] + [{"type": "text", "text": note}]
                out.append({**message, "content": text})
                waiting.append({"type": "text", "text": f"Image(s) from tool call {call}:"})
                waiting.extend(images)
                continue
        if waiting and message.get("role") != "tool":
            out.append({"role": "user", "content": waiting})
            waiting = []
        out.append(message)
    if waiting:
        out.append({"role": "user", "content": waiting})
    return out


def _tokens(value: Any) -> int:
    """A token count a server reported, as a whole number: 0 for what is none (a string, a
    list, a negative or non-finite number), a float rounded; the reply is still read."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return max(0, round(value))
    return 0
