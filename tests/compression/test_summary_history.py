"""Summaries that stay good over many compressions: extractive fields keep the newest material
within a bounded size and repeat nothing; every summary is stored in the session."""

from __future__ import annotations

import re

from ctxoffload import (
    ContextConfig,
    LocalWorkspace,
    Msg,
    ScriptedModel,
    Summary,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import Compressor, is_summary_message
from ctxoffload.compression._summarize import EXTRACTIVE_FIELD_CHARS
from helpers import summary_reply

COUNTER = get_token_counter(exact=True)
SYSTEM = Msg(role="system", content="You are a coding agent.")


def round_of(k: int, big: bool = True) -> list[Msg]:
    """One round: a request, two bash calls (one big result), an error, a statement."""
    words = " ".join(f"r{k}w{j}" for j in range(60))
    return [
        Msg(role="user", content=f"REQUEST-{k}: {words}"),
        Msg(
            role="assistant",
            content=[ToolCallBlock(id=f"a{k}", name="bash", input={"cmd": f"make {k}"})],
        ),
        Msg(
            role="tool",
            content=[
                ToolResultBlock(
                    id=f"a{k}",
                    name="bash",
                    output="\n".join(f"line {i} {words}" for i in range(200 if big else 3)),
                )
            ],
        ),
        Msg(
            role="assistant",
            content=[ToolCallBlock(id=f"b{k}", name="grep", input={"p": f"x{k}"})],
        ),
        Msg(
            role="tool",
            content=[
                ToolResultBlock(
                    id=f"b{k}", name="grep", output=f"ERROR-{k}: not found", is_error=True
                )
            ],
        ),
        Msg(role="assistant", content=f"STATEMENT-{k}: {words}"),
    ]


async def eleven_compressions(
    ws: LocalWorkspace, model: ScriptedModel | None = None
) -> tuple[Compressor, list[Msg]]:
    comp = Compressor(
        ContextConfig(context_window=6_000, tool_result_limit=400),
        model=model,
        offloader=ws,
        session_id="s1",
        counter=COUNTER,
    )
    context = [SYSTEM]
    for k in range(11):
        for msg in round_of(k):
            context.append(await comp.process_message(msg))
        result = await comp.maybe_compress(context, force=True)
        assert result.compressed, k
        context = result.messages
    return comp, context


async def test_extractive_fields_stay_bounded_and_keep_the_newest(local_ws: LocalWorkspace) -> None:
    comp, _context = await eleven_compressions(local_ws)
    summary = comp.summary
    assert summary is not None
    for name, value in summary.model_dump().items():
        assert len(value) <= EXTRACTIVE_FIELD_CHARS, (name, len(value))
    assert "REQUEST-0" in summary.task_overview  # the task as first given
    # The newest compressed round (round 10 is the newest turn, still in the context).
    assert "REQUEST-9" in summary.task_overview
    assert "STATEMENT-9" in summary.current_state
    assert "ERROR-9" in summary.important_discoveries


async def test_extractive_summaries_repeat_nothing(local_ws: LocalWorkspace) -> None:
    comp, _context = await eleven_compressions(local_ws)
    summary = comp.summary
    assert summary is not None
    text = "\n".join(summary.model_dump().values())
    assert text.count("Tools used:") == 1
    rows = await local_ws.read_context("s1")
    calls = [
        c["name"]
        for r in rows
        if isinstance(r["content"], list)
        for c in r["content"]
        if c.get("type") == "tool_call"
    ]
    assert f"bash x{calls.count('bash')}" in text and f"grep x{calls.count('grep')}" in text
    assert calls.count("bash") >= 10
    paths = re.findall(r"\S+/tool_result-\S+?\.txt", summary.context_to_preserve)
    assert len(paths) == len(set(paths))
    assert text.count("Offloaded files:") <= 1


async def test_an_extractive_summary_names_each_offloaded_file_once(
    local_ws: LocalWorkspace,
) -> None:
    # The template lists the newest offloaded files ({artifacts}); the summary's own text
    # names only those older than its list, so a file's path is not paid for twice.
    comp = Compressor(
        ContextConfig(context_window=64_000, tool_result_limit=400, artifact_trail_limit=3),
        offloader=local_ws,
        session_id="s1",
        counter=COUNTER,
    )
    context = [SYSTEM]
    for k in range(5):
        context += [await comp.process_message(msg) for msg in round_of(k)]
    result = await comp.maybe_compress([*context, *round_of(5)], force=True)
    rendered = next(m for m in result.messages if is_summary_message(m)).text
    paths = re.findall(r"\S+/tool_result-\S+?\.txt", rendered)
    assert len(paths) == 5 and len(set(paths)) == 5


async def test_the_rendered_summary_keeps_the_newest_request(local_ws: LocalWorkspace) -> None:
    comp, context = await eleven_compressions(local_ws)
    context = [*context, *round_of(11)]
    result = await comp.maybe_compress(context, force=True)
    rendered = next(m for m in result.messages if is_summary_message(m)).text
    # A small window leaves the rendered summary little room: what is cut is the oldest.
    assert "REQUEST-10" in rendered


async def test_every_summary_is_stored_in_the_session_with_its_five_fields(
    local_ws: LocalWorkspace,
) -> None:
    replies = [summary_reply(f"MODEL-{k}") for k in range(5)]
    model = ScriptedModel([replies[0], "not json", "not json", "not json", *replies[1:]])
    await eleven_compressions(local_ws, model)
    events = [e for e in await local_ws.read_events("s1") if e["kind"] == "summary"]
    assert [e["compression"] for e in events] == list(range(1, 12))
    assert [e["source"] for e in events[:2]] == ["model", "extractive"]
    for e in events:
        assert set(e["summary"]) == set(Summary.model_fields)
        assert e["lines"] and e["lines"][0] <= e["lines"][1]
    assert events[0]["summary"]["task_overview"] == "MODEL-0 task_overview"


async def test_the_summary_says_how_context_jsonl_is_laid_out_and_searched(
    local_ws: LocalWorkspace,
) -> None:
    comp = Compressor(
        ContextConfig(context_window=3_000), offloader=local_ws, session_id="s1", counter=COUNTER
    )
    result = await comp.maybe_compress([SYSTEM, *round_of(0, big=False) * 4], force=True)
    text = next(m for m in result.messages if is_summary_message(m)).text
    assert "one JSON message per line" in text
    assert re.search(r"search it .*(grep|Grep|search)", text, re.IGNORECASE | re.DOTALL)
