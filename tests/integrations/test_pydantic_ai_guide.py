"""The example of docs/guides/pydantic-ai.md runs as written against the real pydantic-ai (the
docs' own test skips it: their environment has no pydantic-ai)."""

from __future__ import annotations

from pathlib import Path

from frameworks import require_framework, run_guide_example

require_framework("pydantic_ai", "pydantic_ai")


def test_the_guide_example_runs_and_stores_the_log(tmp_path: Path) -> None:
    done = run_guide_example("pydantic-ai.md", tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "The nightly job finished: its last batch, 19999, is done."
    assert int(lines[0].split()[0]) < 20_000
    stored = tmp_path / "agent_workspace" / "sessions" / "nightly-check" / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8").endswith("INFO nightly: batch 19999 done")
