"""The defaults of `ContextConfig` fit every window it accepts; only a value the user chose
and that cannot fit is warned about."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxoffload import ConfigError, ContextConfig, LocalWorkspace, ToolResultBlock
from ctxoffload.compression import TRUNCATION_MARKER, Compressor
from ctxoffload.compression._truncator import FRESH_PREVIEW_FLOOR
from ctxoffload.tokens import get_token_counter

COUNTER = get_token_counter(exact=True)

# From the smallest window a default config accepts (what a compaction leaves at the least,
# the summary template's text and a 200-token preview, under the trigger) to a large one, with
# the ones around the old edge (20,000 tokens: a 2,000-token default preview in a 10% reserve).
SMALLEST = 379
WINDOWS = [SMALLEST, 400, 1_000, 1_999, 2_000, 4_000, 8_000, 19_999, 20_000, 20_001, 200_000]


def room(config: ContextConfig, window: int) -> int:
    """What a result left in the context may take: the reserve, at least the floor."""
    return max(FRESH_PREVIEW_FLOOR, config.reserve_tokens(window))


def big_result() -> ToolResultBlock:
    text = "\n".join(f"{i:05d}: " + " ".join(f"w{i}x{j}" for j in range(6)) for i in range(3000))
    return ToolResultBlock(id="c1", name="cat", output=text)


@given(
    window=st.integers(min_value=SMALLEST, max_value=10**9),
    reserve=st.floats(min_value=0.01, max_value=0.5),
)
def test_the_derived_preview_fits_any_window(window: int, reserve: float) -> None:
    config = ContextConfig(context_window=window, reserve_ratio=reserve)
    preview = config.preview_budget(window)
    assert preview <= room(config, window)
    assert preview <= min(config.tool_result_limit, 2_000)
    assert not config.misfit(window)
    # Where the reserve is large enough, the absolute default stands.
    if config.reserve_tokens(window) >= 2_000:
        assert preview == 2_000


@pytest.mark.parametrize("window", WINDOWS)
async def test_a_default_config_says_nothing_and_its_previews_fit(
    window: int, local_ws: LocalWorkspace, caplog: pytest.LogCaptureFixture
) -> None:
    config = ContextConfig(context_window=window)
    comp = Compressor(config, offloader=local_ws, session_id="s1", counter=COUNTER)
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        out = await comp.process_tool_result(big_result())
        await comp.process_tool_result(big_result().model_copy(update={"id": "c2"}))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert isinstance(out.output, str) and TRUNCATION_MARKER in out.output
    assert COUNTER.count_text(out.output) <= room(config, window)


@pytest.mark.parametrize(
    ("fields", "window"),
    [
        ({"tool_result_limit": 3_000}, 8_000),
        ({"tool_result_limit": 500}, 4_000),
        ({"preview_tokens": 2_000}, 8_000),  # the window known only to the compressor
    ],
)
async def test_a_value_the_user_chose_that_does_not_fit_is_said_once(
    fields: dict[str, int],
    window: int,
    local_ws: LocalWorkspace,
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = ContextConfig(**fields)  # type: ignore[arg-type]
    comp = Compressor(
        config, offloader=local_ws, session_id="s1", counter=COUNTER, context_window=window
    )
    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        out = await comp.process_tool_result(big_result())
        await comp.process_tool_result(big_result().model_copy(update={"id": "c2"}))
    said = [r.getMessage() for r in caplog.records if "does not fit the reserve" in r.getMessage()]
    assert len(said) == 1, said
    assert isinstance(out.output, str)
    assert COUNTER.count_text(out.output) <= room(config, window)


def test_the_smallest_window_is_the_least_a_default_config_accepts() -> None:
    ContextConfig(context_window=SMALLEST)
    with pytest.raises(ConfigError, match=f"at least {SMALLEST} tokens"):
        ContextConfig(context_window=SMALLEST - 1)


def test_a_changed_copy_keeps_the_defaults_derived() -> None:
    # The documented way to change a config: validate a copy of what the user gave.
    config = ContextConfig(trigger_ratio=0.7)
    copy = ContextConfig.from_dict(
        {**config.model_dump(exclude_unset=True), "context_window": 8_000}
    )
    assert not copy.misfit(8_000)
    assert copy.preview_budget(8_000) == 800


@pytest.mark.slow
def test_replay_with_a_small_window_and_no_config_says_nothing(tmp_path: Path) -> None:
    # A real process: in this one, pytest's log capture would take the line.
    transcript = tmp_path / "t.json"
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Check every shard."}]
    for i in range(6):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "x " * 5_000})
    transcript.write_text(json.dumps(messages))
    command = [sys.executable, "-m", "ctxoffload", "replay", str(transcript), "--window", "8000"]
    done = subprocess.run(
        [*command, "--workdir", str(tmp_path / "ws")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "does not fit" not in done.stderr, done.stderr
