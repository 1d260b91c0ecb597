"""A skipped test says what it needs in words that work: the install command from a clone with
the extra pip finds, and one wording for the missing corpus (tests/helpers.py holds both)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import corpus_missing, install_hint

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def run_pytest(*args: str, env: dict[str, str] | None = None) -> str:
    """pytest's output for `args`, run from the repository in one process of its own."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    return done.stdout + done.stderr


def extras() -> set[str]:
    """The extras of the installed package, as pip finds them."""
    from importlib.metadata import metadata

    return set(metadata("ctxoffload").get_all("Provides-Extra") or [])


def test_the_install_hint_names_the_extra_as_pip_finds_it() -> None:
    assert install_hint("pydantic_ai") == "pip install -e '.[pydantic-ai]'"
    assert install_hint("openai_agents") == "pip install -e '.[openai-agents]'"
    assert install_hint("sql") == "pip install -e '.[sql]'"


def test_every_framework_a_test_requires_is_an_extra_of_the_package() -> None:
    called = re.compile(r"require_framework\(\s*\"[\w.]+\",\s*\"([\w-]+)\"\s*\)")
    named = {
        match.group(1)
        for path in (TESTS / "integrations").glob("*.py")
        for match in called.finditer(path.read_text(encoding="utf-8"))
    }
    assert named, "no require_framework call found: the pattern is out of date"
    hinted = {install_hint(extra).split("[")[1].split("]")[0] for extra in named}
    assert hinted <= extras(), f"not extras of the package: {sorted(hinted - extras())}"


@pytest.mark.slow
def test_a_missing_host_skips_with_the_command_that_installs_it() -> None:
    try:
        import pydantic_ai  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover - the host's own environment runs the guide instead
        return
    out = run_pytest("-rs", "tests/integrations/test_pydantic_ai_guide.py")
    assert "pip install -e '.[pydantic-ai]'" in out, out


@pytest.mark.slow
def test_without_the_corpus_no_case_is_an_empty_parameter_set(tmp_path: Path) -> None:
    """Where the corpus is missing, a test parametrised over its files skips with the one
    reason, never as pytest's bare "got empty parameter set" (an item id ending `NOTSET`)."""
    users = sorted(
        str(path.relative_to(ROOT))
        for path in TESTS.rglob("test_*.py")
        if re.search(r"\bcorpus_(cases|files|file|missing)\b", path.read_text(encoding="utf-8"))
    )
    assert len(users) >= 5, users
    out = run_pytest("--collect-only", "-q", *users, env={"CTXOFFLOAD_CORPUS": str(tmp_path)})
    assert "NOTSET" not in out and "no-corpus" in out, out


def test_no_test_spells_the_corpus_place_or_its_skip_itself() -> None:
    spelled = re.compile(
        r"\"shared\"\s*/\s*\"corpus\"|corpus[^\n]{0,40}is not (there|here|present)"
    )
    own = [
        str(path.relative_to(ROOT))
        for path in TESTS.rglob("*.py")
        if path.name != "helpers.py" and spelled.search(path.read_text(encoding="utf-8"))
    ]
    assert not own, f"use helpers.CORPUS, corpus_file and corpus_missing in: {own}"
    assert corpus_missing().startswith("the transcript corpus is not at ")
