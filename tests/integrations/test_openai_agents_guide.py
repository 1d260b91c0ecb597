"""The example of docs/guides/openai-agents.md runs as written against the real OpenAI Agents
SDK, its client pointed at the local scripted server (the docs' own test skips it: their
environment has no SDK)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework, run_guide_example

require_framework("agents", "openai_agents")

from openai_server import OpenAIServer, chat_completion  # noqa: E402


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return chat_completion(tool_calls=[{"id": call_id, "type": "function", "function": function}])


def test_the_guide_example_runs_and_stores_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OpenAIServer() as server:
        server.add(call("fetch_logs", {"job": "nightly"}, "call_1"))
        server.add(call("Grep", {"pattern": "batch 19999 done"}, "call_2"))
        server.add_completion("The nightly job finished: its last batch, 19999, is done.")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
        done = run_guide_example("openai-agents.md", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        "The nightly job finished: its last batch, 19999, is done."
    )
    stored = tmp_path / "agent_workspace" / "sessions" / "nightly-check" / "tool_result-call_1.txt"
    assert stored.read_text(encoding="utf-8").endswith("INFO nightly: batch 19999 done")
    (cut,) = [m for m in server.requests[1]["messages"] if m.get("tool_call_id") == "call_1"]
    assert "tool_result-call_1.txt" in cut["content"] and len(cut["content"]) < 10_000
    (found,) = [m for m in server.requests[2]["messages"] if m.get("tool_call_id") == "call_2"]
    assert "batch 19999 done" in found["content"]
