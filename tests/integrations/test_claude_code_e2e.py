"""Claude Code's hooks end to end: the real Claude Code CLI that the Claude Agent SDK bundles,
run non-interactively (`claude -p`) in a project whose .claude/settings.json holds the hooks
`ctxoffload hook settings` prints, against a scripted Anthropic Messages API on loopback
(tests/anthropic_server.py) that records every request the CLI sends.

What is proven here and nowhere else: Claude Code runs `ctxoffload hook PostToolUse` on a real
Bash output and the model's next request carries the replacement (the head and the notice
naming the stored file), not the output; `/compact` runs PreCompact and SessionStart, and the
request after it tells the model where the history went; a hook that fails leaves the session
going; two sessions at once in one project each keep their own output.

The CLI runs with HOME in tmp_path (no user settings or credentials leak in), every
non-essential request off, only Bash allowed (`--allowedTools Bash`, which works as root, where
`--dangerously-skip-permissions` is refused), and each run under a timeout that kills its
whole process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from frameworks import framework_required, require_framework

from anthropic_server import AnthropicServer
from claude_code_hooks import BARE_PATH, clone_with_plugin
from ctxoffload import LocalWorkspace

sdk = require_framework("claude_agent_sdk", "claude")

NOTICE = "<<<TRUNCATED>>>"
RUN_TIMEOUT = 300
"""Seconds one CLI run may take before its process group is killed (a hang fails, never
blocks CI; a run takes about a second here)."""

SEQ_COMMAND = "seq 1 300000"
SEQ_OUTPUT = "".join(f"{i}\n" for i in range(1, 300_001))
"""What `seq 1 300000` prints: 300,000 lines, 1,988,895 bytes."""


def _cli_problem(cli: Path, home: Path) -> str | None:
    if not cli.is_file():
        return f"{cli} is not there"
    try:
        done = subprocess.run(
            [str(cli), "--version"],
            env=_base_env(home),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cli} does not start: {exc}"
    if done.returncode != 0 or "Claude Code" not in done.stdout:
        return f"{cli} --version exited {done.returncode}: {done.stderr.strip()[:500]}"
    return None


@pytest.fixture(scope="module")
def claude_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Claude Code CLI inside the installed claude-agent-sdk package, checked to start.

    Where this run requires the Claude Agent SDK and the package's own file list holds the
    binary, a missing or broken binary fails; otherwise (a wheel built without it, a run that
    does not require the SDK) the tests skip with the reason.
    """
    cli = Path(sdk.__file__).resolve().parent / "_bundled" / "claude"
    files = importlib.metadata.files("claude-agent-sdk") or []
    packaged = any(Path(str(f)).parts[-2:] == ("_bundled", "claude") for f in files)
    problem = _cli_problem(cli, tmp_path_factory.mktemp("version-home"))
    if problem is None:
        return cli
    if packaged and framework_required("claude"):
        pytest.fail(f"the Claude Code CLI of claude-agent-sdk cannot run here: {problem}", False)
    pytest.skip(f"no runnable Claude Code CLI in claude-agent-sdk: {problem}")


