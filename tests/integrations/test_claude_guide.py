"""The Python example of docs/guides/coding-agents.md ("Claude Agent SDK"), run as a reader
runs it (a fresh interpreter, in an empty folder) against the real Claude Agent SDK."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from frameworks import require_framework

require_framework("claude_agent_sdk", "claude")

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "coding-agents.md"


def test_the_guides_sdk_example_stores_the_log_and_sends_its_head(tmp_path: Path) -> None:
    section = GUIDE.read_text(encoding="utf-8").split("## Claude Agent SDK", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    src = str(GUIDE.parents[2] / "src")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
        },
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.endswith(" of 608,889 characters reach Claude")
    assert int(first.split()[0].replace(",", "")) < 20_000
    assert second == "INFO nightly: batch 0 done"
    stored = tmp_path / "agent_workspace" / "sessions" / "nightly-check" / "tool_result-toolu_1.txt"
    assert stored.read_text(encoding="utf-8").endswith("INFO nightly: batch 19999 done")
