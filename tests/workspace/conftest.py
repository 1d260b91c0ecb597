"""Fixtures of the workspace tests: each workspace in turn, the bucket one on the S3 API on
loopback (the `s3` fixture of tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import InMemoryWorkspace, LocalWorkspace, ObjectStoreWorkspace, SqlWorkspace
from helpers import Syncs


@pytest.fixture(params=["local", "memory", "bucket", "sqlite", "postgres"])
def make_workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Any]:
    """Makes each workspace in turn, with the options given: a folder, memory, a bucket on a
    real S3 API, a SQLite file, a schema of its own on a real PostgreSQL server (each call
    of one test: the same workspace)."""
    schema: list[str] = []

    def make(**options: Any) -> Any:
        if request.param == "local":
            return LocalWorkspace(tmp_path / "ws", **options)
        if request.param == "sqlite":
            return SqlWorkspace(f"sqlite:///{tmp_path / 'ws.db'}", **options)
        if request.param == "postgres":
            if not schema:
                schema.append(request.getfixturevalue("postgres").new_schema())
            return SqlWorkspace(schema[0], **options)
        if request.param == "memory":
            return InMemoryWorkspace(**options)
        server = request.getfixturevalue("s3")
        return ObjectStoreWorkspace(
            f"s3://{server.new_bucket()}/ws", **server.workspace_kwargs(), **options
        )

    return make


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """`tmpfs(size)`: a real tmpfs of that size (`"256k"`, `"1m"`), to fill up or remount
    read-only, unmounted when the test ends; a skip where mounting is not permitted."""
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        mount_point = tmp_path / f"tmpfs-{uuid.uuid4().hex[:8]}"
        mount_point.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(mount_point)
        return mount_point

    yield mount
    for mount_point in mounted:
        subprocess.run(["umount", str(mount_point)], check=True)


@pytest.fixture
def any_workspace(make_workspace: Callable[..., Any]) -> Any:
    """Each workspace in turn, with its default options."""
    return make_workspace()


@pytest.fixture
def read_starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The offsets a `LocalWorkspace` starts each read of a file's lines at, in order, from
    the moment the fixture is asked for: where a follower's read begins."""
    from ctxoffload.workspace import _disk_store

    starts: list[int] = []
    real = _disk_store.iter_chunks

    def spied(fd: int, start: int, end: int) -> Any:
        starts.append(start)
        return real(fd, start, end)

    monkeypatch.setattr(_disk_store, "iter_chunks", spied)
    return starts


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> Syncs:
    """`os.fsync` wrapped (it still syncs) to note, per file, its syncs and what they covered."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to name the file each fsync is for")
    watch = Syncs(os.fsync)
    monkeypatch.setattr(os, "fsync", watch)
    return watch
