"""The contract's driver for the Claude Agent SDK's `OffloadingHooks`: its PostToolUse
callback, fetched from `matchers()` as `ClaudeAgentOptions(hooks=...)` holds it and called
with the input the SDK gives it (tests/claude_code_hooks.py), as the SDK calls it after a
tool. The SDK's Claude Code process, which makes the model calls, is not run here."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from contract import FILE_TOOLS, DoorDriver, Outcome, Turn

from claude_code_hooks import post_tool_use_bash
from ctxoffload._disk.ids import session_id_for
from ctxoffload._doors.doors import DOORS


class ClaudeAgentSdkDriver(DoorDriver):
    door = "claude-agent-sdk"
    limit = 3_000  # the hook's default
    host_readers = frozenset({FILE_TOOLS})  # Claude Code's own Read and Grep
    module = "claude_agent_sdk"
    extra = "claude"
    reasons: ClassVar[dict[str, str]] = {
        "call arguments": "the hooks see a tool's input only to run it: what Claude is sent "
        "again is the SDK's Claude Code transcript, which its own compaction keeps",
        "no shared default": "the SDK sends its session_id with every hook input; the hooks "
        "write that session",
        "one writer": DOORS["claude-agent-sdk"].one_writer,
        "same tools": "the SDK's Claude Code reads the stored files with its own Read and "
        "Grep (the notice names the file); ctxoffload's read-back tools reach it as an MCP "
        "server (ctxoffload mcp-proxy)",
    }
    gaps: ClassVar[dict[str, str]] = dict.fromkeys(
        ("readers named on a memory", "readers named on a bucket", "readers named on a sqlite"),
        "Claude Code reads a stored output with its own Read, which opens files: on a workspace "
        "with no folder the model has no tool that reads one back, and the notice says 'your "
        "file tools' (the hooks should refuse such a workspace, or give the retrieval tool)",
    )

    def make(self, workspace: Any) -> Any:
        from ctxoffload.integrations.claude import OffloadingHooks

        return OffloadingHooks(workspace)

    def converse(self, made: Any, conversation: str | None, turns: list[Turn]) -> Outcome:
        assert conversation is not None
        return asyncio.run(self._converse(made, conversation, turns))

    async def _converse(self, made: Any, conversation: str, turns: list[Turn]) -> Outcome:
        (post_tool_use,) = (
            callback
            for event, matchers in made.matchers().items()
            if event == "PostToolUse"
            for matcher in matchers
            for callback in matcher.hooks
        )
        kept = ""
        for number, turn in enumerate(turns):
            if turn.tool_output is None:
                continue
            call = f"toolu_{number:04d}"
            given = post_tool_use_bash(turn.tool_output, session=conversation, tool_use_id=call)
            answer = await post_tool_use(given, call, {"signal": None})
            replaced = answer.get("hookSpecificOutput", {}).get("updatedToolOutput")
            kept = replaced["stdout"] if replaced else turn.tool_output
        return Outcome(session=session_id_for(conversation), kept=kept)


DRIVER = ClaudeAgentSdkDriver()
