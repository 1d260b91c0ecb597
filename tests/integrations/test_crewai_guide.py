"""The example of docs/guides/crewai.md runs as written against the real CrewAI (the docs' own
test skips it: their environment has no CrewAI)."""

from __future__ import annotations

from pathlib import Path

import crewai_scripted  # noqa: F401 (imports CrewAI quietly, or skips where it is missing)
from frameworks import check_what_it_prints, run_guide_example


def test_the_guide_example_runs_and_stores_the_log(tmp_path: Path) -> None:
    done = run_guide_example("crewai.md", tmp_path)
    assert done.returncode == 0, done.stderr
    check_what_it_prints("crewai.md", done)  # nothing on stderr: the LLM counts its tokens
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines[-2:] == [
        "The nightly job finished: its last batch, 19999, is done.",
        "session: nightly-check",
    ]
    session = tmp_path / "agent_workspace" / "sessions" / "nightly-check"
    (stored,) = session.glob("tool_result-crewai-*.txt")
    assert stored.read_text(encoding="utf-8").endswith("INFO nightly: batch 19999 done")
    # What the model was sent of the log, at each call after the tool's: its head and the
    # notice naming the file that holds it whole, as CrewAI's defaults leave it (its
    # `use_better_compaction` turned a result over a quarter of the LLM's window into its
    # own temporary file and a pointer to it, which named no file of the workspace).
    sent = [line for line in lines if "characters of the log sent" in line]
    assert len(sent) == 2
    for line in sent:
        count, _, named = line.partition(" characters of the log sent, naming ")
        assert int(count) < 20_000 and named == str(stored.resolve())


def test_the_summary_example_runs_offline(tmp_path: Path) -> None:
    done = run_guide_example("crewai.md", tmp_path, block=1)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "gpt-4o-mini writes the summaries",
        "refused: summary_model 'nosuch/model-1' is no model CrewAI makes an LLM of",
    ]
