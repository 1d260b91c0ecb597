"""The workspaces an integration runs on, as factories for parametrised fixtures: a local
folder, memory, and a bucket on the shared moto S3 server (127.0.0.1) (`WORKSPACES`); a bucket
in this process's memory (`memory://`) and a SQLite database, for the door contract."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ctxoffload import InMemoryWorkspace, LocalWorkspace, ObjectStoreWorkspace, SqlWorkspace
from ctxoffload.workspace import Workspace
from s3_server import shared_server

__all__ = [
    "WORKSPACES",
    "bucket",
    "local",
    "memory",
    "memory_bucket",
    "shared_server",
    "sqlite",
]


def local(tmp_path: Path) -> Workspace:
    return LocalWorkspace(tmp_path / "ws", fsync=False)


def memory(tmp_path: Path) -> Workspace:
    return InMemoryWorkspace()


def bucket(tmp_path: Path) -> Workspace:
    s3 = shared_server()
    return ObjectStoreWorkspace(f"s3://{s3.new_bucket()}/agents", **s3.workspace_kwargs())


def memory_bucket(tmp_path: Path) -> Workspace:
    """A bucket of this process's memory (`memory://`), under a prefix of its own."""
    return ObjectStoreWorkspace(f"memory:///{tmp_path.name}/agents")


def sqlite(tmp_path: Path) -> Workspace:
    return SqlWorkspace(f"sqlite:///{tmp_path / 'ws.db'}")


WORKSPACES: list[Callable[[Path], Workspace]] = [local, memory, bucket]
