"""`WorkspaceStorage` (Strands' ContextOffloader storage) on each workspace, without Strands.

The protocol is Strands' own (`store(key, content, content_type) -> reference`,
`retrieve(reference) -> (content, content_type)`, KeyError when unknown); the test against
the real plugin is tests/integrations/test_strands_offloader.py. The unified
`strands.storage.Storage` methods raise Strands' own errors and return its result type, so
they are tested with the real package in tests/integrations/test_strands_storage_unified.py;
here only what holds without Strands: importing is free, and the install hint.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path
from typing import Any

import pytest
from workspace_kinds import WORKSPACES

from ctxoffload import InMemoryWorkspace, LocalWorkspace
from ctxoffload.exceptions import ConfigError, InvalidSessionId, OffloadError
from ctxoffload.integrations.strands import WorkspaceStorage
from helpers import MinimalOffloader

PNG = b"\x89PNG\r\n\x1a\n" + zlib.compress(b"pixels" * 50)
LOG = "\n".join(f"{i:05d} INFO exported ORD-{10000 + i}" for i in range(1, 3001))


@pytest.fixture(params=WORKSPACES, ids=lambda f: f.__name__)
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return request.param(tmp_path)


async def test_text_is_a_tool_result_file_and_comes_back_exactly(workspace: Any) -> None:
    storage = WorkspaceStorage(workspace, session_id="run-1")
    text = LOG + "\r\nlast line \u2713 with a \x00 byte"
    ref = await storage.store("tooluse_7_0", text.encode(), "text/plain")
    assert ref.endswith("sessions/run-1/tool_result-tooluse_7_0.txt")
    content, content_type = await storage.retrieve(ref)
    assert content == text.encode()
    assert content_type.startswith("text/plain")
    assert ref in await workspace.list_files("run-1")
    events = await workspace.read_events("run-1")
    assert any(e.get("kind") == "tool_result" for e in events)


async def test_a_second_result_under_one_key_never_overwrites_the_first(workspace: Any) -> None:
    storage = WorkspaceStorage(workspace, session_id="run-1")
    first = await storage.store("call_1_0", b"first output", "text/plain")
    second = await storage.store("call_1_0", b"second output", "text/plain")
    assert first != second
    assert (await storage.retrieve(first))[0] == b"first output"
    assert (await storage.retrieve(second))[0] == b"second output"


@pytest.mark.parametrize(
    ("content", "content_type", "suffix"),
    [
        (json.dumps({"rows": list(range(50))}, indent=2).encode(), "application/json", ".json"),
        (PNG, "image/png", ".png"),
        (b"%PDF-1.7 not really", "application/pdf", ".pdf"),
        (b"\xff\xfe not utf-8 \x80", "text/plain", ".txt"),
    ],
)
async def test_other_blocks_are_stored_once_by_hash_with_their_type(
    workspace: Any, content: bytes, content_type: str, suffix: str
) -> None:
    storage = WorkspaceStorage(workspace, session_id="run-1")
    ref = await storage.store("call_2_1", content, content_type)
    again = await storage.store("call_9_0", content, content_type)
    assert ref == again and "/data/" in ref and ref.endswith(suffix)
    assert await storage.retrieve(ref) == (content, content_type)


@pytest.mark.parametrize(
    "content_type",
    [
        "application/x-custom",
        # Strands' documents: `application/<format>`, no extension of ctxoffload's own.
        *(f"application/{f}" for f in ("docx", "doc", "xlsx", "xls", "csv", "html", "txt", "md")),
    ],
)
async def test_a_type_of_no_known_extension_comes_back_with_its_bytes(
    workspace: Any, content_type: str
) -> None:
    """A data/ file of a type with no extension ctxoffload knows is a `.bin`: its type came
    back as `application/octet-stream` (a Strands docx block came back as bytes of no
    format); it is the type the session's `data` event recorded (a bucket: the object's
    metadata)."""
    storage = WorkspaceStorage(workspace, session_id="run-1")
    data = f"payload of {content_type} \xff".encode("latin-1")
    ref = await storage.store("k", data, content_type)
    assert await storage.retrieve(ref) == (data, content_type)


@pytest.mark.parametrize(
    "reference",
    ["../../etc/passwd", "/etc/passwd", "sessions/run-1/tool_result-nope.txt", "s3://other/x"],
)
async def test_unknown_or_outside_references_are_key_errors(workspace: Any, reference: str) -> None:
    storage = WorkspaceStorage(workspace, session_id="run-1")
    await storage.store("call_1_0", b"x", "text/plain")
    with pytest.raises(KeyError):
        await storage.retrieve(reference)


async def test_hostile_keys_stay_in_the_session(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    storage = WorkspaceStorage(ws, session_id="run-1")
    for key in ("../../escape", "/abs/path", "a\x00b", ".hidden", "x" * 600):
        ref = await storage.store(key, b"content", "text/plain")
        path = ws.resolve_reference(ref)
        assert path.parent == (tmp_path / "ws" / "sessions" / "run-1").resolve()
    assert sorted(p.name for p in (tmp_path / "ws").iterdir()) == ["sessions"]


def test_bad_arguments_are_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(InvalidSessionId):
        WorkspaceStorage(LocalWorkspace(tmp_path), session_id="../x")
    with pytest.raises(ConfigError, match=r"object has no .*not a ctxoffload Workspace"):
        WorkspaceStorage(object())  # type: ignore[arg-type]
    # An Offloader is not enough: the storage reads back and keeps keys in state.json.
    with pytest.raises(ConfigError, match=r"has no read_reference, record_event, .*purge_session"):
        WorkspaceStorage(MinimalOffloader())  # type: ignore[arg-type]


async def test_a_refused_write_is_an_offload_error_and_loses_nothing(tmp_path: Path) -> None:
    # "No permission" cannot be staged with chmod as root: data/ is made a regular file, so
    # the write fails with ENOTDIR (a full disk is covered in tests/workspace/test_disk_errors).
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    storage = WorkspaceStorage(ws, session_id="run-1")
    before = await storage.store("call_0", b"before", "text/plain")
    (tmp_path / "ws" / "data").write_bytes(b"not a folder")
    with pytest.raises(OffloadError):
        await storage.store("call_1", PNG, "image/png")
    assert await storage.retrieve(before) == (b"before", "text/plain")


def test_importing_the_module_imports_no_strands() -> None:
    code = "import sys, ctxoffload.integrations.strands; print('strands' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_without_strands_the_unified_methods_say_how_to_install_it(tmp_path: Path) -> None:
    # sys.modules[name] = None makes the import fail as if Strands were not installed, in an
    # environment that has it too.
    code = textwrap.dedent(
        """
        import asyncio, sys
        sys.modules["strands"] = None
        from ctxoffload import InMemoryWorkspace
        from ctxoffload.exceptions import ConfigError
        from ctxoffload.integrations.strands import WorkspaceStorage

        storage = WorkspaceStorage(InMemoryWorkspace())
        for call in (
            lambda: asyncio.run(storage.write("k", b"v")),
            lambda: storage.sync.read("k"),
            lambda: asyncio.run(storage.search("k")),
        ):
            try:
                call()
            except ConfigError as exc:
                print(exc)
        print(asyncio.run(storage.retrieve(asyncio.run(storage.store("k", b"v")))))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4
    assert all("pip install 'ctxoffload[strands]'" in line for line in lines[:3])
    assert lines[3] == "(b'v', 'text/plain')"  # the ContextOffloader protocol needs no Strands


async def test_the_sync_facade_refuses_to_block_the_running_loop() -> None:
    storage = WorkspaceStorage(InMemoryWorkspace())
    for name, args in [("write", ("k", b"v")), ("read", ("k",)), ("list", ("",))]:
        with pytest.raises(RuntimeError, match=rf"running event loop.*await storage\.{name}\("):
            getattr(storage.sync, name)(*args)


def test_a_session_id_too_long_for_unified_keys_is_refused_when_they_are_used() -> None:
    storage = WorkspaceStorage(InMemoryWorkspace(), session_id="s" * 100)
    with pytest.raises(InvalidSessionId, match="at most 80"):
        storage.sync.read("k")
