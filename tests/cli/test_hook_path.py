"""Claude Code's hooks run by a shell whose PATH lacks the virtual environment holding
ctxoffload (issue 56, item 5): Claude Code started from a desktop launcher, an IDE or any
terminal where the venv is not active. The commands `ctxoffload hook settings` prints and the
plugin's hooks.json command are run exactly as written, by `/bin/sh -c` with PATH=/usr/bin:/bin,
fed the JSON Claude Code sends (tests/claude_code_hooks.py)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from claude_code_hooks import (
    SESSION,
    bare_env,
    clone_with_plugin,
    hook_commands,
    plugin_commands,
    post_tool_use_bash,
    pre_compact,
    run_command,
    session_start,
    transcript_rows,
)

NOTICE = "<<<TRUNCATED>>>"
VENV_BIN = Path(sys.executable).parent
"""The bin folder of the virtual environment this test runs in, where `ctxoffload` is."""


def big_output() -> str:
    return "\n".join(f"{i:06d} GET /api/orders/{i} 200" for i in range(20_000))


def run_the_three_hooks(
    commands: dict[str, str], project: Path, env: dict[str, str], cwd: Path | None = None
) -> None:
    """Each event's command, run in `project` as Claude Code runs it: a big Bash output is
    stored and replaced, a compaction keeps the transcript, the start after it names where."""
    env = {**env, "CLAUDE_PROJECT_DIR": str(project)}
    cwd = cwd or project
    workdir = project / ".ctxoffload"
    stdout = big_output()
    done = run_command(commands["PostToolUse"], post_tool_use_bash(stdout), env, cwd)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    replaced = json.loads(done.stdout)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    stored = workdir / "sessions" / SESSION / "tool_result-toolu_01ABC123.txt"
    assert NOTICE in replaced and str(stored) in replaced
    assert stored.read_text(encoding="utf-8") == stdout
    transcript = project / "transcript.jsonl"
    transcript.write_text("".join(json.dumps(r) + "\n" for r in transcript_rows(3)), "utf-8")
    done = run_command(commands["PreCompact"], pre_compact(str(transcript)), env, cwd)
    assert (done.returncode, done.stderr) == (0, b""), done.stderr.decode()
    context = workdir / "sessions" / SESSION / "context.jsonl"
    assert len(context.read_text(encoding="utf-8").splitlines()) == 9
    done = run_command(commands["SessionStart"], session_start("compact"), env, cwd)
    assert (done.returncode, done.stderr) == (0, b""), done.stderr.decode()
    said = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert str(context) in said


def python3_in(folder: Path) -> Path:
    """`folder/python3`, a python3 that imports ctxoffload (this test's interpreter)."""
    python3 = folder / "python3"
    python3.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    python3.chmod(0o755)
    return python3


def plant_ctxoffload(project: Path) -> Path:
    """A `ctxoffload` package in `project`, as a cloned repository could ship one; the file
    it makes when imported or run is returned (it must never exist)."""
    marker = project.parent / "planted-ctxoffload-ran"
    planted = project / "ctxoffload"
    planted.mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "cli.py"):
        (planted / name).write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    return marker


def hook_settings(program: list[str], env: dict[str, str], *extra: str) -> tuple[dict, str]:
    """What `PROGRAM hook settings EXTRA` prints: the settings, and its stderr."""
    done = subprocess.run(
        [*program, "hook", "settings", *extra], capture_output=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout), done.stderr.decode()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["console script", "python -m"])
def test_the_printed_hooks_run_from_a_shell_whose_path_lacks_the_venv(
    tmp_path: Path, how: str
) -> None:
    # The venv reached through a path with a space and a quote in it: the printed command
    # must quote it for the shell.
    spaced = tmp_path / "it's my venv"
    spaced.symlink_to(VENV_BIN.parent)
    if how == "console script":
        program = [str(spaced / "bin" / "ctxoffload")]
    else:
        program = [str(spaced / "bin" / "python"), "-m", "ctxoffload"]
    settings, said = hook_settings(program, bare_env())
    commands = hook_commands(settings)
    assert set(commands) == {"PostToolUse", "PreCompact", "SessionStart"}
    first = shlex.split(commands["PostToolUse"])[0]
    assert first == str(spaced / "bin" / "ctxoffload")
    # It says which ctxoffload the hooks run, on stderr (stdout is the JSON to paste).
    assert said.count("\n") == 1 and shlex.quote(first) in said, said
    project = tmp_path / "project"
    project.mkdir()
    run_the_three_hooks(commands, project, bare_env())


