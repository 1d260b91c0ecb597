"""Many writers at once, as tasks in one process and as separate processes: nothing is lost.

Processes are real (`sys.executable`), each with its own LocalWorkspace on the same workdir.
Every child waits for a "go" line on stdin, so all of them start writing together.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace, ToolResultBlock
from ctxoffload.workspace import Workspace
from helpers import image_block, makes_unnamed_files

SpawnPython = Callable[..., "subprocess.Popen[str]"]

APPEND_WRITER = """
import asyncio, json, sys
from ctxoffload import LocalWorkspace

workdir, writer, count, fsync = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

async def main():
    ws = LocalWorkspace(workdir, fsync=fsync == "1")
    sys.stdin.readline()
    spans = []
    for seq in range(count):
        msg = {"role": "user", "writer": writer, "seq": seq,
               "content": f"w{writer}-{seq} " + "x" * (seq % 7 * 150)}
        ref = await ws.offload_context("shared", msgs=[msg])
        spans.append([ref.first_line, ref.last_line])
    print(json.dumps(spans))

asyncio.run(main())
"""

TOOL_RESULT_WRITER = """
import asyncio, sys
from ctxoffload import LocalWorkspace

workdir, writer, count, same = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

async def main():
    ws = LocalWorkspace(workdir)
    sys.stdin.readline()
    for k in range(count):
        text = "one content for all\\n" if same == "1" else f"writer {writer} result {k}\\n" * 2000
        result = {"role": "tool", "tool_call_id": "call_same", "content": text}
        print(await ws.offload_tool_result("s", result), flush=True)

asyncio.run(main())
"""

DATA_WRITER = """
import asyncio, base64, sys
from ctxoffload import Base64Source, DataBlock, LocalWorkspace

workdir, count = sys.argv[1], int(sys.argv[2])
raw = bytes(range(256)) * 4096

async def main():
    ws = LocalWorkspace(workdir)
    block = DataBlock(source=Base64Source(media_type="image/png",
                                          data=base64.b64encode(raw).decode()))
    sys.stdin.readline()
    urls = await asyncio.gather(*(ws.offload_data_block(block) for _ in range(count)))
    print(*sorted({b.source.url for b in urls}), sep="\\n")

asyncio.run(main())
"""
DATA_WRITER_BYTES = bytes(range(256)) * 4096


def _run_together(spawn_python: SpawnPython, code: str, argvs: list[list[str]]) -> list[str]:
    """Start one child per argv, release them at once, and return each one's stdout."""
    children = [spawn_python(code, *argv) for argv in argvs]
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outputs = []
    for child in children:
        out, err = child.communicate()
        assert child.returncode == 0, err
        outputs.append(out)
    return outputs


def _check_shared_log(workdir: Path, writers: int, count: int, outputs: list[str]) -> None:
    log = workdir / "sessions" / "shared" / "context.jsonl"
    raw = log.read_bytes()
    assert raw.endswith(b"\n")
    lines = [json.loads(line) for line in raw.split(b"\n")[:-1]]
    assert len(lines) == writers * count
    keys = [(m["writer"], m["seq"]) for m in lines]
    assert len(set(keys)) == len(keys)
    per_writer: dict[int, list[int]] = defaultdict(list)
    for writer, seq in keys:
        per_writer[writer].append(seq)
    assert per_writer == {w: list(range(count)) for w in range(writers)}
    for writer, out in enumerate(outputs):
        spans = json.loads(out)
        for seq, (first, last) in enumerate(spans):
            assert first == last
            assert (lines[first - 1]["writer"], lines[first - 1]["seq"]) == (writer, seq)


# -- context log ------------------------------------------------------------------------------


async def test_concurrent_tasks_lose_no_line(workspace: Workspace) -> None:
    msgs = [{"role": "user", "content": f"task {i} " + "y" * (i * 97)} for i in range(50)]
    refs = await asyncio.gather(*(workspace.offload_context("s", msgs=[msg]) for msg in msgs))
    spans = sorted((r.first_line, r.last_line) for r in refs)
    assert spans == [(n, n) for n in range(1, 51)]
    log = await workspace.read_reference(refs[0])
    lines = log.split(b"\n")
    assert len(lines) == 51 and lines[-1] == b""
    for ref, msg in zip(refs, msgs, strict=True):
        assert json.loads(lines[ref.first_line - 1]) == msg


async def test_concurrent_batches_stay_consecutive(workspace: Workspace) -> None:
    batches = [
        [{"role": "user", "content": f"batch {b} msg {i}"} for i in range(5)] for b in range(20)
    ]
    refs = await asyncio.gather(*(workspace.offload_context("s", msgs=batch) for batch in batches))
    spans = sorted((r.first_line, r.last_line) for r in refs)
    assert spans == [(1 + 5 * k, 5 + 5 * k) for k in range(20)]
    lines = (await workspace.read_reference(refs[0])).split(b"\n")
    for ref, batch in zip(refs, batches, strict=True):
        assert [json.loads(x) for x in lines[ref.first_line - 1 : ref.last_line]] == batch


