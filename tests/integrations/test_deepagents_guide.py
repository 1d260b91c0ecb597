"""The example of docs/guides/deepagents.md runs as written against the real deepagents (the
docs' own test skips it: their environment has no deepagents)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from frameworks import require_framework

require_framework("deepagents", "deepagents")

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "deepagents.md"


def test_the_guide_example_runs_and_stores_the_log(tmp_path: Path) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)
    # The source tree first, as the installs of .ci/run and of a checkout's venv give it.
    path = [str(GUIDE.parents[2] / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert int(lines[0].split()[0]) < 5_000
    assert "/large_tool_results/call_1" in done.stdout
    assert "INFO nightly: batch 19999 done" in done.stdout  # grep found it in the workspace
    assert lines[-1] == "The nightly job finished: its last batch, 19999, is done."
    session = tmp_path / "agent_workspace" / "sessions" / "nightly-check"
    stored = session / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8").endswith("INFO nightly: batch 19999 done")
