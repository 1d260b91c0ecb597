"""The examples in examples/ run as written (the OpenAI one against a local server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import unreleased_leases
from openai_server import OpenAIServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, *args: str, env: dict[str, str] | None = None, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_workspace_tour_offloads_a_context_a_result_and_an_image(tmp_path: Path) -> None:
    out = run_example("workspace_tour.py", str(tmp_path / "ws"), cwd=tmp_path)
    session = tmp_path / "ws" / "sessions" / "run-42"
    log = (session / "tool_result-call_fetch_log_1.txt").read_text()
    assert log.splitlines()[-1].endswith("duplicate key 'sku-1182'")
    assert len(list((tmp_path / "ws" / "data").glob("*.png"))) == 1
    assert "context.jsonl" in out and "grep -n ERROR" in out


@pytest.mark.slow
def test_custom_tool_example_shows_schema_and_truncation(tmp_path: Path) -> None:
    out = run_example("custom_tool.py", cwd=tmp_path)
    assert '"enum": [' in out and "<<<TRUNCATED>>>" in out


def test_custom_offloader_example_finds_the_failure(tmp_path: Path) -> None:
    out = run_example("custom_offloader.py", cwd=tmp_path)
    assert "> 10001\trow 10000: FAILED checksum" in out
    database = json.loads(out.splitlines()[-1])
    assert database["rows"] == 1 and database["path"].endswith("offload.db")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["custom_tool.py", "custom_offloader.py", "workspace_tour.py"])
def test_an_example_leaves_nothing_in_the_temporary_folder(tmp_path: Path, name: str) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    args = [str(tmp_path / "ws")] if name == "workspace_tour.py" else []
    run_example(name, *args, cwd=tmp_path, env={"TMPDIR": str(temp)})
    assert sorted(p.name for p in temp.iterdir()) == []


@pytest.mark.slow
def test_quickstart_runs_against_an_openai_compatible_server(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        server.add_completion(
            None,
            tool_calls=[
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "fetch_logs", "arguments": '{"job": "nightly"}'},
                }
            ],
        )
        server.add_completion("db-2 refused connections: max_connections=100 was reached.")
        out = run_example(
            "quickstart_openai.py",
            "why?",
            cwd=tmp_path,
            env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key"},
        )
    assert "max_connections=100" in out
    assert unreleased_leases(tmp_path) == [], "the example never closed its agent"
    files = list((tmp_path / "agent_workspace" / "sessions").glob("*/tool_result-call_1.txt"))
    assert len(files) == 1 and "ERROR nightly" in files[0].read_text()
