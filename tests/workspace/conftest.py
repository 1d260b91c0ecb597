"""Fixtures of the workspace tests: the S3 API on loopback that ObjectStoreWorkspace talks to,
and each workspace in turn."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import InMemoryWorkspace, LocalWorkspace, ObjectStoreWorkspace
from s3_server import s3

__all__ = ["any_workspace", "make_workspace", "s3"]


@pytest.fixture(params=["local", "memory", "bucket"])
def make_workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Any]:
    """Makes each workspace in turn, with the options given: a folder, memory, a bucket on a
    real S3 API."""

    def make(**options: Any) -> Any:
        if request.param == "local":
            return LocalWorkspace(tmp_path / "ws", **options)
        if request.param == "memory":
            return InMemoryWorkspace(**options)
        server = request.getfixturevalue("s3")
        return ObjectStoreWorkspace(
            f"s3://{server.new_bucket()}/ws", **server.workspace_kwargs(), **options
        )

    return make


@pytest.fixture
def any_workspace(make_workspace: Callable[..., Any]) -> Any:
    """Each workspace in turn, with its default options."""
    return make_workspace()
