"""A scripted HTTP server on 127.0.0.1, the base of the test servers that play a provider's API
(tests/openai_server.py, tests/anthropic_server.py): an ephemeral port, a serving thread,
keep-alive connections tracked so that `stop` wakes and joins every handler thread (none
outlives the test), and a context manager.

A subclass names its request handler (`handler`, a `LoopbackHandler`) and the thread's name,
and implements what the handler asks of its owner (`server.owner`).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Self

__all__ = ["LoopbackHandler", "LoopbackServer"]


class LoopbackHandler(BaseHTTPRequestHandler):
    """A request handler whose connection the server tracks (HTTP/1.1, so a client keeps its
    connection alive, as it would against a real server), silent on stderr."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        # Silence the per-request stderr line; the tests assert on the recorded requests.
        pass


class _Server(ThreadingHTTPServer):
    # Handler threads are joined in server_close() so none outlives the test.
    daemon_threads = False

    def __init__(self, owner: Any, handler: type[LoopbackHandler]) -> None:
        self.owner = owner
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), handler)

    def track(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.add(connection)

    def untrack(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.discard(connection)

    def drop_connections(self) -> None:
        # Keep-alive handlers block reading the next request; shutting their sockets down
        # wakes them with EOF so server_close() can join them.
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class LoopbackServer:
    """Serve `handler` on 127.0.0.1, on an ephemeral port, in a background thread.

    Attributes:
        stopping: set when `stop` begins, so handlers that wait (a delayed reply) give up.
    """

    handler: ClassVar[type[LoopbackHandler]]
    thread_name: ClassVar[str] = "loopback-test-server"

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def origin(self) -> str:
        """`http://127.0.0.1:PORT`."""
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not running: call start() first")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        """Bind an ephemeral port and serve in a background thread."""
        self._server = _Server(self, self.handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, drop open connections, and join every thread."""
        if self._server is None:
            return
        self.stopping.set()
        self._server.shutdown()
        self._server.drop_connections()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
