"""What the MCP proxy's tests share: the real `ctxoffload mcp-proxy` subprocess in front of the
real test server (mcp_server.py), driven by the `mcp` SDK's real client."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from frameworks import require_framework

from ctxoffload.text import TRUNCATION_MARKER

mcp = require_framework("mcp", "mcp")

from mcp import Client, StdioServerParameters  # noqa: E402

SERVER = Path(__file__).with_name("mcp_server.py")
"""The wrapped server of every test."""

LIMIT = 500
"""The tests' `--limit`, in tokens."""


def server_command(*args: str) -> list[str]:
    """The command that starts the test server."""
    return [sys.executable, str(SERVER), *args]


def proxy_command(
    workdir: Path,
    *options: str,
    server: Sequence[str] | None = None,
    limit: int = LIMIT,
    url: str | None = None,
    stderr: Path | None = None,
) -> list[str]:
    """`ctxoffload mcp-proxy` on `workdir` in front of `server` (the test server), or of the
    server at `url`; with `stderr`, what it writes there is appended to that file."""
    wrapped = ["--url", url] if url else ["--", *(server or server_command())]
    into = ["sh", "-c", f'exec "$@" 2>>{shlex.quote(str(stderr))}', "sh"] if stderr else []
    return [
        *into,
        sys.executable,
        "-m",
        "ctxoffload",
        "mcp-proxy",
        "--workspace",
        str(workdir),
        "--limit",
        str(limit),
        *options,
        *wrapped,
    ]


@contextlib.asynccontextmanager
async def proxied(
    workdir: Path,
    *options: str,
    server: Sequence[str] | None = None,
    limit: int = LIMIT,
    mode: str = "legacy",
    url: str | None = None,
    stderr: Path | None = None,
) -> AsyncIterator[Any]:
    """A connected client of a proxy subprocess (legacy mode: the handshake Claude Code,
    Cursor and Codex speak); with `stderr`, the proxy's stderr goes to that file."""
    command = proxy_command(workdir, *options, server=server, limit=limit, url=url, stderr=stderr)
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with Client(params, cache=None, mode=mode) as client:
        yield client


@contextlib.asynccontextmanager
async def direct(*args: str, mode: str = "legacy") -> AsyncIterator[Any]:
    """A connected client of the test server itself (no proxy)."""
    command = server_command(*args)
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with Client(params, cache=None, mode=mode) as client:
        yield client


def text_of(result: Any) -> str:
    """The text of a tool result's content."""
    return "\n".join(c.text for c in result.content if c.type == "text")


def sessions(workdir: Path) -> list[str]:
    """The sessions of a workspace."""
    folder = workdir / "sessions"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def events(workdir: Path, session: str) -> list[dict[str, Any]]:
    """A session's events, in order."""
    path = workdir / "sessions" / session / "events.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def stored_path(text: str) -> Path:
    """The file a truncation notice names (in its full or its compact form)."""
    found = re.search(r"(/\S*/tool_result-[^\s()']+\.txt)", text.split(TRUNCATION_MARKER)[-1])
    if found is None:
        raise AssertionError(f"no stored file named in: {text[-800:]}")
    return Path(found.group(1))


async def wait_for_file(path: Path) -> None:
    """Until `path` exists and holds something (a pid, a port)."""
    import anyio

    while not (path.exists() and path.read_text(encoding="utf-8")):
        await anyio.sleep(0.02)


def pid_in(path: Path) -> int:
    """The pid a test server wrote."""
    return int(path.read_text(encoding="utf-8"))


def process_gone(pid: int) -> bool:
    """Whether the process ended (a zombie no one reaped counts as ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except (FileNotFoundError, ProcessLookupError):
        # (Reaped between the open and the read, the read fails with ESRCH.)
        return True
    return "\nState:\tZ" in status
