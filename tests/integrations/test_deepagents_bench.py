"""bench/bench_peers.py, the side-by-side with LangChain's built-ins and deepagents, starts in
the deepagents environment (it imports the tests' helpers, which moved once under it and left
it unable to start)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from frameworks import require_framework

require_framework("deepagents", "deepagents")

ROOT = Path(__file__).resolve().parents[2]


def test_the_peers_bench_starts_and_says_its_options() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_peers.py"), "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "--strategies" in done.stdout
    assert "--corpus" in done.stdout


def test_a_what_if_is_a_json_object_of_the_configs_fields() -> None:
    # `--what-if` measures a choice against the guide's example: a list is refused before any
    # replay, and a field ContextConfig does not have stops the bench naming it.
    bench = [sys.executable, str(ROOT / "bench" / "bench_peers.py")]
    done = subprocess.run(
        [*bench, "--what-if", "[1]"], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 2
    assert "--what-if takes a JSON object" in done.stderr
    shape = ["--shapes", "swe", "--shape-runs", "1", "--windows", "8000"]
    done = subprocess.run(
        [*bench, "--what-if", '{"no_such_field": 1}', *shape, "--strategies", "ctxoffload"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode != 0
    assert "what-if, not the guide's example" in done.stdout
    assert "no_such_field" in done.stderr
