"""What the adapters store in data/ is recorded in a session, so `gc` keeps it while an agent
holds only the reference: Strands' `WorkspaceStorage.store` (JSON, images, documents) and
`AgentScopeOffloader.offload_data_block`, on each workspace.

`gc` runs with its grace over (as an hour later): only a record can keep a file.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from workspace_kinds import WORKSPACES

from ctxoffload._disk.ids import door_session
from ctxoffload.integrations.agentscope import AgentScopeOffloader
from ctxoffload.integrations.strands import WorkspaceStorage
from ctxoffload.workspace import GarbageCollector
from helpers import image_block

PNG = b"\x89PNG\r\n\x1a\n" + zlib.compress(b"held only in the context" * 40)


@pytest.fixture(params=WORKSPACES, ids=lambda f: f.__name__)
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return request.param(tmp_path)


@pytest.fixture
def grace_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """gc's grace for unreferenced data/ files is over at once (a clock an hour later)."""
    import ctxoffload.workspace._bucket_collector as bucket_collector
    import ctxoffload.workspace._bucket_store as bucket_store
    import ctxoffload.workspace._disk_store as disk_store

    monkeypatch.setattr(disk_store, "DATA_GRACE_SECONDS", 0.0)
    monkeypatch.setattr(bucket_store, "DATA_GRACE_SECONDS", 0.0)
    monkeypatch.setattr(bucket_collector, "DATA_GRACE_SECONDS", 0.0)


async def _collect(workspace: Any) -> list[str]:
    """Run gc (every unreferenced file is past its grace); the data/ names it removed."""
    if not isinstance(workspace, GarbageCollector):
        return []  # in memory: nothing collects; the record is checked all the same
    return (await workspace.gc()).data_removed


async def _recorded(workspace: Any, session_id: str, reference: str) -> bool:
    name = reference.rsplit("/", 1)[-1]
    return any(name in json.dumps(e) for e in await workspace.read_events(session_id))


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (PNG, "image/png"),
        (json.dumps({"rows": list(range(40))}).encode(), "application/json"),
        (b"%PDF-1.7 a document", "application/pdf"),
    ],
    ids=["image", "json", "document"],
)
async def test_what_strands_stores_in_data_survives_gc(
    workspace: Any, grace_over: None, content: bytes, content_type: str
) -> None:
    storage = WorkspaceStorage(workspace, session_id="run-1")
    reference = await storage.store("tooluse_1_0", content, content_type)
    assert "/data/" in reference
    assert await _recorded(workspace, "run-1", reference)
    assert reference.rsplit("/", 1)[-1] not in await _collect(workspace)
    assert await storage.retrieve(reference) == (content, content_type)


async def test_what_agentscope_offloads_in_data_survives_gc(
    workspace: Any, grace_over: None
) -> None:
    offloader = AgentScopeOffloader(workspace)
    stored = await offloader.offload_data_block(image_block(PNG))
    reference = stored.source.url
    # Without the middleware no agent's session is known: the record goes to the door's own
    # session, a name no conversation can have.
    assert await _recorded(workspace, door_session("agentscope", "data"), reference)
    assert reference.rsplit("/", 1)[-1] not in await _collect(workspace)
    assert await workspace.read_reference(reference) == PNG


async def test_an_unrecorded_data_file_is_still_collected(workspace: Any, grace_over: None) -> None:
    # The control: without a record, the same file goes at the first gc past the grace.
    if not isinstance(workspace, GarbageCollector):
        pytest.skip("an InMemoryWorkspace has no gc")
    reference = await workspace.store_bytes(PNG, "image/png")
    assert await _collect(workspace) == [reference.rsplit("/", 1)[-1]]
