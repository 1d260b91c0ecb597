"""`ctxoffload mcp-proxy` attacked: the wrapped server killed mid-call, answers the MCP SDK's
parser refuses, a client that goes away mid-call, hostile session ids, read-back tools asked
to leave the workspace, two proxies on one workspace, one session claimed twice; and the HTTP
form."""

from __future__ import annotations

from frameworks import require_framework

require_framework("mcp", "mcp")

import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from pathlib import Path  # noqa: E402

import anyio  # noqa: E402
import pytest  # noqa: E402
from mcp import MCPError  # noqa: E402
from mcp_proxy import (  # noqa: E402
    SERVER,
    events,
    pid_in,
    process_gone,
    proxied,
    proxy_command,
    server_command,
    sessions,
    stored_path,
    text_of,
    wait_for_file,
)
from mcp_server import big_text  # noqa: E402

BOUND = 60.0
"""Seconds within which an answer must come where a hang is the failure looked for (far above
what it takes: it guards the run, it measures nothing)."""


async def test_the_wrapped_server_killed_mid_call_gives_an_error_not_a_hang(
    workdir: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "hang.pid"
    async with proxied(workdir) as client:
        stored = await client.call_tool("big", {"total_bytes": 50_000, "marker_line": 99})
        path = stored_path(text_of(stored))
        with anyio.fail_after(BOUND):
            async with anyio.create_task_group() as group:

                async def kill() -> None:
                    await wait_for_file(pid_file)
                    os.kill(pid_in(pid_file), signal.SIGKILL)

                group.start_soon(kill)
                with pytest.raises(MCPError) as crashed:
                    await client.call_tool("hang", {"pid_file": str(pid_file)})
            assert "closed the connection" in crashed.value.message
            assert "tools/call 'hang'" in crashed.value.message
            # Every later call of a wrapped tool fails at once, saying the same.
            with pytest.raises(MCPError) as later:
                await client.call_tool("echo", {"text": "x"})
            assert later.value.message == crashed.value.message
        # The read-back tools still work, on what was stored before.
        found = await client.call_tool("Grep", {"pattern": "MARKER", "path_or_glob": str(path)})
        assert "MARKER-FOUND-HERE" in text_of(found)
    (session,) = sessions(workdir)
    calls = [e for e in events(workdir, session) if e["kind"] == "tool_call"]
    assert [(c["name"], c["outcome"]) for c in calls][1:3] == [("hang", "error"), ("echo", "error")]


async def test_after_the_wrapped_server_dies_the_read_back_tools_are_still_listed(
    workdir: Path, tmp_path: Path
) -> None:
    """A client that lists the tools again before calling one (as clients do after a
    reconnect) still finds Read, Grep, Glob and retrieve, and is told why the rest went."""
    pid_file = tmp_path / "server.pid"
    async with proxied(workdir, server=server_command("--pid-file", str(pid_file))) as client:
        stored = await client.call_tool("big", {"total_bytes": 50_000, "marker_line": 99})
        path = stored_path(text_of(stored))
        os.kill(pid_in(pid_file), signal.SIGKILL)
        while not process_gone(pid_in(pid_file)):
            await anyio.sleep(0.02)
        with anyio.fail_after(BOUND):
            listed = await client.list_tools()
        assert [t.name for t in listed.tools] == [
            "Read",
            "Grep",
            "Glob",
        ]
        assert "is gone" in listed.meta["ctxoffload/wrapped-server-gone"]
        found = await client.call_tool("Grep", {"pattern": "MARKER", "path_or_glob": str(path)})
        assert "MARKER-FOUND-HERE" in text_of(found)


RAW_SERVER = [sys.executable, str(SERVER.with_name("mcp_raw_server.py"))]
"""The wrapped server written by hand (mcp_raw_server.py)."""


async def test_an_answer_holding_a_lone_surrogate_escape_arrives_and_is_stored(
    workdir: Path, tmp_path: Path
) -> None:
    """Valid JSON the SDK's parser refuses: without the proxy reading it again, the call
    waits for --timeout (600 s) and its answer is lost. The SDK's traceback for the line it
    refused is left out of the proxy's stderr, since the answer arrived."""
    stderr = tmp_path / "proxy.stderr"
    async with proxied(workdir, server=RAW_SERVER, stderr=stderr) as client:
        with anyio.fail_after(BOUND):
            result = await client.call_tool("cut_emoji", {"total_bytes": 50_000})
    stored = stored_path(text_of(result)).read_text(encoding="utf-8")
    assert stored == f"start \ufffd{big_text(50_000, 0)} end \ufffd"
    assert "Traceback" not in stderr.read_text(encoding="utf-8")


async def test_a_line_the_proxy_cannot_read_again_is_still_logged(
    workdir: Path, tmp_path: Path
) -> None:
    """What the SDK logs of a line that is no JSON at all (no answer the proxy could read
    again) stays on the proxy's stderr."""
    stderr = tmp_path / "proxy.stderr"
    async with proxied(workdir, server=RAW_SERVER, stderr=stderr) as client:
        with anyio.fail_after(BOUND):
            assert text_of(await client.call_tool("noise", {"text": "x"})) == "x"
    logged = stderr.read_text(encoding="utf-8")
    assert "Failed to parse JSONRPC message from server" in logged
    assert "this line is no JSON" in logged


async def test_an_answer_that_cannot_be_read_fails_its_call_at_once(workdir: Path) -> None:
    async with proxied(workdir, server=RAW_SERVER) as client:
        with anyio.fail_after(BOUND), pytest.raises(MCPError) as unread:
            await client.call_tool("cut_emoji_no_object", {})
        assert unread.value.code == -32700
        assert "answer could not be read" in unread.value.message
        assert text_of(await client.call_tool("echo", {"text": "still here"})) == "still here"


@contextlib.asynccontextmanager
async def _raw_server_over_http(tmp_path: Path, *options: str) -> AsyncIterator[str]:
    """The hand-written server over streamable HTTP (`--sse`: each answer an event stream); its
    URL."""
    port_file = tmp_path / "raw-port"
    server = subprocess.Popen([*RAW_SERVER, "--http", str(port_file), *options])
    try:
        with anyio.fail_after(BOUND):
            await wait_for_file(port_file)
        yield f"http://127.0.0.1:{port_file.read_text(encoding='utf-8')}/mcp"
    finally:
        server.terminate()
        server.wait(timeout=BOUND)


@pytest.mark.parametrize("answers", ["json", "sse", "json-gzip", "sse-gzip"])
async def test_over_http_an_answer_holding_a_lone_surrogate_escape_arrives_and_is_stored(
    workdir: Path, tmp_path: Path, answers: str
) -> None:
    """Over HTTP the SDK fails such an answer at once (-32700) instead of dropping it: read
    again, it arrives as it does over stdio, whether the body is JSON or an event stream,
    compressed or not."""
    options = [f"--{part}" for part in answers.split("-") if part != "json"]
    stderr = tmp_path / "proxy.stderr"
    async with (
        _raw_server_over_http(tmp_path, *options) as url,
        proxied(workdir, url=url, stderr=stderr) as client,
    ):
        with anyio.fail_after(BOUND):
            result = await client.call_tool("cut_emoji", {"total_bytes": 50_000})
        stored = stored_path(text_of(result)).read_text(encoding="utf-8")
        assert stored == f"start \ufffd{big_text(50_000, 0)} end \ufffd"
        assert "Traceback" not in stderr.read_text(encoding="utf-8")
        with anyio.fail_after(BOUND), pytest.raises(MCPError) as unread:
            await client.call_tool("cut_emoji_no_object", {})
        assert unread.value.code == -32700
        assert text_of(await client.call_tool("echo", {"text": "still here"})) == "still here"


async def test_over_http_an_event_stream_answer_over_a_mebibyte_arrives_and_is_stored(
    workdir: Path, tmp_path: Path
) -> None:
    """The SDK bounds one event of an event stream to 1 MiB, and a server answering with
    event streams (the SDKs' servers do by default) sends a result as one event: without the
    proxy lifting the bound, a result of 2 MB, the kind the proxy is for, failed its call."""
    async with (
        _raw_server_over_http(tmp_path, "--sse") as url,
        proxied(workdir, url=url) as client,
    ):
        with anyio.fail_after(BOUND):
            result = await client.call_tool("cut_emoji", {"total_bytes": 2_000_000})
        stored = stored_path(text_of(result)).read_text(encoding="utf-8")
        assert stored == f"start \ufffd{big_text(2_000_000, 0)} end \ufffd"


def _send(process: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


def test_a_client_that_goes_away_mid_call_ends_the_proxy_and_its_server(
    workdir: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "hang.pid"
    server_pid_file = tmp_path / "server.pid"
    command = proxy_command(workdir, server=server_command("--pid-file", str(server_pid_file)))
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        _send(
            process,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "a test", "version": "1"},
                },
            },
        )
        assert json.loads(process.stdout.readline())["id"] == 1
        _send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(
            process,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "hang", "arguments": {"pid_file": str(pid_file)}},
            },
        )
        anyio.run(wait_for_file, pid_file)
        assert process.stdin is not None
        process.stdin.close()  # the client is gone
        assert process.wait(timeout=BOUND) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()
    assert process_gone(pid_in(server_pid_file))
    (session,) = sessions(workdir)
    (call,) = [e for e in events(workdir, session) if e["kind"] == "tool_call"]
    assert call["name"] == "hang" and call["error"]["message"] == "Error: cancelled by the client"
    # The lease went with the process: the session can be taken again.
    assert not (workdir / "sessions" / session / "lease.json").exists() or _lease_free(
        workdir, session
    )


