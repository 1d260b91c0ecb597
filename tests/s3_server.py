"""A real S3 API on loopback for the object-store tests and benchmark: moto's threaded server.

`S3Server.start()` serves on 127.0.0.1 at a free port; `new_bucket()` creates a bucket with
the plain S3 API (over HTTP, like any client); `stop()` / `start()` again simulate an
outage. The workspace under test talks to it with its real client, unpatched.

One fix is made to the server, not the client: moto checks `If-None-Match: *` and then
stores the object as two steps, so two conditional PUTs of one key that arrive together can
both succeed, the second silently replacing the first. S3 (and MinIO, R2) decide a
conditional write atomically: exactly one succeeds, the other gets 412. Serialising moto's
conditional PUTs gives the tests the semantics of the real stores.

And one speed-up: moto lists its own package folder on every request to route it (a quarter
of the server's time); the list never changes while it runs, so it is read once.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

ACCESS_KEY = "AKIATESTONLY0000"
SECRET_KEY = "ctxoffload-test-secret-do-not-print"
REGION = "us-east-1"


def workspace_kwargs_at(endpoint_url: str) -> dict[str, Any]:
    """The keyword arguments that point an ObjectStoreWorkspace at `endpoint_url`, with the
    test's region and credentials."""
    return {
        "endpoint_url": endpoint_url,
        "region": REGION,
        "access_key_id": ACCESS_KEY,
        "secret_access_key": SECRET_KEY,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Server:
    """moto's S3 on 127.0.0.1; `endpoint_url` is what clients are given."""

    port: int = field(default_factory=free_port)
    _server: Any = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        import logging

        from moto.server import ThreadedMotoServer

        # One log line per request would drown a failing test's output.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)

        _make_conditional_puts_atomic()
        _route_without_listing_moto()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def new_bucket(self) -> str:
        """Create a fresh bucket and return its name."""
        name = f"ctx-{uuid.uuid4().hex[:20]}"
        client = self._client()
        client.create_bucket(Bucket=name)
        client.close()
        return name

    def put_object(
        self, bucket: str, key: str, body: bytes, metadata: dict[str, str] | None = None
    ) -> None:
        """Write an object with the plain S3 API, as a hand or another program would."""
        client = self._client()
        client.put_object(Bucket=bucket, Key=key, Body=body, Metadata=metadata or {})
        client.close()

    def count_objects(self, bucket: str, prefix: str) -> int:
        """How many objects the bucket holds under `prefix`, listed with the plain S3 API."""
        client = self._client()
        try:
            pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            return sum(page.get("KeyCount", 0) for page in pages)
        finally:
            client.close()

    def delete_object(self, bucket: str, key: str) -> None:
        """Delete an object with the plain S3 API."""
        client = self._client()
        client.delete_object(Bucket=bucket, Key=key)
        client.close()

    def replace_metadata(self, bucket: str, key: str, changes: dict[str, str]) -> None:
        """Change an object's user metadata in place (a copy onto itself), as a hand would."""
        client = self._client()
        found = client.head_object(Bucket=bucket, Key=key)
        client.copy_object(
            Bucket=bucket,
            Key=key,
            CopySource={"Bucket": bucket, "Key": key},
            Metadata={**found["Metadata"], **changes},
            MetadataDirective="REPLACE",
            ContentType=found.get("ContentType", "application/octet-stream"),
        )
        client.close()

    def _client(self) -> Any:
        """A boto3 S3 client of this server (the plain API, beside the workspace's own)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def workspace_kwargs(self) -> dict[str, Any]:
        """The keyword arguments that point an ObjectStoreWorkspace at this server."""
        return workspace_kwargs_at(self.endpoint_url)

    def environment(self) -> dict[str, str]:
        """The environment variables that point the `ctxoffload` command at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
        }


_conditional_put_lock = threading.Lock()


def _make_conditional_puts_atomic() -> None:
    """Serialise moto's PUTs that carry a precondition (see the module's docstring)."""
    from moto.s3.responses import S3Response

    original = S3Response.put_object
    if getattr(original, "_ctxoffload_atomic", False):
        return

    def put_object(self: Any) -> Any:
        if self.headers.get("If-None-Match") or self.headers.get("If-Match"):
            with _conditional_put_lock:
                return original(self)
        return original(self)

    put_object._ctxoffload_atomic = True  # type: ignore[attr-defined]
    S3Response.put_object = put_object  # type: ignore[method-assign]


