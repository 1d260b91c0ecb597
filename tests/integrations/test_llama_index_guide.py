"""The example of docs/guides/llama-index.md runs as written against the real LlamaIndex (the
docs' own test skips it: their environment has no LlamaIndex)."""

from __future__ import annotations

from pathlib import Path

from frameworks import check_what_it_prints, require_framework, run_guide_example

require_framework("llama_index.core", "llama_index")


def test_the_guide_example_runs_and_stores_the_log(tmp_path: Path) -> None:
    done = run_guide_example("llama-index.md", tmp_path)
    assert done.returncode == 0, done.stderr
    check_what_it_prints("llama-index.md", done)
    lines = done.stdout.splitlines()
    assert lines[-2:] == [
        "The nightly job finished: its last batch, 19999, is done.",
        "session: nightly-check",
    ]
    assert int(lines[0].split()[0]) < 20_000
    session = tmp_path / "agent_workspace" / "sessions" / "nightly-check"
    (stored,) = session.glob("tool_result-fetch_logs-*.txt")
    assert stored.read_text(encoding="utf-8").endswith("INFO nightly: batch 19999 done")


def test_the_summary_example_runs_offline(tmp_path: Path) -> None:
    done = run_guide_example("llama-index.md", tmp_path, block=1)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["refused: summary_model is the string 'gpt-4.1'"]
