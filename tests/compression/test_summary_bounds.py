"""Summaries are bounded: in time (a summary model that hangs), in size (a huge reply), and in
kind (a refusal dressed as a summary); each failure gives the extractive fallback."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ScriptedModel, Summary, get_token_counter
from ctxoffload.compression import Compressor
from ctxoffload.compression._summarize import is_refusal, summarize
from helpers import plausible_session, summary_reply

COUNTER = get_token_counter(exact=True)
FIELDS = tuple(Summary.model_fields)
# A guard so that a regression fails the test instead of hanging the suite.
GUARD = 30


async def never_answers(messages: Sequence[Msg]) -> dict[str, str]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


def test_summary_timeout_defaults_to_two_minutes() -> None:
    assert ContextConfig().summary_timeout == 120


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf")])
def test_an_impossible_summary_timeout_is_rejected(value: float) -> None:
    with pytest.raises(ValueError, match=r"summary_timeout .* is not a positive number"):
        ContextConfig(summary_timeout=value)


async def test_a_summary_model_that_never_answers_gives_an_extractive_summary() -> None:
    model = ScriptedModel(default=never_answers)
    outcome = await asyncio.wait_for(
        summarize(
            plausible_session(12),
            model=model,
            config=ContextConfig(summary_timeout=0.2),
            counter=COUNTER,
        ),
        GUARD,
    )
    assert outcome.source == "extractive"
    assert "request 0:" in outcome.summary.task_overview


async def test_the_summary_timeout_bounds_all_chunks_together() -> None:
    async def slow(messages: Sequence[Msg]) -> dict[str, str]:
        await asyncio.sleep(0.1)
        return summary_reply("slow")

    model = ScriptedModel(default=slow, context_window=2000)
    outcome = await asyncio.wait_for(
        summarize(
            plausible_session(300),
            model=model,
            config=ContextConfig(summary_timeout=0.25),
            counter=COUNTER,
        ),
        GUARD,
    )
    # Each chunk alone is well within the timeout; all of them together are not. A call
    # takes 0.1 s at least, so only a few start within 0.25 s; a slower machine starts
    # fewer, maybe none before the timeout (so no lower bound).
    assert outcome.source == "extractive"
    assert len(model.calls) <= 4


async def test_a_hanging_summary_model_still_compresses_what_is_on_disk(
    local_ws: LocalWorkspace,
) -> None:
    comp = Compressor(
        ContextConfig(context_window=3000, summary_timeout=0.2),
        model=ScriptedModel(default=never_answers),
        offloader=local_ws,
        session_id="s1",
        counter=COUNTER,
    )
    result = await asyncio.wait_for(comp.maybe_compress(plausible_session(40), force=True), GUARD)
    assert result.compressed and result.summary_source == "extractive"
    assert len(await local_ws.read_context("s1")) == result.compressed_messages > 0


# -- size -----------------------------------------------------------------------------------


def huge_reply(mark: str, size: int = 400_000) -> dict[str, str]:
    return {name: f"{mark}-{name}-start " + "x" * size + f" {mark}-{name}-end" for name in FIELDS}


def test_the_summary_budget_is_a_share_of_the_window_with_a_floor() -> None:
    config = ContextConfig()
    assert config.summary_budget_tokens(8_000) == 1_000  # the floor
    assert config.summary_budget_tokens(200_000) == 10_000  # 5% of the window
    assert ContextConfig(summary_max_tokens=300).summary_budget_tokens(200_000) == 300


async def test_a_huge_model_summary_is_cut_to_the_budget_before_anything_uses_it(
    local_ws: LocalWorkspace,
) -> None:
    model = ScriptedModel([huge_reply("FIRST"), summary_reply("SECOND")], context_window=100_000)
    config = ContextConfig(context_window=20_000)
    comp = Compressor(config, model=model, offloader=local_ws, session_id="s1", counter=COUNTER)
    budget = config.summary_budget_tokens(20_000) * 4  # characters

    first = await comp.maybe_compress(plausible_session(120), force=True)
    assert first.summary_source == "model"
    assert first.summary is not None
    dumped = first.summary.model_dump()
    assert sum(len(v) for v in dumped.values()) <= budget
    assert all(len(v) <= budget // 2 for v in dumped.values())
    # The start of each field survives, and the cut is marked.
    assert all(v.startswith(f"FIRST-{k}-start") and "cut" in v for k, v in dumped.items())
    # The message in the context and the state carried in it are bounded too.
    assert len(first.messages[0].model_dump_json()) < 4 * budget

    await comp.maybe_compress([*first.messages, *plausible_session(120)], force=True)
    folded = "\n".join(m.text for m in model.calls[1])
    assert "FIRST-task_overview-start" in folded
    assert len(folded) < budget + 40_000


async def test_an_adopted_summary_from_a_saved_state_is_bounded_too(
    local_ws: LocalWorkspace,
) -> None:
    model = ScriptedModel([huge_reply("OLD")], context_window=100_000)
    config = ContextConfig(context_window=20_000)
    comp = Compressor(config, model=model, offloader=local_ws, session_id="s1", counter=COUNTER)
    first = await comp.maybe_compress(plausible_session(120), force=True)
    # Someone saved a state with a huge summary in it (an older version, say).
    marker = first.messages[0].metadata["ctxoffload"]
    marker["summary"] = huge_reply("SAVED")
    second_model = ScriptedModel([summary_reply("NEXT")], context_window=100_000)
    resumed = Compressor(
        config, model=second_model, offloader=local_ws, session_id="s1", counter=COUNTER
    )
    await resumed.maybe_compress([*first.messages, *plausible_session(120)], force=True)
    folded = "\n".join(m.text for m in second_model.calls[0])
    assert "SAVED-task_overview-start" in folded
    assert len(folded) < config.summary_budget_tokens(20_000) * 4 + 40_000


# -- refusals -------------------------------------------------------------------------------

REFUSALS = [
    "I'm sorry, but I can't help with that request.",
    "I’m sorry, but I can’t help with that.",
    "I apologize, but I cannot summarize this conversation.",
    "Sorry, I can't assist with that.",
    "I am unable to help with this request.",
    "I cannot comply with this request.",
]


@pytest.mark.parametrize("refusal", REFUSALS)
async def test_a_summary_that_only_refuses_is_a_failure(refusal: str) -> None:
    every_field = {name: refusal for name in FIELDS}
    model = ScriptedModel(default=every_field)
    outcome = await summarize(
        plausible_session(12),
        model=model,
        config=ContextConfig(summary_max_retries=1),
        counter=COUNTER,
    )
    assert outcome.source == "extractive"
    assert len(model.calls) == 2
    assert refusal not in outcome.summary.model_dump_json()


async def test_a_refusal_with_empty_or_none_fields_is_still_a_refusal() -> None:
    reply = {name: "none" for name in FIELDS}
    reply["task_overview"] = REFUSALS[0]
    reply["next_steps"] = ""
    outcome = await summarize(
        plausible_session(12),
        model=ScriptedModel(default=reply),
        config=ContextConfig(),
        counter=COUNTER,
    )
    assert outcome.source == "extractive"


@pytest.mark.parametrize(
    "reply",
    [
        # A real summary that quotes an apology.
        {
            **summary_reply("real"),
            "important_discoveries": (
                "The fixture tests/data/refusal.txt holds \"I'm sorry, but I can't help with "
                'that request." and test_refusal at tests/test_chat.py:41 compares against it.'
            ),
        },
        # The user apologised; the summary says so and goes on with the facts.
        {
            **summary_reply("real"),
            "task_overview": "Sorry for the confusion earlier: fix the failing build in ci.yml.",
        },
        # One field refuses, the others carry content.
        {**summary_reply("real"), "next_steps": REFUSALS[0]},
    ],
)
async def test_a_real_summary_that_mentions_an_apology_is_kept(reply: dict[str, str]) -> None:
    outcome = await summarize(
        plausible_session(12), model=ScriptedModel([reply]), config=ContextConfig(), counter=COUNTER
    )
    assert outcome.source == "model"
    assert outcome.summary == Summary(**reply)


@pytest.mark.parametrize(
    ("text", "refuses"),
    [
        *((r, True) for r in REFUSALS),
        ("Sorry, the build is broken: pytest fails at tests/test_a.py:12.", False),
        ("I can't reproduce the failure locally; CI uses Python 3.10.", False),
        ("none", False),
        ("I'm sorry, but I can't help with that request. " + "The patch is in a.py. " * 20, False),
    ],
)
def test_the_refusal_detector(text: str, refuses: bool) -> None:
    assert is_refusal(text) is refuses