def _route_without_listing_moto() -> None:
    """Read moto's list of service modules once instead of on every request."""
    from moto import backends

    if getattr(backends.list_of_moto_modules, "_ctxoffload_cached", False):
        return
    modules = tuple(backends.list_of_moto_modules())

    def list_of_moto_modules() -> Any:
        return iter(modules)

    list_of_moto_modules._ctxoffload_cached = True  # type: ignore[attr-defined]
    backends.list_of_moto_modules = list_of_moto_modules  # type: ignore[assignment]


_shared: S3Server | None = None


@pytest.fixture(scope="session")
def s3() -> S3Server:
    """The moto S3 server shared by this process's tests (started on first use); a fixture
    for the conftest.py of each test folder that uses it to import."""
    return shared_server()


def shared_server() -> S3Server:
    """One server for the whole test session (started on first use, stopped at exit)."""
    global _shared
    if _shared is None:
        import atexit

        _shared = S3Server()
        _shared.start()
        atexit.register(_shared.stop)
    return _shared


def serve_on_loopback(answer: Callable[[BaseHTTPRequestHandler], None]) -> ThreadingHTTPServer:
    """An HTTP/1.1 server on 127.0.0.1 at a free port, serving from a daemon thread until its
    `shutdown()`: `answer(request)` answers every request, whatever its method."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            answer(self)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class ThrottlingProxy:
    """An HTTP proxy on 127.0.0.1 in front of an S3 server that answers 503 SlowDown.

    `throttle(n)`: the next `n` requests get S3's throttling answer (503, code SlowDown)
    instead of reaching the server; `throttle(-1)`: every request does, until `throttle(0)`.
    `throttled` counts the answers given, `requests` every request received. `hold(seconds)`:
    each request passed through waits that long before it is sent on (a slow network: it
    still lands, late). Everything else is passed through unchanged.
    """

    def __init__(self, upstream: S3Server) -> None:
        self.upstream = upstream
        self.throttled = 0
        self.requests = 0
        self._remaining = 0
        self._hold = 0.0
        self._lock = threading.Lock()
        self._server = serve_on_loopback(self._answer)
        self.port = self._server.server_address[1]

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        with self._lock:
            self.requests += 1
        if self._take():
            answer = (
                b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                b"<Message>Please reduce your request rate.</Message></Error>"
            )
            request.send_response(503)
            request.send_header("Content-Type", "application/xml")
            request.send_header("Content-Length", str(len(answer)))
            request.end_headers()
            request.wfile.write(answer)
            return
        if self._hold:
            time.sleep(self._hold)
        connection = http.client.HTTPConnection("127.0.0.1", self.upstream.port)
        try:
            headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
            headers["Host"] = f"127.0.0.1:{self.upstream.port}"
            connection.request(request.command, request.path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            request.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    request.send_header(name, value)
            request.send_header("Content-Length", str(len(payload)))
            request.end_headers()
            if request.command != "HEAD":
                request.wfile.write(payload)
        finally:
            connection.close()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def throttle(self, n: int) -> None:
        with self._lock:
            self._remaining = n

    def hold(self, seconds: float) -> None:
        self._hold = seconds

    def _take(self) -> bool:
        with self._lock:
            if self._remaining == 0:
                return False
            if self._remaining > 0:
                self._remaining -= 1
            self.throttled += 1
            return True

    def workspace_kwargs(self) -> dict[str, Any]:
        return {**self.upstream.workspace_kwargs(), "endpoint_url": self.endpoint_url}

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class CannedServer:
    """An HTTP server on 127.0.0.1 that gives one answer to every request.

    `CannedServer(200, "text/html", b"<html>...")` is a web console on the port a user took
    for the S3 API; `CannedServer(403, "application/xml", ACCESS_DENIED)` a store that refuses
    the credentials. `requests` counts the requests answered.
    """

    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        self.requests = 0
        self._canned = (status, content_type, body)
        self._server = serve_on_loopback(self._answer)
        self.port = self._server.server_address[1]

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        if length:
            request.rfile.read(length)
        self.requests += 1
        status, content_type, body = self._canned
        request.send_response(status)
        request.send_header("Content-Type", content_type)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(body)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def workspace_kwargs(self) -> dict[str, Any]:
        return workspace_kwargs_at(self.endpoint_url)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


HTML_CONSOLE = (
    b"<!doctype html><html><head><title>Console</title></head><body>Sign in</body></html>"
)
ACCESS_DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
    b"<Message>Access Denied</Message><RequestId>R1</RequestId></Error>"
)
