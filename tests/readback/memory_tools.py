"""What the memory tool's tests share: a tool on a fresh workspace, bound to a session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ctxoffload import LocalWorkspace
from ctxoffload.readback import memory_tool

Memory = Callable[..., Awaitable[str]]

SESSION = "s1"
"""The session the tests' changes are recorded in."""


def memory_on(workdir: Path, **options: Any) -> tuple[LocalWorkspace, Memory]:
    """A workspace on `workdir` and its memory tool, recording in `SESSION` by default."""
    workspace = LocalWorkspace(workdir, isolate_sessions=options.pop("isolate_sessions", False))
    options.setdefault("session_id", SESSION)
    return workspace, memory_tool(workspace, **options)


def tree_of(folder: Path) -> dict[str, bytes]:
    """Every regular file below `folder` (hidden ones too), by path relative to it."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }
