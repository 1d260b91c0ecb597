"""The HTTP client the proxy reaches a wrapped server by URL with: its answers read again.

Over streamable HTTP the SDK parses a JSON body, or each event of an event stream, inside its
transport and fails the request with -32700 when pydantic refuses it: the refused text never
reaches the proxy (unlike stdio's, `ctxoffload.mcp._reread`). The SDK takes the HTTP client
it is given, so the proxy gives one whose answers (JSON and event streams, each decoded from
its Content-Encoding) pass through `LoneSurrogateEscapes` on their way in: the SDK parses
them with each lone surrogate escape already `\\ufffd`, as a stdio line read again would be.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ._reread import LoneSurrogateEscapes

__all__ = ["answers_client"]

_CONNECT_SECONDS = 30.0
"""How long connecting (and writing a request) may take: the SDK's own default client's."""

_READ_SECONDS = 300.0
"""The SDK's own default client's read timeout (an event stream may stay quiet that long)."""

_REREAD_TYPES = ("application/json", "text/event-stream")
"""The answers that carry JSON-RPC messages."""


def answers_client(httpx: Any, timeout: float) -> Any:
    """An `httpx2.AsyncClient` (the SDK's HTTP library) whose JSON answers come with their lone
    surrogate escapes replaced; otherwise as the SDK's own default client.

    Args:
        httpx: the `httpx2` module.
        timeout: the proxy's deadline per request: reading waits at least that long.
    """
    stream_class = _rereading_stream_class(httpx)

    async def reread_answer(response: Any) -> None:
        content_type = response.headers.get("content-type", "").lower()
        if not content_type.startswith(_REREAD_TYPES):
            return
        # The body as it came (its Content-Encoding decoded by httpx), read through the rule;
        # the response then holds the decoded text, so it no longer says an encoding.
        encoded = httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=response.stream,
            request=response.request,
        )
        response.stream = stream_class(encoded)
        if "content-encoding" in response.headers:
            del response.headers["content-encoding"]
            response.headers.pop("content-length", None)

    return httpx.AsyncClient(
        timeout=httpx.Timeout(_CONNECT_SECONDS, read=max(_READ_SECONDS, timeout + 1)),
        event_hooks={"response": [reread_answer]},
    )


def _rereading_stream_class(httpx: Any) -> type:
    """The byte stream that gives a response's decoded body through `LoneSurrogateEscapes`,
    built on `httpx2.AsyncByteStream` (which httpx requires of a response's stream)."""

    class RereadingStream(httpx.AsyncByteStream):  # type: ignore[misc]
        def __init__(self, encoded: Any) -> None:
            self._encoded = encoded

        async def __aiter__(self) -> AsyncIterator[bytes]:
            escapes = LoneSurrogateEscapes()
            async for piece in self._encoded.aiter_bytes():
                settled = escapes.feed(piece)
                if settled:
                    yield settled
            rest = escapes.end()
            if rest:
                yield rest

        async def aclose(self) -> None:
            await self._encoded.aclose()

    return RereadingStream
