"""Every example of docs/guides/openai-agents.md runs as written against the real OpenAI Agents
SDK, each alone, offline: their model is a scripted SDK `Model` in the block, and no variable
points them at a server or gives them a key (the docs' own test skips them: their environment
has no SDK)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from frameworks import check_the_nightly_example, require_framework, run_guide_example

require_framework("agents", "openai_agents")


def offline_env() -> dict[str, str]:
    """This environment without a key, a server or a tracing switch: what a block needs it
    must set itself."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "CTXOFFLOAD_", "HTTP_PROXY", "HTTPS_PROXY"))
    }


def test_the_agent_example_runs_offline_and_stores_the_log(tmp_path: Path) -> None:
    check_the_nightly_example("openai-agents.md", tmp_path, env=offline_env())


def test_the_agent_example_prints_no_tracing_failure(tmp_path: Path) -> None:
    done = run_guide_example("openai-agents.md", tmp_path, env=offline_env())
    assert done.returncode == 0, done.stderr
    assert "Tracing" not in done.stderr and "OPENAI_API_KEY" not in done.stderr, done.stderr


def test_the_session_example_keeps_the_log_once(tmp_path: Path) -> None:
    done = run_guide_example("openai-agents.md", tmp_path, block=1, env=offline_env())
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    assert line.endswith(" characters of the log in the session's items")
    assert int(line.split()[0]) < 20_000
    session = tmp_path / "agent_workspace" / "sessions" / "nightly-check"
    stored = session / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8").endswith("INFO nightly: batch 19999 done")
    assert "batch 19999 done" not in (session / "history.jsonl").read_text(encoding="utf-8")
    assert "Tracing" not in done.stderr, done.stderr


def test_the_compaction_example_moves_the_older_turns_to_the_context_log(tmp_path: Path) -> None:
    done = run_guide_example("openai-agents.md", tmp_path, block=2, env=offline_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["8 items before", "3 items after"]
    session = tmp_path / "agent_workspace" / "sessions" / "nightly-check"
    lines = (session / "context.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["role"] for line in lines] == ["user", "assistant"] * 3
    assert "Tracing" not in done.stderr, done.stderr
