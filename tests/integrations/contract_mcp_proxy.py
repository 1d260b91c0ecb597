"""The contract's driver for `ctxoffload mcp-proxy`: the real proxy process in front of the real
test server (mcp_server.py), driven by the `mcp` SDK's client as an MCP client drives it."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from contract import DoorDriver, Outcome, Turn, sessions_of

from ctxoffload import SessionBusyError


class _Made:
    def __init__(self, workspace: Any) -> None:
        self.workspace = workspace


class McpProxyDriver(DoorDriver):
    door = "mcp-proxy"
    module = "mcp"
    needs = "Client"  # the MCP SDK 2 (AgentScope's environment holds 1.x)
    extra = "mcp"
    reasons: ClassVar[dict[str, str]] = {
        "call arguments": "the proxy is the tools' server: it receives a call's arguments "
        "and never sees the client's requests to its model",
        "identity": "an MCP connection carries no id of its own: each connection is a new "
        "session, or the one --session names (a plain name, checked before anything starts)",
        **dict.fromkeys(
            ("readers named on a memory", "readers named on a bucket", "readers named on a sqlite"),
            "the proxy is a program on a folder (--workspace DIR); McpProxy on a store with no "
            "folder serves the retrieval tool and its notices name it "
            "(tests/integrations/test_mcp_proxy.py)",
        ),
        "a path is no workspace": "the proxy is a program: its --workspace is a folder, "
        "taken as LocalWorkspace(folder); a folder that is a file is refused before anything "
        "starts",
    }

    def make(self, workspace: Any) -> _Made:
        from mcp_proxy import server_command

        from ctxoffload.mcp import McpProxy

        # The proxy checks its workspace when it is built, before it starts anything.
        McpProxy(workspace, server_command())
        return _Made(workspace)

    def converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        return asyncio.run(self._converse(made, conversation, turns))

    async def _converse(self, made: _Made, conversation: str | None, turns: list[Turn]) -> Outcome:
        from mcp_proxy import proxied, text_of

        options = ["--session", conversation] if conversation else []
        before = sessions_of(made.workspace)
        kept = ""
        listed: list[str] = []
        try:
            async with proxied(made.workspace.workdir, *options, limit=300) as client:
                listed = [tool.name for tool in (await client.list_tools()).tools]
                for turn in turns:
                    if turn.tool_output is not None:
                        result = await client.call_tool("echo", {"text": turn.tool_output})
                        kept = text_of(result)
        except Exception:
            # The proxy said why in one line on its stderr, which the client does not see:
            # start it once more alone to read that line.
            said = _refusal(made, options)
            if "another live run" in said:
                raise SessionBusyError(said, conversation or "", {}) from None
            raise
        session = conversation or next(iter(sessions_of(made.workspace) - before))
        return Outcome(session=session, kept=kept, tools=listed)

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        from mcp_proxy import proxy_command

        # A client connected through a proxy holding the session: the proxy holds it for as
        # long as its connection lasts (stdin open).
        events = workspace.workdir / "sessions" / conversation / "events.jsonl"
        with subprocess.Popen(
            proxy_command(workspace.workdir, "--session", conversation),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ) as proxy:
            assert proxy.stdin is not None
            try:
                for _ in range(6000):
                    if events.exists() and b'"kind":"door"' in events.read_bytes():
                        break
                    assert proxy.poll() is None, "the proxy stopped"
                    time.sleep(0.01)
                yield
            finally:
                proxy.stdin.close()
                proxy.wait(60)

    def grep(self, made: _Made, conversation: str, pattern: str) -> str:
        return asyncio.run(self._grep(made, conversation, pattern))

    async def _grep(self, made: _Made, conversation: str, pattern: str) -> str:
        from mcp_proxy import proxied, text_of

        async with proxied(made.workspace.workdir) as client:
            return text_of(await client.call_tool("Grep", {"pattern": pattern}))


def _refusal(made: _Made, options: list[str]) -> str:
    """What the proxy prints when it stops at its start (a session held by another)."""
    from mcp_proxy import proxy_command

    done = subprocess.run(
        proxy_command(made.workspace.workdir, *options),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stderr.strip()


DRIVER = McpProxyDriver()
