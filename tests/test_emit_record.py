"""Which offloaders keep the record of events: asked of each offloader object once and
remembered, but never of its class alone: two objects of one class may keep different
records (a proxy keeps what the object it forwards to keeps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxoffload import LocalWorkspace, Msg, ToolResultBlock
from ctxoffload.compression import Compressor
from ctxoffload.workspace import EventBatches, EventLog


class Proxy:
    """Forwards every attribute to the object it wraps: it has the methods that object has."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Offloads:
    """The three `Offloader` methods and nothing else: keeps no record."""

    async def offload_context(self, session_id: str, msgs: Any) -> str:
        return "ctx"

    async def offload_tool_result(self, session_id: str, block: ToolResultBlock) -> str:
        return f"file-{block.id}"

    async def offload_data_block(self, block: Any) -> Any:
        return block


@dataclass
class OneByOne(Offloads):
    """An `EventLog` without batches; a dataclass, so it cannot be hashed or remembered."""

    written: list[str] = field(default_factory=list)

    async def record_event(self, session_id: str, kind: str, **fields: Any) -> None:
        self.written.append(kind)

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        return [{"kind": k} for k in self.written]


async def _cut(offloader: Any) -> None:
    """A result over the limit through a compressor: a truncation event is written."""
    compressor = Compressor(offloader=offloader, session_id="s")
    await compressor.process_tool_result(ToolResultBlock(id="t", output="word " * 30_000))


async def test_each_offloader_object_keeps_the_record_it_can(tmp_path: Path) -> None:
    workspace = LocalWorkspace(tmp_path)
    keeping, keeping_none = Proxy(workspace), Proxy(Offloads())
    assert isinstance(keeping, EventBatches) and not isinstance(keeping_none, EventLog)
    for _ in range(2):  # (the second time from what was remembered)
        await _cut(keeping_none)
        await _cut(keeping)
    kinds = [e["kind"] for e in await workspace.read_events("s")]
    assert kinds.count("truncation") == 2
    one_by_one = OneByOne()
    for _ in range(2):
        await _cut(one_by_one)
    assert one_by_one.written == ["truncation", "truncation"]


async def test_a_record_is_kept_for_a_workspace_made_after_another_was_dropped(
    tmp_path: Path,
) -> None:
    # What was remembered of an object goes with it: a new one is asked again.
    for n in range(3):
        workspace = LocalWorkspace(tmp_path / str(n))
        await workspace.offload_context("s", msgs=[Msg(role="user", content="hi")])
        await _cut(workspace)
        assert [e["kind"] for e in await workspace.read_events("s")].count("truncation") == 1
        del workspace
