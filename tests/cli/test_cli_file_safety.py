"""Every `ctxoffload` reader refuses a hard-linked workspace file and says so, and reports a
file it may not read instead of taking it for empty or missing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_workspace import FAILING_LINE, unprivileged_prefix

from ctxoffload._disk.read import Folder
from ctxoffload.cli._access import read_json_lines
from ctxoffload.exceptions import CliError

SECRET = "SECRET-0f1e2d"
WHY = "it may be shared with a file outside the workspace; not read"


def _hard_link(outside: Path, inside: Path, text: str) -> None:
    """`inside` becomes a second name of `outside`, a file outside the workspace."""
    outside.write_text(text)
    inside.unlink(missing_ok=True)
    os.link(outside, inside)


def _secret_event() -> str:
    return f'{{"time": "2026-11-22T12:00:00+00:00", "kind": "compression", "note": "{SECRET}"}}\n'


def _secret_message() -> str:
    return f'{{"role": "user", "content": "{SECRET}"}}\n'


# -- hard links -----------------------------------------------------------------------------


def test_grep_refuses_a_hard_linked_tool_result_and_searches_the_rest(
    filled: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    hard = filled / "sessions/run-1/tool_result-hard.txt"
    _hard_link(tmp_path / "out.txt", hard, f"{SECRET}\n")
    result = cli("grep", f"{SECRET}|ORD-58213", "--workdir", filled)
    assert SECRET not in result.out
    assert result.out.count("ORD-58213") == 2  # both sessions' logs were still searched
    assert result.err == f"ctxoffload grep: {hard}: has 2 hard links: {WHY}\n"
    assert result.code == 2  # an error gives 2 even though lines matched (GNU grep's rule)


def test_grep_refuses_a_hard_linked_context_and_events_log(
    filled: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    context = filled / "sessions/run-2/context.jsonl"
    events = filled / "sessions/run-2/events.jsonl"
    _hard_link(tmp_path / "context.jsonl", context, _secret_message())
    _hard_link(tmp_path / "events.jsonl", events, _secret_event())
    plain = cli("grep", SECRET, "--workdir", filled)
    assert (plain.code, plain.out) == (2, "")
    assert plain.err == f"ctxoffload grep: {context}: has 2 hard links: {WHY}\n"
    with_events = cli("grep", "--events", "--json", SECRET, "run-2", "--workdir", filled)
    assert (with_events.code, with_events.out) == (2, "[]\n")
    assert with_events.err.splitlines() == [
        f"ctxoffload grep: {context}: has 2 hard links: {WHY}",
        f"ctxoffload grep: {events}: has 2 hard links: {WHY}",
    ]


def test_read_json_lines_refuses_a_hard_linked_file(filled: Path, tmp_path: Path) -> None:
    events = filled / "sessions/run-2/events.jsonl"
    _hard_link(tmp_path / "events.jsonl", events, _secret_event())
    with (
        Folder(str(filled), "sessions", "run-2") as folder,
        pytest.raises(CliError, match="has 2 hard links") as raised,
    ):
        read_json_lines(folder, "events.jsonl", command="ls")
    assert str(raised.value) == f"{events}: has 2 hard links: {WHY}"
    assert raised.value.code == 2


def test_cat_says_why_it_refuses_a_hard_linked_file(
    filled: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    hard = filled / "sessions/run-1/tool_result-hard.txt"
    _hard_link(tmp_path / "out.txt", hard, f"{SECRET}\n")
    result = cli("cat", hard, "--workdir", filled)
    assert (result.code, result.out) == (2, "")
    assert result.err == f"ctxoffload cat: {hard}: has 2 hard links: {WHY}\n"


# -- files that cannot be read ----------------------------------------------------------------


def _run(prefix: tuple[str, ...], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "ctxoffload", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_grep_reports_a_file_it_cannot_read(filled: Path, tmp_path: Path) -> None:
    prefix = unprivileged_prefix()
    locked = filled / "sessions/run-1/tool_result-call_1.txt"
    locked.chmod(0)
    result = _run(prefix, "grep", "ORD-58213", "--workdir", filled)
    assert result.stdout == (
        f"{filled}/sessions/run-2/tool_result-call_1.txt:{FAILING_LINE}:"
        f"{FAILING_LINE:05d} ERROR export-worker-7 order_id=ORD-58213 disk quota exceeded\n"
    )
    assert result.stderr == f"ctxoffload grep: cannot read {locked}: Permission denied\n"
    assert result.returncode == 2
    # A match only in that file is not "no match" (exit 1): the file was not searched.
    only = _run(prefix, "grep", "ORD-58213", "run-1", "--workdir", filled)
    assert (only.returncode, only.stdout) == (2, "")
    assert only.stderr == f"ctxoffload grep: cannot read {locked}: Permission denied\n"


def test_cat_says_a_file_cannot_be_read(filled: Path, tmp_path: Path) -> None:
    prefix = unprivileged_prefix()
    locked = filled / "sessions/run-1/tool_result-call_1.txt"
    locked.chmod(0)
    result = _run(prefix, "cat", locked, "--workdir", filled)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"ctxoffload cat: cannot read {locked}: Permission denied\n"


def test_read_json_lines_reports_a_file_it_cannot_read(filled: Path, tmp_path: Path) -> None:
    # ls, stats and show read their logs through read_json_lines: what they do with the
    # error is theirs.
    prefix = unprivileged_prefix()
    locked = filled / "sessions/run-1/events.jsonl"
    locked.chmod(0)
    code = (
        "import sys\n"
        "from ctxoffload.cli._access import read_json_lines\n"
        "from ctxoffload.exceptions import CliError\n"
        "from ctxoffload._disk.read import Folder\n"
        "try:\n"
        "    with Folder(sys.argv[1], 'sessions', 'run-1') as folder:\n"
        "        read_json_lines(folder, 'events.jsonl', command='ls')\n"
        "except CliError as exc:\n"
        "    print(exc.code, exc)\n"
    )
    done = subprocess.run(
        [*prefix, sys.executable, "-c", code, str(filled)], capture_output=True, text=True
    )
    assert (done.stdout, done.stderr) == (f"2 cannot read {locked}: Permission denied\n", "")
