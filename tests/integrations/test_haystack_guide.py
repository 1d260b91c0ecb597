"""The example of docs/guides/haystack.md runs as written against the real Haystack (the docs'
own test skips it: their environment has no Haystack)."""

from __future__ import annotations

from pathlib import Path

from frameworks import check_what_it_prints, require_framework, run_guide_example

require_framework("haystack", "haystack")


def test_the_guide_example_runs_and_stores_the_log(tmp_path: Path) -> None:
    done = run_guide_example("haystack.md", tmp_path)
    assert done.returncode == 0, done.stderr
    # On stderr, as the guide says, Haystack's ExperimentalWarning for its CompactionHook.
    check_what_it_prints(
        "haystack.md", done, stderr=r"ExperimentalWarning: 'CompactionHook'|CompactionHook\("
    )
    lines = done.stdout.splitlines()
    assert lines[-2:] == [
        "The nightly job finished: its last batch, 19999, is done.",
        "session: nightly-check",
    ]
    assert int(lines[0].split()[0]) < 2_000  # Haystack's pointer, not the log
    session = tmp_path / "agent_workspace" / "sessions" / "nightly-check"
    stored = session / "tool_result-0_fetch_logs_call_1.txt"
    assert stored.read_text(encoding="utf-8").endswith("INFO nightly: batch 19999 done")
