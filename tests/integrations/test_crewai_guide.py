"""The example of docs/guides/crewai.md runs as written against the real CrewAI (the docs' own
test skips it: their environment has no CrewAI)."""

from __future__ import annotations

from pathlib import Path

import crewai_scripted  # noqa: F401 (imports CrewAI quietly, or skips where it is missing)
from frameworks import run_guide_example


def test_the_guide_example_runs_and_stores_the_log(tmp_path: Path) -> None:
    done = run_guide_example("crewai.md", tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines[-1] == "The nightly job finished: its last batch, 19999, is done."
    count = int(lines[0].split()[0])
    assert count < 20_000 and lines[0].endswith("characters of the log in the conversation")
    session = tmp_path / "agent_workspace" / "sessions" / "nightly-check"
    (stored,) = session.glob("tool_result-crewai-*.txt")
    assert stored.read_text(encoding="utf-8").endswith("INFO nightly: batch 19999 done")
