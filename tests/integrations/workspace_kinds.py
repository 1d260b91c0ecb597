"""The three workspaces an integration runs on, as factories for parametrised fixtures:
a local folder, memory, and a bucket on the shared moto S3 server (127.0.0.1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ctxoffload import InMemoryWorkspace, LocalWorkspace, ObjectStoreWorkspace
from ctxoffload.workspace import Workspace
from s3_server import shared_server

__all__ = ["WORKSPACES", "bucket", "local", "memory", "shared_server"]


def local(tmp_path: Path) -> Workspace:
    return LocalWorkspace(tmp_path / "ws", fsync=False)


def memory(tmp_path: Path) -> Workspace:
    return InMemoryWorkspace()


def bucket(tmp_path: Path) -> Workspace:
    s3 = shared_server()
    return ObjectStoreWorkspace(f"s3://{s3.new_bucket()}/agents", **s3.workspace_kwargs())


WORKSPACES: list[Callable[[Path], Workspace]] = [local, memory, bucket]
