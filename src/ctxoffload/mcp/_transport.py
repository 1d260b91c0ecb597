"""The wrapped server's transport, watched: the proxy learns when the connection itself ended.

The SDK fails a request whose connection closed with an `MCPError` of code -32000
(`CONNECTION_CLOSED`), the code JSON-RPC leaves to any server for its own errors too (a server
saying "rate limited" may send it), so the code cannot say that the server is gone. The
streams can: the connection ended when the SDK stopped reading the server's messages (their
stream ended, or the transport failed and took the reader down) or the stream to the server
broke. `WatchedTransport` wraps the SDK's transport and says so; it also gives each line the
SDK's parser refused to `reread` (`ctxoffload.mcp._reread`) on its way in.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

__all__ = ["WatchedTransport"]


class WatchedTransport:
    """An SDK transport (an async context manager giving a read and a write stream) that
    calls `on_end` once its connection ended.

    Args:
        transport: the SDK's transport (`stdio_client(...)`, `streamable_http_client(...)`).
        anyio: the async library the SDK runs on (its stream errors).
        on_end: called, without arguments, when a stream ends or breaks (more than once is
            harmless).
        reread: given each item the server's stream gives; what it returns goes on instead.
    """

    def __init__(
        self,
        transport: Any,
        anyio: Any,
        on_end: Callable[[], None],
        reread: Callable[[Any], Any],
    ) -> None:
        self._transport = transport
        self._ends = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError)
        self._on_end = on_end
        self._reread = reread

    async def __aenter__(self) -> tuple[_Reads, _Writes]:
        read_stream, write_stream = await self._transport.__aenter__()
        return _Reads(read_stream, self._ends, self._on_end, self._reread), _Writes(
            write_stream, self._ends, self._on_end
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._transport.__aexit__(exc_type, exc, traceback)
        return result


class _Reads:
    """The stream of the server's messages, as the SDK reads it (`ReadStream`)."""

    def __init__(
        self,
        stream: Any,
        ends: tuple[type[BaseException], ...],
        on_end: Callable[[], None],
        reread: Callable[[Any], Any],
    ) -> None:
        self._stream = stream
        self._ends = ends
        self._on_end = on_end
        self._reread = reread

    @property
    def last_context(self) -> Any:
        # The SDK reads the sender's context from a stream that carries one.
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self._stream.receive()
        except self._ends:
            self._on_end()
            raise
        return self._reread(item)

    async def aclose(self) -> None:
        # The SDK closes this stream when it stops reading the server (the stream ended, or
        # the transport failed and cancelled its reader), before it fails the requests in
        # flight: said first, so they find the connection ended.
        self._on_end()
        await self._stream.aclose()

    def __aiter__(self) -> _Reads:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except self._ends[0]:  # EndOfStream: the iteration's end
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _Reads:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Writes:
    """The stream to the server, as the SDK writes it (`WriteStream`)."""

    def __init__(
        self, stream: Any, ends: tuple[type[BaseException], ...], on_end: Callable[[], None]
    ) -> None:
        self._stream = stream
        self._ends = ends
        self._on_end = on_end

    async def send(self, item: Any, /) -> None:
        try:
            await self._stream.send(item)
        except self._ends:
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _Writes:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
