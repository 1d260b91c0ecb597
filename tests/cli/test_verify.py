"""`ctxoffload verify`: a whole workspace passes; each kind of damage is found."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def test_a_whole_workspace_verifies(filled: Path, cli: Callable[..., Any]) -> None:
    result = cli("verify", "--workdir", filled)
    assert result.code == 0, result.out
    assert result.out.startswith("ok: ")
    report = json.loads(cli("verify", "--json", "--workdir", filled).out)
    assert report["ok"] and report["checked"]["data_files"] == 1
    assert report["checked"]["references"] >= 4  # events, context, state all name files


def _problems(cli: Callable[..., Any], filled: Path) -> list[str]:
    result = cli("verify", "--json", "--workdir", filled)
    report = json.loads(result.out)
    assert result.code == (1 if report["problems"] else 0)
    return [f"{p['path']}: {p['problem']}" for p in report["problems"]]


def test_a_corrupt_line_is_a_problem(filled: Path, cli: Callable[..., Any]) -> None:
    events = filled / "sessions/run-1/events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    events.write_bytes(lines[0] + b'{"kind": "trunc\n' + b"".join(lines[1:]))
    assert _problems(cli, filled) == [f"{events}: line 2 is not valid JSON: " + _json_error()]


def test_a_json_line_that_is_not_an_event_is_a_problem(
    filled: Path, cli: Callable[..., Any]
) -> None:
    # `show` skips such a line and sends the user here: verify must name it.
    events = filled / "sessions/run-1/events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    events.write_bytes(lines[0] + b"[1, 2]\n" + b'{"kind": 5}\n' + b"".join(lines[1:]))
    assert _problems(cli, filled) == [
        f"{events}: line 2 is not an event (an object with a kind): readers skip it",
        f"{events}: line 3 is not an event (an object with a kind): readers skip it",
    ]


def _json_error() -> str:
    try:
        json.loads('{"kind": "trunc')  # the line as the log holds it, without its newline
    except ValueError as exc:
        return str(exc)
    raise AssertionError


def test_a_torn_tail_is_a_warning_not_a_problem(filled: Path, cli: Callable[..., Any]) -> None:
    context = filled / "sessions/run-1/context.jsonl"
    with open(context, "ab") as f:
        f.write(b'{"role": "user", "conte')
    result = cli("verify", "--workdir", filled)
    assert result.code == 0
    assert f"warning: {context}: line 5 is torn" in result.out


def test_a_data_file_that_does_not_match_its_hash(filled: Path, cli: Callable[..., Any]) -> None:
    data = next((filled / "data").iterdir())
    data.write_bytes(data.read_bytes() + b"x")
    [problem] = _problems(cli, filled)
    assert problem.startswith(f"{data}: content hashes to ")


def test_a_reference_to_a_missing_file(filled: Path, cli: Callable[..., Any]) -> None:
    (filled / "sessions/run-1/tool_result-call_1.txt").unlink()
    problems = _problems(cli, filled)
    assert problems
    assert all("sessions/run-1/tool_result-call_1.txt names no file" in p for p in problems)
    assert any(p.startswith(f"{filled}/sessions/run-1/events.jsonl:") for p in problems)


def test_a_corrupt_state_file(filled: Path, cli: Callable[..., Any]) -> None:
    (filled / "sessions/run-1/state.json").write_text("{not json")
    [problem] = _problems(cli, filled)
    assert "state.json: not valid JSON" in problem


def test_links_and_foreign_files_are_problems(
    filled: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    session = filled / "sessions/run-2"
    (session / "tool_result-link.txt").symlink_to(outside)
    os.mkfifo(session / "tool_result-fifo.txt")
    os.link(session / "tool_result-call_1.txt", tmp_path / "second-name.txt")
    problems = "\n".join(_problems(cli, filled))
    assert "tool_result-link.txt: is a symbolic link" in problems
    assert "tool_result-fifo.txt: is a FIFO" in problems
    assert "tool_result-call_1.txt: has 2 hard links" in problems


def test_verify_one_session(filled: Path, cli: Callable[..., Any]) -> None:
    (filled / "sessions/run-2/state.json").write_text("{not json")
    assert cli("verify", "run-1", "--workdir", filled).code == 0
    assert cli("verify", "run-2", "--workdir", filled).code == 1


def test_one_of_a_kind_is_said_in_the_singular(filled: Path, cli: Callable[..., Any]) -> None:
    (filled / "sessions/run-2/state.json").write_text("{not json")
    last = cli("verify", "--workdir", filled).out.splitlines()[-1]
    assert last.startswith("1 problem: ") and ", 1 data file, " in last


def test_a_commit_record_that_miscounts_the_lines(filled: Path, cli: Callable[..., Any]) -> None:
    from ctxoffload._disk.commit import encode_commit_record

    context = filled / "sessions/run-1/context.jsonl"
    record = context.with_name("context.jsonl.commit")
    record.write_bytes(encode_commit_record(context.stat().st_size, 3))
    result = cli("verify", "--json", "--workdir", filled)
    assert result.code == 1
    assert json.loads(result.out)["problems"] == [
        {
            "path": str(record),
            "problem": "says 3 lines of context.jsonl committed, but its committed part holds 4",
        }
    ]
