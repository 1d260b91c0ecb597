"""`ctxoffload replay` on hostile transcripts and configs: each ends in a correct report or
one clear line with exit 2, never a traceback. Run as a real process: what a person sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import WHITESPACE_PADDING, padded_report


def _replay(
    tmp_path: Path, *args: str | Path, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CTXOFFLOAD_WORKDIR"} | (env_extra or {})
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxoffload",
            "replay",
            *map(str, args),
            "--workdir",
            str(tmp_path / "ws"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def _one_line_error(done: subprocess.CompletedProcess[str], says: str) -> None:
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 2, done
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("ctxoffload replay: ") and says in done.stderr, done.stderr


CHAT = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "ok"},
    {"role": "user", "content": "again"},
    {"role": "assistant", "content": "done"},
]


def _swe_agent(tool_call_ids: str) -> dict[str, object]:
    call = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    return {
        "trajectory": [],
        "history": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "look", "tool_calls": [call]},
            {"role": "tool", "content": "file.txt", "tool_call_ids": tool_call_ids},
            {"role": "assistant", "content": "done"},
        ],
    }


@pytest.mark.slow
@pytest.mark.parametrize("value", [5, None, ["x"], {"a": 1}, "other-agent-2", "x" * 10_000])
@pytest.mark.parametrize("info", [False, True], ids=["chat", "mini-swe-agent's keys"])
def test_a_trajectory_format_replay_does_not_know_is_said_in_one_line(
    tmp_path: Path, value: object, info: bool
) -> None:
    """A transcript that names its format, as one replay does not know, is not read as a
    format guessed from its keys; --format says which to read it as."""
    transcript = tmp_path / "t.traj.json"
    data = {"trajectory_format": value, "messages": CHAT, **({"info": {}} if info else {})}
    transcript.write_text(json.dumps(data))
    done = _replay(tmp_path, transcript)
    _one_line_error(done, "is in no format replay knows (its trajectory_format is ")
    assert len(done.stderr) < 400, done.stderr
    chosen = _replay(tmp_path, transcript, "--format", "openai")
    assert chosen.returncode == 0, chosen.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "ids",
    [
        "-" * 100_000 + "1",  # MemoryError in Python's parser
        "1+" * 50_000 + "1",  # RecursionError building its tree
        "[" + "~" * 99_998 + "1]",
        "[" * 100_000,
        "['" + "x" * 99_996 + "']",  # long, and harmless
    ],
    ids=["minus", "plus", "tilde", "brackets", "long-id"],
)
def test_swe_agent_tool_call_ids_of_100000_characters(tmp_path: Path, ids: str) -> None:
    transcript = tmp_path / "t.traj"
    transcript.write_text(json.dumps(_swe_agent(ids)))
    done = _replay(tmp_path, transcript, "--json")
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode in (0, 2), done


def test_swe_agent_tool_call_ids_as_a_python_list_are_read(tmp_path: Path) -> None:
    transcript = tmp_path / "t.traj"
    transcript.write_text(json.dumps(_swe_agent("['call_1']")))
    done = _replay(tmp_path, transcript, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"][0]["recoverable"]


def _openhands_line(instance_id: str, text: str) -> str:
    history = [
        {"action": "message", "source": "user", "args": {"content": f"do {text}"}},
        {"action": "message", "source": "agent", "args": {"content": "looking"}},
        {"action": "message", "source": "user", "args": {"content": "go on"}},
        {"action": "message", "source": "agent", "args": {"content": f"done {text}"}},
    ]
    return json.dumps({"instance_id": instance_id, "history": history})


@pytest.mark.slow
def test_two_openhands_runs_with_one_instance_id_get_a_report_each(tmp_path: Path) -> None:
    transcript = tmp_path / "output.jsonl"
    transcript.write_text(_openhands_line("same", "a") + "\n" + _openhands_line("same", "b") + "\n")
    done = _replay(tmp_path, transcript)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "run output-same:" in done.stdout and "run output-same-2:" in done.stdout, done.stdout
    as_json = _replay(tmp_path, transcript, "--json", "--session", "again")
    runs = [r["run"] for r in json.loads(as_json.stdout)["results"]]
    assert runs == ["output-same", "output-same-2"]


@pytest.mark.slow
@pytest.mark.parametrize("depth", [990, 100_000])
def test_a_deeply_nested_transcript_is_one_line(tmp_path: Path, depth: int) -> None:
    transcript = tmp_path / "t.json"
    deep = "[" * depth + "]" * depth
    transcript.write_text('[{"role": "user", "content": ' + deep + "}]")
    _one_line_error(_replay(tmp_path, transcript), "nested more than")
    lines = tmp_path / "t.jsonl"
    lines.write_text(json.dumps(CHAT[0]) + "\n" + '{"role": "user", "content": ' + deep + "}\n")
    _one_line_error(_replay(tmp_path, lines), "nested more than")


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ('{"context_window": ' + "[" * 100_000 + "]" * 100_000 + "}", "config"),
        ('{"context_window": ' + "[" * 990 + "]" * 990 + "}", "config"),
        ('{"context_window": ' + "9" * 5000 + "}", "config"),
        ('{"tool_result_limit": ' + "9" * 5000 + "}", "config"),
        ('{"context_window": 1e999}', "config"),
    ],
    ids=["deep", "deep-990", "5000-digit window", "5000-digit limit", "infinite"],
)
def test_a_hostile_config_is_one_line(tmp_path: Path, config: str, says: str) -> None:
    transcript = tmp_path / "t.json"
    transcript.write_text(json.dumps(CHAT))
    path = tmp_path / "c.json"
    path.write_text(config)
    _one_line_error(_replay(tmp_path, transcript, "--config", path), says)


@pytest.mark.slow
@pytest.mark.parametrize("jsonl", [False, True], ids=["json", "jsonl"])
def test_a_transcript_that_starts_with_a_byte_order_mark_is_replayed(
    tmp_path: Path, jsonl: bool
) -> None:
    messages = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
    ]
    text = "\n".join(map(json.dumps, messages)) if jsonl else json.dumps(messages)
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    done = _replay(tmp_path, path)
    assert done.returncode == 0, done.stderr
    assert "model calls" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("fast", ["0", "1"], ids=["tiktoken", "rs-bpe"])
def test_reports_padded_with_a_megabyte_of_whitespace_are_replayed(
    tmp_path: Path, fast: str
) -> None:
    messages: list[dict[str, object]] = [{"role": "user", "content": "Print every report."}]
    for i, pad in enumerate(WHITESPACE_PADDING):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "report", "arguments": "{}"},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": padded_report(pad)})
    transcript = tmp_path / "padded.json"
    transcript.write_text(json.dumps(messages), encoding="utf-8")
    done = _replay(tmp_path, transcript, env_extra={"CTXOFFLOAD_FAST_COUNTER": fast})
    assert "Traceback" not in done.stderr and "panicked" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done
    stored = sorted((tmp_path / "ws").rglob("tool_result-*.txt"))
    assert [p.read_text(encoding="utf-8") for p in stored] == [
        padded_report(pad) for pad in WHITESPACE_PADDING
    ]


def _codex_row(payload: dict[str, object], second: int) -> str:
    return json.dumps(
        {
            "timestamp": f"2025-09-24T19:22:{second:02d}Z",
            "type": "response_item",
            "payload": payload,
        }
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "arguments",
    ["[" * 5_000 + "]" * 5_000, '{"a":' * 5_000 + "1" + "}" * 5_000],
    ids=["array", "object"],
)
def test_a_codex_call_whose_arguments_nest_5000_deep_is_replayed(
    tmp_path: Path, arguments: str
) -> None:
    # The arguments are JSON inside a string: the line itself is shallow, and parsing them
    # raised RecursionError out of replay. They are kept as the text the model sent, as the
    # chat format keeps them, and the run is replayed.
    transcript = tmp_path / "rollout.jsonl"
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
    call = {"type": "function_call", "name": "shell", "arguments": arguments, "call_id": "c1"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "done"}],
    }
    rows = [_codex_row(p, n) for n, p in enumerate([user, call, output, answer])]
    transcript.write_text("\n".join(rows) + "\n")
    done = _replay(tmp_path, transcript, "--json")
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"][0]["recoverable"]
