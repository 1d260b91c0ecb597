"""The example of docs/guides/smolagents.md runs as written against the real smolagents (the
docs' own test skips it: their environment has no smolagents)."""

from __future__ import annotations

from pathlib import Path

from frameworks import check_the_nightly_example, require_framework, run_guide_example

require_framework("smolagents", "smolagents")


def test_the_guide_example_runs_and_stores_the_log(tmp_path: Path) -> None:
    check_the_nightly_example("smolagents.md", tmp_path)


def test_the_summary_example_runs_offline(tmp_path: Path) -> None:
    done = run_guide_example("smolagents.md", tmp_path, block=1)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Qwen/Qwen2.5-7B-Instruct writes the summaries",
        "refused: summary_model is the string 'gpt-4o-mini'",
    ]
