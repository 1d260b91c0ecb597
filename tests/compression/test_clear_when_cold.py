"""Clearing when the cache is cold: `Activation(idle_seconds_exceed=...)` lets a manager that
rewrites the middle of the context (`ClearToolUses`) run only once the provider's prompt cache
has expired, so it breaks no cached prefix; the run's `clock` is the time source."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_clear_tool_uses import conversation, turn

from ctxoffload import Activation, ConfigError, LocalWorkspace, Msg
from ctxoffload.compression import ClearToolUses
from ctxoffload.text import CLEARED_MARK
from helpers import pipeline_run


def cleared(messages: list[Msg]) -> int:
    return sum(
        1
        for m in messages
        for b in m.tool_results
        if isinstance(b.output, str) and b.output.startswith(CLEARED_MARK)
    )


async def test_outputs_are_cleared_only_after_a_pause_longer_than_the_cache_lifetime(
    tmp_path: Path,
) -> None:
    cold = ClearToolUses(keep=2, activation=Activation(idle_seconds_exceed=300))
    run = pipeline_run(LocalWorkspace(tmp_path), cold, window=100_000)
    now = [1_000.0]
    run.clock = lambda: now[0]
    context = conversation(3)
    # The first call: nothing is cached yet, so clearing costs nothing.
    first = (await run.pre_llm(context)).messages
    assert cleared(first) == 1
    sent = first
    for i in range(3, 9):  # a call every minute: the cache stays warm, the prefix stays put
        now[0] += 60
        sent = (await run.pre_llm([*sent, *turn(i)])).messages
        assert cleared(sent) == 1
    warm = sent
    now[0] += 301  # a pause past the lifetime: the cache has expired, clear now
    after = (await run.pre_llm([*warm, *turn(9)])).messages
    assert cleared(after) == 8  # all but the newest 2 of 10
    # While warm, each request began with the one before it, message for message.
    assert all(a is b for a, b in zip(warm[:3], first[:3], strict=True))


async def test_a_pause_does_not_count_a_compaction_asked_for_as_a_model_call(
    tmp_path: Path,
) -> None:
    """`compact` runs the managers with no model call after it: the clock of the next
    call still measures from the last real call."""
    run = pipeline_run(
        LocalWorkspace(tmp_path),
        ClearToolUses(keep=2, activation=Activation(idle_seconds_exceed=300)),
        window=100_000,
    )
    now = [0.0]
    run.clock = lambda: now[0]
    sent = (await run.pre_llm(conversation(2))).messages
    now[0] += 200
    await run.pre_llm([*sent, *turn(2)], model_call=False)
    now[0] += 200  # 400 s since the last model call, 200 s since the compaction
    after = (await run.pre_llm([*sent, *turn(2), *turn(3)])).messages
    assert cleared(after) == 2


def test_the_rule_is_checked_read_from_templates_and_described() -> None:
    for bad in (-1, True, float("nan"), "300"):
        with pytest.raises(ConfigError, match="idle_seconds_exceed"):
            Activation(idle_seconds_exceed=bad)  # type: ignore[arg-type]
    rule = Activation.from_value({"idle_seconds_exceed": 3600, "ratio_exceed": 0.5})
    assert rule == Activation(ratio_exceed=0.5, idle_seconds_exceed=3600.0)
    assert not rule.is_always
    assert (
        rule.describe()
        == "more than 0.5 of the window and more than 3600 s since the last model call"
    )
    assert rule.holds(messages=3, tokens=600, window=1000, idle=None)  # before any call
    assert not rule.holds(messages=3, tokens=600, window=1000, idle=3600)
    assert rule.holds(messages=3, tokens=600, window=1000, idle=3600.5)
