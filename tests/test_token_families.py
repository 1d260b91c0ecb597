"""A token counter per model family: OpenAI models counted exactly with their encoding, Claude
with a calibrated bound that never counts less than the provider did on the corpus, and the
provider's reported usage folded back in after each call."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from corpus_usage import CORPUS, threads
from ctxoffload import ContextConfig, LocalWorkspace, Msg, ScriptedModel
from ctxoffload.compression import Projector
from ctxoffload.tokens import (
    CLAUDE_RATIO,
    CalibratedCounter,
    ContextTokenTracker,
    HeuristicCounter,
    TiktokenCounter,
    family_of,
    get_token_counter,
)
from helpers import corpus_missing, summary_reply

TEXT = "2026-11-20T03:42:00.118Z ERROR export-worker-7 order_id=ORD-58213 disk quota exceeded"


@pytest.mark.parametrize(
    ("model", "family", "encoding"),
    [
        ("claude-sonnet-4-5", "claude", "o200k_base"),
        ("claude-opus-4-1", "claude", "o200k_base"),
        ("claude-sonnet-4-20250514", "claude", "o200k_base"),
        ("Claude-Opus-4-1", "claude", "o200k_base"),
        ("anthropic/claude-sonnet-4.5", "claude", "o200k_base"),
        ("openrouter/anthropic/claude-3.7-sonnet", "claude", "o200k_base"),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", "claude", "o200k_base"),  # Bedrock
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude", "o200k_base"),
        ("claude-sonnet-4-5@20250929", "claude", "o200k_base"),  # Vertex
        ("gpt-4o", "openai", "o200k_base"),
        ("openai/gpt-4o-mini", "openai", "o200k_base"),
        ("gpt-5", "openai", "o200k_base"),
        ("gpt-5-codex", "openai", "o200k_base"),
        ("o3", "openai", "o200k_base"),
        ("o3-mini", "openai", "o200k_base"),
        ("ft:gpt-4o:acme::abc", "openai", "o200k_base"),
        ("gpt-4", "openai", "cl100k_base"),
        ("gpt-3.5-turbo", "openai", "cl100k_base"),
        ("gemini-2.5-pro", "other", "o200k_base"),
        ("llama-3.1-70b", "other", "o200k_base"),
        ("scripted", "other", "o200k_base"),
        ("notclaude-1", "other", "o200k_base"),  # "claude" inside another name
        ("o10x", "other", "o200k_base"),
        # pydantic-ai's provider:model; a name:tag keeps its meaning.
        ("anthropic:claude-sonnet-4-5", "claude", "o200k_base"),
        ("bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude", "o200k_base"),
        ("openai:gpt-4", "openai", "cl100k_base"),
        ("openai:gpt-4o", "openai", "o200k_base"),
        ("google-gla:gemini-2.5-pro", "other", "o200k_base"),
        ("gpt-oss:20b", "openai", "o200k_base"),
        ("llama3:8b", "other", "o200k_base"),
        ("notclaude:gemini", "other", "o200k_base"),
    ],
)
def test_a_model_name_picks_its_family(model: str, family: str, encoding: str) -> None:
    assert family_of(model) == family
    counter = get_token_counter(model)
    if family == "claude":
        assert isinstance(counter, CalibratedCounter)
        assert counter.ratio == CLAUDE_RATIO and counter.base.name == encoding
        assert counter.name == f"{encoding}*{CLAUDE_RATIO:g} (claude)"
    else:
        assert isinstance(counter, TiktokenCounter) and counter.name == encoding
    # Exact only where the counts are the model's own: an OpenAI model with its encoding.
    assert counter.is_exact is (family == "openai")


def test_no_model_counts_o200k_exactly_and_an_odd_name_never_raises() -> None:
    assert family_of(None) == family_of("") == "other"
    counter = get_token_counter()
    assert isinstance(counter, TiktokenCounter) and counter.is_exact is True
    odd = ("../claude", "/", "\x00claude", "claude" * 10_000, " claude-3 ", "é/ü", ":", "a:", ":a")
    for name in odd:
        family_of(name)  # any string: a family, no error
    assert family_of("../claude") == "claude"  # a path-like prefix is a provider prefix


def test_the_claude_counter_is_o200k_times_the_ratio_rounded_up() -> None:
    base = get_token_counter("gpt-4o")
    claude = get_token_counter("claude-sonnet-4-5")
    msg = Msg(role="user", content=TEXT)
    assert claude.count_text(TEXT) == math.ceil(base.count_text(TEXT) * CLAUDE_RATIO)
    assert claude.count_message(msg) == math.ceil(base.count_message(msg) * CLAUDE_RATIO)
    tools = [{"type": "function", "function": {"name": "grep", "parameters": {}}}]
    assert claude.count_tools(tools) == math.ceil(base.count_tools(tools) * CLAUDE_RATIO)
    assert claude.count_tools([]) == claude.count_messages([]) == 0
    # The tracker adds a context up the same way the counter does.
    msgs = [msg, Msg(role="assistant", content="checking the quota"), msg]
    assert ContextTokenTracker(claude).count(None, None, msgs) == claude.count_messages(msgs)


def test_the_heuristic_is_scaled_for_claude_too() -> None:
    rough = get_token_counter("claude-opus-4-1", exact=False)
    assert isinstance(rough, CalibratedCounter) and isinstance(rough.base, HeuristicCounter)
    assert rough.is_exact is False
    assert rough.count_text(TEXT) == math.ceil(math.ceil(len(TEXT) / 4) * CLAUDE_RATIO)
    assert get_token_counter("gpt-4o", exact=False).is_exact is False


def test_a_ratio_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="below 1"):
        CalibratedCounter(TiktokenCounter(), 0.9, family="claude")
    with pytest.raises(ValueError, match="below 1"):
        CalibratedCounter(TiktokenCounter(), float("nan"), family="claude")


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.is_dir(), reason=corpus_missing())
def test_the_claude_counter_never_counts_less_than_claude_did_on_the_corpus() -> None:
    """Every model call of the corpus's Claude Code transcripts (main agents and subagents):
    the Claude counter's count of the messages, plus Claude Code's system prompt and tools
    (not in the transcript: estimated as the conversation's first reported input minus the
    o200k count of its first request's messages, scaled like the rest), is at or above the
    input Claude reported."""
    o200k = get_token_counter("gpt-4o")
    checked = 0
    for thread in threads():
        if family_of(thread.model) != "claude":
            continue
        claude = get_token_counter(thread.model)
        host = thread.calls[0].reported - o200k.count_messages(thread.calls[0].messages)
        for number, call in enumerate(thread.calls):
            ours = claude.count_messages(call.messages) + math.ceil(host * CLAUDE_RATIO)
            assert ours >= call.reported, (thread.name, number, ours, call.reported)
            checked += 1
    assert checked >= 150  # 181 calls in the corpus as measured


# -- the provider's count folded back in ----------------------------------------------------


def test_a_partial_report_is_not_taken_for_the_whole_prompt() -> None:
    """Anthropic's `input_tokens` counts only what its prompt cache did not serve (3 tokens
    for a 24,000-token request in the corpus): taken as the whole, it would hide the window."""
    tracker = ContextTokenTracker(get_token_counter("claude-sonnet-4-5"))
    msgs = [Msg(role="user", content=TEXT * 200)]
    counted = tracker.count(None, None, msgs)
    assert tracker.anchor(3, msgs) is False and not tracker.is_anchored
    assert tracker.count(None, None, msgs) == counted
    # The whole figure is taken, even far below the calibrated bound (the bound's margin).
    assert tracker.anchor(counted // 2, msgs) is True
    more = [*msgs, Msg(role="user", content="and?")]
    assert tracker.count(None, None, more) == counted // 2 + tracker.count_message(more[-1])


async def test_the_projector_decides_on_the_reported_count(tmp_path: Path) -> None:
    """A host hands the provider's usage back (`report_usage`): the next projection compares
    that figure, not the counter's, with the trigger, and compacts."""
    config = ContextConfig(context_window=4000, trigger_ratio=0.8, tool_result_limit=500)
    projector = Projector(
        LocalWorkspace(tmp_path / "ws"),
        "t1",
        config=config,
        model=ScriptedModel([], default=summary_reply("reported")),
    )
    history: list[Any] = [
        Msg(role="user" if i % 2 == 0 else "assistant", content=f"step {i}: " + "ok " * 40)
        for i in range(12)
    ]
    assert await projector.report_usage(3500) is False  # nothing projected yet
    first = await projector.project(history)
    assert first == history  # about 600 tokens: under the trigger of 3,200
    assert await projector.report_usage(3500) is True  # what the provider counted
    history.append(Msg(role="user", content="go on"))
    second = await projector.project(history)
    assert len(second) < len(history)  # 3,500 + the new message: over the trigger
    assert any("reported" in m.text for m in second)
    assert await projector.report_usage(1) is False  # a partial figure is not taken
    # The same history without the report is under the trigger: the report decided.
    unreported = Projector(LocalWorkspace(tmp_path / "ws"), "t2", config=config)
    assert await unreported.project(history) == history


