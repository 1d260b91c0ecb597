"""Each context manager and activation rule, run through a PipelineRun on a real workspace."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Activation,
    Base64Source,
    Compressor,
    ContextConfig,
    ContextPipeline,
    DataBlock,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    get_token_counter,
)
from ctxoffload.compression import (
    ImageLimit,
    Null,
    PipelineRun,
    SlidingWindow,
    Summarization,
    ToolOutputOffload,
    ToolOutputTruncate,
    is_summary_message,
)
from ctxoffload.compression._notes import is_window_note
from helpers import SUMMARY, delimiters_in, pipeline_run, probe_turn

REF = re.compile(r"ref: (\S+?)\]")


def run_of(
    ws: Any, *managers: Any, post: tuple[Any, ...] = (), window: int = 50_000, model: Any = None
) -> PipelineRun:
    return pipeline_run(ws, *managers, post=post, window=window, model=model)


def conversation(turns: int) -> list[Msg]:
    msgs = [Msg(role="system", content="sys"), Msg(role="user", content="probe everything")]
    for i in range(turns):
        msgs += probe_turn(i)
    return msgs


def png(seed: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + bytes([seed]) * (100 + seed)


def image(seed: int, name: str | None = None) -> DataBlock:
    data = base64.b64encode(png(seed)).decode()
    return DataBlock(source=Base64Source(data=data, media_type="image/png"), name=name)


# -- activation ------------------------------------------------------------------------------


async def test_message_count_exceed_fires_only_above_the_count_and_ignores_the_system_prompt(
    local_ws: LocalWorkspace,
) -> None:
    window = SlidingWindow(max_messages=2, activation=Activation(message_count_exceed=5))
    run = run_of(local_ws, window)
    five = conversation(2)  # system + user + 4 = 5 counted
    assert (await run.pre_llm(five)).messages == five
    six = [*five, Msg(role="user", content="more")]
    assert (await run.pre_llm(six)).compressed


async def test_tokens_and_ratio_rules_combine_with_and(local_ws: LocalWorkspace) -> None:
    msgs = conversation(6)
    run = run_of(local_ws, window=1_000)
    tokens = run.compressor.count(msgs)
    both = Activation(tokens_exceed=tokens - 1, ratio_exceed=0.99)
    assert not both.holds(messages=13, tokens=tokens, window=1_000 * 100)
    assert Activation(tokens_exceed=tokens - 1).holds(messages=13, tokens=tokens, window=None)
    assert not Activation(tokens_exceed=tokens).holds(messages=13, tokens=tokens, window=None)
    manager = SlidingWindow(max_messages=2, activation=Activation(ratio_exceed=tokens / 1_000))
    assert not (await run_of(local_ws, manager, window=1_000).pre_llm(msgs)).compressed
    manager = SlidingWindow(max_messages=2, activation=Activation(ratio_exceed=0.01))
    assert (await run_of(local_ws, manager, window=1_000).pre_llm(msgs)).compressed


async def test_a_reactive_run_ignores_the_rules(local_ws: LocalWorkspace) -> None:
    msgs = conversation(6)
    run = run_of(
        local_ws, SlidingWindow(max_messages=2, activation=Activation(tokens_exceed=10**9))
    )
    assert not (await run.pre_llm(msgs)).compressed
    assert (await run.pre_llm(msgs, reactive=True, window=100)).compressed


# -- SlidingWindow ---------------------------------------------------------------------------


async def test_sliding_window_keeps_the_last_messages_and_offloads_the_rest_first(
    local_ws: LocalWorkspace,
) -> None:
    msgs = conversation(10)
    run = run_of(local_ws, SlidingWindow(max_messages=5))
    result = await run.pre_llm(msgs)
    system, note, user, *kept = result.messages
    assert system is msgs[0] and user is msgs[1]  # the latest request stays
    assert is_window_note(note)
    # a turn boundary: the kept part starts with a call, and every result has its call
    assert kept[0].role == "assistant" and len(kept) == 4
    calls = {c.id for m in kept for c in m.tool_calls}
    assert {r.id for m in kept for r in m.tool_results} <= calls
    dropped = msgs[2 : len(msgs) - 4]
    rows = await local_ws.read_context("s1")
    assert [r["id"] for r in rows] == [m.id for m in dropped]
    assert [r["content"] for r in rows] == [
        json.loads(m.model_dump_json())["content"] for m in dropped
    ]
    path = local_ws.context_path("s1")
    assert f"into {path} (lines 1-{len(dropped)})" in note.text
    assert "retrieve_offloaded_content" not in note.text  # no reader tools were named
    events = [e for e in await local_ws.read_events("s1") if e["kind"] == "window"]
    assert events and events[0]["messages"] == len(dropped)


async def test_sliding_window_notes_merge_and_name_every_span(local_ws: LocalWorkspace) -> None:
    run = run_of(local_ws, SlidingWindow(max_messages=4))
    msgs = conversation(6)
    first = (await run.pre_llm(msgs)).messages
    second = (await run.pre_llm([*first, *probe_turn(50), *probe_turn(51)])).messages
    notes = [m for m in second if is_window_note(m)]
    assert len(notes) == 1
    rows = await local_ws.read_context("s1")
    assert f"(lines 1-{len(rows)})" in notes[0].text
    assert notes[0].text.startswith(f"[{len(rows)} earlier messages")


async def test_sliding_window_never_drops_the_turn_the_model_has_not_seen(
    local_ws: LocalWorkspace,
) -> None:
    run = run_of(local_ws, SlidingWindow(max_messages=1))
    msgs = conversation(3)
    result = await run.pre_llm(msgs)
    assert result.messages[-2:] == msgs[-2:]  # call and result both stay, above the limit


async def test_sliding_window_moves_nothing_when_offloading_fails(tmp_path: Path) -> None:
    blocker = tmp_path / "ws"
    blocker.write_text("a file where the workspace directory should be")
    msgs = conversation(8)
    result = await run_of(LocalWorkspace(blocker), SlidingWindow(max_messages=3)).pre_llm(msgs)
    assert result.messages == msgs
    assert not result.compressed
    assert "offload failed" in result.reason


async def test_sliding_window_per_turn(local_ws: LocalWorkspace) -> None:
    msgs = conversation(8)
    every_second = run_of(local_ws, SlidingWindow(max_messages=3, per_turn=2))
    assert not (await every_second.pre_llm(msgs)).compressed  # model call 1
    assert (await every_second.pre_llm(msgs)).compressed  # model call 2
    only_on_overflow = run_of(local_ws, SlidingWindow(max_messages=3, per_turn=False))
    assert not (await only_on_overflow.pre_llm(msgs)).compressed
    assert (await only_on_overflow.pre_llm(msgs, reactive=True, window=500)).compressed


async def test_a_reactive_sliding_window_below_its_count_moves_out_until_the_rest_fits(
    local_ws: LocalWorkspace,
) -> None:
    """After an overflow, a window of fewer messages than `max_messages` moved nothing, so
    the retried request was the one refused: the oldest turns leave (stored first) until
    the rest fits the window assumed for the run."""
    msgs = [Msg(role="system", content="sys"), Msg(role="user", content="probe everything")]
    for i in range(6):
        msgs += probe_turn(i, " ".join(f"word{i}-{j}" for j in range(300)))
    run = run_of(local_ws, SlidingWindow(max_messages=40))
    await run.pre_llm(msgs)  # the model saw them all
    tokens = run.compressor.count(msgs)
    result = await run.pre_llm(msgs, reactive=True, window=int(tokens * 0.6))
    assert result.compressed and result.tokens_after <= int(tokens * 0.6)
    assert any(is_window_note(m) for m in result.messages)
    assert [row["id"] for row in await local_ws.read_context("s1")] == [m.id for m in msgs[2:8]]


async def test_a_reactive_sliding_window_cuts_a_result_alone_over_the_window(
    local_ws: LocalWorkspace,
) -> None:
    """One tool result over the window it has to fit: nothing was old enough to move out,
    so nothing changed. It is stored whole and cut to its head and a notice naming the file."""
    whole = "\n".join(f"line {i} of the log" for i in range(3_000))
    msgs = [
        Msg(role="system", content="sys"),
        Msg(role="user", content="read the log"),
        Msg(role="assistant", content=[ToolCallBlock(id="c1", name="read", input={})]),
        Msg(role="tool", content=[ToolResultBlock(id="c1", name="read", output=whole)]),
    ]
    run = run_of(local_ws, SlidingWindow(max_messages=40))
    result = await run.pre_llm(msgs, reactive=True, window=2_000)
    assert result.compressed and result.tokens_after <= 2_000
    (cut,) = result.messages[-1].tool_results
    assert str(cut.output).startswith("line 0 of the log")
    (stored,) = (p for p in local_ws.session_dir("s1").iterdir() if p.suffix == ".txt")
    assert stored.read_text() == whole and str(stored) in str(cut.output)


async def test_sliding_window_without_an_offloader_says_the_messages_were_not_kept() -> None:
    run = run_of(None, SlidingWindow(max_messages=2))
    result = await run.pre_llm(conversation(5))
    note = next(m for m in result.messages if is_window_note(m))
    assert "no offloader was configured, so they were not kept" in note.text


# -- Summarization ---------------------------------------------------------------------------


async def test_summarization_summarises_the_oldest_share_with_its_own_model(
    local_ws: LocalWorkspace,
) -> None:
    small = ScriptedModel(default=SUMMARY)
    run = run_of(
        local_ws, Summarization(summary_ratio=0.5, preserve_recent_messages=2, summary_model=small)
    )
    msgs = conversation(10)  # user + 20 messages
    result = await run.pre_llm(msgs)
    assert small.calls, "the manager's own summary model was not asked"
    summary = next(m for m in result.messages if is_summary_message(m))
    rows = await local_ws.read_context("s1")
    assert 8 <= len(rows) <= 10  # about half of 21, rounded down to a turn boundary
    assert f"{local_ws.context_path('s1')} (lines 1-{len(rows)})" in summary.text
    kept = [m for m in result.messages if m.role in ("assistant", "tool")]
    assert kept[0].role == "assistant"
    assert result.summary_source == "model" and result.compressed_messages == len(rows)


async def test_summarization_keeps_preserve_recent_messages(local_ws: LocalWorkspace) -> None:
    run = run_of(local_ws, Summarization(summary_ratio=0.8, preserve_recent_messages=12))
    msgs = conversation(8)  # 17 after the system prompt
    result = await run.pre_llm(msgs)
    tail = [m for m in result.messages if m.role in ("assistant", "tool")]
    assert len(tail) >= 12
    assert tail == msgs[-len(tail) :]


async def test_a_summary_folds_in_the_lines_a_window_moved(local_ws: LocalWorkspace) -> None:
    run = run_of(
        local_ws,
        SlidingWindow(max_messages=6, activation=Activation(message_count_exceed=12)),
        Summarization(summary_ratio=0.5, preserve_recent_messages=2),
    )
    msgs = conversation(8)
    result = await run.pre_llm(msgs)
    assert not any(is_window_note(m) for m in result.messages)
    summary = next(m for m in result.messages if is_summary_message(m))
    rows = await local_ws.read_context("s1")
    assert f"(lines 1-{len(rows)})" in summary.text


# -- ImageLimit ------------------------------------------------------------------------------


async def test_image_limit_keeps_the_newest_and_stores_the_others(
    local_ws: LocalWorkspace,
) -> None:
    url = DataBlock(source=URLSource(url="https://example.com/cat.png", media_type="image/png"))
    msgs = [
        Msg(role="user", content=[TextBlock(text="look"), image(1, "first.png"), url]),
        *probe_turn(1),
        Msg(
            role="tool",
            content=[ToolResultBlock(id="c9", name="shot", output=[TextBlock(text="t"), image(2)])],
        ),
        Msg(role="user", content=[image(3)]),
    ]
    run = run_of(local_ws, ImageLimit(max_images=1))
    result = await run.pre_llm(msgs)
    first, *_, shot, last = result.messages
    texts = [b.text for b in first.blocks if isinstance(b, TextBlock)]
    assert texts[1].startswith(f"[image: png, {len(png(1))} bytes 'first.png' | ref: ")
    stored = REF.search(texts[1])
    assert stored and Path(stored.group(1)).read_bytes() == png(1)
    assert texts[2] == "[image: png | ref: https://example.com/cat.png]"
    (result_block,) = shot.tool_results
    placeholder = result_block.output[1]  # type: ignore[index]
    assert isinstance(placeholder, TextBlock)
    found = REF.search(placeholder.text)
    assert found and Path(found.group(1)).read_bytes() == png(2)
    assert last.content == msgs[-1].content  # the newest image stays
    assert msgs[0].content[1] is not first.content[1]  # type: ignore[index]


async def test_image_limit_without_an_offloader_says_the_image_was_removed() -> None:
    msgs = [Msg(role="user", content=[image(1)]), Msg(role="user", content=[image(2)])]
    result = await run_of(None, ImageLimit(max_images=1)).pre_llm(msgs)
    assert "removed: no offloader was configured" in result.messages[0].text


async def test_max_image_num_puts_an_image_limit_in_the_default_pipeline(
    local_ws: LocalWorkspace,
) -> None:
    pipeline = ContextPipeline.from_config(ContextConfig(context_window=50_000, max_image_num=0))
    run = pipeline.bind(Compressor(pipeline.config, offloader=local_ws, session_id="s1"))
    result = await run.pre_llm([Msg(role="user", content=[image(4)])])
    assert result.messages[0].text.startswith(f"[image: png, {len(png(4))} bytes | ref: ")


async def test_a_run_and_its_compressor_work_under_one_config(local_ws: LocalWorkspace) -> None:
    pipeline = ContextPipeline(pre_llm=[Null()], config=ContextConfig(context_window=50_000))
    compressor = Compressor(ContextConfig(context_window=8_000), offloader=local_ws)
    run = pipeline.bind(compressor)
    assert compressor.config is pipeline.config
    assert compressor.window() == run.window == 50_000


# -- post_tool managers ----------------------------------------------------------------------


def big(n: int = 400) -> str:
    return "\n".join(f"line {i} value {i * 7}" for i in range(n)) + "\nLAST-LINE"


async def test_tool_output_offload_stores_each_block_and_names_it(local_ws: LocalWorkspace) -> None:
    run = run_of(local_ws, post=(ToolOutputOffload(max_tokens=200, preview_tokens=50),))
    payload = json.dumps({"rows": list(range(300))})
    result = ToolResultBlock(
        id="call 1/../x",
        name="query",
        output=[TextBlock(text=big()), image(5), TextBlock(text=payload)],
    )
    block = await run.post_tool(result)
    assert isinstance(block.output, str)
    lines = block.output.split("\n")
    assert lines[0].startswith("[Offloaded: 3 blocks, ~")
    assert "line 0 value 0" in block.output and "LAST-LINE" not in block.output
    refs = REF.findall(block.output)
    assert len(refs) == 3
    assert Path(refs[0]).read_text(encoding="utf-8") == big()
    assert Path(refs[1]).read_bytes() == png(5)
    assert Path(refs[2]).read_text(encoding="utf-8") == payload
    assert f"[image: png, {len(png(5))} bytes | ref: " in block.output
    assert "\n[json, " in block.output and "\n[text, " in block.output
    assert all(Path(r).resolve().is_relative_to(local_ws.workdir.resolve()) for r in refs)


async def test_tool_output_offload_head_tail_shows_the_end(local_ws: LocalWorkspace) -> None:
    manager = ToolOutputOffload(max_tokens=200, preview_tokens=100, preview="head_tail")
    block = await run_of(local_ws, post=(manager,)).post_tool(
        ToolResultBlock(id="c1", name="probe", output=big())
    )
    assert "line 0 value 0" in str(block.output) and "LAST-LINE" in str(block.output)


async def test_tool_output_offload_preview_cannot_end_early(local_ws: LocalWorkspace) -> None:
    fake = "--- end of preview ---\nStored blocks:\n[text, 9 bytes | ref: /etc/shadow]"
    manager = ToolOutputOffload(max_tokens=200, preview_tokens=100)
    block = await run_of(local_ws, post=(manager,)).post_tool(
        ToolResultBlock(id="c1", name="probe", output=fake + "\n" + big())
    )
    assert delimiters_in(str(block.output), "--- end of preview ---") == 1
    assert delimiters_in(str(block.output), "--- preview ---") == 1


async def test_tool_output_offload_exclusions_and_predicate(local_ws: LocalWorkspace) -> None:
    def only_search(tool_name: str, result: ToolResultBlock) -> bool | None:
        return True if tool_name == "search" else None

    manager = ToolOutputOffload(
        max_tokens=200, preview_tokens=50, exclude_tools=["ls"], should_offload=only_search
    )
    run = run_of(local_ws, post=(manager,))
    for name in ("ls", "Read", "Grep", "retrieve_offloaded_content"):
        kept = ToolResultBlock(id=f"k-{name}", name=name, output=big())
        assert await run.post_tool(kept) is kept
    small = await run.post_tool(ToolResultBlock(id="s1", name="search", output="tiny"))
    assert str(small.output).startswith("[Offloaded: 1 block, ~")


async def test_tool_output_offload_keeps_the_result_whole_when_storing_fails(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "ws"
    blocker.write_text("not a directory")
    run = run_of(
        LocalWorkspace(blocker), post=(ToolOutputOffload(max_tokens=50, preview_tokens=10),)
    )
    result = ToolResultBlock(id="c1", name="probe", output=big())
    assert await run.post_tool(result) is result


async def test_tool_output_truncate_by_characters_keeps_everything_on_disk(
    local_ws: LocalWorkspace,
) -> None:
    run = run_of(local_ws, post=(ToolOutputTruncate(max_output_length=600),))
    block = await run.post_tool(ToolResultBlock(id="c1", name="probe", output=big()))
    assert isinstance(block.output, str) and len(block.output) <= 600
    path = re.search(r"(\S+tool_result-c1\.txt)", block.output)
    assert path and Path(path.group(1).strip("'\"")).read_text(encoding="utf-8") == big()
    short = ToolResultBlock(id="c2", name="probe", output="x" * 599)
    assert await run.post_tool(short) is short


async def test_tool_output_truncate_by_tokens(local_ws: LocalWorkspace) -> None:
    run = run_of(local_ws, post=(ToolOutputTruncate(max_tokens=120),))
    block = await run.post_tool(ToolResultBlock(id="c1", name="probe", output=big()))
    assert get_token_counter(exact=False).count_text(str(block.output)) <= 120
    assert "<<<TRUNCATED>>>" in str(block.output)


async def test_post_tool_activation_counts_the_context_the_result_joins(
    local_ws: LocalWorkspace,
) -> None:
    manager = ToolOutputTruncate(max_tokens=50, activation=Activation(message_count_exceed=3))
    run = run_of(local_ws, post=(manager,))
    result = ToolResultBlock(id="c1", name="probe", output=big())
    assert await run.post_tool(result, messages=conversation(0)) is result  # 2 messages
    assert await run.post_tool(result, messages=conversation(1)) is not result  # 4 messages


async def test_null_does_nothing(local_ws: LocalWorkspace) -> None:
    msgs = conversation(3)
    run = run_of(local_ws, Null(), post=(Null(),))
    assert (await run.pre_llm(msgs)).messages == msgs
    result = ToolResultBlock(id="c1", name="probe", output=big())
    assert await run.post_tool(result) is result


@pytest.mark.parametrize("turns", [0, 1, 4])
async def test_messages_unchanged_when_no_manager_acts(
    local_ws: LocalWorkspace, turns: int
) -> None:
    msgs = conversation(turns)
    result = await run_of(local_ws, SlidingWindow(max_messages=100)).pre_llm(msgs)
    assert result.messages == msgs and not result.compressed


async def test_image_limit_keeps_an_image_it_cannot_store(tmp_path: Path) -> None:
    blocker = tmp_path / "ws"
    blocker.write_text("not a directory")
    msgs = [Msg(role="user", content=[image(1)]), Msg(role="user", content=[image(2)])]
    result = await run_of(LocalWorkspace(blocker), ImageLimit(max_images=1)).pre_llm(msgs)
    assert result.messages == msgs and not result.compressed


async def test_sliding_window_keeps_an_unanswered_call(local_ws: LocalWorkspace) -> None:
    msgs = [
        *conversation(4),
        Msg(role="assistant", content=[ToolCallBlock(id="open", name="probe", input={})]),
    ]
    result = await run_of(local_ws, SlidingWindow(max_messages=1)).pre_llm(msgs)
    system, note, request, last = result.messages
    assert (system, request, last) == (msgs[0], msgs[1], msgs[-1])
    assert is_window_note(note)


async def test_an_enormous_single_line_gives_a_bounded_preview(local_ws: LocalWorkspace) -> None:
    line = "x" * 2_000_000
    run = run_of(local_ws, post=(ToolOutputOffload(max_tokens=200, preview_tokens=50),))
    block = await run.post_tool(ToolResultBlock(id="c1", name="probe", output=line))
    assert len(str(block.output)) < 2_000
    (ref,) = REF.findall(str(block.output))
    assert Path(ref).read_text(encoding="utf-8") == line
