"""InMemoryWorkspace, and the contract it shares with LocalWorkspace.

Tests taking the `workspace` fixture run against both implementations: whatever code is
written against one must behave the same with the other. Tests of what only one of them
does (files on disk, `memory://` references) take that one directly.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

import ctxoffload
from ctxoffload import (
    DataBlock,
    InMemoryWorkspace,
    InvalidReference,
    Msg,
    TextBlock,
    ToolResultBlock,
    URLSource,
)
from ctxoffload.workspace import Workspace
from helpers import PNG, image_block, user_msgs


def _line(log: bytes, line_no: int) -> Any:
    return json.loads(log.split(b"\n")[line_no - 1])


# -- the Offloader protocol (tests/workspace/test_protocols.py checks what each one is) ------


async def test_msgs_can_be_passed_by_keyword(workspace: Workspace) -> None:
    ref = await workspace.offload_context("s", msgs=user_msgs("hello"))
    assert (ref.first_line, ref.last_line) == (1, 1)
    assert [m["content"] for m in await workspace.read_context("s")] == ["hello"]


async def test_initialize_is_idempotent(workspace: Workspace) -> None:
    await workspace.initialize()
    await workspace.initialize()
    assert await workspace.list_sessions() == []


# -- context log ------------------------------------------------------------------------------


async def test_offload_context_reports_the_lines_each_call_wrote(workspace: Workspace) -> None:
    first = await workspace.offload_context("s", msgs=user_msgs("a", "b"))
    second = await workspace.offload_context("s", msgs=user_msgs("c"))
    third = await workspace.offload_context("s", msgs=user_msgs("d", "e", "f"))
    assert [(r.first_line, r.last_line) for r in (first, second, third)] == [
        (1, 2),
        (3, 3),
        (4, 6),
    ]
    assert [first.line_span, second.line_span, third.line_span] == ["1-2", "3", "4-6"]


async def test_offload_context_returns_the_context_log_reference(workspace: Workspace) -> None:
    ref = await workspace.offload_context("s", msgs=user_msgs("a"))
    assert isinstance(ref, ctxoffload.ContextRef)
    assert str(ref) == str(workspace.context_path("s"))


async def test_context_line_at_the_reported_span_holds_the_message(
    workspace: Workspace,
) -> None:
    await workspace.offload_context("s", msgs=user_msgs("before"))
    msgs = user_msgs("one", "two")
    ref = await workspace.offload_context("s", msgs=msgs)
    log = await workspace.read_reference(ref)
    for line_no, msg in zip(range(ref.first_line, ref.last_line + 1), msgs, strict=True):
        assert _line(log, line_no) == json.loads(msg.model_dump_json())


async def test_read_context_returns_every_message_oldest_first(workspace: Workspace) -> None:
    await workspace.offload_context("s", msgs=user_msgs("1", "2"))
    await workspace.offload_context("s", msgs=user_msgs("3"))
    assert [m["content"] for m in await workspace.read_context("s")] == ["1", "2", "3"]


async def test_context_messages_round_trip_to_msg(workspace: Workspace) -> None:
    # Unknown fields are kept too (Msg allows extra keys).
    msg = Msg.model_validate(
        {
            "role": "assistant",
            "content": [TextBlock(text="see")],
            "name": "bot",
            "metadata": {"k": [1, 2]},
            "extra_field": "kept",
        }
    )
    await workspace.offload_context("s", msgs=[msg])
    [line] = await workspace.read_context("s")
    assert Msg.model_validate(line) == msg


async def test_a_single_message_not_in_a_list_is_one_line(workspace: Workspace) -> None:
    ref = await workspace.offload_context("s", msgs=Msg(role="user", content="alone"))  # type: ignore[arg-type]
    assert (ref.first_line, ref.last_line) == (1, 1)
    assert [m["content"] for m in await workspace.read_context("s")] == ["alone"]


async def test_empty_msgs_write_nothing(workspace: Workspace) -> None:
    ref = await workspace.offload_context("s", msgs=[])
    assert (ref.first_line, ref.last_line) == (0, -1)
    assert await workspace.read_context("s") == []
    assert await workspace.list_sessions() == []


async def test_sessions_do_not_share_a_context_log(workspace: Workspace) -> None:
    await workspace.offload_context("a", msgs=user_msgs("for a"))
    ref = await workspace.offload_context("b", msgs=user_msgs("for b"))
    assert ref.first_line == 1
    assert [m["content"] for m in await workspace.read_context("a")] == ["for a"]
    assert await workspace.list_sessions() == ["a", "b"]


# -- events -----------------------------------------------------------------------------------


async def test_context_offload_records_an_event(workspace: Workspace) -> None:
    ref = await workspace.offload_context("s", msgs=user_msgs("a", "b"))
    log = await workspace.read_reference(ref)
    [event] = await workspace.read_events("s")
    assert event["kind"] == "context"
    assert event["reference"] == str(ref)
    assert event["bytes"] == len(log)
    assert event["lines"] == [1, 2]
    assert event["messages"] == 2
    assert "time" in event


async def test_tool_result_offload_records_an_event(workspace: Workspace) -> None:
    result = ToolResultBlock(id="call_1", name="grep", output="l1\nl2\nl3")
    path = await workspace.offload_tool_result("s", result)
    [event] = await workspace.read_events("s")
    assert event["kind"] == "tool_result"
    assert event["reference"] == path
    assert event["bytes"] == len(b"l1\nl2\nl3")
    assert event["lines"] == 3
    assert (event["tool_id"], event["tool_name"]) == ("call_1", "grep")


async def test_record_event_appends_a_custom_event(workspace: Workspace) -> None:
    await workspace.record_event("s", "compression", tokens_before=900, tokens_after=120)
    [event] = await workspace.read_events("s")
    assert (event["kind"], event["tokens_before"], event["tokens_after"]) == (
        "compression",
        900,
        120,
    )


# -- tool results -----------------------------------------------------------------------------


async def test_tool_result_file_holds_the_whole_output(workspace: Workspace) -> None:
    output = "".join(f"line {i}\n" for i in range(5000))
    path = await workspace.offload_tool_result("s", ToolResultBlock(id="call_1", output=output))
    assert path.endswith("/sessions/s/tool_result-call_1.txt")
    assert await workspace.read_reference(path) == output.encode()


async def test_same_tool_result_twice_gives_one_file(workspace: Workspace) -> None:
    result = ToolResultBlock(id="call_1", output="same")
    first = await workspace.offload_tool_result("s", result)
    second = await workspace.offload_tool_result("s", result)
    assert first == second
    assert await workspace.list_files("s") == [first]


async def test_same_tool_id_with_other_content_gets_a_new_file(workspace: Workspace) -> None:
    paths = [
        await workspace.offload_tool_result("s", ToolResultBlock(id="call_1", output=text))
        for text in ("first", "second", "third")
    ]
    assert [p.rsplit("/", 1)[1] for p in paths] == [
        "tool_result-call_1.txt",
        "tool_result-call_1.2.txt",
        "tool_result-call_1.3.txt",
    ]
    assert [await workspace.read_reference(p) for p in paths] == [b"first", b"second", b"third"]


async def test_earlier_content_of_a_reused_tool_id_is_found_again(workspace: Workspace) -> None:
    a = await workspace.offload_tool_result("s", ToolResultBlock(id="c", output="A"))
    await workspace.offload_tool_result("s", ToolResultBlock(id="c", output="B"))
    assert await workspace.offload_tool_result("s", ToolResultBlock(id="c", output="A")) == a
    assert len(await workspace.list_files("s")) == 2


async def test_tool_result_with_a_data_block_stores_it_and_names_it(workspace: Workspace) -> None:
    result = ToolResultBlock(
        id="call_1", output=[TextBlock(text="plot:"), image_block(name="chart.png")]
    )
    path = await workspace.offload_tool_result("s", result)
    text = (await workspace.read_reference(path)).decode()
    first, data_line = text.split("\n")
    assert first == "plot:"
    digest = hashlib.sha256(PNG).hexdigest()
    assert data_line.startswith("<data url='") and data_line.endswith(
        "' name='chart.png' media_type='image/png'/>"
    )
    url = data_line[len("<data url='") :].split("'", 1)[0]
    assert url.endswith(f"/data/{digest}.png")
    assert await workspace.read_reference(url) == PNG


async def test_tool_results_of_two_sessions_are_kept_apart(workspace: Workspace) -> None:
    a = await workspace.offload_tool_result("a", ToolResultBlock(id="c", output="A"))
    b = await workspace.offload_tool_result("b", ToolResultBlock(id="c", output="B"))
    assert a != b
    assert await workspace.read_reference(a) == b"A"
    assert await workspace.read_reference(b) == b"B"


# -- data blocks ------------------------------------------------------------------------------


async def test_data_block_comes_back_with_a_url_source(workspace: Workspace) -> None:
    block = await workspace.offload_data_block(image_block(name="chart.png"))
    assert isinstance(block, DataBlock)
    assert isinstance(block.source, URLSource)
    assert block.source.media_type == "image/png"
    assert block.name == "chart.png"
    assert block.source.url.endswith(f"/data/{hashlib.sha256(PNG).hexdigest()}.png")
    assert await workspace.read_reference(block.source.url) == PNG


async def test_same_payload_is_stored_once(workspace: Workspace) -> None:
    first = await workspace.offload_data_block(image_block(name="a.png"))
    second = await workspace.offload_data_block(image_block(name="b.png"))
    assert first.source.url == second.source.url


async def test_different_payloads_are_stored_apart(workspace: Workspace) -> None:
    first = await workspace.offload_data_block(image_block(PNG, name="chart.png"))
    second = await workspace.offload_data_block(image_block(PNG + b"!", name="chart.png"))
    assert first.source.url != second.source.url
    assert await workspace.read_reference(second.source.url) == PNG + b"!"


async def test_data_block_with_a_url_source_is_returned_unchanged(workspace: Workspace) -> None:
    block = DataBlock(source=URLSource(url="https://example.com/a.png", media_type="image/png"))
    assert await workspace.offload_data_block(block) is block


# -- read side --------------------------------------------------------------------------------


async def test_list_sessions_is_sorted(workspace: Workspace) -> None:
    for session_id in ("b", "a", "c"):
        await workspace.offload_context(session_id, msgs=user_msgs("x"))
    assert await workspace.list_sessions() == ["a", "b", "c"]


async def test_read_of_an_unknown_session_is_empty(workspace: Workspace) -> None:
    assert await workspace.read_context("nobody") == []
    assert await workspace.read_events("nobody") == []
    assert await workspace.read_state("nobody") is None
    assert await workspace.list_files("nobody") == []


async def test_read_reference_refuses_an_unknown_reference(workspace: Workspace) -> None:
    ref = await workspace.offload_context("s", msgs=user_msgs("x"))
    for unknown in (
        str(ref).replace("context.jsonl", "nope.jsonl"),
        str(ref).replace("/s/", "/t/"),
        "",
        "\x00",
        "memory://other/sessions/s/context.jsonl",
    ):
        with pytest.raises(InvalidReference):
            await workspace.read_reference(unknown)


async def test_write_state_is_read_back(workspace: Workspace) -> None:
    await workspace.write_state("s", {"messages": [1]})
    await workspace.write_state("s", {"messages": [1, 2]})
    assert await workspace.read_state("s") == {"messages": [1, 2]}


async def test_purge_session_removes_the_session(workspace: Workspace) -> None:
    await workspace.offload_context("s", msgs=user_msgs("x"))
    path = await workspace.offload_tool_result("s", ToolResultBlock(id="c", output="out"))
    await workspace.offload_context("other", msgs=user_msgs("y"))
    assert await workspace.purge_session("s") is True
    assert await workspace.list_sessions() == ["other"]
    assert await workspace.read_context("s") == []
    assert await workspace.read_events("s") == []
    assert await workspace.list_files("s") == []
    with pytest.raises(InvalidReference):
        await workspace.read_reference(path)
    assert [m["content"] for m in await workspace.read_context("other")] == ["y"]


async def test_purge_session_keeps_shared_data(workspace: Workspace) -> None:
    msg = Msg(role="user", content=[image_block(name="chart.png")])
    await workspace.offload_context("s", msgs=[msg])
    [line] = await workspace.read_context("s")
    url = line["content"][0]["source"]["url"]
    await workspace.purge_session("s")
    assert await workspace.read_reference(url) == PNG


async def test_purge_of_an_unknown_session_returns_false(workspace: Workspace) -> None:
    assert await workspace.purge_session("nobody") is False


async def test_a_purged_session_starts_again_at_line_one(workspace: Workspace) -> None:
    await workspace.offload_context("s", msgs=user_msgs("a", "b", "c"))
    await workspace.purge_session("s")
    ref = await workspace.offload_context("s", msgs=user_msgs("again"))
    assert (ref.first_line, ref.last_line) == (1, 1)


# -- InMemoryWorkspace only -------------------------------------------------------------------


async def test_memory_references_follow_the_on_disk_names() -> None:
    ws = InMemoryWorkspace("mine")
    ref = await ws.offload_context("s", msgs=user_msgs("x"))
    path = await ws.offload_tool_result("s", ToolResultBlock(id="call_1", output="o"))
    block = await ws.offload_data_block(image_block(name="chart.png"))
    assert ref == "memory://mine/sessions/s/context.jsonl"
    assert path == "memory://mine/sessions/s/tool_result-call_1.txt"
    assert block.source.url == f"memory://mine/data/{hashlib.sha256(PNG).hexdigest()}.png"


async def test_two_memory_workspaces_share_nothing() -> None:
    a, b = InMemoryWorkspace("a"), InMemoryWorkspace("b")
    ref = await a.offload_context("s", msgs=user_msgs("x"))
    assert await b.list_sessions() == []
    with pytest.raises(InvalidReference):
        await b.read_reference(ref)


async def test_an_append_to_a_long_memory_log_does_not_copy_it() -> None:
    # Each append made a new bytes object holding the whole log (O(its length squared)
    # over a session). Measured in memory, not time: while 200 messages go to a log of
    # about 10 MB, the most allocated at once grows by far less than one copy of it.
    import tracemalloc

    ws = InMemoryWorkspace()
    filler = [Msg(role="user", content="x" * 10_000, id=f"f{i}") for i in range(1_000)]
    await ws.offload_context("s", filler)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for i in range(200):
            await ws.offload_context("s", [Msg(role="user", content=f"m{i}", id=f"m{i}")])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - before < 3_000_000, peak - before
    # And what a reader holds stays as it was read.
    log = await ws.read_reference(ws.context_path("s"))
    await ws.offload_context("s", [Msg(role="user", content="later", id="later")])
    assert log.count(b"\n") == 1_200
    assert (await ws.read_reference(ws.context_path("s"))).count(b"\n") == 1_201
    assert json.loads(await ws.read_lines(ws.context_path("s"), 1_201, 1_201))["id"] == "later"
