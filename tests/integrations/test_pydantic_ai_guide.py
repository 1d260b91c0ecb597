"""The example of docs/guides/pydantic-ai.md runs as written against the real pydantic-ai (the
docs' own test skips it: their environment has no pydantic-ai)."""

from __future__ import annotations

from pathlib import Path

from frameworks import check_the_nightly_example, require_framework

require_framework("pydantic_ai", "pydantic_ai")


def test_the_guide_example_runs_and_stores_the_log(tmp_path: Path) -> None:
    check_the_nightly_example("pydantic-ai.md", tmp_path)
