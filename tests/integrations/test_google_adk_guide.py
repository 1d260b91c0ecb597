"""The example of docs/guides/google-adk.md runs as written against the real Google ADK (the
docs' own test skips it: their environment has no ADK)."""

from __future__ import annotations

from pathlib import Path

from frameworks import check_the_nightly_example, require_framework

require_framework("google.adk", "google_adk")


def test_the_guide_example_runs_and_stores_the_log(tmp_path: Path) -> None:
    check_the_nightly_example("google-adk.md", tmp_path)