def _lease_free(workdir: Path, session: str) -> bool:
    import asyncio

    from ctxoffload import LocalWorkspace
    from ctxoffload.workspace import take_lease

    async def take() -> bool:
        lease = await take_lease(LocalWorkspace(workdir), session, "a test")
        if lease is not None:
            await lease.release()
        return True

    return asyncio.run(take())


@pytest.mark.parametrize(
    "session", ["../x", "/etc", "a/b", "", ".hidden", "x" * 129, "a\\b", "é", "a b", "..\\x"]
)
def test_a_hostile_session_id_is_refused_before_anything_is_touched(
    workdir: Path, session: str
) -> None:
    done = subprocess.run(
        proxy_command(workdir, "--session", session), capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.startswith("ctxoffload mcp-proxy: --session: session_id ")
    assert "is not a plain name" in done.stderr
    assert not workdir.exists()


async def test_the_read_back_tools_cannot_leave_the_workspace(
    workdir: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("SECRET-OUTSIDE\n", encoding="utf-8")
    async with proxied(workdir) as client:
        await client.call_tool("big", {"total_bytes": 50_000})
        (session,) = sessions(workdir)
        folder = workdir / "sessions" / session
        (folder / "planted.txt").symlink_to(secret)
        (folder / "planted_dir").symlink_to(tmp_path)
        attempts = [
            ("Read", {"path": "../outside.txt"}),
            ("Read", {"path": str(secret)}),
            ("Read", {"path": "/etc/passwd"}),
            ("Read", {"path": str(folder / "planted.txt")}),
            ("Read", {"path": str(folder / "planted_dir" / "outside.txt")}),
            ("Grep", {"pattern": "SECRET", "path_or_glob": str(tmp_path)}),
            ("Grep", {"pattern": "SECRET", "path_or_glob": "../*.txt"}),
            ("Grep", {"pattern": "SECRET", "path_or_glob": "**/*"}),
            ("Grep", {"pattern": "root", "path_or_glob": "/etc/passwd"}),
            ("Glob", {"pattern": "../*"}),
            ("Glob", {"pattern": "/etc/*"}),
        ]
        for name, arguments in attempts:
            result = await client.call_tool(name, arguments)
            answer = text_of(result)
            # Refused as an error, or (a search over the workspace) finding nothing outside.
            assert result.is_error or name == "Grep", (name, arguments, answer)
            assert "SECRET-OUTSIDE" not in answer, (name, arguments, answer)
            assert "root:" not in answer, (name, arguments, answer)
            assert str(secret) not in answer or name != "Glob", answer
    assert secret.read_text(encoding="utf-8") == "SECRET-OUTSIDE\n"


async def test_two_proxies_on_one_workspace_keep_separate_sessions_and_lose_nothing(
    workdir: Path,
) -> None:
    paths: dict[int, Path] = {}

    async def one(marker: int) -> None:
        async with proxied(workdir) as client:
            for round_ in range(3):
                result = await client.call_tool(
                    "big", {"total_bytes": 400_000 + round_, "marker_line": marker + round_}
                )
                paths[marker + round_] = stored_path(text_of(result))

    with anyio.fail_after(BOUND * 2):
        async with anyio.create_task_group() as group:
            group.start_soon(one, 1_000)
            group.start_soon(one, 2_000)
    assert len(sessions(workdir)) == 2
    assert len({p.parent for p in paths.values()}) == 2
    for marker, path in paths.items():
        base = 1_000 if marker < 2_000 else 2_000
        expected = big_text(400_000 + marker - base, marker)
        assert path.read_text(encoding="utf-8") == expected
    for session in sessions(workdir):
        calls = [e for e in events(workdir, session) if e["kind"] == "tool_call"]
        assert [c["outcome"] for c in calls] == ["ok"] * 3


async def test_a_session_held_by_a_live_proxy_is_refused_to_a_second(
    workdir: Path, tmp_path: Path
) -> None:
    async with proxied(workdir, "--session", "shared") as client:
        await client.call_tool("echo", {"text": "first"})
        started = tmp_path / "second-server.pid"
        done = subprocess.run(
            proxy_command(
                workdir, "--session", "shared", server=server_command("--pid-file", str(started))
            ),
            capture_output=True,
            text=True,
            input="",
            timeout=BOUND,
        )
        assert done.returncode == 2
        assert done.stderr.startswith("ctxoffload mcp-proxy: ")
        assert "shared" in done.stderr and "pid" in done.stderr
        # Refused before its wrapped server was started (the lease is taken first).
        assert not started.exists()
        assert text_of(await client.call_tool("echo", {"text": "still"})) == "still"


def test_a_server_that_cannot_start_is_said_in_one_line(workdir: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-server")
    done = subprocess.run(
        proxy_command(workdir, server=[missing]), capture_output=True, text=True, input=""
    )
    assert done.returncode == 2
    assert done.stderr.startswith("ctxoffload mcp-proxy: could not start or reach the wrapped")
    assert missing in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


async def test_the_http_form_proxies_a_server_reached_by_url(workdir: Path, tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    server = subprocess.Popen([*server_command("--http", str(port_file))])
    try:
        with anyio.fail_after(BOUND):
            await wait_for_file(port_file)
        url = f"http://127.0.0.1:{port_file.read_text(encoding='utf-8')}/mcp"
        async with proxied(workdir, url=url) as client:
            result = await client.call_tool("big", {"total_bytes": 200_000, "marker_line": 5})
            path = stored_path(text_of(result))
            assert path.read_text(encoding="utf-8") == big_text(200_000, 5)
            assert text_of(await client.call_tool("echo", {"text": "via http"})) == "via http"
    finally:
        server.terminate()
        server.wait(timeout=BOUND)
