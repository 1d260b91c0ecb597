"""The browser tests on a machine without Chromium: the run that holds them (the tests marked
slow, `python -m pytest -q -m slow`, which the README's command leaves out and CI runs) still
passes and says in one line which tests it did not run and how to run them; where `CI=true` they are
required and fail. Each case runs the real browser tests in a pytest process of its own, with
a PATH that holds no Chromium."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BROWSER_TESTS = Path(__file__).with_name("test_ui_browser.py")
CHROMIUM_NAMES = ("chromium", "chromium-browser")


def without_chromium(**extra: str) -> dict[str, str]:
    """This environment with no Chromium to find: PATH keeps only the folders that hold none,
    and neither CTXOFFLOAD_CHROMIUM nor CI is set, unless `extra` sets them."""
    folders = [
        folder
        for folder in os.environ.get("PATH", "").split(os.pathsep)
        if folder and not any(os.path.exists(os.path.join(folder, n)) for n in CHROMIUM_NAMES)
    ]
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "CTXOFFLOAD_CHROMIUM"}}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), *folders])
    return {**env, **extra}


def run_browser_tests(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`python -m pytest -q -m slow` on the browser tests, as CI runs them (-ra from
    pyproject.toml), in one process."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-m",
            "slow",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'basetemp'}",
            str(BROWSER_TESTS),
        ],
        cwd=BROWSER_TESTS.parents[3],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.slow
def test_without_chromium_the_browser_tests_skip_in_one_line(tmp_path: Path) -> None:
    done = run_browser_tests(tmp_path, without_chromium())
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    skipped = re.search(r"\b(\d+) skipped\b", last)
    assert skipped and "passed" not in last and "error" not in last, done.stdout
    # One summary line names the tests left out, how to run them, and that CI requires them.
    lines = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(lines) == 1, done.stdout
    (line,) = lines
    assert f"SKIPPED [{skipped.group(1)}]" in line
    assert "tests/cli/ui/test_ui_browser.py" in line
    assert "apt-get install chromium" in line and "CI=true" in line


@pytest.mark.slow
@pytest.mark.parametrize("ci", ["true", "TRUE"])
def test_where_ci_is_true_a_missing_chromium_fails_the_browser_tests(
    tmp_path: Path, ci: str
) -> None:
    done = run_browser_tests(tmp_path, without_chromium(CI=ci))
    assert done.returncode != 0, done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert "skipped" not in last and ("error" in last or "failed" in last), done.stdout
    assert "apt-get install chromium" in done.stdout


def test_ci_requires_the_browser_tests() -> None:
    """.ci/run sets CI=true before it runs the suite, so CI never skips them."""
    script = (BROWSER_TESTS.parents[3] / ".ci" / "run").read_text(encoding="utf-8")
    lines = script.splitlines()
    assert "export CI=true" in lines
    assert lines.index("export CI=true") < lines.index("python -m pytest -q")
