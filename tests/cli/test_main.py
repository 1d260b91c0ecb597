"""The command line as a whole: registration, --version, and bad input everywhere."""

from __future__ import annotations

import asyncio
import io
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace, ToolResultBlock
from ctxoffload.cli import COMMANDS, build_parser, main
from ctxoffload.cli._commands import COMMAND_HELP
from ctxoffload.cli._output import Progress, print_table
from helpers import corpus_file, install_hint, on_a_terminal

Result = Any


def test_help_lists_every_command(cli: Callable[..., Result]) -> None:
    result = cli("--help")
    assert result.code == 0
    for name in ["demo", "ls", "cat", "grep", "watch", "stats", "verify", "gc", "replay"]:
        assert f"    {name} " in result.out


def test_version(cli: Callable[..., Result]) -> None:
    result = cli("--version")
    assert result.code == 0
    assert result.out.startswith("ctxoffload ")


def test_no_command_is_a_usage_error(cli: Callable[..., Result]) -> None:
    assert cli().code == 2


def test_unknown_option_is_a_usage_error(cli: Callable[..., Result]) -> None:
    result = cli("ls", "--no-such-option")
    assert result.code == 2
    assert "unrecognized arguments" in result.err


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_registers_itself_under_its_listed_name(name: str) -> None:
    # `--help` lists the commands from COMMAND_HELP without importing them; a run imports
    # only its own module. Both must describe the same command.
    parser = build_parser(name)
    action = parser._subparsers._group_actions[0]  # type: ignore[union-attr]
    assert list(action.choices) == [name]
    assert [a.help for a in action._choices_actions] == [COMMAND_HELP[name]]
    assert callable(action.choices[name].get_default("run"))


