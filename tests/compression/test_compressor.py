"""The Compressor: persist before drop, a summary that names the exact lines, the artifact
trail, events, triggers, and state carried across compressions and across instances."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import (
    Base64Source,
    ContextConfig,
    DataBlock,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    Summary,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import TRUNCATION_MARKER, Compressor, is_summary_message
from helpers import summary_reply

COUNTER = get_token_counter(exact=True)
FIELDS = tuple(Summary.model_fields)
SYSTEM = Msg(role="system", content="You are a coding agent.")


def model(*marks: str) -> ScriptedModel:
    return ScriptedModel([summary_reply(m) for m in marks], default=summary_reply("default"))


def make(ws: LocalWorkspace | None, window: int = 3000, **config: Any) -> Compressor:
    return Compressor(
        ContextConfig(context_window=window, **config),
        model=model("one", "two", "three"),
        offloader=ws,
        session_id="s1",
        counter=COUNTER,
    )


def chat(n: int, start: int = 0) -> list[Msg]:
    """n messages alternating user / assistant, ~60 tokens each."""
    words = " ".join(f"word{j}" for j in range(25))
    return [
        Msg(role="user" if i % 2 == 0 else "assistant", content=f"message {i}: {words}")
        for i in range(start, start + n)
    ]


def as_row(msg: Msg) -> Any:
    return json.loads(msg.model_dump_json())


def span_of(summary_text: str) -> str:
    found = re.search(r"\(lines ([0-9, -]+)\)", summary_text)
    assert found, summary_text[:300]
    return found.group(1)


def lines_of(path: str, first: int, last: int) -> list[Any]:
    """`sed -n 'FIRST,LASTp' PATH`, parsed."""
    raw = Path(path).read_bytes().split(b"\n")
    return [json.loads(line) for line in raw[first - 1 : last]]


async def test_when_offloading_fails_nothing_leaves_the_context(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workdir.mkdir()
    (workdir / "sessions").write_text("not a directory")
    comp = make(LocalWorkspace(workdir))
    msgs = [SYSTEM, *chat(60)]
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        result = await comp.maybe_compress(msgs)
    assert result.messages == msgs
    assert all(a is b for a, b in zip(result.messages, msgs, strict=True))
    assert not result.compressed
    assert "offload" in result.reason
    assert result.tokens_after == result.tokens_before
    assert comp.summary is None and comp.compressions == 0
    assert comp.model is not None and not comp.model.calls  # type: ignore[attr-defined]
    assert any("not compressing" in r.getMessage() for r in caplog.records)


async def test_the_summary_names_the_file_and_the_exact_lines_of_the_compressed_messages(
    local_ws: LocalWorkspace,
) -> None:
    comp = make(local_ws)
    # Something else in the session log first, so the span does not start at line 1.
    await local_ws.offload_context("s1", msgs=chat(3, start=900))
    msgs = [SYSTEM, *chat(60)]
    result = await comp.maybe_compress(msgs)

    assert result.compressed
    path = str(local_ws.context_path("s1"))
    assert result.reference == path
    first, last = result.line_span or (0, 0)
    assert (first, last) == (4, 3 + result.compressed_messages)
    summary = result.messages[1]
    assert is_summary_message(summary)
    assert f"{path} (lines {first}-{last})" in summary.text
    compressed = [m for m in msgs[1:] if m not in result.messages]
    assert [as_row(m) for m in compressed] == lines_of(path, first, last)
    assert result.messages[0] is SYSTEM
    assert result.messages[2:] == msgs[-len(result.messages) + 2 :]


def tool_turn(i: int, name: str, lines: int) -> tuple[Msg, ToolResultBlock]:
    call = Msg(role="assistant", content=[ToolCallBlock(id=f"call{i}", name=name, input={"n": i})])
    output = "\n".join(f"{name} output {i} line {k}" for k in range(lines))
    return call, ToolResultBlock(id=f"call{i}", name=name, output=output)


async def test_the_artifact_trail_lists_offloaded_files_newest_first_within_its_limit(
    local_ws: LocalWorkspace,
) -> None:
    comp = make(local_ws, window=6000, tool_result_limit=200, artifact_trail_limit=3)
    msgs: list[Msg] = [SYSTEM, Msg(role="user", content="inspect everything")]
    tools = ["ls", "grep", "cat", "find", "git"]
    for i, name in enumerate(tools):
        call, block = tool_turn(i, name, lines=100 + 10 * i)
        msgs += [call, Msg(role="tool", content=[await comp.process_tool_result(block)])]
    result = await comp.maybe_compress(msgs, force=True)

    summary = result.messages[1].text.split("</context_summary>", 1)[0]
    trail = (summary + "</context_summary>").split("## Offloaded files\n", 1)[1].split("\n")
    paths = [str(local_ws.session_dir("s1") / f"tool_result-call{i}.txt") for i in range(5)]
    assert len(trail) == 5  # three files, the "older" line, and the closing tag
    for line, i in zip(trail[:3], (4, 3, 2), strict=True):
        size = Path(paths[i]).stat().st_size
        assert line.startswith(f"- {paths[i]} (")
        assert f"{size / 1024:.1f} KB" in line or f"{size:,} bytes" in line
        assert f"{100 + 10 * i} lines" in line
        assert line.endswith(f"from {tools[i]})")
    assert trail[3] == "- ... and 2 older files in the same session folder"
    assert [a.path for a in comp.artifacts] == paths[::-1]


async def test_a_compression_event_records_the_token_counts(local_ws: LocalWorkspace) -> None:
    comp = make(local_ws)
    result = await comp.maybe_compress([SYSTEM, *chat(60)])
    events = [e for e in await local_ws.read_events("s1") if e["kind"] == "compression"]
    assert len(events) == 1
    event = events[0]
    assert (event["tokens_before"], event["tokens_after"]) == (
        result.tokens_before,
        result.tokens_after,
    )
    assert event["tokens_after"] < event["tokens_before"]
    assert event["reference"] == result.reference
    assert event["lines"] == list(result.line_span or ())
    assert event["messages"] == result.compressed_messages
    assert event["summary_source"] == "model"


async def test_below_the_trigger_nothing_happens(local_ws: LocalWorkspace) -> None:
    comp = make(local_ws)
    msgs = [SYSTEM, *chat(10)]
    assert comp.count(msgs) < 0.8 * 3000
    result = await comp.maybe_compress(msgs)
    assert not result.compressed and result.reason == "below trigger"
    assert all(a is b for a, b in zip(result.messages, msgs, strict=True))
    assert len(result.messages) == len(msgs)
    assert not local_ws.workdir.exists()


async def test_force_compresses_below_the_trigger(local_ws: LocalWorkspace) -> None:
    comp = make(local_ws)
    msgs = [SYSTEM, *chat(20)]
    assert comp.count(msgs) < 0.8 * 3000
    result = await comp.maybe_compress(msgs, force=True)
    assert result.compressed
    assert len(await local_ws.read_context("s1")) == result.compressed_messages > 0


async def test_a_one_off_config_is_honoured(local_ws: LocalWorkspace) -> None:
    comp = make(local_ws, window=100_000)
    msgs = [SYSTEM, *chat(40)]
    assert not (await comp.maybe_compress(msgs)).compressed
    result = await comp.maybe_compress(msgs, config=ContextConfig(context_window=2000))
    assert result.compressed
    assert comp.count(result.messages) < 0.8 * 2000
    assert comp.config.context_window == 100_000


async def test_the_tokens_after_are_below_the_trigger(local_ws: LocalWorkspace) -> None:
    comp = make(local_ws)
    result = await comp.maybe_compress([SYSTEM, *chat(100)])
    assert result.compressed
    assert result.tokens_after == comp.count(result.messages) < 0.8 * 3000


async def test_a_second_compression_folds_the_first_and_merges_adjacent_spans(
    local_ws: LocalWorkspace,
) -> None:
    comp = make(local_ws)
    first = await comp.maybe_compress([SYSTEM, *chat(60)])
    second = await comp.maybe_compress([*first.messages, *chat(60, start=100)])
    assert first.line_span and second.line_span
    a, b = first.line_span
    c, d = second.line_span
    assert (a, c) == (1, b + 1)
    summary = second.messages[1]
    assert f"(lines 1-{d})" in summary.text
    assert sum(is_summary_message(m) for m in second.messages) == 1
    assert "two task_overview" in summary.text and "one task_overview" not in summary.text
    assert comp.compressions == 2
    # Every message of both rounds is in the file, in order, and none twice.
    rows = lines_of(str(local_ws.context_path("s1")), 1, d)
    texts = [r["content"] for r in rows]
    assert len(set(texts)) == len(texts)
    assert texts[0].startswith("message 0:")


async def test_spans_that_are_not_adjacent_are_listed_apart(local_ws: LocalWorkspace) -> None:
    comp = make(local_ws)
    first = await comp.maybe_compress([SYSTEM, *chat(60)])
    await local_ws.offload_context("s1", msgs=chat(2, start=500))  # another writer
    second = await comp.maybe_compress([*first.messages, *chat(60, start=100)])
    assert first.line_span and second.line_span
    a, b = first.line_span
    c, d = second.line_span
    assert c == b + 3
    assert span_of(second.messages[1].text) == f"{a}-{b}, {c}-{d}"


async def test_a_resumed_compressor_adopts_the_state_in_the_summary_message(
    local_ws: LocalWorkspace,
) -> None:
    comp = make(local_ws, tool_result_limit=200)
    call, block = tool_turn(1, "cat", lines=300)
    msgs = [
        SYSTEM,
        *chat(50),
        call,
        Msg(role="tool", content=[await comp.process_tool_result(block)]),
    ]
    first = await comp.maybe_compress([*msgs, *chat(10, start=60)])
    assert first.compressed and first.line_span

    resumed = Compressor(
        ContextConfig(context_window=3000, tool_result_limit=200),
        model=model("after resume"),
        offloader=local_ws,
        session_id="s1",
        counter=COUNTER,
    )
    second = await resumed.maybe_compress([*first.messages, *chat(60, start=100)])
    assert second.compressed and second.line_span
    assert resumed.compressions == 2
    assert [a.path for a in resumed.artifacts] == [a.path for a in comp.artifacts]
    assert resumed.model is not None
    prompt = "\n".join(m.text for m in resumed.model.calls[0])  # type: ignore[attr-defined]
    assert "one task_overview" in prompt  # the first summary was folded in
    text = second.messages[1].text
    assert f"(lines 1-{second.line_span[1]})" in text
    assert str(local_ws.session_dir("s1") / "tool_result-call1.txt") in text


async def test_an_earlier_summary_stays_when_there_is_nothing_new_to_compress(
    local_ws: LocalWorkspace,
) -> None:
    comp = make(local_ws)
    first = await comp.maybe_compress([SYSTEM, *chat(60)], force=True)
    assert first.compressed
    again = await comp.maybe_compress(first.messages, force=True)
    assert not again.compressed
    assert again.messages == first.messages
    assert str(local_ws.context_path("s1")) in again.messages[1].text


async def test_a_cut_request_is_not_cut_again_by_the_next_compression(
    local_ws: LocalWorkspace,
) -> None:
    comp = make(local_ws)
    png = Base64Source(media_type="image/png", data="iVBORw0KGgo=")
    text = "\n".join(f"constraint {i}: keep the output stable" for i in range(300))
    request = Msg(role="user", content=[TextBlock(text=text), DataBlock(source=png)])
    first = await comp.maybe_compress([SYSTEM, *chat(20), request], force=True)
    pinned = first.messages[2]
    assert pinned.id == request.id and TRUNCATION_MARKER in pinned.text
    replies = [m.model_copy(update={"role": "assistant"}) for m in chat(30, start=50)]
    second = await comp.maybe_compress([*first.messages, *replies], force=True)
    assert second.compressed
    assert second.messages[2].id == request.id  # still the latest request, still pinned
    assert second.messages[2].content == pinned.content
    files = sorted(p.name for p in local_ws.session_dir("s1").glob("tool_result-user-*"))
    assert files == [f"tool_result-user-{request.id}.txt"]


async def test_without_an_offloader_the_summary_says_nothing_was_kept() -> None:
    comp = make(None)
    result = await comp.maybe_compress([SYSTEM, *chat(60)])
    assert result.compressed and result.reference is None
    assert "not kept" in result.messages[1].text


async def test_the_summary_fits_its_budget_even_with_a_long_artifact_trail(
    local_ws: LocalWorkspace,
) -> None:
    comp = make(local_ws, tool_result_limit=100)
    for i in range(25):
        block = ToolResultBlock(id=f"toolu_01ABCDEFGHIJKLM{i:04d}", name="sh", output="x\n" * 600)
        await comp.process_tool_result(block)
    result = await comp.maybe_compress([SYSTEM, *chat(60)])
    assert result.compressed
    budget = max(comp.config.reserve_tokens(3000), 500)
    summary = result.messages[1].text
    assert COUNTER.count_text(summary) <= budget
    assert re.search(r"- \.\.\. and \d+ older files in the same session folder", summary)
    assert str(local_ws.context_path("s1")) in summary


async def test_a_field_cut_to_fit_drops_whole_paths_and_says_where_it_is_whole(
    local_ws: LocalWorkspace,
) -> None:
    paths = [f"/srv/exports/batch-{i:03d}/orders-{i:03d}.csv" for i in range(45)]
    reply = {**summary_reply("long"), "context_to_preserve": "Files: " + ", ".join(paths)}
    comp = Compressor(
        ContextConfig(context_window=3000),
        model=ScriptedModel(default=reply),
        offloader=local_ws,
        session_id="s1",
        counter=COUNTER,
    )
    result = await comp.maybe_compress([SYSTEM, *chat(60)])
    assert result.compressed
    text = result.messages[1].text
    field = text.split("## Context to preserve\n", 1)[1].split("\n", 1)[0]
    assert "characters not shown; whole in the events.jsonl beside context.jsonl]" in field
    shown = re.findall(r"/srv/[^\s,\[]*", field)
    assert shown and set(shown) <= set(paths)  # no path left half-written at the cut
    events = (local_ws.session_dir("s1") / "events.jsonl").read_text().splitlines()
    summaries = [e for e in map(json.loads, events) if e["kind"] == "summary"]
    assert summaries[-1]["summary"]["context_to_preserve"] == reply["context_to_preserve"]


async def test_a_request_with_a_lone_surrogate_is_cut_without_failing(
    local_ws: LocalWorkspace,
) -> None:
    # Half an emoji, as json.loads gives for "\ud83d" alone.
    text = "\ud83d broken emoji\n" + "\n".join(f"requirement {i}" for i in range(800))
    request = Msg(role="user", content=text)
    result = await make(local_ws).maybe_compress([SYSTEM, *chat(20), request], force=True)
    assert result.compressed
    cut = result.messages[2]
    assert cut.id == request.id and TRUNCATION_MARKER in cut.text
    path = local_ws.session_dir("s1") / f"tool_result-user-{request.id}.txt"
    assert path.read_bytes() == text.encode("utf-8", "surrogatepass")
