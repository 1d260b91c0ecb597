"""`ctxoffload.integrations.claude.WorkspaceSessionStore` against the real Claude Agent SDK:
its own conformance suite, then what the suite does not ask (entries kept exactly, retried
batches, hostile keys, concurrent writers, and the SDK's resume reading it back)."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

from ctxoffload import InMemoryWorkspace, LocalWorkspace
from ctxoffload.integrations.claude import WorkspaceSessionStore

sdk = require_framework("claude_agent_sdk", "claude")
from claude_agent_sdk.testing import run_session_store_conformance  # noqa: E402

KEY = {"project_key": "-home-user-project", "session_id": "00893aaf-19fa-41d2-8238-13269b9b3ca0"}


@pytest.mark.parametrize("backend", ["local", "memory"])
async def test_the_sdks_conformance_suite_passes(tmp_path: Path, backend: str) -> None:
    made = 0

    def fresh() -> WorkspaceSessionStore:
        nonlocal made
        made += 1
        if backend == "memory":
            return WorkspaceSessionStore(InMemoryWorkspace())
        return WorkspaceSessionStore(LocalWorkspace(tmp_path / f"ws{made}"))

    await run_session_store_conformance(fresh)


def entry(n: int, **extra: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": f"u-{n}", "timestamp": "2026-11-25T12:00:00.000Z", **extra}


async def test_entries_load_back_exactly_payloads_and_odd_text_included(tmp_path: Path) -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40).decode()
    odd = [
        entry(
            1,
            message={
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": png},
                    }
                ],
            },
        ),
        entry(2, text="data:image/png;base64," + png),  # a data URL stays a string
        entry(3, text="lone \udcff surrogate, \u2028 separator, \x1b[31m escape"),
        {"type": "custom-title", "customTitle": "no uuid"},
        {"type": "custom-title", "customTitle": "no uuid"},  # twice: both kept
    ]
    store = WorkspaceSessionStore(LocalWorkspace(tmp_path))
    await store.append(KEY, odd)
    again = WorkspaceSessionStore(LocalWorkspace(tmp_path))  # a new process's view
    assert await again.load(KEY) == odd


async def test_a_retried_batch_is_not_kept_twice(tmp_path: Path) -> None:
    store = WorkspaceSessionStore(LocalWorkspace(tmp_path))
    batch = [entry(1), entry(2)]
    await store.append(KEY, batch)
    await store.append(KEY, batch)  # the SDK retries a batch whose append timed out
    await store.append(KEY, [entry(3)])
    assert await store.load(KEY) == [entry(1), entry(2), entry(3)]


@pytest.mark.parametrize(
    "key",
    [
        {"project_key": "../../etc", "session_id": "passwd"},
        {"project_key": "/abs", "session_id": "../x", "subpath": "../../../y"},
        {"project_key": "p\x00q", "session_id": "s" * 500},
    ],
)
async def test_a_hostile_key_stays_inside_the_workspace(
    tmp_path: Path, key: dict[str, Any]
) -> None:
    ws = tmp_path / "deep" / "ws"
    store = WorkspaceSessionStore(LocalWorkspace(ws))
    await store.append(key, [entry(1)])
    assert await store.load(key) == [entry(1)]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and all((ws / "sessions") in p.parents for p in files), files


def test_two_processes_appending_lose_nothing(tmp_path: Path) -> None:
    code = """
import asyncio, sys
from ctxoffload import LocalWorkspace
from ctxoffload.integrations.claude import WorkspaceSessionStore
key = {"project_key": "p", "session_id": "s"}
async def main():
    store = WorkspaceSessionStore(LocalWorkspace(sys.argv[1]))
    for i in range(100):
        await store.append(key, [{"type": "x", "uuid": f"{sys.argv[2]}-{i}"}])
asyncio.run(main())
"""
    children = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path), name]) for name in "ab"
    ]
    assert [c.wait(timeout=300) for c in children] == [0, 0]
    loaded = asyncio.run(
        WorkspaceSessionStore(LocalWorkspace(tmp_path)).load(
            {"project_key": "p", "session_id": "s"}
        )
    )
    assert loaded is not None
    uuids = [e["uuid"] for e in loaded]
    assert sorted(uuids) == sorted(f"{n}-{i}" for n in "ab" for i in range(100))
    for name in "ab":  # each process's entries in its own order
        mine = [u for u in uuids if u.startswith(f"{name}-")]
        assert mine == [f"{name}-{i}" for i in range(100)]


async def test_the_sdks_store_readers_read_it(tmp_path: Path) -> None:
    rows = [
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "sessionId": KEY["session_id"],
            "timestamp": "2026-11-25T12:00:00.000Z",
            "isSidechain": False,
            "cwd": "/home/user/project",
            "message": {"role": "user", "content": "Summarise the build log"},
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "sessionId": KEY["session_id"],
            "timestamp": "2026-11-25T12:00:01.000Z",
            "isSidechain": False,
            "cwd": "/home/user/project",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "type": "message",
                "model": "claude",
                "content": [{"type": "text", "text": "The build passed."}],
            },
        },
    ]
    store = WorkspaceSessionStore(LocalWorkspace(tmp_path))
    await store.append(KEY, rows)
    messages = await sdk.get_session_messages_from_store(
        store, KEY["session_id"], directory="/home/user/project"
    )
    assert [m.uuid for m in messages] == ["u1", "a1"]
    listed = await sdk.list_sessions_from_store(store, directory="/home/user/project")
    assert [s.session_id for s in listed] == [KEY["session_id"]] or listed == [], listed
    # Readable as any ctxoffload session too.
    (session,) = await LocalWorkspace(tmp_path).list_sessions()
    text = (tmp_path / "sessions" / session / "context.jsonl").read_text(encoding="utf-8")
    assert "The build passed." in text and json.loads(text.splitlines()[0])["id"] == "u1"
