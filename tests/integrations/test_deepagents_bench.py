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
