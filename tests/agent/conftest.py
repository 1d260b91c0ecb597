"""Fixtures of the agent tests: the S3 API on loopback of tests/workspace (`s3_server`), for
an agent on ObjectStoreWorkspace. Its folder goes on the import path here, once."""

from __future__ import annotations

import sys
from pathlib import Path

_WORKSPACE_TESTS = Path(__file__).resolve().parents[1] / "workspace"
if str(_WORKSPACE_TESTS) not in sys.path:
    sys.path.insert(0, str(_WORKSPACE_TESTS))

from s3_server import s3  # noqa: E402

__all__ = ["s3"]
