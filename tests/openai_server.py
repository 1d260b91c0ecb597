"""A real OpenAI-compatible server on loopback, scripted by the test.

The server speaks the wire format of `POST /v1/chat/completions` and of the Responses API's
`POST /v1/responses` over real HTTP, so the tests exercise the real `openai` client end to
end: its request encoding, its retries and its error classes. A request with `"stream": true`
is answered with server-sent events (chat chunks, `stream_chunks`; Responses events,
`response_events`). A test queues the replies (`add_completion`, `add_response`, `add_error`,
`add`) and reads back every request body the client sent (`requests`).

    with OpenAIServer() as server:
        server.add_completion("hello", usage=(12, 3))
        ...  # point a client at server.base_url
        assert server.requests[0]["messages"][0]["content"] == "hi"
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from loopback import LoopbackHandler, LoopbackServer

__all__ = [
    "OpenAIServer",
    "ScriptedReply",
    "chat_completion",
    "closed_port_url",
    "function_call_item",
    "message_item",
    "response_events",
    "responses_reply",
    "stream_chunks",
]

ROUTES = ("/v1/chat/completions", "/v1/responses")


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted HTTP reply.

    Args:
        status: the HTTP status code.
        body: the JSON body.
        delay: seconds to wait before answering (to provoke client timeouts).
        drip: when set, the headers go out at once and the body follows one byte every
            `drip` seconds (a server that is alive but too slow, which per-read socket
            timeouts never catch).
    """

    status: int
    body: Any
    delay: float = 0.0
    drip: float | None = None