def test_help_and_a_search_import_neither_other_commands_nor_pydantic(tmp_path: Path) -> None:
    # A session holding only tool results: searching it needs no message model (a
    # context.jsonl does: its lines are decoded into messages, which loads pydantic).
    asyncio.run(
        LocalWorkspace(tmp_path).offload_tool_result(
            "s1", ToolResultBlock(id="call_1", name="logs", output="ok\nERROR disk full\n")
        )
    )
    code = (
        "import sys; from ctxoffload.cli import main; "
        "codes = [main(['--help']), main(['grep', '--workdir', sys.argv[1], 'ERROR'])]; "
        "print(codes, sorted(m for m in sys.modules if m.startswith('ctxoffload.cli._cmd_') "
        "or m.split('.')[0] in ('pydantic', 'tiktoken', 'rich', 'asyncio')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert "tool_result-call_1.txt:2:ERROR disk full" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[0, 0] ['ctxoffload.cli._cmd_grep']"


def test_help_imports_no_heavy_module() -> None:
    code = (
        "import sys; from ctxoffload.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('rich', 'watchfiles', 're2') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


SIGNALLED_WHILE_PARSING = r"""
import argparse, os, signal, sys, time

# As a terminal's Ctrl-C meets a command, whatever the test runner's process ignores.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
number = getattr(signal, sys.argv[1])
parse = argparse.ArgumentParser.parse_known_args


def signalled(self, *args, **kwargs):
    os.kill(os.getpid(), number)
    time.sleep(5)
    return parse(self, *args, **kwargs)


argparse.ArgumentParser.parse_known_args = signalled
from ctxoffload.cli import main

sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_while_the_command_line_is_read_says_interrupted(
    filled: Path, signal_name: str
) -> None:
    # The signal comes as argparse reads the command line, before any command runs: one
    # line and 130, as when it comes while the command runs (a traceback, or for SIGTERM
    # an end with no word and no cleanup, before).
    command = [sys.executable, "-c", SIGNALLED_WHILE_PARSING, signal_name]
    done = subprocess.run(
        [*command, "--workdir", str(filled), "ls"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (130, "ctxoffload: interrupted\n")


def test_workdir_from_the_environment(
    filled: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXOFFLOAD_WORKDIR", str(filled))
    assert "run-1" in cli("ls").out


def test_workdir_before_the_command(filled: Path, cli: Callable[..., Result]) -> None:
    assert "run-1" in cli("--workdir", filled, "ls").out


def test_workdir_defaults_to_the_current_directory(
    filled: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CTXOFFLOAD_WORKDIR", raising=False)
    monkeypatch.chdir(filled)
    assert "run-2" in cli("ls").out


# Every command that reads a workspace, with what it needs after the workdir.
READERS = [
    ["ls"],
    ["stats"],
    ["verify"],
    ["grep", "ERROR"],
    ["cat", "sessions/run-1/tool_result-call_1.txt"],
    ["watch"],
    ["gc", "--older-than", "7d"],
]


def _bad_workdirs(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "plain-folder").mkdir()
    (tmp_path / "plain-folder" / "notes.txt").write_text("hello")
    return {
        "missing": tmp_path / "missing",
        "file": tmp_path / "a-file",
        "not a workspace": tmp_path / "plain-folder",
    }


@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
@pytest.mark.parametrize("kind", ["missing", "file", "not a workspace"])
def test_a_bad_workdir_is_one_line_and_exit_2_and_creates_nothing(
    tmp_path: Path,
    cli: Callable[..., Result],
    tree: Callable[[Path], Any],
    command: list[str],
    kind: str,
) -> None:
    workdir = _bad_workdirs(tmp_path)[kind]
    before = tree(tmp_path)
    result = cli(command[0], "--workdir", workdir, *command[1:])
    assert result.code == 2, result
    assert result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err
    assert str(workdir) in result.err
    assert tree(tmp_path) == before


@pytest.mark.parametrize("command", ["grep ERROR", "stats", "verify", "watch"])
@pytest.mark.parametrize("session", ["../x", "nope", "/etc", "a/b", ""])
def test_a_bad_session_is_one_line_and_exit_2(
    filled: Path,
    cli: Callable[..., Result],
    tree: Callable[[Path], Any],
    command: str,
    session: str,
) -> None:
    before = tree(filled.parent)
    result = cli(*command.split(), session, "--workdir", filled)
    assert result.code == 2, result
    assert result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err
    assert tree(filled.parent) == before


def test_demo_with_a_hostile_session_creates_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "demo", "--session", "../x", "--workdir", "ws"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "../x" in done.stderr
    assert os.listdir(tmp_path) == []


def test_demo_with_a_file_as_workdir_creates_nothing(
    tmp_path: Path, cli: Callable[..., Result]
) -> None:
    (tmp_path / "f").write_text("x")
    result = cli("demo", "--workdir", tmp_path / "f")
    assert result.code == 2 and "is not a folder" in result.err
    assert os.listdir(tmp_path) == ["f"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_tables_use_rich_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("rich", reason=f"no rich: {install_hint('cli')}")
    monkeypatch.delenv("NO_COLOR", raising=False)
    terminal, pipe = _Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        print_table(["session", "bytes"], [["run-1", 1234567]], right=(1,), out=stream)
    assert pipe.getvalue() == "session      bytes\nrun-1    1,234,567\n"
    assert "┃" in terminal.getvalue() or "│" in terminal.getvalue()
    assert "1,234,567" in terminal.getvalue()


def test_a_narrow_terminal_never_cuts_an_id_or_a_number(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("rich", reason=f"no rich: {install_hint('cli')}")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    terminal = _Terminal()
    headers = ["session", "last activity (UTC)", "steps", "bytes", "summaries", "dedup saved"]
    row = ["nightly-job-2026-11-20", "2026-11-22 11:09:29", 12, 6_751_531_000, "2 model", 154]
    print_table(headers, [row], right=(2, 3, 5), out=terminal)
    text = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())  # colours off
    assert "nightly-job-2026-11-20" in text and "6,751,531,000" in text
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_progress_is_drawn_on_a_terminal_only() -> None:
    terminal, pipe = _Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        with Progress("verify: bytes", 10, stream=stream) as progress:
            progress.advance(10)
    assert "verify: bytes [##########] 10/10" in terminal.getvalue()
    assert pipe.getvalue() == ""


@pytest.mark.slow
def test_long_commands_show_progress_on_a_terminal_and_not_in_a_pipe(
    tmp_path: Path, filled: Path
) -> None:
    transcript = corpus_file("minisweagent-django__django-15629.traj.json")
    command = [sys.executable, "-m", "ctxoffload", "replay", str(transcript)]
    piped = subprocess.run(
        [*command, "--workdir", str(tmp_path / "a")], capture_output=True, text=True, check=True
    )
    assert piped.stderr == ""
    argv = [*command[3:], "--workdir", str(tmp_path / "b")]
    code, drawn = on_a_terminal(argv, dict(os.environ), stderr_too=True)
    assert code == 0
    assert b"replay: messages" in drawn
    assert b"replay of " in drawn


@pytest.mark.parametrize("command", COMMANDS)
def test_every_commands_help_fits_80_columns_and_breaks_no_name(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--help` on an 80-column terminal: no line wider, and no hyphenated name (a format,
    `claude-code`; an option, `--summary-model`) cut at its hyphen (replay's --format
    listed its choices on a 99-character line)."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert not re.search(r"\w-\n", text), text
