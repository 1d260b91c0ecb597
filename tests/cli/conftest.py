"""Real workspaces on disk for the `ctxoffload` command's tests, and a way to run it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_workspace import fill_workspace

from ctxoffload.cli import main


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    """A workspace with two sessions: tool results, messages, an image stored once, events."""
    workdir = tmp_path / "ws"
    asyncio.run(fill_workspace(workdir))
    return workdir


@dataclass
class Result:
    code: int
    out: str
    err: str


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with file contents (None for folders)."""
    tree: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        tree[str(path.relative_to(root))] = path.read_bytes() if path.is_file() else None
    return tree


@pytest.fixture
def tree() -> Callable[[Path], dict[str, bytes | None]]:
    """`tree(root)`: a snapshot of everything under root, to show a command created nothing."""
    return snapshot


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run `ctxoffload ARGS` in this process; returns exit status, stdout and stderr."""

    def run(*args: str | Path) -> Result:
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
