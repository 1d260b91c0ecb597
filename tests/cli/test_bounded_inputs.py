"""Hostile input never ends a command in a traceback: JSON lines nested as deep as the
parser allows (or far deeper) in every log a command reads, and hostile values on every
numeric option, end in a clear line and a documented exit status (0, 1 or 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# Depths from well past what the workspace writes to past what json can parse: a value that
# parses with the interpreter's stack nearly used up is the one a recursive walk after it
# overflows, and where that is depends on the interpreter.
DEPTHS = [*range(150, 900, 50), *range(900, 1000), 100_000]


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _listed(depth: int) -> str:
    return "[" * depth + '"x"' + "]" * depth


def _plant(workdir: Path) -> None:
    """Deep lines in context.jsonl (no commit record: every line counts), events.jsonl (as a
    message, a tool call, a model call's step), state.json and a tool_result file."""
    session = workdir / "sessions" / "run-1"
    (session / "context.jsonl.commit").unlink()
    context_lines = [
        '{"role": "user", "content": LISTED}',
        '{"role": "user", "content": [NESTED]}',
        '{"role": "assistant", "content": [{"type": "tool_call", "id": "c", "name": "n", '
        '"input": NESTED}]}',
        '{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "n", '
        '"arguments": "QUOTED"}}]}',
        "LISTED",
    ]
    event_lines = [
        '{"kind": "message", "time": "x", "message": {"id": "mDEPTH", "role": "user", '
        '"content": LISTED}}',
        '{"kind": "message", "time": "x", "message": {"role": "user", "content": [NESTED]}}',
        '{"kind": "model_call", "step": DEPTH, "time": "x", "messages": ["mDEPTH"]}',
        '{"kind": "tool_call", "time": "x", "name": NESTED}',
        '{"kind": "compression", "time": "x", "reference": NESTED}',
        "NESTED",
    ]

    def filled(lines: list[str], depth: int) -> list[str]:
        nested = _nested(depth)
        quoted = nested.replace('"', '\\"')  # as a JSON string: OpenAI's tool-call arguments
        return [
            line.replace("LISTED", _listed(depth))
            .replace("NESTED", nested)
            .replace("QUOTED", quoted)
            .replace("DEPTH", str(depth))
            for line in lines
        ]

    context = [line for depth in DEPTHS for line in filled(context_lines, depth)]
    events = [line for depth in DEPTHS for line in filled(event_lines, depth)]
    with open(session / "context.jsonl", "a") as f:
        f.write("\n".join(context) + "\n")
    with open(session / "events.jsonl", "a") as f:
        f.write("\n".join(events) + "\n")
    (session / "state.json").write_text(_nested(990) + "\n")
    (session / "tool_result-deep.txt").write_text(_nested(100_000) + "\n")


@pytest.fixture(scope="module")
def deep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import asyncio

    from cli_workspace import fill_workspace

    workdir = tmp_path_factory.mktemp("deep") / "ws"
    asyncio.run(fill_workspace(workdir))
    _plant(workdir)
    return workdir


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CTXOFFLOAD_WORKDIR"}
    return subprocess.run(
        [sys.executable, "-m", "ctxoffload", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


DEEP_COMMANDS = {
    "ls": ["ls"],
    "ls --json": ["ls", "--json"],
    "stats": ["stats"],
    "verify": ["verify"],
    "grep": ["grep", "x"],
    "grep --events -C": ["grep", "--events", "-C", "3", "a"],
    "show": ["show", "run-1"],
    "show --full": ["show", "run-1", "--full"],
    "show --json": ["show", "run-1", "--json"],
    **{f"show --step {depth}": ["show", "run-1", "--step", str(depth)] for depth in DEPTHS[::7]},
    "cat context": ["cat", "sessions/run-1/context.jsonl"],
    "cat events": ["cat", "sessions/run-1/events.jsonl"],
    "cat state": ["cat", "sessions/run-1/state.json"],
    "cat tool result": ["cat", "sessions/run-1/tool_result-deep.txt"],
}


@pytest.mark.parametrize("argv", DEEP_COMMANDS.values(), ids=DEEP_COMMANDS.keys())
def test_a_deeply_nested_line_is_no_traceback(deep: Path, argv: list[str]) -> None:
    done = _run(*argv, "--workdir", deep)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "RecursionError" not in done.stderr + done.stdout
    assert done.returncode in (0, 1, 2), done.stderr


@pytest.mark.slow
def test_a_deeply_nested_line_is_reported_as_a_bad_line(deep: Path) -> None:
    ls = _run("ls", "--workdir", deep)
    assert ls.returncode == 0, ls.stderr
    assert "is not valid JSON" in ls.stderr  # said once, as for any line that is not JSON
    verify = _run("verify", "--workdir", deep)
    assert verify.returncode == 1
    assert "nested more than" in verify.stdout


@pytest.mark.slow
def test_a_chain_of_1200_sub_agents_is_listed_each_under_the_one_before(tmp_path: Path) -> None:
    """Sub-agents of sub-agents, 1,200 deep, as parent links on disk: `ls` lists them all,
    in order, each one level under its parent (a recursive walk ended in RecursionError)."""
    import asyncio
    import json

    from helpers import chain_of_sub_agents

    workdir = tmp_path / "ws"
    names = asyncio.run(chain_of_sub_agents(workdir, 1200))
    listed = _run("ls", "--json", "--workdir", workdir)
    assert listed.returncode == 0, listed.stderr[-3000:]
    rows = json.loads(listed.stdout)
    assert [(r["session"], r["depth"]) for r in rows] == [(n, d) for d, n in enumerate(names)]
    table = _run("ls", "--workdir", workdir)
    assert table.returncode == 0, table.stderr[-3000:]
    assert table.stdout.splitlines()[-1].strip().startswith("└ s1199")


# -- hostile numbers ---------------------------------------------------------------------------

HUGE = "9" * 5000  # past Python's 4,300-digit limit for int()
HOSTILE_NUMBERS = [
    "-1",
    "0",
    HUGE,
    "-" + HUGE,
    "nan",
    "inf",
    "-inf",
    "1e309",
    "1e-309",
    "99999999999999999999",
    "0x10",
    "",
    " ",
    "1_000",
]

# Every numeric option of every command, with the arguments it needs around it.
NUMERIC = {
    "show --step": (["show", "run-1", "--step"], []),
    "grep -C": (["grep", "-C"], ["ORD-58213"]),
    "grep --max-columns": (["grep", "--max-columns"], ["ORD-58213"]),
    "grep --timeout": (["grep", "--timeout"], ["(a)\\1"]),
    "cat --lines": (["cat", "sessions/run-1/tool_result-call_1.txt", "--lines"], []),
    "cat --lines A:": (["cat", "sessions/run-1/tool_result-call_1.txt", "--lines"], [":"]),
    "gc --older-than": (["gc", "--dry-run", "--older-than"], []),
    "gc --max-bytes": (["gc", "--dry-run", "--max-bytes"], []),
    "replay --window": (["replay", "TRANSCRIPT", "--window"], []),
}


@pytest.fixture(scope="module")
def numbers_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import asyncio

    from cli_workspace import fill_workspace

    workdir = tmp_path_factory.mktemp("numbers") / "ws"
    asyncio.run(fill_workspace(workdir))
    (workdir.parent / "t.json").write_text(
        '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"},'
        ' {"role": "user", "content": "again"}, {"role": "assistant", "content": "done"}]'
    )
    return workdir


@pytest.mark.parametrize("value", HOSTILE_NUMBERS, ids=lambda v: v[:12] or "empty")
@pytest.mark.parametrize("option", NUMERIC.keys())
def test_a_hostile_number_on_any_option_is_no_traceback(
    numbers_workspace: Path,
    option: str,
    value: str,
    cli: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command run in this process: an exception escaping it fails the test, as a
    traceback would end the command (what a person sees of a process is held by the tests
    of deep lines above, which need a fresh interpreter's stack)."""
    monkeypatch.delenv("CTXOFFLOAD_WORKDIR", raising=False)
    before, after = NUMERIC[option]
    if option == "cat --lines A:":
        value, after = value + after[0], []
    argv = [str(numbers_workspace.parent / "t.json") if a == "TRANSCRIPT" else a for a in before]
    workdir = (
        numbers_workspace if not option.startswith("replay") else numbers_workspace.parent / "r"
    )
    done = cli(*argv, value, *after, "--workdir", workdir)
    assert "Traceback" not in done.err, done.err[-3000:]
    assert done.code in (0, 1, 2), done.err
    if done.code == 2:  # one line that names the command (after the usage, for argparse)
        assert done.err.strip().splitlines()[-1].startswith("ctxoffload "), done.err


@pytest.mark.slow
def test_a_hostile_deadline_in_the_environment_is_no_traceback(numbers_workspace: Path) -> None:
    for value in ["nan", "-1", HUGE, "inf", "1e309"]:
        done = subprocess.run(
            [sys.executable, "-m", "ctxoffload", "ls", "--workdir", "s3://bucket/x"],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "CTXOFFLOAD_DEADLINE": value},
        )
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        assert done.returncode == 2
