"""A plain `ctxoffload grep` line is read without argparse (`_grep_arguments.py`), to the
values the whole parser gives, and every other line is left to the parser: each command line
below prints the same bytes and exits with the same status both ways."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from cli_workspace import fill_workspace

from ctxoffload.cli._grep_arguments import read_grep_arguments
from ctxoffload.cli._parser import parse

WS, MISSING = "{ws}", "{missing}"

# Each command line, whether the lean reader reads it (else the parser does), and its exit
# status (the same both ways: the test checks it, so that two identical crashes do not pass).
LINES: list[tuple[list[str], bool, int]] = [
    (["grep", "ORD-58213", "--workdir", WS], True, 0),
    (["grep", "ORD-58213", "run-1", "--workdir", WS], True, 0),
    (["--workdir", WS, "grep", "ORD-58213"], True, 0),
    ([f"--workdir={WS}", "grep", "-i", "ord-58213", "run-2"], True, 0),
    (["--workdir", MISSING, "grep", "ORD-58213", "--workdir", WS], True, 0),
    (["grep", "-F", "ORD-5821", "--workdir", WS], True, 0),
    (["grep", "--fixed-strings", "--ignore-case", "quota", f"--workdir={WS}"], True, 0),
    (["grep", "-C", "1", "ORD-58213", "run-1", "--workdir", WS], True, 0),
    (["grep", "--context=2", "-C", "1", "needle", "--workdir", WS], True, 0),
    (["grep", "--json", "ORD-58213", "run-1", "--workdir", WS], True, 0),
    (["grep", "ORD-58213", "--events", "--writers", "--workdir", WS], True, 0),
    (["grep", "--max-columns", "12", "ORD-58213", "--workdir", WS], True, 0),
    (["grep", "--timeout", "0", r"(ORD)-5\d*13", "--workdir", WS], True, 0),
    (["grep", "--timeout", "5", r"(1)\1", "run-1", "--workdir", WS], True, 0),
    (["grep", "", "--workdir", WS], True, 2),  # an empty pattern
    (["grep", "(", "--workdir", WS], True, 2),  # a bad regex
    (["grep", "nothing-matches", "--workdir", WS], True, 1),
    (["grep", "ORD", "nope", "--workdir", WS], True, 2),  # no such session
    (["grep", "ORD", "team/alice:42", "--workdir", WS], True, 2),  # a host's id, mapped
    (["grep", "ORD", "../run-1", "--workdir", WS], True, 2),
    (["grep", "ORD", "--workdir", MISSING], True, 2),
    (["grep", "ORD", "--workdir", "s3://"], True, 2),
    (["grep", "--timeout", "nan", "ORD", "--workdir", WS], True, 2),
    (["grep", "--max-columns", " 7 ", "ORD-58213", "--workdir", WS], True, 0),
    # Left to the parser: help, usage errors, and the spellings the lean reader does not read.
    (["grep"], False, 2),
    (["grep", "--help"], False, 0),
    (["grep", "-h", "ORD"], False, 0),
    (["grep", "--no-such-option", "ORD", "--workdir", WS], False, 2),
    (["grep", "a", "run-1", "extra", "--workdir", WS], False, 2),
    (["grep", "--workdir", WS, "--", "-worker-7"], False, 0),
    (["grep", "-iF", "ord-58213", "--workdir", WS], False, 0),
    (["grep", "-C1", "ORD-58213", "run-1", "--workdir", WS], False, 0),
    (["grep", "-C=1", "ORD-58213", "run-1", "--workdir", WS], False, 0),
    (["grep", "--ignore", "ord-58213", "--workdir", WS], False, 0),  # an abbreviation
    (["grep", "--json=yes", "ORD", "--workdir", WS], False, 2),
    (["grep", "-C", "-1", "ORD", "--workdir", WS], False, 2),
    (["grep", "--context=-1", "ORD", "--workdir", WS], False, 2),
    (["grep", "-C", "x", "ORD", "--workdir", WS], False, 2),
    (["grep", "--timeout", "soon", "ORD", "--workdir", WS], False, 2),
    (["grep", "ORD", "-C"], False, 2),
    (["grep", "ORD", "--workdir"], False, 2),
    (["grep", "--workdir", "-x", "ORD"], False, 2),
    (["--workdir", "-x", "grep", "ORD"], False, 2),
    (["grep", "-5", "--workdir", WS], False, 0),  # a negative number is a positional
    (["grep", "-", "--workdir", WS], False, 0),
    (["--help"], False, 0),
    (["ls", "--workdir", WS], False, 0),
]

IDS = [" ".join(argv) for argv, _, _ in LINES]

# The lean path as the `ctxoffload` script runs it (`main`), or the whole parser.
CHILD = """
import json, sys
from ctxoffload.cli import main
from ctxoffload.cli._main import run_command_line
argv = json.loads(sys.argv[1])
sys.exit(main(argv) if sys.argv[2] == "lean" else run_command_line(argv, lean=False))
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A real workspace (two sessions: tool results, messages, an image, events), and a
    folder that does not exist."""
    root = tmp_path_factory.mktemp("grep-arguments")
    asyncio.run(fill_workspace(root / "ws"))
    return {WS: str(root / "ws"), MISSING: str(root / "missing")}


def spelled(argv: list[str], workspace: dict[str, str]) -> list[str]:
    for placeholder, path in workspace.items():
        argv = [token.replace(placeholder, path) for token in argv]
    return argv


@pytest.mark.parametrize(("argv", "lean", "code"), LINES, ids=IDS)
def test_each_line_prints_and_exits_the_same_both_ways(
    workspace: dict[str, str], argv: list[str], lean: bool, code: int
) -> None:
    argv = spelled(argv, workspace)
    lean_run, full_run = (
        subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(argv), path],
            capture_output=True,
            check=False,
        )
        for path in ("lean", "full")
    )
    assert b"Traceback" not in full_run.stderr, full_run.stderr
    assert full_run.returncode == code, full_run.stderr
    assert (lean_run.returncode, lean_run.stdout, lean_run.stderr) == (
        full_run.returncode,
        full_run.stdout,
        full_run.stderr,
    )


@pytest.mark.parametrize(("argv", "lean", "code"), LINES, ids=IDS)
def test_the_lean_reader_reads_only_plain_lines_to_the_parsers_values(
    workspace: dict[str, str],
    argv: list[str],
    lean: bool,
    code: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = spelled(argv, workspace)
    read = read_grep_arguments(argv)
    parsed = parse(argv)
    capsys.readouterr()  # the parser's help or usage error
    assert (read is not None) == lean
    if read is not None:
        assert not isinstance(parsed, int)
        expected = vars(parsed)
        del expected["run"]  # `main` adds it to what the lean reader gives
        # Each value by its repr (a NaN is no NaN's equal) and its type (`session` is the
        # parser's SessionName, `timeout` a float).
        assert described(vars(read)) == described(expected)


def described(values: dict[str, object]) -> list[tuple[str, str, type]]:
    return sorted((name, repr(value), type(value)) for name, value in values.items())
