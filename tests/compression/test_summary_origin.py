"""The record says who wrote each summary: the model and how its reply was read (structured
or parsed), how many requests it took, which fields came from the extract; or why the summary
is the extract (no model, no time, a timeout, failures with the last error)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from ctxoffload import (
    ContextConfig,
    LocalWorkspace,
    ModelError,
    Msg,
    ScriptedModel,
    Summary,
    get_token_counter,
)
from ctxoffload._disk.events import record_of
from ctxoffload._disk.wording import summary_origin_text
from ctxoffload.compression import Compressor
from ctxoffload.compression._summarize import summarize  # the private unit under test
from helpers import SUMMARY, plausible_session, summary_reply

COUNTER = get_token_counter(exact=True)
FIELDS = tuple(Summary.model_fields)


async def run(model: ScriptedModel | None, config: ContextConfig | None = None, **kw: Any) -> Any:
    return await summarize(
        plausible_session(12), model=model, config=config or ContextConfig(), counter=COUNTER, **kw
    )


async def never_answers(messages: Sequence[Msg]) -> str:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


PROSE_REPLY = (
    "Here is the summary:\n```json\n"
    + json.dumps({k: v for k, v in summary_reply("prose").items() if k != "next_steps"})
    + "\n```\nLet me know if you need more."
)


@pytest.mark.parametrize(
    ("replies", "expected"),
    [
        ([json.dumps(SUMMARY)], "summary: scripted, structured"),
        (["no summary here", SUMMARY], "summary: scripted, structured, 2 attempts"),
        ([PROSE_REPLY], "summary: scripted, parsed from prose, next_steps from the extract"),
        (
            ["## Task overview\nthe task\n\n**Current state:** tests pass"],
            "summary: scripted, parsed from headings, important_discoveries, next_steps and "
            "context_to_preserve from the extract",
        ),
        (
            ['{"task_overview": "the task", "current_state": "halfway thr'],
            "summary: scripted, parsed from a cut-off reply, important_discoveries, next_steps "
            "and context_to_preserve from the extract, current_state cut off",
        ),
    ],
)
async def test_a_models_summary_says_how_its_reply_was_read(
    replies: list[Any], expected: str
) -> None:
    outcome = await run(ScriptedModel(replies))
    assert outcome.source == "model"
    assert summary_origin_text(outcome.origin("scripted")) == expected


async def test_the_fields_the_reply_lacked_are_named_and_taken_from_the_extract() -> None:
    outcome = await run(ScriptedModel([PROSE_REPLY]))
    origin = outcome.origin("gpt-4o-mini")
    assert origin == {
        "source": "model",
        "model": "gpt-4o-mini",
        "door": None,
        "attempts": 1,
        "chunks": 1,
        "reply": "prose",
        "filled": ["next_steps"],
        "cut": [],
    }
    assert outcome.summary.task_overview == "prose task_overview"
    assert "without a summary model" in outcome.summary.next_steps  # the extract's


async def test_no_model_is_said() -> None:
    outcome = await run(None)
    assert outcome.origin(None) == {
        "source": "extractive",
        "model": None,
        "door": None,
        "attempts": 0,
        "chunks": 0,
        "fallback": "no_model",
        "error": None,
        "timeout": None,
    }
    assert summary_origin_text(outcome.origin(None)) == "summary: extractive (no summary model)"


async def test_a_timeout_is_said_with_its_seconds() -> None:
    outcome = await run(ScriptedModel(default=never_answers), ContextConfig(summary_timeout=0.2))
    origin = outcome.origin(None)
    assert (origin["fallback"], origin["timeout"]) == ("timeout", 0.2)
    assert summary_origin_text(origin) == "summary: extractive (timeout after 0.2 s)"


async def test_no_time_left_is_said() -> None:
    outcome = await run(ScriptedModel(default=SUMMARY), timeout=0)
    assert outcome.fallback == "no_time"
    assert summary_origin_text(outcome.origin(None)) == (
        "summary: extractive (no time left of the summary timeout)"
    )


async def test_failures_are_said_with_the_last_error() -> None:
    model = ScriptedModel([ModelError("rate limited"), ModelError("quota exceeded for key 7")])
    outcome = await run(model, ContextConfig(summary_max_retries=1))
    assert outcome.fallback == "failed"
    assert outcome.error == "ModelError: quota exceeded for key 7"
    assert summary_origin_text(outcome.origin(None)) == (
        "summary: extractive (2 attempts failed, the last with 'ModelError: quota exceeded "
        "for key 7')"
    )


async def test_a_window_too_small_for_any_request_is_said() -> None:
    outcome = await run(ScriptedModel(default=SUMMARY, context_window=300))
    assert (outcome.source, outcome.fallback) == ("extractive", "window")


async def test_the_compaction_record_holds_who_wrote_the_summary(
    local_ws: LocalWorkspace,
) -> None:
    model = ScriptedModel(default=PROSE_REPLY, model_name="claude-3-5-haiku")
    comp = Compressor(
        ContextConfig(context_window=2000), model=model, offloader=local_ws, session_id="s1"
    )
    await comp.maybe_compress(plausible_session(60), force=True)
    [event] = [e for e in await local_ws.read_events("s1") if e["kind"] == "compression"]
    assert event["summary_origin"]["model"] == "scripted (claude-3-5-haiku)"
    assert event["summary_origin"]["filled"] == ["next_steps"]
    assert (
        "summary: scripted (claude-3-5-haiku), parsed from prose, next_steps from the extract"
        in record_of(event).notes()
    )


def test_a_compaction_record_of_an_older_release_has_no_summary_line() -> None:
    event = {"kind": "compression", "messages": 3, "summary_source": "model"}
    assert not any(note.startswith("summary:") for note in record_of(event).notes())


@pytest.mark.parametrize(
    "origin",
    [
        {"source": "model"},
        {"source": "model", "reply": 5, "filled": "next_steps", "attempts": "2"},
        {"source": "extractive", "fallback": "failed", "error": ["x"], "attempts": None},
        {"source": "extractive", "fallback": "timeout", "timeout": "soon"},
        {"source": "extractive", "fallback": "something newer"},
        {},
    ],
)
def test_a_damaged_or_newer_origin_still_reads(origin: dict[str, Any]) -> None:
    assert summary_origin_text(origin).startswith("summary: ")  # type: ignore[union-attr]


async def test_nothing_to_send_is_said() -> None:
    outcome = await summarize(
        [], model=ScriptedModel(default=SUMMARY), config=ContextConfig(), counter=COUNTER
    )
    assert summary_origin_text(outcome.origin(None)) == (
        "summary: extractive (no messages to send the summary model)"
    )