def _base_env(home: Path) -> dict[str, str]:
    # Built from nothing, not from os.environ: no user's ANTHROPIC_* or CLAUDE_* setting, proxy
    # or config reaches the CLI. Its PATH lacks the virtual environment ctxoffload is in, as
    # for Claude Code started anywhere but a shell where it is active: the hooks find it
    # without PATH (issue 56, item 5).
    env = {
        "PATH": BARE_PATH,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "NO_PROXY": "127.0.0.1,localhost",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    return env


@dataclass
class Project:
    """A Claude Code project in tmp_path: its folder (with .claude/settings.json holding the
    hooks), the HOME the CLI runs with, and the CLI."""

    folder: Path
    home: Path
    cli: Path

    @property
    def workdir(self) -> Path:
        """The workspace the hooks use by default: .ctxoffload in the project."""
        return self.folder / ".ctxoffload"

    def claude(
        self, server: AnthropicServer, prompt: str, *args: str, **env: str
    ) -> dict[str, Any]:
        """Run `claude -p PROMPT --output-format json` here against `server`; its result."""
        command = [str(self.cli), "-p", prompt, "--output-format", "json"]
        command += ["--allowedTools", "Bash", *args]
        environment = {
            **_base_env(self.home),
            "ANTHROPIC_BASE_URL": server.base_url,
            "ANTHROPIC_API_KEY": "test",
            **env,
        }
        process = subprocess.Popen(
            command,
            cwd=self.folder,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its Bash and hook children die with it on a timeout
        )
        try:
            stdout, stderr = process.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            pytest.fail(f"claude {prompt!r} did not finish in {RUN_TIMEOUT} s", False)
        assert process.returncode == 0, f"claude exited {process.returncode}: {stderr[-2000:]}"
        result: dict[str, Any] = json.loads(stdout)
        assert result.get("is_error") is False, result
        return result

    def transcript(self, session: str) -> str:
        """The text of Claude Code's own transcript of `session` (under HOME)."""
        (path,) = (self.home / ".claude" / "projects").glob(f"*/{session}.jsonl")
        return path.read_text(encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path, claude_cli: Path) -> Project:
    """A project whose .claude/settings.json is what `ctxoffload hook settings` prints."""
    home = tmp_path / "home"
    home.mkdir()
    folder = tmp_path / "project"
    (folder / ".claude").mkdir(parents=True)
    command = Path(sys.executable).parent / "ctxoffload"
    assert command.is_file(), f"the ctxoffload command is not installed next to {sys.executable}"
    assert shutil.which("ctxoffload", path=_base_env(home)["PATH"]) is None
    settings = subprocess.run(
        [command, "hook", "settings"],
        env=_base_env(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    (folder / ".claude" / "settings.json").write_text(settings, encoding="utf-8")
    return Project(folder, home, claude_cli)


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    """A scripted Messages API on loopback."""
    with AnthropicServer() as running:
        yield running


def tool_result_text(body: dict[str, Any], tool_use_id: str) -> str:
    """The text of the tool_result for `tool_use_id` in a Messages request body."""
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                inner = block.get("content")
                if isinstance(inner, str):
                    return inner
                return "".join(part.get("text", "") for part in inner or [])
    raise AssertionError(f"no tool_result for {tool_use_id} in the request")


def stored_file(project: Project, session: str, tool_use_id: str) -> Path:
    return project.workdir / "sessions" / session / f"tool_result-{tool_use_id}.txt"


def events(project: Project, session: str) -> list[dict[str, Any]]:
    return asyncio.run(LocalWorkspace(project.workdir).read_events(session))


def run_big_bash(project: Project, server: AnthropicServer, tool_use_id: str, *args: str) -> str:
    """One session: the model runs `seq 1 300000` with Bash, then ends; its session id."""
    server.add_tool_use("Bash", {"command": SEQ_COMMAND}, tool_use_id=tool_use_id)
    server.add_text("Done.")
    result = project.claude(server, "Count to 300,000.", *args)
    assert result["result"] == "Done."
    assert server.remaining == 0
    session: str = result["session_id"]
    return session


def test_a_big_bash_output_reaches_the_model_as_its_head_and_a_notice(
    project: Project, server: AnthropicServer
) -> None:
    session = run_big_bash(project, server, "toolu_e2e_seq")
    first, second = server.message_requests
    assert "toolu_e2e_seq" not in json.dumps(first)
    # What the model is sent: the head and the notice naming the file, in the one request
    # after the call; no copy of the 2 MB anywhere in it (its last lines are not there).
    sent = tool_result_text(second, "toolu_e2e_seq")
    stored = stored_file(project, session, "toolu_e2e_seq")
    assert sent.startswith("1\n2\n3\n") and NOTICE in sent
    assert str(stored) in sent
    assert len(sent) < 20_000 < len(SEQ_OUTPUT)
    assert "\n299999\n" not in json.dumps(second)
    # What is on disk: the whole output, byte for byte, and the events that say where.
    assert stored.read_bytes() == SEQ_OUTPUT.encode()
    kinds = {event["kind"]: event for event in events(project, session)}
    assert kinds["tool_result"]["tool_id"] == "toolu_e2e_seq"
    assert kinds["tool_result"]["bytes"] == len(SEQ_OUTPUT)
    assert kinds["tool_result"]["reference"] == str(stored)
    assert kinds["truncation"]["lines_total"] == 300_000


def test_a_compaction_keeps_the_session_and_the_next_request_says_where(
    project: Project, server: AnthropicServer
) -> None:
    session = run_big_bash(project, server, "toolu_e2e_seq")
    server.add_text("<summary>The user counted to 300,000 with seq.</summary>")
    compacted = project.claude(server, "/compact", "--resume", session)
    assert compacted["session_id"] == session and server.remaining == 0
    # PreCompact kept every message of the transcript before the compaction dropped it.
    kept = asyncio.run(LocalWorkspace(project.workdir).read_context(session))
    assert [m["role"] for m in kept] == ["user", "assistant", "user", "assistant"]
    call, result = kept[1]["content"][0], kept[2]["content"][0]
    assert (call["type"], call["id"], call["input"]["command"]) == (
        "tool_call",
        "toolu_e2e_seq",
        SEQ_COMMAND,
    )
    # The transcript holds what the model saw: the head and the notice, whose file is whole.
    assert result["type"] == "tool_result" and result["id"] == "toolu_e2e_seq"
    assert str(stored_file(project, session, "toolu_e2e_seq")) in result["output"]
    assert kept[3]["content"][0]["text"] == "Done."
    (compaction,) = [e for e in events(project, session) if e["kind"] == "host_compaction"]
    assert compaction["trigger"] == "manual" and compaction["messages"] == 4
    # SessionStart gave the model where the history is: the request after the compaction
    # names the session's context.jsonl.
    asked = len(server.message_requests)
    server.add_text("Nothing else.")
    project.claude(server, "What is left to do?", "--resume", session)
    (after,) = server.message_requests[asked:]
    context = project.workdir / "sessions" / session / "context.jsonl"
    assert str(context) in json.dumps(after)
    assert all(str(context) not in json.dumps(body) for body in server.message_requests[:asked])


def test_a_hook_that_cannot_write_leaves_the_session_going(
    project: Project, server: AnthropicServer, tmp_path: Path
) -> None:
    # The workspace named is a file: every hook fails, each with one line on stderr and exit
    # 1, which Claude Code takes as non-blocking. The file is left as it was.
    not_a_folder = tmp_path / "not-a-folder"
    not_a_folder.write_bytes(b"keep me")
    server.add_tool_use("Bash", {"command": SEQ_COMMAND}, tool_use_id="toolu_e2e_seq")
    server.add_text("Done.")
    result = project.claude(server, "Count.", CTXOFFLOAD_WORKDIR=str(not_a_folder))
    assert result["result"] == "Done."
    # The model got Claude Code's own handling of the output, not a notice of ours.
    sent = tool_result_text(server.message_requests[1], "toolu_e2e_seq")
    assert NOTICE not in sent and "tool_result-" not in sent and "\n2\n3\n4\n" in sent
    assert not_a_folder.read_bytes() == b"keep me"
    assert not project.workdir.exists()
    # Claude Code recorded the hook's reason, which names the workspace and the fix.
    assert f"workdir '{not_a_folder}' is not a folder" in project.transcript(result["session_id"])


def test_a_dot_ctxoffload_the_repository_linked_elsewhere_gets_nothing(
    project: Project, server: AnthropicServer, tmp_path: Path
) -> None:
    # A cloned repository ships `.ctxoffload` as a link to a folder it can read (issue 55,
    # item 6): the hook refuses it, the output reaches the model by Claude Code's own
    # handling, and nothing lands where the link points.
    outside = tmp_path / "outside"
    outside.mkdir()
    project.workdir.symlink_to(outside)
    server.add_tool_use("Bash", {"command": SEQ_COMMAND}, tool_use_id="toolu_e2e_seq")
    server.add_text("Done.")
    result = project.claude(server, "Count.")
    assert result["result"] == "Done."
    sent = tool_result_text(server.message_requests[1], "toolu_e2e_seq")
    assert NOTICE not in sent and "\n2\n3\n4\n" in sent
    assert list(outside.iterdir()) == []
    said = f"{project.workdir} is a symbolic link (to {str(outside)!r})"
    assert said in project.transcript(result["session_id"])


def test_two_sessions_at_once_each_keep_their_own_output(
    project: Project, server: AnthropicServer
) -> None:
    # Two Claude Code processes in one project, one workspace, at the same time; the server
    # answers each by what it asks (its job number), since their requests interleave.
    def command(job: int) -> str:
        return f"seq {job}00000 {job + 2}50000"

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        asked = json.dumps([m for m in body["messages"] if m["role"] == "user"][-1])
        if '"tool_result"' in asked:
            return server.text_reply("Done.")
        (job,) = map(int, re.findall(r"Run job (\d+)\.", asked))
        return server.tool_use_reply(
            "Bash", {"command": command(job)}, tool_use_id=f"toolu_e2e_job{job}"
        )

    server.responder = respond
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda job: project.claude(server, f"Run job {job}."), (1, 2)))
    sessions = [run["session_id"] for run in runs]
    assert len(set(sessions)) == 2
    for job, session in zip((1, 2), sessions, strict=True):
        expected = "".join(f"{i}\n" for i in range(job * 100_000, (job + 2) * 100_000 + 50_001))
        stored = stored_file(project, session, f"toolu_e2e_job{job}")
        assert stored.read_bytes() == expected.encode()
        recorded = [e for e in events(project, session) if e["kind"] == "tool_result"]
        assert [(e["tool_id"], e["bytes"]) for e in recorded] == [
            (f"toolu_e2e_job{job}", len(expected))
        ]
        sent = [
            tool_result_text(body, f"toolu_e2e_job{job}")
            for body in server.message_requests
            if f'"tool_use_id": "toolu_e2e_job{job}"' in json.dumps(body)
        ]
        assert len(sent) == 1 and str(stored) in sent[0] and NOTICE in sent[0]


@pytest.fixture
def bare_project(tmp_path: Path, claude_cli: Path) -> Project:
    """A project with no hooks in its settings."""
    home = tmp_path / "home"
    home.mkdir()
    folder = tmp_path / "project"
    folder.mkdir()
    return Project(folder, home, claude_cli)


def test_the_plugin_run_from_a_clone_stores_a_big_output(
    bare_project: Project, server: AnthropicServer, tmp_path: Path
) -> None:
    # `claude --plugin-dir <clone>/integrations/claude-code-plugin`, the clone's .venv
    # holding ctxoffload, and a PATH without it.
    plugin = clone_with_plugin(tmp_path / "my clone", venv=True)
    session = run_big_bash(bare_project, server, "toolu_e2e_seq", "--plugin-dir", str(plugin))
    sent = tool_result_text(server.message_requests[1], "toolu_e2e_seq")
    stored = stored_file(bare_project, session, "toolu_e2e_seq")
    assert sent.startswith("1\n2\n3\n") and NOTICE in sent and str(stored) in sent
    assert stored.read_bytes() == SEQ_OUTPUT.encode()


def test_the_plugin_without_ctxoffload_tells_the_user_and_leaves_the_session_going(
    bare_project: Project, server: AnthropicServer, tmp_path: Path
) -> None:
    # A clone with no .venv, nothing on PATH: the plugin finds no ctxoffload (the python3
    # of /usr/bin, where there is one, lacks it).
    found = subprocess.run(
        ["/bin/sh", "-c", "command -v ctxoffload || python3 -c 'import ctxoffload'"],
        env=_base_env(bare_project.home),
        capture_output=True,
        timeout=120,
    )
    assert found.returncode != 0, "this machine's /usr/bin has a ctxoffload: the test needs none"
    plugin = clone_with_plugin(tmp_path / "clone", venv=False)
    session = run_big_bash(bare_project, server, "toolu_e2e_seq", "--plugin-dir", str(plugin))
    sent = tool_result_text(server.message_requests[1], "toolu_e2e_seq")
    assert NOTICE not in sent and "\n2\n3\n4\n" in sent  # Claude Code's own handling
    assert not bare_project.workdir.exists()
    # Claude Code showed the user the one line the plugin said (a hook's systemMessage).
    shown = [
        row["attachment"]
        for row in map(json.loads, bare_project.transcript(session).splitlines())
        if row.get("attachment", {}).get("type") == "hook_system_message"
    ]
    assert [(a["hookEvent"], a["content"][:38]) for a in shown] == [
        ("PostToolUse", "ctxoffload plugin: no ctxoffload found")
    ]
