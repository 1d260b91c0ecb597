"""A real S3 API on loopback for the object-store tests and benchmark: moto's threaded server.

`S3Server.start()` serves on 127.0.0.1 at a free port; `new_bucket()` creates a bucket with
the plain S3 API (over HTTP, like any client); `stop()` / `start()` again simulate an
outage. The workspace under test talks to it with its real client, unpatched.
"""

from __future__ import annotations

import socket
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
