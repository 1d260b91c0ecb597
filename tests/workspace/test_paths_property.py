"""Property: whatever is planted inside the workspace, no byte outside it is read or written.

Hypothesis builds a workspace tree with symlinks (to outside files and directories), hard
links to outside files, FIFOs, stray directories and regular files planted at the names
the workspace uses, then runs every public operation on it. Each operation either works or
raises a ctxoffload error; none blocks, none returns a byte of an outside file, and every
outside file keeps its bytes and its mtime.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxoffload import (
    CtxOffloadError,
    LocalWorkspace,
    Msg,
    ToolResultBlock,
)
from helpers import examples, image_block

MARKER = b"OUTSIDE-MARKER-7f3a"
PNG = b"\x89PNG\r\n\x1a\nimage bytes"
PNG_NAME = hashlib.sha256(PNG).hexdigest() + ".png"

# Names the workspace creates or reads, relative to the workdir.
TARGETS = [
    "sessions",
    "data",
    "sessions/s",
    "sessions/s/context.jsonl",
    "sessions/s/context.jsonl.commit",
    "sessions/s/events.jsonl",
    "sessions/s/state.json",
    "sessions/s/tool_result-c1.txt",
    "sessions/s/tool_result-c1.2.txt",
    f"data/{PNG_NAME}",
]
PLANTS = ["symlink-dir", "symlink-file", "hardlink", "fifo", "file", "dir", "dangling"]


def _outside(root: Path) -> Path:
    out = root / "outside"
    out.mkdir()
    (out / "secret.txt").write_bytes(MARKER + b'\n{"role":"user","id":"x","content":"o"}\n')
    (out / "context.jsonl").write_bytes(b'{"role":"user","content":"' + MARKER + b'"}\n')
    (out / "state.json").write_bytes(b'{"messages":"' + MARKER + b'"}\n')
    return out


def _snapshot(out: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(out)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(out.rglob("*"))
        if p.is_file()
    }


def _plant(workdir: Path, out: Path, target: str, kind: str) -> None:
    path = workdir / target
    for parent in reversed(path.relative_to(workdir).parents):
        here = workdir / parent
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            return  # an earlier plant took a parent: planting through it would leave the tree
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        return  # an earlier plant took this name
    if kind == "symlink-dir":
        path.symlink_to(out)
    elif kind == "symlink-file":
        path.symlink_to(out / ("state.json" if target.endswith(".json") else "context.jsonl"))
    elif kind == "hardlink":
        os.link(out / "secret.txt", path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "file":
        path.write_bytes(b'{"role":"user","content":"inside"}\n')
    elif kind == "dir":
        path.mkdir()
    else:
        path.symlink_to(out / "does-not-exist")


def _returned_bytes(value: Any) -> bytes:
    return repr(value).encode() if not isinstance(value, bytes) else value


async def _operations(ws: LocalWorkspace, workdir: Path, out: Path) -> list[Any]:
    image = image_block(PNG)
    refs = [str(workdir / t) for t in TARGETS] + [
        str(out / "secret.txt"),
        str(workdir / "sessions" / "s" / ".." / ".." / ".." / "outside" / "secret.txt"),
        "sessions/s/context.jsonl",
    ]
    calls = [
        lambda: ws.initialize(),
        lambda: ws.offload_context("s", msgs=[Msg(id="m1", role="user", content="hello")]),
        lambda: ws.offload_tool_result("s", ToolResultBlock(id="c1", output="result")),
        lambda: ws.offload_data_block(image),
        lambda: ws.record_event("s", "note"),
        lambda: ws.write_state("s", {"messages": []}),
        lambda: ws.read_context("s"),
        lambda: ws.read_events("s"),
        lambda: ws.read_state("s"),
        lambda: ws.list_files("s"),
        lambda: ws.list_sessions(),
        *[(lambda ref=ref: ws.read_reference(ref)) for ref in refs],
        lambda: ws.purge_session("s"),
        lambda: ws.offload_context("s", msgs=[Msg(id="m2", role="user", content="again")]),
    ]
    results = []
    for call in calls:
        try:
            results.append(await asyncio.wait_for(call(), timeout=300))  # a hang guard only
        except CtxOffloadError as exc:
            results.append(exc)
    return results


@pytest.mark.slow
@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    plants=st.lists(
        st.tuples(st.sampled_from(TARGETS), st.sampled_from(PLANTS)), min_size=1, max_size=4
    ),
    symlinked_workdir=st.booleans(),
)
def test_nothing_outside_the_workspace_is_read_or_written(
    plants: list[tuple[str, str]], symlinked_workdir: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        out = _outside(root)
        real = root / "ws"
        real.mkdir()
        for target, kind in plants:
            _plant(real, out, target, kind)
        workdir = real
        if symlinked_workdir:
            workdir = root / "link-to-ws"
            workdir.symlink_to(real)
        before = _snapshot(out)
        results = asyncio.run(_operations(LocalWorkspace(workdir, fsync=False), workdir, out))
        for result in results:
            if not isinstance(result, BaseException):
                assert MARKER not in _returned_bytes(result), result
        assert _snapshot(out) == before
        assert sorted(p.name for p in out.iterdir()) == [
            "context.jsonl",
            "secret.txt",
            "state.json",
        ]
