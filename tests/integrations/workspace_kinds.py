"""The three workspaces an integration runs on, as factories for parametrised fixtures:
a local folder, memory, and a bucket on the shared moto S3 server (127.0.0.1)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxoffload import InMemoryWorkspace, LocalWorkspace, ObjectStoreWorkspace

sys.path.insert(0, str(Path(__file__).parents[1] / "workspace"))
from s3_server import shared_server

__all__ = ["WORKSPACES", "bucket", "local", "memory", "shared_server"]


def local(tmp_path: Path) -> Any:
    return LocalWorkspace(tmp_path / "ws", fsync=False)


def memory(tmp_path: Path) -> Any:
    return InMemoryWorkspace()


def bucket(tmp_path: Path) -> Any:
    s3 = shared_server()
    return ObjectStoreWorkspace(f"s3://{s3.new_bucket()}/agents", **s3.workspace_kwargs())


WORKSPACES: list[Callable[[Path], Any]] = [local, memory, bucket]
