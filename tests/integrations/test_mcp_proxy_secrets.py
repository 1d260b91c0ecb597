"""`ctxoffload mcp-proxy` never shows the secrets of the server it wraps: an API key or token on
the wrapped command line (`--api-key=X`, `--token X`, `API_KEY=X`), a password or key in its
URL, reach neither the client (its error messages), nor the session's events, nor
`ctxoffload show`, nor the proxy's stderr, however the wrapped server fails."""

from __future__ import annotations

from frameworks import require_framework

require_framework("mcp", "mcp")

import json  # noqa: E402
import os  # noqa: E402
import shlex  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import anyio  # noqa: E402
import pytest  # noqa: E402
from mcp import MCPError  # noqa: E402
from mcp_proxy import (  # noqa: E402
    pid_in,
    process_gone,
    proxied,
    proxy_command,
    server_command,
    sessions,
    text_of,
    wait_for_file,
)

KEY = "Zq7-key-3f9a1c5e"
TOKEN = "Zq7-token-77b2d0"
ENV_KEY = "Zq7-env-c0ffee42"
PASSWORD = "Zq7-pw-9d8e7f"
SECRETS = (KEY, TOKEN, ENV_KEY, PASSWORD)


def _everything_shown(workdir: Path, stderr: Path, said: list[str]) -> str:
    """What the client was told, the session's files, `ctxoffload show` and `ls`, stderr."""
    cli = [sys.executable, "-m", "ctxoffload", "--workdir", str(workdir)]
    parts = [*said, stderr.read_text(encoding="utf-8", errors="replace")]
    for session in sessions(workdir):
        for path in sorted((workdir / "sessions" / session).iterdir()):
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
        for how in ([], ["--full"], ["--json"]):
            shown = subprocess.run([*cli, "show", session, *how], capture_output=True, text=True)
            parts += [shown.stdout, shown.stderr]
    listed = subprocess.run([*cli, "ls"], capture_output=True, text=True)
    return "\n".join([*parts, listed.stdout, listed.stderr])


