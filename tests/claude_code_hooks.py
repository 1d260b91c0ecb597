"""The JSON Claude Code sends its hooks on stdin, in the shapes its documentation gives, for
the tests of `ctxoffload hook` (tests/cli/test_hook*.py) and of the Claude Agent SDK's
callbacks (tests/integrations/test_claude_*.py).

Sources, read 2026-11-25:

- Claude Code's hooks reference, https://code.claude.com/docs/en/hooks: "Common input fields"
  (session_id, transcript_path, cwd, permission_mode, hook_event_name), "PostToolUse input"
  (tool_name, tool_input, tool_response, tool_use_id, duration_ms), "PreCompact input"
  (trigger, custom_instructions), "SessionStart input" (source, model), and "PostToolUse
  decision control" (`updatedToolOutput` must have the tool's own output shape: Bash returns
  `{stdout, stderr, interrupted, isImage}`; MCP output is passed through unchecked).
- The Claude Agent SDK for Python 0.2.189, `claude_agent_sdk.types`: `PostToolUseHookInput`,
  `PreCompactHookInput` (the same fields, typed).
- MCP tool results (`tool_response` of an `mcp__<server>__<tool>` tool) are the MCP content
  list, `[{"type": "text", "text": ...}]` (https://modelcontextprotocol.io, CallToolResult).
- `persistedOutputPath`: where Claude Code 2.1.278 put a Bash output of over about 30,000
  characters itself, sending the hook only its start; seen in public hook scripts (not in the
  reference), so it is handled when present and nothing depends on it.

Each function returns a fresh dict: a test may change what it gets.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

SESSION = "00893aaf-19fa-41d2-8238-13269b9b3ca0"
"""A session id as Claude Code writes them (a UUID)."""


def _common(event: str, transcript: str, session: str) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": transcript,
        "cwd": "/home/user/my-project",
        "permission_mode": "default",
        "hook_event_name": event,
    }


def post_tool_use_bash(
    stdout: str,
    *,
    stderr: str = "",
    session: str = SESSION,
    tool_use_id: str = "toolu_01ABC123",
    transcript: str = "/home/user/.claude/projects/-home-user-my-project/transcript.jsonl",
) -> dict[str, Any]:
    """A PostToolUse input for a Bash call (the reference's example, with a Bash output)."""
    return {
        **_common("PostToolUse", transcript, session),
        "tool_name": "Bash",
        "tool_input": {
            "command": "npm test",
            "description": "Run test suite",
            "timeout": 120000,
            "run_in_background": False,
        },
        "tool_response": {
            "stdout": stdout,
            "stderr": stderr,
            "interrupted": False,
            "isImage": False,
        },
        "tool_use_id": tool_use_id,
        "duration_ms": 12,
    }


def post_tool_use_write(session: str = SESSION) -> dict[str, Any]:
    """The reference's own PostToolUse example: a Write call, a small structured output."""
    return {
        **_common("PostToolUse", "/home/user/.claude/projects/p/t.jsonl", session),
        "tool_name": "Write",
        "tool_input": {"file_path": "/path/to/file.txt", "content": "file content"},
        "tool_response": {"filePath": "/path/to/file.txt", "success": True},
        "tool_use_id": "toolu_01ABC123",
        "duration_ms": 12,
    }


def post_tool_use_mcp(text: str, session: str = SESSION) -> dict[str, Any]:
    """A PostToolUse input for an MCP tool: its output is the MCP content list (text and an
    image, whose base64 is never taken for text)."""
    return {
        **_common("PostToolUse", "/home/user/.claude/projects/p/t.jsonl", session),
        "tool_name": "mcp__github__search_repositories",
        "tool_input": {"query": "context offloading"},
        "tool_response": [
            {"type": "text", "text": text},
            {"type": "image", "data": "iVBORw0KGgo=" * 400, "mimeType": "image/png"},
        ],
        "tool_use_id": "toolu_01MCP",
    }


def post_tool_use_read(content: str, session: str = SESSION) -> dict[str, Any]:
    """A PostToolUse input for Read: the agent reading a file (an offloaded one, maybe)."""
    return {
        **_common("PostToolUse", "/home/user/.claude/projects/p/t.jsonl", session),
        "tool_name": "Read",
        "tool_input": {"file_path": "/home/user/my-project/big.log"},
        "tool_response": {
            "type": "text",
            "file": {
                "filePath": "/home/user/my-project/big.log",
                "content": content,
                "numLines": content.count("\n") + 1,
                "startLine": 1,
                "totalLines": content.count("\n") + 1,
            },
        },
        "tool_use_id": "toolu_01READ",
    }


def pre_compact(
    transcript: str, *, session: str = SESSION, trigger: str = "auto"
) -> dict[str, Any]:
    """A PreCompact input (the reference's example)."""
    return {
        **_common("PreCompact", transcript, session),
        "trigger": trigger,
        "custom_instructions": "",
    }


def session_start(
    source: str = "compact", *, session: str = SESSION, transcript: str = "/t/transcript.jsonl"
) -> dict[str, Any]:
    """A SessionStart input (the reference's example; `source` "compact" after a compaction)."""
    return {
        **_common("SessionStart", transcript, session),
        "source": source,
        "model": "claude-sonnet-5",
    }


def transcript_rows(turns: int, *, session: str = SESSION, start: int = 0) -> list[dict[str, Any]]:
    """Records of a Claude Code transcript: per turn a user prompt, an assistant response split
    over two lines (text, then a Bash tool_use; one `message.id`), and the tool_result, each
    naming a file path, a command and an id, as the corpus' sessions do."""
    rows: list[dict[str, Any]] = []
    for i in range(start, start + turns):
        base = {"sessionId": session, "isSidechain": False, "cwd": "/home/user/my-project"}
        rows.append(
            {
                **base,
                "type": "user",
                "uuid": f"u-{i:05d}",
                "message": {"role": "user", "content": f"Check shard {i} of ORD-{1000 + i}"},
            }
        )
        api_id = f"msg_{i:05d}"
        rows.append(
            {
                **base,
                "type": "assistant",
                "uuid": f"a-{i:05d}-1",
                "message": {
                    "id": api_id,
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"Reading shard {i}."}],
                },
            }
        )
        rows.append(
            {
                **base,
                "type": "assistant",
                "uuid": f"a-{i:05d}-2",
                "message": {
                    "id": api_id,
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"toolu_{i:05d}",
                            "name": "Bash",
                            "input": {"command": f"cat /srv/shards/shard-{i}.log"},
                        }
                    ],
                },
            }
        )
        rows.append(
            {
                **base,
                "type": "user",
                "uuid": f"r-{i:05d}",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"toolu_{i:05d}",
                            "content": f"shard {i}: 12 rows written to /srv/out/part-{i}.csv",
                        }
                    ],
                },
            }
        )
    return rows