@pytest.mark.slow
def test_concurrent_processes_lose_no_line(workdir: Path, spawn_python: SpawnPython) -> None:
    # fsync off: it decides what survives a power cut, not whether appends interleave; the
    # run below with fsync on covers that path with fewer appends.
    writers, count = 8, 500
    outputs = _run_together(
        spawn_python,
        APPEND_WRITER,
        [[str(workdir), str(w), str(count), "0"] for w in range(writers)],
    )
    _check_shared_log(workdir, writers, count, outputs)


@pytest.mark.slow
def test_concurrent_processes_with_fsync_lose_no_line(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    writers, count = 4, 40
    outputs = _run_together(
        spawn_python,
        APPEND_WRITER,
        [[str(workdir), str(w), str(count), "1"] for w in range(writers)],
    )
    _check_shared_log(workdir, writers, count, outputs)


# -- tool results -----------------------------------------------------------------------------


@pytest.fixture(params=["no name until linked", "a temporary name"])
def linking(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, workdir: Path) -> str:
    """How tool result files are made: with no name until linked into place (Linux's
    O_TMPFILE, the default here), or under a temporary name (other systems), forced by
    hiding the flag."""
    if request.param == "a temporary name":
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    elif not makes_unnamed_files(workdir.parent):
        pytest.skip("no O_TMPFILE here: tool results take a temporary name")
    return str(request.param)


async def test_concurrent_tool_results_with_one_id_get_distinct_intact_files(
    workspace: Workspace, linking: str
) -> None:
    contents = [f"result {i}\n" * (1000 + i) for i in range(20)]
    paths = await asyncio.gather(
        *(
            workspace.offload_tool_result("s", ToolResultBlock(id="call_same", output=text))
            for text in contents
        )
    )
    assert len(set(paths)) == 20
    for path, text in zip(paths, contents, strict=True):
        assert await workspace.read_reference(path) == text.encode()
    assert sorted(await workspace.list_files("s")) == sorted(paths)


async def test_concurrent_identical_tool_results_share_one_file(
    workspace: Workspace, linking: str
) -> None:
    result = ToolResultBlock(id="call_same", output="identical\n" * 1000)
    paths = await asyncio.gather(*(workspace.offload_tool_result("s", result) for _ in range(20)))
    assert len(set(paths)) == 1
    assert await workspace.list_files("s") == [paths[0]]


def _session_files(workdir: Path) -> list[Path]:
    return sorted((workdir / "sessions" / "s").iterdir())


@pytest.mark.slow
def test_tool_results_with_one_id_from_processes_get_distinct_intact_files(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    writers, count = 4, 5
    outputs = _run_together(
        spawn_python,
        TOOL_RESULT_WRITER,
        [[str(workdir), str(w), str(count), "0"] for w in range(writers)],
    )
    paths = [out.splitlines() for out in outputs]
    flat = [p for per_writer in paths for p in per_writer]
    assert len(set(flat)) == writers * count
    for writer, per_writer in enumerate(paths):
        for k, path in enumerate(per_writer):
            assert Path(path).read_bytes() == (f"writer {writer} result {k}\n" * 2000).encode()
    on_disk = [p for p in _session_files(workdir) if p.name != "events.jsonl"]
    assert sorted(map(str, on_disk)) == sorted(flat)


@pytest.mark.slow
def test_identical_tool_results_from_processes_share_one_file(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    outputs = _run_together(
        spawn_python,
        TOOL_RESULT_WRITER,
        [[str(workdir), str(w), "5", "1"] for w in range(4)],
    )
    paths = {p for out in outputs for p in out.splitlines()}
    assert len(paths) == 1
    [path] = paths
    assert Path(path).read_bytes() == b"one content for all\n"
    assert [p.name for p in _session_files(workdir)] == ["events.jsonl", Path(path).name]


# -- data -------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_same_image_offloaded_by_many_tasks_is_stored_once(
    workspace: Workspace,
) -> None:
    raw = bytes(range(256)) * 4096
    block = image_block(raw)
    results: list[Any] = await asyncio.gather(
        *(workspace.offload_data_block(block) for _ in range(100))
    )
    urls = {b.source.url for b in results}
    assert len(urls) == 1
    [url] = urls
    assert await workspace.read_reference(url) == raw
    if isinstance(workspace, LocalWorkspace):
        assert [p.name for p in workspace.data_dir.iterdir()] == [Path(url).name]


@pytest.mark.slow
def test_same_image_offloaded_by_processes_is_stored_once(
    workdir: Path, spawn_python: SpawnPython
) -> None:
    outputs = _run_together(spawn_python, DATA_WRITER, [[str(workdir), "25"] for _ in range(4)])
    urls = {u for out in outputs for u in out.splitlines()}
    assert len(urls) == 1
    [url] = urls
    expected = workdir / "data" / f"{hashlib.sha256(DATA_WRITER_BYTES).hexdigest()}.png"
    assert Path(url) == expected
    assert sorted((workdir / "data").iterdir()) == [expected]
    assert expected.read_bytes() == DATA_WRITER_BYTES
