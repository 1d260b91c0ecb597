"""README.md keeps its promises: it is short, it opens with the two set-up commands, the first
of them works as written on a copy of the repository, CI runs the second, and every relative
link in it (and in CHANGELOG.md and CONTRIBUTING.md) names a file of the repository.

Its Python and console blocks are run with every page's by the other tests of this folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from blocks import ROOT, blocks

README = ROOT / "README.md"
MAX_LINES = 160

SET_UP_DEMO = "python3 -m venv .venv && . .venv/bin/activate && pip install . && ctxoffload demo"
"""The README's first command: install from a clone and run the demo."""

SET_UP_TESTS = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' "
    "&& python -m pytest -q"
)
"""The README's second command: install the test extra and run the suite (what .ci/run does
in a virtual environment of its own)."""

# What a copy of the repository leaves out: version control, local environments, caches and
# what earlier runs wrote. Everything else is copied, as a clone would have it.
_NOT_IN_A_CLONE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "venv*",
    "__pycache__",
    "*.egg-info",
    ".*_cache",
    ".hypothesis",
    "_build",
    "dist",
    "build",
    "agent_workspace",
    "ctxoffload-demo-*",
)

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCED = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+).+?\1", re.S)


def relative_links(page: Path) -> list[str]:
    """The targets of a page's Markdown links that are neither URLs nor in-page anchors,
    without their `#fragment`; code blocks and code spans are not read."""
    text = _CODE_SPAN.sub("", _FENCED.sub("", page.read_text(encoding="utf-8")))
    targets = (match.group(1) for match in _LINK.finditer(text))
    return [
        target.split("#", 1)[0]
        for target in targets
        if not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")
    ]


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines (at most {MAX_LINES})"


def test_the_readme_opens_with_the_two_set_up_commands() -> None:
    first, second = blocks(README)[:2]
    assert (first.language, first.code) == ("bash", SET_UP_DEMO + "\n")
    assert (second.language, second.code) == ("bash", SET_UP_TESTS + "\n")
    # Nothing but the title and one sentence comes before them.
    assert first.line <= 5, f"the first set-up command starts at line {first.line}"


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run makes its own virtual environment, then installs and tests as the README says
    (it may install more extras beside `test`, such as `docs`): with uv, a faster installer of
    the same packages, and with pip where uv cannot be installed."""
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install, test = SET_UP_TESTS.split(" && ")[2:]
    assert install == "pip install -e '.[test]'"
    assert re.search(r"^python3 -m venv ", script, re.M)
    extras = r"-e '\.\[(\w+,)*test(,\w+)*\]'$"
    assert re.search(rf"^ *python -m pip install (--quiet )?{extras}", script, re.M), (
        f".ci/run does not run {install!r} where uv is missing"
    )
    assert re.search(
        rf'^ *uv pip install (--quiet )?--python "\$venv/bin/python" {extras}', script, re.M
    )
    assert re.search(rf"^{re.escape(test)}$", script, re.M), f".ci/run does not run {test!r}"


@pytest.mark.slow
@pytest.mark.xdist_group("readme-set-up")
def test_the_demo_command_runs_as_written_in_a_copy_of_the_repository(tmp_path: Path) -> None:
    """The README's first command, word for word, in a bash shell in a copy of the
    repository: a fresh .venv, `pip install .` from the package index, the demo."""
    clone = tmp_path / "ctxoffload"
    shutil.copytree(ROOT, clone, ignore=_NOT_IN_A_CLONE, symlinks=True)
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}
        and not name.startswith("CTXOFFLOAD_")
    }
    # `python3` is the interpreter running the tests, so the venv gets its Python version.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    done = subprocess.run(
        ["bash", "-c", SET_UP_DEMO],
        cwd=clone,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Answer: The nightly export failed on order ORD-58213" in done.stdout
    assert (clone / ".venv" / "bin" / "ctxoffload").is_file()
    (workspace,) = clone.glob("ctxoffload-demo-*")
    assert (workspace / "sessions" / "nightly-job" / "events.jsonl").is_file()


@pytest.mark.slow
def test_the_quickstart_run_twice_prints_nothing_on_stderr(tmp_path: Path) -> None:
    """A new user runs the quickstart again: it closed its agent, so the second run takes no
    lease over and prints no warning; it resumes run-42 and answers the same, and `show`
    says it resumed, as the README tells."""
    quickstart = next(b for b in blocks(README) if b.language == "python")
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart.code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXOFFLOAD_"))}
    runs = [
        subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        for _ in range(2)
    ]
    for run in runs:
        assert (run.returncode, run.stderr) == (0, ""), run.stderr
    assert runs[0].stdout == runs[1].stdout
    assert not (tmp_path / "agent_workspace/sessions/run-42/tool_result-call_1.2.txt").exists()
    # What the README says shows the resumed run, where a new user looks.
    said = " ".join(README.read_text(encoding="utf-8").split())
    assert "`ctxoffload show run-42 --workdir agent_workspace`" in said
    assert "opening with `resumed at step 3`" in said
    show = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "show", "run-42", "--workdir", "agent_workspace"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert " resumed at step 3: " in show.stdout, show.stdout
    # Each line of the timeline fits 80 columns (the first names the folder, as it is).
    wide = [line for line in show.stdout.splitlines()[1:] if len(line) > 80]
    assert not wide, wide


@pytest.mark.parametrize("page", ["README.md", "CHANGELOG.md", "CONTRIBUTING.md"])
def test_every_relative_link_names_a_file_of_the_repository(page: str) -> None:
    missing = [target for target in relative_links(ROOT / page) if not (ROOT / target).is_file()]
    assert not missing, f"{page} links to files that do not exist: {', '.join(missing)}"


def test_the_link_reader_skips_urls_anchors_and_code(tmp_path: Path) -> None:
    sample = tmp_path / "page.md"
    sample.write_text(
        "[a](docs/a.md#x) [b](https://example.org/c.md) [c](#top) `[d](e.md)`\n"
        "```\n[f](g.md)\n```\n",
        encoding="utf-8",
    )
    assert relative_links(sample) == ["docs/a.md"]