@pytest.mark.parametrize("text", ["line {i}: " + "text " * 200, "{i} 🙂" * 300, "{i}\x00é" * 400])
def test_a_calibrated_estimate_past_the_trigger_holds_the_exact_count(text: str) -> None:
    """A cold history counted by the Claude counter is counted from the newest back and the
    rest estimated; the bounds, scaled by the ratio, hold the count made in full (emoji and
    control bytes: o200k spends up to a token a byte on them)."""
    claude = get_token_counter("claude-sonnet-4-5")
    history = [Msg(role="user", content=text.format(i=i)) for i in range(600)]
    counted = ContextTokenTracker(claude).count_past(None, None, history, limit=40_000)
    exact = claude.count_messages(history)
    assert not counted.exact and counted.uncounted > 0
    assert counted.at_least <= exact <= counted.at_most


def _turns(count: int) -> list[Msg]:
    return [
        Msg(role="user" if i % 2 == 0 else "assistant", content=f"step {i}: " + "ok " * 40)
        for i in range(count)
    ]


async def test_the_first_model_named_picks_the_projectors_counter(tmp_path: Path) -> None:
    """A host that knows its model only at the first call (`use_model`) gets that model's
    counter; once a projection has counted, or when a counter was given, the counter stays
    (a new one would count the whole history again)."""
    workspace = LocalWorkspace(tmp_path / "ws")
    config = ContextConfig(context_window=100_000)
    projector = Projector(workspace, "late", config=config)
    assert projector.use_model(None) is projector.counter  # no name: nothing picked
    claude = projector.use_model("anthropic:claude-sonnet-4-5")
    assert isinstance(claude, CalibratedCounter) and projector.counter is claude
    assert projector.use_model("gpt-4o") is claude  # a second name changes nothing
    history = _turns(6)
    await projector.project(history)
    assert projector.counter is claude
    tracker = projector._compressor.tracker
    assert tracker.known(history[0]) == claude.count_message(history[0])

    # A projection before any name settles the counter it counted with.
    early = Projector(workspace, "early", config=config)
    await early.project(history)
    first = early.counter
    assert early.use_model("claude-sonnet-4-5") is first
    assert not isinstance(first, CalibratedCounter)

    # A counter the user gave always wins.
    mine = HeuristicCounter()
    given = Projector(workspace, "given", config=config, counter=mine)
    assert given.use_model("claude-sonnet-4-5") is mine


async def test_a_reply_without_usage_keeps_the_earlier_report(tmp_path: Path) -> None:
    """A reply that reports no usage (0) leaves the earlier report standing: the next count
    is that report plus what was appended since, never the counter's own lower count."""
    config = ContextConfig(context_window=100_000)
    projector = Projector(LocalWorkspace(tmp_path / "ws"), "quiet", config=config)
    history = _turns(6)
    await projector.project(history)
    assert await projector.report_usage(5_000) is True
    history.append(Msg(role="user", content="and then?"))
    await projector.project(history)
    assert await projector.report_usage(0) is False
    assert await projector.report_usage(-3) is False
    tracker = projector._compressor.tracker
    assert tracker.is_anchored
    history.append(Msg(role="user", content="go on"))
    sent = await projector.project(history)
    added = sum(tracker.count_message(m) for m in history[-2:])
    assert projector._compressor.count(sent) == 5_000 + added
    # A partial figure (below a quarter of the count) drops the report: the counter counts.
    assert await projector.report_usage(3) is False
    assert not tracker.is_anchored
