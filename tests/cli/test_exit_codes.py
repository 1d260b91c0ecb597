"""Every command exits 2 on an error (docs/concepts/errors.md: 0 found or done, 1 not found
or problems found, 2 error), with one line on stderr; an error after part of the output (a
file that could not be read) gives 2 too, once the rest is printed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def _hard_link(path: Path, tmp_path: Path) -> None:
    """`path` becomes a second name of a file outside the workspace: never read."""
    outside = tmp_path / f"outside-{path.name}"
    outside.write_bytes(path.read_bytes())
    path.unlink()
    os.link(outside, path)


ERRORS: dict[str, tuple[list[str], str]] = {
    "ls: no workspace": (["ls", "--workdir", "{missing}"], "does not exist"),
    "ls: a log not read": (["ls", "--workdir", "{ws}"], "hard links"),
    "stats: a log not read": (["stats", "--workdir", "{ws}"], "hard links"),
    "stats: no session": (["stats", "nope", "--workdir", "{ws}"], "no session 'nope'"),
    "show: no session": (["show", "nope", "--workdir", "{ws}"], "no session 'nope'"),
    "show: a log not read": (["show", "run-1", "--workdir", "{ws}"], "hard links"),
    "cat: refused": (["cat", "/etc/passwd", "--workdir", "{ws}"], "names no file"),
    "grep: a file not read": (["grep", "ORD-58213", "--workdir", "{ws}"], "hard links"),
    "grep: bad pattern": (["grep", "(", "--workdir", "{ws}"], "invalid regular expression"),
    "verify: no workspace": (["verify", "--workdir", "{missing}"], "does not exist"),
    "gc: nothing asked": (["gc", "--workdir", "{ws}"], "say what to remove"),
    "watch: no session": (["watch", "nope", "--workdir", "{ws}"], "no session 'nope'"),
    "replay: not JSON": (["replay", "{notjson}", "--workdir", "{new}"], "neither JSON"),
    "demo: session taken": (["demo", "--session", "run-1", "--workdir", "{ws}"], "exists"),
}


@pytest.mark.parametrize(("argv", "says"), ERRORS.values(), ids=ERRORS.keys())
def test_every_command_exits_2_on_an_error(
    filled: Path, tmp_path: Path, cli: Callable[..., Any], argv: list[str], says: str
) -> None:
    _hard_link(filled / "sessions/run-1/events.jsonl", tmp_path)
    _hard_link(filled / "sessions/run-1/tool_result-call_1.txt", tmp_path)
    (tmp_path / "t.txt").write_text("not json {")
    names = {
        "ws": filled,
        "missing": tmp_path / "missing",
        "notjson": tmp_path / "t.txt",
        "new": tmp_path / "new",
    }
    result = cli(*[a.format(**names) for a in argv])
    assert result.code == 2, result
    assert says in result.err, result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize(
    "argv",
    [
        ["ls"],
        ["show", "run-1"],
        ["stats"],
        ["grep", "ERROR"],
        ["grep", "--json", "ERROR"],
        ["cat", "sessions/run-1/tool_result-call_1.txt"],
        ["verify"],
    ],
    ids=" ".join,
)
def test_a_closed_stdout_is_said_in_one_line_and_exits_2(filled: Path, argv: list[str]) -> None:
    """Run as `ctxoffload ... >&-` (descriptor 1 closed before Python starts, which leaves
    sys.stdout None): one line on stderr naming stdout, status 2, no traceback, and the
    workspace as it was."""
    import subprocess
    import sys

    before = sorted((p, p.stat().st_size) for p in filled.rglob("*") if p.is_file())
    command = [sys.executable, "-m", "ctxoffload", *argv, "--workdir", str(filled)]
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *command],
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "stdout is closed" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted((p, p.stat().st_size) for p in filled.rglob("*") if p.is_file()) == before


def _closed(redirect: str, argv: list[str]) -> Any:
    """`ctxoffload ARGV` run from a shell with `redirect` (such as `2>&-`) on it."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "ctxoffload", *argv]
    return subprocess.run(
        ["sh", "-c", f'exec "$@" {redirect}', "sh", *command],
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_with_stderr_closed_an_error_still_exits_2_and_the_output_is_whole(
    filled: Path, tmp_path: Path
) -> None:
    """`2>&-` leaves sys.stderr None: the error that cannot be said is still told by the
    status (was 1, from the traceback of writing it), and what is printed is what a run
    with stderr open prints."""
    missing = _closed("2>&-", ["ls", "--workdir", str(tmp_path / "missing")])
    assert missing.returncode == 2 and missing.stdout == b""
    opened = _closed("", ["grep", "-F", "ORD-", "--workdir", str(filled)])
    closed = _closed("2>&-", ["grep", "-F", "ORD-", "--workdir", str(filled)])
    assert opened.returncode == closed.returncode == 0
    assert closed.stdout == opened.stdout and b"ORD-" in closed.stdout


def test_with_stdin_closed_the_hook_reads_no_input_as_with_an_empty_stdin(tmp_path: Path) -> None:
    """`<&-` leaves sys.stdin None: the Claude Code hook says what it says of an empty
    stdin, not an AttributeError."""
    import subprocess
    import sys

    argv = ["hook", "PostToolUse", "--workdir", str(tmp_path / "ws")]
    closed = _closed("<&-", argv)
    empty = subprocess.run(
        [sys.executable, "-m", "ctxoffload", *argv],
        input=b"",
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert b"AttributeError" not in closed.stderr and b"no hook input" in closed.stderr
    assert (closed.returncode, closed.stdout, closed.stderr) == (
        empty.returncode,
        empty.stdout,
        empty.stderr,
    )
