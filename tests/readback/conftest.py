"""Folders for the read-back tools: a workspace with links out, logs, a 50 MB line."""

from __future__ import annotations

from pathlib import Path

import pytest
from readback_files import HUGE_SIZE, SECRET

from ctxoffload.readback import FileToolbox


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace with text files and symlinks, next to directories it must not reach."""
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    # A sibling whose name starts with the root's name: a string-prefix check would let it in.
    (tmp_path / "ws2").mkdir()
    (tmp_path / "ws2" / "secret.txt").write_text(SECRET + "\n")
    (workspace / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (workspace / "sub" / "deep.txt").write_text("delta\n")
    (workspace / "link_out").symlink_to(outside / "secret.txt")
    (workspace / "link_dir_out").symlink_to(outside, target_is_directory=True)
    (workspace / "chain").symlink_to(workspace / "link_out")
    (workspace / "sub" / "link_up").symlink_to(Path("..", "..", "outside"))
    (workspace / "link_in").symlink_to(workspace / "notes.txt")
    return workspace


@pytest.fixture
def toolbox(root: Path) -> FileToolbox:
    """The tools confined to `root`."""
    return FileToolbox([root])


@pytest.fixture(scope="session")
def huge_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root holding one 50 MB line with a needle in the middle, and a short second line."""
    root = tmp_path_factory.mktemp("huge")
    half = (HUGE_SIZE - len("NEEDLE")) // 2
    with (root / "huge.txt").open("wb") as file:
        file.write(b"x" * half + b"NEEDLE" + b"x" * (HUGE_SIZE - half - len("NEEDLE")))
        file.write(b"\nsecond line\n")
    return root


@pytest.fixture
def log_root(tmp_path: Path) -> Path:
    """app.log (30 lines, ERROR at 5, 6 and 20) and other.log (ERROR at 2)."""
    root = tmp_path / "logs"
    root.mkdir()
    lines = [f"line {n}" for n in range(1, 31)]
    for n in (5, 6, 20):
        lines[n - 1] = f"ERROR at {n}"
    (root / "app.log").write_text("\n".join(lines) + "\n")
    (root / "other.log").write_text("fine\nERROR here too\n")
    return root