def chat_completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: tuple[int, int] | None = (10, 5),
    finish_reason: str | None = None,
    model: str = "test-model",
    message_extra: Mapping[str, Any] | None = None,
    cached_tokens: int | None = None,
) -> dict[str, Any]:
    """Build a `chat.completion` response body the way OpenAI-compatible servers return it.

    Args:
        content: the assistant's text (None when it only calls tools).
        tool_calls: OpenAI `tool_calls` entries; `arguments` must already be a JSON string.
        usage: (prompt_tokens, completion_tokens), or None to leave usage out.
        finish_reason: defaults to "tool_calls" when there are tool calls, else "stop".
        model: the model name echoed back.
        message_extra: extra keys for the message (for example `reasoning_content`).
        cached_tokens: the prompt tokens the provider's cache served
            (`usage.prompt_tokens_details.cached_tokens`); None leaves the details out.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    message.update(message_extra or {})
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
    }
    if usage is not None:
        prompt_tokens, completion_tokens = usage
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if cached_tokens is not None:
            body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return body


def responses_reply(
    output: list[dict[str, Any]],
    *,
    usage: tuple[int, int] | None = (10, 5),
    model: str = "test-model",
    response_id: str = "resp_test",
) -> dict[str, Any]:
    """Build a Responses-API `response` body (`POST /v1/responses`) holding `output`.

    Wire format: https://platform.openai.com/docs/api-reference/responses/object.

    Args:
        output: the output items as the API gives them (`message`, `function_call`,
            `compaction`, `reasoning`, ...).
        usage: (input_tokens, output_tokens), or None to leave usage out.
        model: the model name echoed back.
        response_id: the response's id.
    """
    body: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    if usage is not None:
        input_tokens, output_tokens = usage
        body["usage"] = {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        }
    return body


def function_call_item(name: str, arguments: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    """A Responses-API `function_call` output item calling `name` with `arguments`."""
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(dict(arguments)),
        "status": "completed",
    }


def message_item(text: str) -> dict[str, Any]:
    """A Responses-API assistant `message` output item saying `text`."""
    return {
        "type": "message",
        "id": "msg_test",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def response_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The server-sent events that stream `response` (a `responses_reply` body), in order:
    `response.created`, each output item added (a `compaction` item announced by
    `response.compaction.compacting`, as the API does while it samples one) and done, then
    `response.completed` with the whole response.

    Wire format: https://platform.openai.com/docs/api-reference/responses-streaming.
    """
    events: list[dict[str, Any]] = [
        {
            "type": "response.created",
            "response": {**response, "status": "in_progress", "output": [], "usage": None},
        }
    ]
    for index, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        if item.get("type") == "compaction":
            events.append(
                {
                    "type": "response.compaction.compacting",
                    "item_id": item.get("id", ""),
                    "output_index": index,
                }
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [{**event, "sequence_number": number} for number, event in enumerate(events)]


def closed_port_url() -> str:
    """A base URL on loopback where nothing listens (a port bound and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class _Handler(LoopbackHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        # Header names are case-insensitive; lower-case them so tests can index reliably.
        headers = {name.lower(): value for name, value in self.headers.items()}
        reply = self.server.owner.record(self.path, headers, body)
        if reply.delay and self.server.owner.stopping.wait(reply.delay):
            self.close_connection = True
            return
        asked_stream = isinstance(body, dict) and body.get("stream") is True
        chat = isinstance(reply.body, dict) and bool(reply.body.get("choices"))
        if asked_stream and reply.status == 200 and chat:
            self._send_stream(reply.body)
            return
        streamed = asked_stream and reply.status == 200 and self.path.rstrip("/") == "/v1/responses"
        if streamed:
            payload = b"".join(
                f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
                for event in response_events(reply.body)
            )
        else:
            payload = json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            self.send_header(
                "Content-Type", "text/event-stream" if streamed else "application/json"
            )
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if reply.drip is None:
                self.wfile.write(payload)
                return
            for index in range(len(payload)):
                self.wfile.write(payload[index : index + 1])
                self.wfile.flush()
                if self.server.owner.stopping.wait(reply.drip):
                    self.close_connection = True
                    return
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (a timeout test); nothing to answer.
            self.close_connection = True

    def _send_stream(self, completion: dict[str, Any]) -> None:
        """`completion` as the server-sent events of a streamed request (`stream_chunks`)."""
        payload = b"".join(
            f"data: {json.dumps(chunk)}\n\n".encode() for chunk in stream_chunks(completion)
        )
        payload += b"data: [DONE]\n\n"
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def stream_chunks(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """The `chat.completion.chunk`s that stream `completion` (a `chat_completion` body): the
    role and text in one delta, each tool call in one, the finish reason, then the usage in a
    chunk without choices, as OpenAI sends it when `stream_options.include_usage` is set
    (here always, when the completion has usage)."""
    (choice,) = completion["choices"]
    message = choice["message"]
    base = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": message.get("content") or ""})]
    for index, call in enumerate(message.get("tool_calls") or []):
        chunks.append(chunk({"tool_calls": [{**call, "index": index}]}))
    chunks.append(chunk({}, choice["finish_reason"]))
    if "usage" in completion:
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks


class OpenAIServer(LoopbackServer):
    """A scripted chat-completions and Responses-API server on 127.0.0.1, on an ephemeral port.

    Replies are played in order; when the queue is empty the server answers 500 with a
    message saying so, which makes a missing script step fail loudly.

    Attributes:
        requests: every JSON request body received, oldest first.
        headers: the request headers (names lower-cased), one dict per request.
        paths: the request paths, one per request.
    """

    handler = _Handler
    thread_name = "openai-test-server"

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        super().__init__()
        self._queue: list[ScriptedReply] = []
        self._lock = threading.Lock()
        # Asked first with each request body; a body it returns answers instead of the queue.
        self.responder: Callable[[Any], Mapping[str, Any] | None] | None = None

    @property
    def base_url(self) -> str:
        """The base URL to give an OpenAI client, ending in `/v1`."""
        return f"{self.origin}/v1"

    def add(self, *replies: Mapping[str, Any] | tuple[int, Any] | ScriptedReply) -> None:
        """Queue replies: a response dict (status 200), a (status, body) pair, or ScriptedReply."""
        with self._lock:
            for reply in replies:
                if isinstance(reply, ScriptedReply):
                    self._queue.append(reply)
                elif isinstance(reply, tuple):
                    self._queue.append(ScriptedReply(status=reply[0], body=reply[1]))
                else:
                    self._queue.append(ScriptedReply(status=200, body=dict(reply)))

    def add_completion(self, content: str | None = None, **kwargs: Any) -> None:
        """Queue a successful completion; keyword arguments go to `chat_completion`."""
        self.add(chat_completion(content, **kwargs))

    def add_response(self, output: list[dict[str, Any]], **kwargs: Any) -> None:
        """Queue a successful Responses-API reply holding `output`; keyword arguments go to
        `responses_reply`. Played as JSON, or as its events to a request that streams."""
        self.add(responses_reply(output, **kwargs))

    def add_error(
        self, status: int, message: str, *, code: str | None = None, **fields: Any
    ) -> None:
        """Queue an error in OpenAI's shape: `{"error": {"message", "type", "code", ...}}`."""
        error = {"message": message, "type": "invalid_request_error", "code": code, **fields}
        self.add((status, {"error": error}))

    @property
    def remaining(self) -> int:
        """How many queued replies have not been served."""
        with self._lock:
            return len(self._queue)

    def record(self, path: str, headers: dict[str, str], body: Any) -> ScriptedReply:
        """Record one request and pop the reply for it (called from handler threads)."""
        with self._lock:
            self.paths.append(path)
            self.headers.append(headers)
            self.requests.append(body)
            if path.rstrip("/") not in ROUTES:
                return ScriptedReply(404, {"error": {"message": f"no route {path}"}})
            if self.responder is not None:
                answer = self.responder(body)
                if answer is not None:
                    return ScriptedReply(200, dict(answer))
            if not self._queue:
                return ScriptedReply(
                    500, {"error": {"message": "OpenAIServer: no scripted reply left"}}
                )
            return self._queue.pop(0)
