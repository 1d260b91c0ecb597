"""docs/guides/coding-agents.md, run: the proxy started with the arguments of each client's
configuration (Claude Code's `.mcp.json`, Cursor's `.cursor/mcp.json`, Codex's
`config.toml`), in front of the test server instead of `npx`, driven by the MCP SDK's client."""

from __future__ import annotations

from frameworks import require_framework

require_framework("mcp", "mcp")

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp_proxy import server_command, sessions, stored_path, text_of  # noqa: E402

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "coding-agents.md"


def _fences(language: str) -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## MCP proxy", 1)[1]
    return re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)


def _entries() -> list[tuple[str, dict[str, Any]]]:
    """Each client's entry for the proxy: (where it is from, {command, args})."""
    import tomllib

    found = [
        (f"json {i}", json.loads(b)["mcpServers"]["everything"])
        for i, b in enumerate(_fences("json"))
    ]
    (toml,) = _fences("toml")
    found.append(("codex", tomllib.loads(toml)["mcp_servers"]["everything"]))
    claude = next(line for line in _fences("bash")[1].splitlines() if "claude mcp add" in line)
    words = shlex.split(claude)
    command = words[words.index("--") + 1 :]
    found.append(("claude mcp add", {"command": command[0], "args": command[1:]}))
    return found


def test_the_guide_gives_the_same_proxy_to_every_client() -> None:
    entries = _entries()
    assert len(entries) == 4
    assert {e["command"] for _, e in entries} == {"ctxoffload"}
    assert len({tuple(e["args"]) for _, e in entries}) == 1


@pytest.mark.parametrize("where", ["json 0", "json 1", "codex", "claude mcp add"])
async def test_each_configuration_starts_a_working_proxy(where: str, tmp_path: Path) -> None:
    entry = dict(_entries())[where]
    args = list(entry["args"])
    # The wrapped server: the test server in place of `npx ...`; the workspace, relative as
    # in the guide, is made in the project folder the client starts the proxy in.
    args = [*args[: args.index("--") + 1], *server_command()]
    args[args.index("mcp-proxy") + 1 : args.index("mcp-proxy") + 1] = ["--limit", "500"]
    command = [sys.executable, "-m", "ctxoffload"] if entry["command"] == "ctxoffload" else []
    params = StdioServerParameters(
        command=command[0], args=[*command[1:], *args], env=dict(os.environ), cwd=tmp_path
    )
    async with Client(params, cache=None, mode="legacy") as client:
        result = await client.call_tool("big", {"total_bytes": 100_000, "marker_line": 321})
        path = stored_path(text_of(result))
        found = await client.call_tool("Grep", {"pattern": "MARKER", "path_or_glob": str(path)})
    assert "line 0000321 MARKER-FOUND-HERE" in text_of(found)
    workspace = tmp_path / ".agent-workspace"
    assert path.is_relative_to(workspace.resolve())
    assert len(sessions(workspace)) == 1
