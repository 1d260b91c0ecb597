"""`ctxoffload purge SESSION...`: the sessions named go whole, from a folder, a bucket, a
SQLite file or a PostgreSQL schema, unless one is live: its lease held by another process,
or its files referenced by a session not named (a fork names its origin). Then nothing
goes, and each is said with why."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace, Msg, TextBlock, ToolResultBlock
from helpers import PNG, image_block, start_lease_worker, wait_held


async def _fill(ws: Any) -> None:
    """`run-1` (a tool result, messages with an image), its fork `retry`, and `other`."""
    await ws.offload_tool_result("run-1", ToolResultBlock(id="c1", output="log\n" * 500))
    await ws.offload_context(
        "run-1", [Msg(role="user", content=[TextBlock(text="see"), image_block(PNG)])]
    )
    await ws.write_state("run-1", {"session_id": "run-1", "steps": 1, "messages": []})
    await ws.fork_session("run-1", "retry")
    await ws.offload_context("other", [Msg(role="user", content="kept")])


KINDS = ["folder", "sqlite", "postgres", "bucket"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_purge_removes_the_sessions_named_and_refuses_a_referenced_one(
    cli: Callable[..., Any], new_workspace: Callable[[str], tuple[str, Any]], kind: str
) -> None:
    where, ws = new_workspace(kind)
    asyncio.run(_fill(ws))
    # `retry` (a fork) names run-1's files: run-1 alone is refused, nothing goes.
    refused = cli("purge", "run-1", "--workdir", where)
    assert refused.code == 2, refused.err
    assert "'run-1' must stay: session 'retry' references its files" in refused.err
    assert "name both in one purge" in refused.err  # the fix, not only in --help
    assert "nothing was removed" in refused.err and refused.err.count("\n") == 1
    assert asyncio.run(ws.list_sessions()) == ["other", "retry", "run-1"]
    dry = cli("purge", "run-1", "retry", "--dry-run", "--workdir", where)
    assert dry.code == 0 and "would remove session run-1" in dry.out
    assert asyncio.run(ws.list_sessions()) == ["other", "retry", "run-1"]
    # Named together, they go together; data/ stays for gc; the others are untouched.
    context = asyncio.run(ws.read_context("other"))
    removed = cli("purge", "retry", "run-1", "retry", "--json", "--workdir", where)
    assert removed.code == 0, removed.err
    report = json.loads(removed.out)
    assert sorted(report["sessions_removed"]) == ["retry", "run-1"]
    assert report["bytes_freed"] > 2000 and report["sessions_kept"] == {}
    assert asyncio.run(ws.list_sessions()) == ["other"]
    assert asyncio.run(ws.read_context("other")) == context
    assert asyncio.run(ws.read_context("run-1")) == []
    missing = cli("purge", "run-1", "--workdir", where)
    assert missing.code == 2 and "no session 'run-1'" in missing.err and where in missing.err


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_purge_refuses_a_session_another_process_holds(
    cli: Callable[..., Any],
    new_workspace: Callable[[str], tuple[str, Any]],
    request: pytest.FixtureRequest,
    kind: str,
) -> None:
    where, ws = new_workspace(kind)
    asyncio.run(_fill(ws))
    env = {}
    if kind == "bucket":
        env = {"CTXOFFLOAD_TEST_S3": json.dumps(request.getfixturevalue("s3").workspace_kwargs())}
    holder = start_lease_worker("hold", where, "other", env=env)
    try:
        wait_held(holder)
        refused = cli("purge", "other", "--workdir", where)
        assert refused.code == 2, refused.err
        assert "'other' is live: its lease is held by" in refused.err
        assert f"pid {holder.pid}" in refused.err
        assert asyncio.run(ws.list_sessions()) == ["other", "retry", "run-1"]
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()


@pytest.mark.parametrize("session", ["../x", "/etc", "a/b", ".hidden", ""])
def test_a_hostile_session_id_is_refused_before_anything(
    cli: Callable[..., Any], tmp_path: Path, session: str
) -> None:
    asyncio.run(_fill(LocalWorkspace(tmp_path / "ws", fsync=False)))
    result = cli("purge", session, "--workdir", tmp_path / "ws")
    assert result.code == 2 and result.err.count("\n") == 1
    assert sorted(p.name for p in (tmp_path / "ws" / "sessions").iterdir()) == [
        "other",
        "retry",
        "run-1",
    ]