# Claude Code reads exit 1 as a non-blocking error: the action goes on (exit 2 would block a
# compaction, and show stderr to the model after a tool call).
NON_BLOCKING = 1


def run_hook(
    event: str, payload: Any, workdir: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`ctxoffload hook EVENT --workdir WORKDIR` with `payload` on stdin (bytes as given, else
    its JSON), as Claude Code runs a command hook: the command's `main` in this process, its
    stdin, stdout and stderr bytes as a child's would be (an interpreter started per case
    was most of the hook tests' time; `hook_in_project` and `run_command` start one, as Claude
    Code does)."""
    from contextlib import redirect_stderr, redirect_stdout

    from ctxoffload.cli import main

    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    argv = ["hook", event, "--workdir", str(workdir), *extra]
    streams = [io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape")]
    streams.append(io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape"))
    saved_env = {name: os.environ.get(name) for name in env or {}}
    saved_stdin = sys.stdin
    os.environ.update(env or {})
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")
    try:
        with redirect_stdout(streams[0]), redirect_stderr(streams[1]):
            code = main(argv)
    finally:
        sys.stdin = saved_stdin
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    out, err = (_written(stream) for stream in streams)
    return subprocess.CompletedProcess(["ctxoffload", *argv], code, out, err)


def _written(stream: io.TextIOWrapper) -> bytes:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue()


def hook_in_project(
    event: str,
    payload: Any,
    project: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """`ctxoffload hook EVENT` as Claude Code runs it in `project` (or from `cwd`): no
    --workdir, no $CTXOFFLOAD_WORKDIR, $CLAUDE_PROJECT_DIR naming the project."""
    environ = {k: v for k, v in os.environ.items() if k != "CTXOFFLOAD_WORKDIR"}
    environ["CLAUDE_PROJECT_DIR"] = str(project)
    return subprocess.run(
        [sys.executable, "-m", "ctxoffload", "hook", event],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env={**environ, **(env or {})},
        cwd=cwd or project,
        timeout=300,
    )


def output_of(done: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b"", done.stderr.decode()
    text = done.stdout.decode("ascii")  # ASCII only: nothing in it can break Claude Code's read
    assert text.endswith("\n") and text.count("\n") == 1
    parsed: dict[str, Any] = json.loads(text)
    return parsed


# -- Commands run as Claude Code runs them ------------------------------------------------------

BARE_PATH = "/usr/bin:/bin"
"""A PATH with no virtual environment on it: what Claude Code started from another shell (a
desktop launcher, an IDE, a terminal where the venv is not active) passes its hooks."""

PLUGIN = Path(__file__).resolve().parents[1] / "integrations" / "claude-code-plugin"
"""The repository's Claude Code plugin."""


def bare_env(**extra: str) -> dict[str, str]:
    """An environment built from nothing (no venv on PATH, no CTXOFFLOAD_* or PYTHON*
    setting of this run), with `extra` added."""
    return {"PATH": BARE_PATH, "HOME": os.environ.get("HOME", "/"), "LANG": "C.UTF-8", **extra}


def run_command(
    command: str, payload: Any, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """A hook's command line as Claude Code runs it: by a shell (`/bin/sh -c`), with the
    event's JSON on stdin."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        ["/bin/sh", "-c", command],
        input=data,
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def hook_commands(settings: dict[str, Any]) -> dict[str, str]:
    """The one command of each event in a settings file's (or hooks.json's) `hooks`."""
    commands: dict[str, str] = {}
    for event, matchers in settings["hooks"].items():
        ((command,),) = [[h["command"] for h in m["hooks"]] for m in matchers]
        commands[event] = command
    return commands


def plugin_commands(plugin: Path = PLUGIN) -> dict[str, str]:
    """The command of each event in the plugin's hooks/hooks.json."""
    return hook_commands(json.loads((plugin / "hooks" / "hooks.json").read_text("utf-8")))


def clone_with_plugin(clone: Path, *, venv: bool) -> Path:
    """A clone of the repository as a user has one, at `clone`: the plugin copied to
    `<clone>/integrations/claude-code-plugin` (returned), and, when `venv`, `<clone>/.venv`
    the virtual environment this test runs in (a link to it)."""
    plugin = clone / "integrations" / "claude-code-plugin"
    shutil.copytree(PLUGIN, plugin, symlinks=True)
    if venv:
        (clone / ".venv").symlink_to(Path(sys.executable).parent.parent)
    return plugin
