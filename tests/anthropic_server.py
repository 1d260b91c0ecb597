"""A real Anthropic Messages API server on loopback, scripted by the test.

It answers `POST /v1/messages` over real HTTP, as a stream of server-sent events when the
request asks for one (`"stream": true`, what Claude Code sends) and as one JSON message
otherwise, so the tests run the real Claude Code CLI against it end to end. A test queues the
replies (`add_tool_use`, `add_text`) and reads back every request body (`requests`).

    with AnthropicServer() as server:
        server.add_tool_use("Bash", {"command": "seq 1 10"}, tool_use_id="toolu_1")
        server.add_text("Done.")
        ...  # ANTHROPIC_BASE_URL=server.base_url
        assert server.message_requests[1]["messages"][-1]["content"][0]["type"] == "tool_result"

Wire format: https://docs.anthropic.com/en/api/messages and
https://docs.anthropic.com/en/api/messages-streaming (message_start, content_block_start,
content_block_delta, content_block_stop, message_delta, message_stop).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

from loopback import LoopbackHandler, LoopbackServer

__all__ = ["AnthropicServer", "stream_events"]

MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"


def stream_events(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The server-sent events that stream `message` (a Messages API response body), in order.

    Text goes out as one `text_delta`, a tool call's input as one `input_json_delta`.
    """
    usage = message["usage"]
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                **message,
                "content": [],
                "stop_reason": None,
                "usage": {**usage, "output_tokens": 1},
            },
        },
    )
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        yield (
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": delta},
        )
        yield ("content_block_stop", {"type": "content_block_stop", "index": index})
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield ("message_stop", {"type": "message_stop"})


class _Handler(LoopbackHandler):
    def do_GET(self) -> None:
        self.server.owner.record("GET", self.path, None)
        self._send_json(404, _error("not_found_error", f"no route GET {self.path}"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        status, reply = self.server.owner.record("POST", self.path, body)
        try:
            if status == 200 and isinstance(body, dict) and body.get("stream"):
                self._send_stream(reply)
            else:
                self._send_json(status, reply)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send_json(self, status: int, reply: Any) -> None:
        payload = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _send_stream(self, message: dict[str, Any]) -> None:
        payload = b"".join(
            f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            for name, data in stream_events(message)
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


class AnthropicServer(LoopbackServer):
    """A scripted Messages API server on 127.0.0.1, on an ephemeral port.

    Replies to `POST /v1/messages` are played in order; when the queue is empty the server
    answers 400 with a message saying so, which makes a request the script did not expect fail
    loudly. `POST /v1/messages/count_tokens` is answered with a count (a quarter of the body's
    length) and takes nothing from the queue.

    Attributes:
        requests: every (method, path, JSON body) received, oldest first.
        responder: asked first with each messages request body, when set; a reply it returns
            answers instead of the queue (for clients that run at once); one it raises on is
            answered 400, which the client reports without retrying.
    """

    handler = _Handler
    thread_name = "anthropic-test-server"

    def __init__(self, model: str = "claude-test-model") -> None:
        super().__init__()
        self.model = model
        self.requests: list[tuple[str, str, Any]] = []
        self._queue: list[dict[str, Any]] = []
        self._replies = 0
        self._lock = threading.Lock()
        # Asked first with each messages request body; a reply it returns (from `text_reply`
        # or `tool_use_reply`) answers instead of the queue, for clients that run at once.
        self.responder: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None

    @property
    def base_url(self) -> str:
        """The URL for ANTHROPIC_BASE_URL (no `/v1`: the clients add it)."""
        return self.origin

    @property
    def message_requests(self) -> list[dict[str, Any]]:
        """The bodies of the `POST /v1/messages` requests, oldest first."""
        with self._lock:
            return [
                body
                for method, path, body in self.requests
                if method == "POST" and path.split("?")[0] == MESSAGES
            ]

    def _message(self, content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
        with self._lock:
            self._replies += 1
            number = self._replies
        return {
            "id": f"msg_test_{number:04d}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        }

    def text_reply(self, text: str) -> dict[str, Any]:
        """A reply that ends the turn with `text`."""
        return self._message([{"type": "text", "text": text}], "end_turn")

    def tool_use_reply(
        self, name: str, tool_input: dict[str, Any], *, tool_use_id: str
    ) -> dict[str, Any]:
        """A reply that calls the tool `name` with `tool_input`."""
        block = {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input}
        return self._message([block], "tool_use")

    def add_text(self, text: str) -> None:
        """Queue a reply that ends the turn with `text`."""
        reply = self.text_reply(text)
        with self._lock:
            self._queue.append(reply)

    def add_tool_use(self, name: str, tool_input: dict[str, Any], *, tool_use_id: str) -> None:
        """Queue a reply that calls the tool `name` with `tool_input`."""
        reply = self.tool_use_reply(name, tool_input, tool_use_id=tool_use_id)
        with self._lock:
            self._queue.append(reply)

    @property
    def remaining(self) -> int:
        """How many queued replies have not been served."""
        with self._lock:
            return len(self._queue)

    def record(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        """Record one request and pick its (status, reply) (called from handler threads)."""
        route = path.split("?")[0]
        with self._lock:
            self.requests.append((method, path, body))
            if method == "POST" and route == COUNT_TOKENS:
                return 200, {"input_tokens": max(1, len(json.dumps(body)) // 4)}
            if method != "POST" or route != MESSAGES or not isinstance(body, dict):
                return 404, _error("not_found_error", f"no route {method} {path}")
            responder = self.responder
        if responder is not None:
            try:
                answer = responder(body)
            except Exception as exc:  # a 400: the client says it and does not retry
                return 400, _error("invalid_request_error", f"AnthropicServer: {exc!r}")
            if answer is not None:
                return 200, answer
        with self._lock:
            if not self._queue:
                return 400, _error(
                    "invalid_request_error", "AnthropicServer: no scripted reply left"
                )
            return 200, self._queue.pop(0)
