"""InMemoryWorkspace(evict_after_turns=N): what is evicted, when, and what a reader is told."""

from __future__ import annotations

import pytest

from ctxoffload import (
    ConfigError,
    InMemoryWorkspace,
    InvalidReference,
    Msg,
    ToolResultBlock,
)
from helpers import image_block


def result(tool_id: str, text: str = "output") -> ToolResultBlock:
    return ToolResultBlock(id=tool_id, name="probe", output=text)


async def test_an_untouched_file_survives_n_model_calls_then_goes() -> None:
    ws = InMemoryWorkspace(evict_after_turns=2)
    ref = await ws.offload_tool_result("s", result("a"))
    ws.note_model_call()
    ws.note_model_call()
    assert await ws.read_reference(ref) == b"output"  # read at call 2: touched again
    ws.note_model_call()
    ws.note_model_call()
    assert await ws.read_reference(ref) == b"output"
    for _ in range(3):
        ws.note_model_call()
    with pytest.raises(InvalidReference) as raised:
        await ws.read_reference(ref)
    message = str(raised.value)
    assert "was evicted at model call 7" in message
    assert "neither written nor read for 2 model calls" in message
    assert "evict_after_turns" in message


async def test_data_payloads_are_evicted_and_the_record_never_is() -> None:
    ws = InMemoryWorkspace(evict_after_turns=1)
    raw = b"\x89PNG\r\n\x1a\n" + b"x" * 50
    block = image_block(raw)
    stored = await ws.offload_data_block(block)
    ref = stored.source.url
    await ws.offload_context("s", msgs=[Msg(role="user", content="keep me")])
    await ws.write_state("s", {"messages": []})
    for _ in range(3):
        ws.note_model_call()
    with pytest.raises(InvalidReference, match="evicted"):
        await ws.read_reference(ref)
    assert [row["content"] for row in await ws.read_context("s")] == ["keep me"]
    assert await ws.read_state("s") == {"messages": []}
    assert await ws.read_events("s")
    # Stored again, it comes back under its content name.
    again = await ws.offload_data_block(block)
    assert again.source.url == ref
    assert await ws.read_reference(ref) == raw


async def test_an_evicted_tool_result_name_is_not_reused_for_new_content() -> None:
    ws = InMemoryWorkspace(evict_after_turns=1)
    first = await ws.offload_tool_result("s", result("a", "one"))
    ws.note_model_call()
    ws.note_model_call()
    second = await ws.offload_tool_result("s", result("a", "two"))
    assert second != first
    assert await ws.read_reference(second) == b"two"
    with pytest.raises(InvalidReference, match="evicted"):
        await ws.read_reference(first)


async def test_eviction_is_off_by_default() -> None:
    ws = InMemoryWorkspace()
    ref = await ws.offload_tool_result("s", result("a"))
    for _ in range(1000):
        ws.note_model_call()
    assert await ws.read_reference(ref) == b"output"


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "3"])
def test_evict_after_turns_must_be_a_positive_int(value: object) -> None:
    with pytest.raises(ConfigError, match="evict_after_turns"):
        InMemoryWorkspace(evict_after_turns=value)  # type: ignore[arg-type]


async def test_a_purged_session_starts_fresh_without_its_evictions() -> None:
    ws = InMemoryWorkspace(evict_after_turns=1)
    old = await ws.offload_tool_result("s", result("c1", "old"))
    ws.note_model_call()
    ws.note_model_call()
    assert await ws.purge_session("s")
    with pytest.raises(InvalidReference, match="is not held by"):
        await ws.read_reference(old)
    new = await ws.offload_tool_result("s", result("c1", "new"))
    assert new.endswith("/sessions/s/tool_result-c1.txt")
    assert await ws.read_reference(new) == b"new"


@pytest.mark.slow
async def test_only_the_latest_evictions_are_remembered() -> None:
    ws = InMemoryWorkspace(evict_after_turns=1)
    kept = InMemoryWorkspace.evictions_remembered
    refs = [await ws.offload_tool_result("s", result(f"x{i}")) for i in range(kept + 1)]
    ws.note_model_call()
    ws.note_model_call()
    with pytest.raises(InvalidReference, match="evicted at model call 2"):
        await ws.read_reference(refs[1])
    with pytest.raises(InvalidReference, match=f"evicted before the latest {kept} evictions"):
        await ws.read_reference(refs[0])
