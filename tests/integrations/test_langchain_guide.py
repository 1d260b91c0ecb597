"""The example of docs/guides/langchain.md runs as written against the real LangChain (the docs'
own test skips it: their environment has no LangChain)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from frameworks import require_framework

require_framework("langchain", "langchain")

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "langchain.md"


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
    assert lines[-1] == "The nightly job finished: its last batch, 19999, is done."
    assert int(lines[0].split()[0]) < 20_000
    stored = tmp_path / "agent_workspace" / "sessions" / "nightly-check" / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8").endswith("INFO nightly: batch 19999 done")
