"""The Claude Agent SDK (Python): `OffloadingHooks`, Claude Code's hooks as the SDK's
`HookMatcher` callbacks, and `WorkspaceSessionStore`, the SDK's `SessionStore` on a ctxoffload
workspace.

- `OffloadingHooks(workspace).matchers()` goes to `ClaudeAgentOptions(hooks=...)`: after every
  tool call (PostToolUse) an output over the config's `tool_result_limit` is stored whole and
  replaced by its head and a notice naming the file; before every compaction (PreCompact) the
  transcript is appended to the session's context.jsonl with the artifact index of what the
  compaction drops. The Python SDK has no SessionStart callback, so that index (and where the
  history is) reaches the model as `additionalContext` of the first tool result or prompt
  after the compaction (PostToolUse, UserPromptSubmit). The same work as `ctxoffload hook`.
- `WorkspaceSessionStore(workspace)` goes to `ClaudeAgentOptions(session_store=...)`: the
  transcript the SDK mirrors is kept in the workspace, one session per transcript, and
  `resume` loads it back from there. It passes the SDK's own conformance suite
  (`claude_agent_sdk.testing.run_session_store_conformance`).

Example::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from ctxoffload import LocalWorkspace
    from ctxoffload.integrations.claude import OffloadingHooks, WorkspaceSessionStore

    workspace = LocalWorkspace("agent_workspace")
    options = ClaudeAgentOptions(
        hooks=OffloadingHooks(workspace).matchers(),
        session_store=WorkspaceSessionStore(workspace),
    )
    async for message in query(prompt="...", options=options):
        ...

Importing this module does not import the SDK; `matchers()` does
(`pip install 'ctxoffload[claude]'`).
"""

from __future__ import annotations

import importlib
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from .._disk.ids import session_id_for
from .._doors.checks import arguments_checked, checked_config, checked_workspace
from .._doors.claude_hooks import (
    compaction_context,
    hook_config,
    hook_session,
    post_tool_use,
    pre_compact,
)
from .._doors.doors import DOORS
from .._doors.recent import RecentKeys
from ..compression import ContextConfig
from ..exceptions import ConfigError, CtxOffloadError
from ..workspace import Workspace

__all__ = ["OffloadingHooks", "WorkspaceSessionStore"]

INSTALL_HINT = "The Claude Agent SDK is not installed: pip install 'ctxoffload[claude]'"

logger = logging.getLogger("ctxoffload")


@arguments_checked
class OffloadingHooks:
    """Claude Code's PostToolUse and PreCompact hooks on a ctxoffload workspace, as Claude
    Agent SDK callbacks (`matchers()` for `ClaudeAgentOptions(hooks=...)`).

    A callback never fails the agent: what goes wrong is logged as a warning and the callback
    returns `{}` (the tool's output and the compaction go on unchanged).

    Args:
        workspace: where outputs and transcripts go; the session is named after the SDK's
            `session_id`, mapped by the one rule every door follows (docs/guides/hosts.md).
        config: the limit for tool outputs (`tool_result_limit`, tokens) and the artifact
            index's budget; by default Claude's 200,000-token window and a 1,200-token index.

    Raises:
        ConfigError: `workspace` is no workspace (a path: pass `LocalWorkspace(path)`; a
            workdir that is a file), or `config` is no `ContextConfig`.
    """

    def __init__(self, workspace: Workspace, *, config: ContextConfig | None = None) -> None:
        self.workspace = checked_workspace(workspace, DOORS[_DOOR])
        self.config = config if config is not None else hook_config()
        checked_config(self.config)
        # Sessions compacted whose index the model has not been given yet.
        self._pending = RecentKeys()

    def matchers(self) -> dict[str, list[Any]]:
        """The callbacks as `{event: [HookMatcher]}` for `ClaudeAgentOptions(hooks=...)`
        (imports the SDK)."""
        try:
            hook_matcher: Any = importlib.import_module("claude_agent_sdk").HookMatcher
        except ImportError as exc:
            raise ConfigError(INSTALL_HINT) from exc
        return {
            "PostToolUse": [hook_matcher(matcher=None, hooks=[self.post_tool_use])],
            "PreCompact": [hook_matcher(matcher=None, hooks=[self.pre_compact])],
            "UserPromptSubmit": [hook_matcher(matcher=None, hooks=[self.user_prompt_submit])],
        }

    async def post_tool_use(
        self, hook_input: Mapping[str, Any], tool_use_id: str | None, context: Any
    ) -> dict[str, Any]:
        """PostToolUse: a big output stored and replaced (`updatedToolOutput`); after a
        compaction, its index as `additionalContext`."""
        output: dict[str, Any] = {}
        try:
            output = await post_tool_use(self.workspace, hook_input, config=self.config, door=_DOOR)
        except (CtxOffloadError, OSError) as exc:
            logger.warning("PostToolUse: the tool's output is left as it is: %s", exc)
        return await self._with_index(output, hook_input, "PostToolUse")

    async def pre_compact(
        self, hook_input: Mapping[str, Any], tool_use_id: str | None, context: Any
    ) -> dict[str, Any]:
        """PreCompact: the transcript kept in context.jsonl, the index of what leaves built."""
        try:
            await pre_compact(self.workspace, hook_input, config=self.config, door=_DOOR)
        except (CtxOffloadError, OSError) as exc:
            logger.warning("PreCompact: the transcript was not kept: %s", exc)
            return {}
        self._pending.add(hook_session(hook_input, "PreCompact"))
        return {}

    async def user_prompt_submit(
        self, hook_input: Mapping[str, Any], tool_use_id: str | None, context: Any
    ) -> dict[str, Any]:
        """UserPromptSubmit: after a compaction, its index as `additionalContext`."""
        return await self._with_index({}, hook_input, "UserPromptSubmit")

    async def _with_index(
        self, output: dict[str, Any], hook_input: Mapping[str, Any], event: str
    ) -> dict[str, Any]:
        """`output` with the latest compaction's text as `additionalContext`, once per
        compaction (what SessionStart with matcher `compact` gives a Claude Code user)."""
        try:
            session = hook_session(hook_input, event)
        except CtxOffloadError:
            return output
        if session not in self._pending:
            return output
        self._pending.discard(session)
        try:
            text = await compaction_context(self.workspace, session)
        except (CtxOffloadError, OSError) as exc:
            logger.warning("%s: the compaction's index could not be read: %s", event, exc)
            return output
        if text is None:
            return output
        specific = dict(output.get("hookSpecificOutput") or {"hookEventName": event})
        specific["additionalContext"] = text
        return {**output, "hookSpecificOutput": specific}


