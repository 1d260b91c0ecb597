"""Integration tests run against the real frameworks, each in its own environment.

The files are tests/integrations/test_<framework>_*.py (`mcp`: the MCP proxy against the MCP SDK;
`claude`: the Claude Agent SDK). The main test run has neither AgentScope nor Strands installed
(their pins conflict with each other), so these tests skip there with the reason. `.ci/run`
installs each framework in a virtual environment of its own and runs its test files with
``CTXOFFLOAD_REQUIRE_FRAMEWORKS`` naming it: there a missing framework is a failure, never a
skip.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from helpers import install_hint


def required_frameworks() -> set[str]:
    """The extras this run requires (``CTXOFFLOAD_REQUIRE_FRAMEWORKS``, comma-separated): set in
    a host's environment by `.ci/run`, empty in the main run."""
    names = os.environ.get("CTXOFFLOAD_REQUIRE_FRAMEWORKS", "").split(",")
    return {name.strip() for name in names} - {""}


def framework_required(extra: str) -> bool:
    """Whether this run requires the framework of the ctxoffload extra `extra`
    (``CTXOFFLOAD_REQUIRE_FRAMEWORKS`` names it): then a missing part fails, never skips."""
    return extra in required_frameworks()


def require_framework(module: str, extra: str) -> ModuleType:
    """Import a framework for an integration test module, or skip it with an install hint.

    Args:
        module: The framework's import name (``agentscope``, ``strands``).
        extra: The ctxoffload extra that installs it.

    Returns:
        The imported module.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if framework_required(extra):
            pytest.fail(f"{module} is required in this run but does not import: {exc}", False)
        pytest.skip(
            f"{module} is not installed: {install_hint(extra)} "
            f"(.ci/run runs these tests in an environment of their own)",
            allow_module_level=True,
        )


def run_guide_example(
    guide: str, folder: Path, block: int = 0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a Python example of docs/guides/`guide` (by default the first, the page's
    whole-agent example) in `folder`, as a reader would (saved as a script, run by a fresh
    interpreter), with the source tree first on the path as the installs of .ci/run and of a
    checkout's venv give it; the finished process (its stdout, stderr, return code).

    Args:
        block: which Python block of the page, from 0.
        env: the variables the process runs with (default: this process's).
    """
    page = Path(__file__).resolve().parents[2] / "docs" / "guides" / guide
    code = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)[block]
    path = [str(page.parents[2] / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    # Saved to a file and run, as a reader runs it (smolagents' @tool reads its function's
    # source, which `python -c` has none of).
    script = folder / "example.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        env={**(os.environ if env is None else env), "PYTHONPATH": os.pathsep.join(path)},
    )


def run_as_a_user(code: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` as a user's script, by a fresh interpreter in `folder`, with logging as
    Python leaves it (nothing configured: a warning reaches stderr as a user sees it), the
    source tree and the tests' helpers (this folder's scripted hosts) on the path; the
    finished process (its stdout, stderr, return code)."""
    here = Path(__file__).resolve().parent
    path = [str(here.parents[1] / "src"), str(here), str(here.parent)]
    script = folder / "user_script.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=folder,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
    )


def _docs_blocks() -> ModuleType:
    """tests/docs/blocks.py, the one reader of the pages' blocks (not on this folder's path)."""
    where = Path(__file__).resolve().parents[1] / "docs" / "blocks.py"
    spec = importlib.util.spec_from_file_location("ctxoffload_docs_blocks", where)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def check_what_it_prints(
    guide: str, done: subprocess.CompletedProcess[str], stderr: str = ""
) -> None:
    """The guide's first example printed what the guide shows (its `test: output` block,
    `...` for what varies) and, on stderr, what the guide says it does: `stderr` is a regular
    expression every line of it matches (none: nothing on stderr)."""
    blocks = _docs_blocks()
    page = Path(__file__).resolve().parents[2] / "docs" / "guides" / guide
    example = next(b for b in blocks.blocks(page) if b.language == "python")
    assert example.output is not None, f"{guide}: its first example shows no output"
    assert blocks.matches(example.output.code, done.stdout), (
        f"{guide}: the example printed\n{done.stdout}\nnot what the guide shows\n"
        f"{example.output.code}"
    )
    noise = [line for line in done.stderr.splitlines() if not re.search(stderr or "^$", line)]
    assert not noise, f"{guide}: unexpected on stderr:\n" + "\n".join(noise)


def check_the_nightly_example(
    guide: str,
    folder: Path,
    env: dict[str, str] | None = None,
    session: str = "nightly-check",
    stderr: str = "",
) -> None:
    """Run the example of a host's guide that fetches the nightly job's 20,000-line log and
    greps its last batch (docs/guides/langchain.md, pydantic-ai.md, openai-agents.md), and
    check what it printed (the characters of the log the model was sent, first; what the
    guide shows, and on stderr what it says: `check_what_it_prints`) and that the whole log is
    in the workspace, in `session`."""
    done = run_guide_example(guide, folder, env=env)
    assert done.returncode == 0, done.stderr
    check_what_it_prints(guide, done, stderr)
    lines = done.stdout.splitlines()
    assert "The nightly job finished: its last batch, 19999, is done." in lines
    assert int(lines[0].split()[0]) < 20_000
    stored = folder / "agent_workspace" / "sessions" / session / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8").endswith("INFO nightly: batch 19999 done")


def context_ids(workdir: Path, session: str) -> set[str]:
    """The ids of the messages a session's context.jsonl holds (what left a host's context)."""
    lines = (workdir / "sessions" / session / "context.jsonl").read_text().splitlines()
    return {json.loads(line).get("id") for line in lines if line.strip()}


def saver_bytes(saver: Any) -> int:
    """What a LangGraph `InMemorySaver` holds, serialised: checkpoints, metadata, blobs,
    writes (what a blob kept in state costs every checkpoint)."""
    total = 0
    for namespaces in saver.storage.values():
        for checkpoints in namespaces.values():
            for checkpoint, metadata, _parent in checkpoints.values():
                total += len(checkpoint[1]) + len(metadata[1])
    total += sum(len(value[1]) for value in saver.blobs.values())
    total += sum(len(w[2][1]) for writes in saver.writes.values() for w in writes.values())
    return total