async def test_secrets_on_the_wrapped_command_line_reach_no_output(
    workdir: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "server.pid"
    stderr = tmp_path / "stderr"
    server = [
        "env",
        f"API_KEY={ENV_KEY}",
        *server_command("--pid-file", str(pid_file), f"--api-key={KEY}", "--token", TOKEN),
    ]
    said: list[str] = []
    async with proxied(workdir, server=server, stderr=stderr) as client:
        assert text_of(await client.call_tool("echo", {"text": "hi"})) == "hi"
        os.kill(pid_in(pid_file), signal.SIGKILL)
        for _ in range(3):  # the first request may still be the one that sees it close
            with pytest.raises(MCPError) as gone:
                await client.call_tool("echo", {"text": "again"})
            said.append(gone.value.message)
        with pytest.raises(MCPError) as listing:
            await client.list_prompts()
        said.append(listing.value.message)
    assert process_gone(pid_in(pid_file))
    assert "closed the connection" in said[-1]
    # The command is still named, its secrets masked.
    assert "'--api-key=***' --token '***'" in said[-1] and "'API_KEY=***'" in said[-1]
    shown = _everything_shown(workdir, stderr, said)
    assert "--api-key=***" in shown
    for secret in SECRETS:
        assert secret not in shown


GITHUB = "Zq7-ghp-51a0e2"
PAT = "Zq7-pat-0d44"
CONFIG_KEY = "Zq7-cfg-8e21aa"
SHORT = "Zq7s"  # shorter than a secret masked wherever it appears: masked where it is read


@pytest.mark.parametrize("shape", ["argv", "sh -c"])
async def test_secrets_in_env_json_and_shell_string_shapes_reach_no_output(
    workdir: Path, tmp_path: Path, shape: str
) -> None:
    # docker's `--env=NAME=VALUE`, a JSON settings argument, `--pat`, and all of it inside
    # one shell string (`sh -c 'exec server ...'`), as MCP client configs spell servers.
    pid_file = tmp_path / "server.pid"
    stderr = tmp_path / "stderr"
    arguments = [
        "--pid-file",
        str(pid_file),
        f"--env=GITHUB_TOKEN={GITHUB}",
        "--pat",
        PAT,
        "--config",
        json.dumps({"apiKey": CONFIG_KEY, "model": "m"}),
        "--token",
        SHORT,
    ]
    server = server_command(*arguments)
    if shape == "sh -c":
        server = ["sh", "-c", f"exec {shlex.join(server)}"]
    said: list[str] = []
    async with proxied(workdir, server=server, stderr=stderr) as client:
        assert text_of(await client.call_tool("echo", {"text": "hi"})) == "hi"
        os.kill(pid_in(pid_file), signal.SIGKILL)
        for _ in range(3):  # the first request may still be the one that sees it close
            with pytest.raises(MCPError) as gone:
                await client.call_tool("echo", {"text": "again"})
            said.append(gone.value.message)
    assert process_gone(pid_in(pid_file))
    assert "closed the connection" in said[-1] and "GITHUB_TOKEN=***" in said[-1]
    shown = _everything_shown(workdir, stderr, said)
    assert '"apiKey": "***"' in shown or '\\"apiKey\\": \\"***\\"' in shown
    for secret in (GITHUB, PAT, CONFIG_KEY, SHORT):
        assert secret not in shown, secret


def test_a_wrapped_command_that_cannot_start_is_named_without_its_secrets(
    workdir: Path, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-server")
    done = subprocess.run(
        proxy_command(workdir, server=[missing, f"--api-key={KEY}", "--token", TOKEN]),
        capture_output=True,
        text=True,
        input="",
    )
    assert done.returncode == 2
    assert done.stderr.startswith("ctxoffload mcp-proxy: could not start or reach the wrapped")
    assert missing in done.stderr and "'--api-key=***' --token '***'" in done.stderr
    assert KEY not in done.stderr and TOKEN not in done.stderr


async def _http_server(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    port_file = tmp_path / "port"
    server = subprocess.Popen([*server_command("--http", str(port_file))])
    with anyio.fail_after(60):
        await wait_for_file(port_file)
    return server, int(port_file.read_text(encoding="utf-8"))


async def test_secrets_in_the_wrapped_url_reach_no_output(workdir: Path, tmp_path: Path) -> None:
    server, port = await _http_server(tmp_path)
    stderr = tmp_path / "stderr"
    url = f"http://agent:{PASSWORD}@127.0.0.1:{port}/mcp?api_key={KEY}&token={TOKEN}"
    said: list[str] = []
    try:
        async with proxied(workdir, url=url, stderr=stderr) as client:
            assert text_of(await client.call_tool("echo", {"text": "via http"})) == "via http"
            server.terminate()
            server.wait(timeout=60)
            # The refused connection fails the call at once (not after --timeout's 600 s).
            with anyio.fail_after(60), pytest.raises(MCPError) as gone:
                await client.call_tool("echo", {"text": "again"})
            said.append(gone.value.message)
            assert "is gone" in said[0]
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(timeout=60)
    assert f"http://***@127.0.0.1:{port}/mcp?api_key=***&token=***" in said[0]
    shown = _everything_shown(workdir, stderr, said)
    for secret in SECRETS:
        assert secret not in shown


async def test_a_url_the_server_refuses_is_named_without_its_secrets(
    workdir: Path, tmp_path: Path
) -> None:
    server, port = await _http_server(tmp_path)
    try:
        # A path the server does not serve: the HTTP client's error quotes the whole URL.
        url = f"http://agent:{PASSWORD}@127.0.0.1:{port}/no-such-path?api_key={KEY}"
        done = subprocess.run(
            proxy_command(workdir, url=url), capture_output=True, text=True, input=""
        )
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("ctxoffload mcp-proxy: could not start or reach the wrapped")
    assert f"127.0.0.1:{port}/no-such-path" in done.stderr
    assert PASSWORD not in done.stderr and KEY not in done.stderr
