"""ContextOffloadHooks under CrewAI's own compaction of a tool result (`use_better_compaction`,
on by default): what the door leaves of a big result passes it as it is, so the model reads
the notice naming the file that holds the result whole, never CrewAI's pointer to a
temporary file of its own (deleted with the run)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from crewai_scripted import HOST_WARNINGS, AtDefaults, Fetch, agent_with, call, crew_of, say

from ctxoffload import ContextConfig, LocalWorkspace, get_token_counter
from ctxoffload.integrations.crewai import ContextOffloadHooks

pytestmark = [pytest.mark.filterwarnings(warning) for warning in HOST_WARNINGS]

CONFIG = ContextConfig(context_window=128_000, tool_result_limit=3_000)
"""The guide's: a limit three times CrewAI's threshold under `BaseLLM`'s window (1,024)."""

LOG = "".join(f"03:{i % 60:02d} INFO export batch {i} done\n" for i in range(160_000))  # ~5 MB


def sent_of(model: AtDefaults, output: str, tmp_path: Path) -> tuple[str, Path]:
    """Run a crew whose one tool returns `output`; what the model was sent of it at the call
    after the tool's, and the one file the session stored it in."""
    offload = ContextOffloadHooks(LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="d")
    model.script([call("fetch", {}, "call_1"), say("Done.")])
    agent = agent_with(model, [Fetch().give([output]), *offload.tools])
    with offload:
        assert crew_of(agent, "fetch the output").kickoff().raw == "Done."
    (kept,) = [m["content"] for m in model.seen[1] if m["role"] == "tool"]
    session = tmp_path / "ws" / "sessions" / "d"
    (stored,) = session.glob("tool_result-*.txt")
    assert stored.read_text(encoding="utf-8") == output
    events = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events].count("tool_result") == 1  # (stored once, cut again)
    return kept, stored


def passes_crewai(model: AtDefaults, text: str) -> bool:
    """Whether CrewAI's executor passes `text` on as a tool's result (its own check)."""
    over, _ = model.is_tool_result_overflowing_threshold(text)
    return not over


def test_a_big_result_reaches_the_model_as_its_head_and_the_notice(tmp_path: Path) -> None:
    model = AtDefaults(model="scripted")
    kept, stored = sent_of(model, LOG, tmp_path)
    assert kept.startswith(LOG[:200]) and str(stored) in kept
    assert "temporary artifact" not in kept and passes_crewai(model, kept)


def test_a_result_under_the_limit_but_over_crewai_s_threshold_is_stored_whole(
    tmp_path: Path,
) -> None:
    # 2,000 tokens of prose: within the config's 3,000, so the door kept it as it was, and
    # CrewAI put it in its temporary file: stored nowhere that outlives the run.
    prose = " ".join(f"The export of shard {i} finished without a retry." for i in range(230))
    model = AtDefaults(model="scripted")
    assert not passes_crewai(model, prose)
    kept, stored = sent_of(model, prose, tmp_path)
    assert kept.startswith(prose[:200]) and str(stored) in kept and passes_crewai(model, kept)


def test_a_result_within_the_limit_that_crewai_passes_stays_whole(tmp_path: Path) -> None:
    # Log lines: the door's counter counts more tokens than CrewAI's four characters a token,
    # so a result over 80% of CrewAI's threshold by the door's count, that CrewAI passes as
    # it is and the config's limit keeps whole, was cut and stored all the same.
    lines = "".join(f"03:{i % 60:02d} INFO export batch {i} done\n" for i in range(110))
    model = AtDefaults(model="scripted")
    offload = ContextOffloadHooks(LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="d")
    counter = get_token_counter(None)
    assert passes_crewai(model, lines) and counter.count_text(lines) > 1_024 * 0.8
    model.script([call("fetch", {}, "call_1"), say("Done.")])
    agent = agent_with(model, [Fetch().give([lines]), *offload.tools])
    with offload:
        crew_of(agent, "fetch the output").kickoff()
    (kept,) = [m["content"] for m in model.seen[1] if m["role"] == "tool"]
    assert kept == lines
    assert not list((tmp_path / "ws" / "sessions" / "d").glob("tool_result-*.txt"))


def test_a_result_crewai_counts_far_above_the_door_is_cut_again_to_pass(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Deep indentation: a run of spaces is one token of the door's counter and a token per
    # four characters of CrewAI's, so the first cut was still over CrewAI's threshold.
    rows = "".join(" " * 160 + f'"batch": {i},\n' for i in range(40_000))
    model = AtDefaults(model="scripted")
    with caplog.at_level(logging.WARNING, "ctxoffload"):
        kept, stored = sent_of(model, rows, tmp_path)
    assert kept.startswith(rows[:200]) and str(stored) in kept and passes_crewai(model, kept)
    assert not [r for r in caplog.records if r.name == "ctxoffload"]


def test_with_crewai_s_compaction_off_the_door_keeps_its_own_limit(tmp_path: Path) -> None:
    model = AtDefaults(model="scripted")
    offload = ContextOffloadHooks(LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="d")
    model.script([call("fetch", {}, "call_1"), say("Done.")])
    agent = agent_with(model, [Fetch().give([LOG]), *offload.tools])
    agent.use_better_compaction = False
    with offload:
        crew_of(agent, "fetch the output").kickoff()
    (kept,) = [m["content"] for m in model.seen[1] if m["role"] == "tool"]
    assert "tool_result-" in kept and not passes_crewai(model, kept)  # (the config's 3,000)


def test_a_window_too_small_for_any_notice_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Tiny(AtDefaults):
        def get_context_window_size(self) -> int:
            return 200  # a threshold of 50 tokens: no notice fits

    model = Tiny(model="scripted")
    offload = ContextOffloadHooks(LocalWorkspace(tmp_path / "ws"), config=CONFIG, session_id="t")
    model.script([call("fetch", {}, "call_1"), call("fetch", {}, "call_2"), say("Done.")])
    agent = agent_with(model, [Fetch().give([LOG, LOG]), *offload.tools])
    with caplog.at_level(logging.WARNING, "ctxoffload"), offload:
        crew_of(agent, "fetch the output twice").kickoff()
    said = [r.getMessage() for r in caplog.records if r.name == "ctxoffload"]
    assert len(said) == 1 and "use_better_compaction=False" in said[0]
    assert len(list((tmp_path / "ws" / "sessions" / "t").glob("tool_result-*.txt"))) == 2
