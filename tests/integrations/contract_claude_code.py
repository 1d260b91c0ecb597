"""The contract's driver for Claude Code's hooks: `ctxoffload hook PostToolUse` fed the JSON
Claude Code sends (tests/claude_code_hooks.py), as a process of its own per tool call."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, ClassVar

from contract import FILE_TOOLS, DoorDriver, Outcome, Turn

from claude_code_hooks import post_tool_use_bash
from ctxoffload._disk.ids import session_id_for
from ctxoffload._doors.doors import DOORS


class ClaudeCodeDriver(DoorDriver):
    door = "claude-code"
    limit = 3_000  # the hook's default
    host_readers = frozenset({FILE_TOOLS})  # Claude Code's own Read and Grep
    reasons: ClassVar[dict[str, str]] = {
        "call arguments": "the hooks see a tool's input only to run it: what Claude is sent "
        "again is Claude Code's own transcript, which its own compaction keeps",
        "no shared default": "Claude Code sends its session_id with every hook input; an "
        "input without one is refused in one line (tests/cli/test_hook.py)",
        "one writer": DOORS["claude-code"].one_writer,
        "checked at construction": "the hook is a command Claude Code runs, not an object: "
        "a workspace that cannot be written is one line on stderr and the output passes "
        "whole, so Claude Code goes on (tests/cli/test_hook.py)",
        **dict.fromkeys(
            ("readers named on a memory", "readers named on a bucket", "readers named on a sqlite"),
            "the hook is a command Claude Code runs on a folder (--workdir), which its own Read "
            "and Grep open",
        ),
        "same tools": "Claude Code reads the stored files with its own Read and Grep (the "
        "notice names the file); ctxoffload's read-back tools reach it through the MCP proxy",
    }

    def make(self, workspace: Any) -> Any:
        return workspace

    def converse(self, made: Any, conversation: str | None, turns: list[Turn]) -> Outcome:
        assert conversation is not None
        kept = ""
        for number, turn in enumerate(turns):
            if turn.tool_output is None:
                continue
            given = post_tool_use_bash(
                turn.tool_output, session=conversation, tool_use_id=f"toolu_{number:04d}"
            )
            hook = ["hook", "PostToolUse", "--workdir", str(made.workdir)]
            done = subprocess.run(
                [sys.executable, "-m", "ctxoffload", *hook],
                input=json.dumps(given),
                capture_output=True,
                text=True,
            )
            assert done.returncode == 0, done.stderr
            answer = json.loads(done.stdout or "{}")
            replaced = answer.get("hookSpecificOutput", {}).get("updatedToolOutput")
            kept = replaced["stdout"] if replaced else turn.tool_output
        return Outcome(session=session_id_for(conversation), kept=kept)


DRIVER = ClaudeCodeDriver()
