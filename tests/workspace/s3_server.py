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

import socket
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

ACCESS_KEY = "AKIATESTONLY0000"
SECRET_KEY = "ctxoffload-test-secret-do-not-print"
REGION = "us-east-1"


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
        import boto3

        name = f"ctx-{uuid.uuid4().hex[:20]}"
        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )
        client.create_bucket(Bucket=name)
        client.close()
        return name

    def workspace_kwargs(self) -> dict[str, Any]:
        """The keyword arguments that point an ObjectStoreWorkspace at this server."""
        return {
            "endpoint_url": self.endpoint_url,
            "region": REGION,
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
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


def shared_server() -> S3Server:
    """One server for the whole test session (started on first use, stopped at exit)."""
    global _shared
    if _shared is None:
        import atexit

        _shared = S3Server()
        _shared.start()
        atexit.register(_shared.stop)
    return _shared
