"""The example of docs/guides/google-adk.md runs as written against the real Google ADK (the
docs' own test skips it: their environment has no ADK)."""

from __future__ import annotations

from pathlib import Path

from frameworks import check_the_nightly_example, require_framework, run_guide_example

from ctxoffload._disk.ids import session_id_for

require_framework("google.adk", "google_adk")


def test_the_guide_example_runs_and_stores_the_log(tmp_path: Path) -> None:
    # The guide names the session the example writes: app "ops", user "ana", "nightly-check".
    session = session_id_for("ops/ana/nightly-check")
    assert session == "ops_ana_nightly-check.e4e258f3f1be92a1"
    check_the_nightly_example("google-adk.md", tmp_path, session=session)


def test_the_summary_example_runs_offline(tmp_path: Path) -> None:
    done = run_guide_example("google-adk.md", tmp_path, block=1)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Gemini writes the summaries",
        "refused: summary_model 'claude-3-5-sonnet' is no model Google ADK resolves",
    ]