@pytest.mark.slow
def test_without_a_ctxoffload_script_the_interpreter_runs_it_and_no_project_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., Any]
) -> None:
    # An installation with no `ctxoffload` script (run as `python -m ctxoffload`, a --target
    # install): the hooks run this interpreter by its path, and with the current directory
    # (the project, a hook's working directory) off its module path, so a `ctxoffload` folder a
    # cloned repository put there is never what runs.
    (tmp_path / "my python").mkdir()
    interpreter = python3_in(tmp_path / "my python")
    monkeypatch.setattr(sys, "executable", str(interpreter))
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "ctxoffload" / "__main__.py")])
    done = cli("hook", "settings")
    assert done.code == 0, done.err
    commands = hook_commands(json.loads(done.out))
    assert shlex.split(commands["PostToolUse"])[:2] == [str(interpreter), "-c"]
    project = tmp_path / "project"
    marker = plant_ctxoffload(project)
    run_the_three_hooks(commands, project, bare_env())
    assert not marker.exists()


def test_the_bare_command_fails_from_such_a_shell(tmp_path: Path) -> None:
    # What the settings said before: `ctxoffload hook ...`, found on no PATH Claude Code has.
    done = run_command("ctxoffload hook PostToolUse", post_tool_use_bash(big_output()), bare_env())
    assert done.returncode == 127


@pytest.mark.slow
def test_settings_with_a_workdir_quote_it_after_the_absolute_command(tmp_path: Path) -> None:
    settings, _ = hook_settings(
        [str(VENV_BIN / "ctxoffload")], bare_env(), "--workdir", str(tmp_path / "my ws")
    )
    commands = hook_commands(settings)
    for event, command in commands.items():
        words = shlex.split(command)
        assert words[1:] == ["--workdir", str(tmp_path / "my ws"), "hook", event]
    done = run_command(commands["PostToolUse"], post_tool_use_bash(big_output()), bare_env())
    assert done.returncode == 0, done.stderr.decode()
    assert len(list((tmp_path / "my ws").glob("sessions/*/tool_result-*.txt"))) == 1


@pytest.mark.slow
@pytest.mark.parametrize("found_by", ["the clone's .venv", "PATH", "python3"])
def test_the_plugin_runs_from_a_clone_whose_path_lacks_the_venv(
    tmp_path: Path, found_by: str
) -> None:
    plugin = clone_with_plugin(tmp_path / "my clone", venv=found_by == "the clone's .venv")
    found = tmp_path / "bin"
    found.mkdir()
    path = os.pathsep.join([str(found), "/usr/bin", "/bin"])
    if found_by == "PATH":
        (found / "ctxoffload").symlink_to(VENV_BIN / "ctxoffload")
    elif found_by == "python3":
        python3_in(found)  # and no `ctxoffload` command anywhere
    env = bare_env(PATH=path, CLAUDE_PLUGIN_ROOT=str(plugin))
    project = tmp_path / "project"
    project.mkdir()
    run_the_three_hooks(plugin_commands(plugin), project, env)


def test_the_plugin_without_ctxoffload_says_so_once_and_lets_claude_code_go_on(
    tmp_path: Path,
) -> None:
    plugin = clone_with_plugin(tmp_path / "clone", venv=False)
    empty = tmp_path / "empty"
    empty.mkdir()  # no ctxoffload, no python3: nothing to find
    env = bare_env(PATH=str(empty), CLAUDE_PLUGIN_ROOT=str(plugin))
    for event, command in plugin_commands(plugin).items():
        payload = {"PostToolUse": post_tool_use_bash(big_output()), "PreCompact": {}}.get(
            event, session_start("compact")
        )
        done = run_command(command, payload, env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr.decode()  # Claude Code goes on
        # One line the user sees (systemMessage), and the same on stderr for the debug log.
        out = json.loads(done.stdout)
        assert list(out) == ["systemMessage"]
        message = out["systemMessage"]
        assert "ctxoffload" in message and "pip install" in message and "\n" not in message
        err = done.stderr.decode()
        assert err.startswith(message) and err.count("\n") == 1, err
    assert not (tmp_path / ".ctxoffload").exists()


@pytest.mark.slow
def test_a_project_cannot_stand_in_for_ctxoffload_in_the_python3_fallback(
    tmp_path: Path,
) -> None:
    # Claude Code runs hooks in the project's folder: a cloned repository shipping a
    # `ctxoffload` package there must not be what `python3` imports.
    plugin = clone_with_plugin(tmp_path / "clone", venv=False)
    found = tmp_path / "bin"
    found.mkdir()
    python3_in(found)
    project = tmp_path / "project"
    marker = plant_ctxoffload(project)
    path = os.pathsep.join([str(found), "/usr/bin", "/bin"])
    run_the_three_hooks(
        plugin_commands(plugin), project, bare_env(PATH=path, CLAUDE_PLUGIN_ROOT=str(plugin))
    )
    assert not marker.exists()
