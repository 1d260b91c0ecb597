"""The command line's parsing: options and positionals in any order, each command's own
usage errors, and help texts that say what each command does with --workdir."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_workspace import FAILING_LINE
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload.cli import COMMANDS
from ctxoffload.cli._parser import wrapped

Result = Any
FOUND = f"sessions/run-1/tool_result-call_1.txt:{FAILING_LINE}:"


@pytest.mark.parametrize(
    "options",
    [["-i"], ["-C1"], ["-C", "1"], ["--max-columns", "5"], ["-F"], ["--events"]],
    ids=" ".join,
)
def test_grep_takes_options_between_the_pattern_and_the_session(
    filled: Path, cli: Callable[..., Result], options: list[str]
) -> None:
    result = cli("grep", "ORD-58213", *options, "run-1", "--workdir", filled)
    assert result.code == 0, result.err
    assert FOUND in result.out
    assert "run-2" not in result.out  # the session was taken as the session


def test_grep_json_between_the_pattern_and_the_session(
    filled: Path, cli: Callable[..., Result]
) -> None:
    result = cli("grep", "ORD-58213", "--json", "run-1", "--workdir", filled)
    assert result.code == 0, result.err
    assert {m["session"] for m in json.loads(result.out)} == {"run-1"}


@pytest.mark.parametrize(
    "argv",
    [
        ["--workdir", "{ws}", "grep", "-i", "ord-58213", "-C", "0", "run-1"],
        ["grep", "--workdir", "{ws}", "ord-58213", "-i", "run-1"],
        ["grep", "ord-58213", "--workdir={ws}", "run-1", "-i"],
        ["--workdir={ws}", "grep", "-F", "ORD-58213", "run-1"],
        ["grep", "-C", "0", "ORD-58213", "run-1", "--workdir", "{ws}"],
    ],
    ids=lambda a: " ".join(a),
)
def test_any_order_of_options_workdir_and_positionals(
    filled: Path, cli: Callable[..., Result], argv: list[str]
) -> None:
    result = cli(*(a.replace("{ws}", str(filled)) for a in argv))
    assert result.code == 0, result.err
    assert FOUND in result.out and "run-2" not in result.out


@pytest.mark.parametrize(
    ("argv", "found"),
    [
        (["grep", "--", "-worker-7", "run-1"], True),
        (["grep", "-i", "--", "-WORKER-7", "run-1"], True),
        (["grep", "-C", "0", "--", "-worker-7", "run-1"], True),
        (["grep", "-worker-7", "-F", "run-1"], False),  # no `--`: an unknown option
        (["grep", "-e", "--", "-worker-7"], False),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else "",
)
def test_after_a_double_dash_everything_is_a_positional(
    filled: Path, cli: Callable[..., Result], argv: list[str], found: bool
) -> None:
    result = cli(argv[0], "--workdir", filled, *argv[1:])
    if not found:
        assert result.code == 2
        assert result.err.startswith("usage: ctxoffload grep ")
        assert "ctxoffload grep: error: unrecognized arguments: -" in result.err
        return
    assert result.code == 0, result.err
    assert f"sessions/run-1/tool_result-call_1.txt:{FAILING_LINE}:" in result.out
    assert "run-2" not in result.out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["stats", "--json", "run-1"], '"session": "run-1"'),
        (["verify", "--json", "run-1"], '"ok": true'),
        (["ls", "--json"], '"session": "run-1"'),
        (["cat", "--lines", "1500:1500", "sessions/run-1/tool_result-call_1.txt"], "ORD-58213"),
        (["cat", "sessions/run-1/tool_result-call_1.txt", "--raw", "--lines", "2"], "00002"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else "",
)
def test_other_commands_take_options_before_their_positionals(
    filled: Path, cli: Callable[..., Result], argv: list[str], says: str
) -> None:
    result = cli(argv[0], "--workdir", filled, *argv[1:])
    assert result.code == 0, result.err
    assert says in result.out


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["grep", "-e", "x"], "unrecognized arguments: -e"),
        (["grep", "-c", "1", "x"], "unrecognized arguments: -c"),
        (["grep"], "the following arguments are required: pattern"),
        (["grep", "x", "-C", "many"], "argument -C/--context: invalid int value: 'many'"),
        (["ls", "--no-such-option"], "unrecognized arguments: --no-such-option"),
        (["stats", "a", "b"], "unrecognized arguments: b"),
        (["show", "a", "b"], "unrecognized arguments: b"),
        (["verify", "--json=1"], "argument --json: ignored explicit argument '1'"),
        (["gc", "--dry-run", "extra"], "unrecognized arguments: extra"),
        (["cat"], "the following arguments are required: reference"),
        (["replay", "t.json", "--window"], "argument --window: expected one argument"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else "",
)
def test_a_usage_error_in_a_command_prints_that_commands_usage(
    cli: Callable[..., Result], argv: list[str], error: str
) -> None:
    result = cli(*argv)
    assert result.code == 2
    assert result.out == ""
    lines = result.err.splitlines()
    assert lines[0].startswith(f"usage: ctxoffload {argv[0]} "), result.err
    assert lines[-1] == f"ctxoffload {argv[0]}: error: {error}"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["ls", "--api-key=s3cret-Zq7"], "unrecognized arguments: '--api-key=***'"),
        (["ls", "--token", "s3cret-Zq7"], "unrecognized arguments: --token '***'"),
        (["stats", "a", "https://u:s3cret-Zq7@h/x"], "unrecognized arguments: 'https://***@h/x'"),
        (["gc", "--dry-run", "API_KEY=s3cret-Zq7"], "unrecognized arguments: 'API_KEY=***'"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else "",
)
def test_a_usage_error_never_quotes_a_secret(
    cli: Callable[..., Result], argv: list[str], error: str
) -> None:
    result = cli(*argv)
    assert result.code == 2
    assert "s3cret-Zq7" not in result.err
    assert result.err.splitlines()[-1] == f"ctxoffload {argv[0]}: error: {error}"


@pytest.mark.parametrize(
    "argv", [["--workdir", "w", "grep", "-e", "x"], ["--workdir=w", "ls", "-z"]]
)
def test_a_workdir_before_the_command_keeps_the_commands_usage(
    cli: Callable[..., Result], argv: list[str]
) -> None:
    result = cli(*argv)
    assert result.code == 2
    command = argv[2] if argv[0] == "--workdir" else argv[1]
    assert result.err.startswith(f"usage: ctxoffload {command} ")
    assert f"ctxoffload {command}: error: unrecognized arguments" in result.err


def test_errors_before_the_command_are_the_whole_commands(cli: Callable[..., Result]) -> None:
    for argv in (["--bogus", "ls"], ["nosuchcommand"], ["--workdir"]):
        result = cli(*argv)
        assert result.code == 2
        assert result.err.startswith("usage: ctxoffload [-h] [--version] [--workdir DIR] COMMAND")


@pytest.mark.parametrize("name", COMMANDS)
def test_each_commands_help_is_its_own(cli: Callable[..., Result], name: str) -> None:
    for argv in ([name, "--help"], ["--workdir", "w", name, "-h"]):
        result = cli(*argv)
        assert result.code == 0
        assert result.out.startswith(f"usage: ctxoffload {name} ")


def test_the_whole_help_and_version_still_work(cli: Callable[..., Result]) -> None:
    assert "    grep " in cli("--help").out
    assert cli("--version").out.startswith("ctxoffload ")
    assert cli("--workdir", "w", "--help").code == 0


def test_a_mixed_grep_imports_no_other_command(tmp_path: Path, filled: Path) -> None:
    code = (
        "import sys; from ctxoffload.cli import main; "
        "code = main(['grep', 'ORD-58213', '-i', 'run-1', '-C', '0', '--workdir', sys.argv[1]]); "
        "print(code, sorted(m for m in sys.modules if m.startswith('ctxoffload.cli._cmd_')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(filled)], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "0 ['ctxoffload.cli._cmd_grep']"


def _help(cli: Callable[..., Result], name: str) -> str:
    result = cli(name, "--help")
    assert result.code == 0
    return " ".join(result.out.split())


@pytest.mark.parametrize("name", ["demo", "watch", "replay"])
def test_commands_that_need_a_folder_offer_no_bucket(cli: Callable[..., Result], name: str) -> None:
    text = _help(cli, name)
    assert "bucket URL such as" not in text and "s3://" not in text


def test_demo_help_says_where_its_workspace_goes(cli: Callable[..., Result]) -> None:
    text = _help(cli, "demo")
    workdir = text[text.index("--workdir DIR") :]
    assert "ctxoffload-demo-<time>" in workdir
    assert "(default: $CTXOFFLOAD_WORKDIR" not in workdir


@pytest.mark.parametrize("name", ["ls", "show", "cat", "grep", "stats", "verify", "gc"])
def test_commands_that_read_a_bucket_still_say_so(cli: Callable[..., Result], name: str) -> None:
    text = _help(cli, name)
    assert "bucket URL" in text and "$CTXOFFLOAD_WORKDIR" in text


def test_the_top_level_workdir_help_tells_the_exceptions(cli: Callable[..., Result]) -> None:
    text = " ".join(cli("--help").out.split())
    workdir = text[text.index("--workdir DIR") : text.index("Exit status")]
    assert "demo" in workdir and "bucket" in workdir


def test_the_whole_help_loads_no_module_it_can_do_without() -> None:
    # `--help` is held to 1.5x `import argparse` (bench/bench_import.py): textwrap,
    # contextlib and collections.abc cost 2-5 ms each, a tenth of that margin or more.
    code = (
        "import sys; from ctxoffload.cli import main; main(['--help']); "
        "print(sorted(m for m in ('textwrap', 'contextlib', 'collections.abc') "
        "if m in sys.modules), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "usage: ctxoffload" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]"


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    words=st.lists(st.text(alphabet="ab-c", min_size=1, max_size=15), max_size=12),
    width=st.integers(min_value=1, max_value=20),
)
def test_help_is_wrapped_as_textwrap_wraps_it(words: list[str], width: int) -> None:
    text = " ".join(words)
    expected = textwrap.wrap(text, width, break_on_hyphens=False)
    assert wrapped(text, width) == expected
