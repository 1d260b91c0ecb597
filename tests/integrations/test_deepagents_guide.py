"""The example of docs/guides/deepagents.md runs as written against the real deepagents (the
docs' own test skips it: their environment has no deepagents)."""

from __future__ import annotations

from pathlib import Path

from frameworks import check_what_it_prints, require_framework, run_guide_example

require_framework("deepagents", "deepagents")


def test_the_guide_example_runs_and_stores_the_log(tmp_path: Path) -> None:
    done = run_guide_example("deepagents.md", tmp_path)
    assert done.returncode == 0, done.stderr
    check_what_it_prints("deepagents.md", done)
    lines = done.stdout.splitlines()
    assert int(lines[0].split()[0]) < 5_000
    assert "/large_tool_results/call_1" in done.stdout
    assert "INFO nightly: batch 19999 done" in done.stdout  # grep found it in the workspace
    assert lines[-1] == "The nightly job finished: its last batch, 19999, is done."
    session = tmp_path / "agent_workspace" / "sessions" / "nightly-check"
    stored = session / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8").endswith("INFO nightly: batch 19999 done")