_STORE = "claude_session_store"
"""The state.json field that says which transcript a `WorkspaceSessionStore` session holds."""
_ENTRY = "claude_code_entry"
"""The `type` of a context.jsonl line holding one transcript entry, as its JSON text."""


class WorkspaceSessionStore:
    """The Claude Agent SDK's `SessionStore` on a ctxoffload workspace.

    Each transcript (a `project_key`, a `session_id`, and a `subpath` for a subagent's) is a
    session of the workspace, named `session_id_for` of the three, whose context.jsonl holds
    one line per entry, in the order appended (the entry's own JSON as text, so `load` gives
    back exactly what was appended, base64 images and all; an entry's `uuid` is its id, and an
    entry appended again under its uuid with the same content is not written twice). Appends
    are whole or absent and safe across processes, as every context.jsonl append is; the
    session's state.json names the transcript and the time of its last append.

    Args:
        workspace: where the transcripts are kept.
    """

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = checked_workspace(workspace, DOORS[_DOOR])

    async def append(self, key: Mapping[str, Any], entries: list[dict[str, Any]]) -> None:
        """Keep a batch of transcript entries, after those appended before."""
        if not entries:
            return
        session = _session_of(key)
        rows = [_row(entry) for entry in entries]
        await self.workspace.offload_context(session, msgs=rows)
        await self.workspace.write_state(
            session,
            {
                _STORE: {
                    "project_key": key["project_key"],
                    "session_id": key["session_id"],
                    "subpath": key.get("subpath"),
                    "mtime": int(time.time() * 1000),
                }
            },
        )

    async def load(self, key: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """The transcript's entries in the order appended; None for one never written."""
        session = _session_of(key)
        if await self.workspace.read_state(session) is None:
            return None
        rows = await self.workspace.read_context(session)
        return [
            json.loads(row["json"])
            for row in rows
            if isinstance(row, dict) and row.get("type") == _ENTRY
        ]

    async def list_sessions(self, project_key: str) -> list[dict[str, Any]]:
        """The main transcripts of `project_key`: `session_id` and `mtime` (epoch ms)."""
        return [
            {"session_id": found["session_id"], "mtime": found["mtime"]}
            for found in await self._transcripts(project_key)
            if found.get("subpath") is None
        ]

    async def delete(self, key: Mapping[str, Any]) -> None:
        """Remove a transcript; a main transcript takes its subagents' with it."""
        if key.get("subpath") is not None:
            await self.workspace.purge_session(_session_of(key))
            return
        for found in await self._transcripts(key["project_key"]):
            if found["session_id"] == key["session_id"]:
                await self.workspace.purge_session(found["session"])

    async def list_subkeys(self, key: Mapping[str, Any]) -> list[str]:
        """The subpaths of a session's subagent transcripts."""
        return [
            found["subpath"]
            for found in await self._transcripts(key["project_key"])
            if found["session_id"] == key["session_id"] and found.get("subpath") is not None
        ]

    async def _transcripts(self, project_key: str) -> list[dict[str, Any]]:
        """What each session of the workspace holding a transcript of `project_key` says."""
        found: list[dict[str, Any]] = []
        for session in await self.workspace.list_sessions():
            state = await self.workspace.read_state(session)
            said = (state or {}).get(_STORE)
            if isinstance(said, dict) and said.get("project_key") == project_key:
                found.append({**said, "session": session})
        return found


def _session_of(key: Mapping[str, Any]) -> str:
    """The workspace session of a transcript key: never a path, never shared by two keys (the
    three parts as JSON, made a plain name by `session_id_for`, which adds a hash)."""
    parts = [key["project_key"], key["session_id"], key.get("subpath")]
    return session_id_for(json.dumps(parts, ensure_ascii=False))


def _row(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The context.jsonl line of one transcript entry: its JSON as text (so no payload in it is
    moved to data/, and it loads back equal), its uuid as the line's id."""
    row: dict[str, Any] = {"type": _ENTRY, "json": json.dumps(entry, ensure_ascii=False)}
    uuid = entry.get("uuid")
    if isinstance(uuid, str) and uuid:
        row["id"] = uuid
    return row


_DOOR = "claude-agent-sdk"
"""The door the SDK's hooks record (`_doors/doors.py`)."""
