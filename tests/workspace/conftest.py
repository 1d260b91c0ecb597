"""Fixtures of the workspace tests: the S3 API on loopback that ObjectStoreWorkspace talks to."""

from __future__ import annotations

import pytest
from s3_server import S3Server, shared_server


@pytest.fixture(scope="session")
def s3() -> S3Server:
    """The moto S3 server shared by this process's tests (started on first use)."""
    return shared_server()
