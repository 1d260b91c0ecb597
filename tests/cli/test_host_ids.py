"""Every command that takes a session takes the host's own id of a conversation (a LangGraph
`thread_id` such as `team/alice:42`) and finds the session a door stored it in, by the one
rule every door follows; the folder's own name works as well. Run as a user runs them: the
real `ctxoffload` command, in a process of its own."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxoffload import LocalWorkspace, Msg
from ctxoffload._doors.identity import conversation_session

THREAD = "team/alice:42"


def ctxoffload(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxoffload", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def stored(tmp_path: Path) -> str:
    """A workspace in `tmp_path/ws` holding the thread's session, as a door writes it (its
    folder named by `conversation_session`): a message moved out, a tool result stored."""

    async def write() -> None:
        ws = LocalWorkspace(tmp_path / "ws", fsync=False)
        session = conversation_session(THREAD)
        await ws.offload_context(session, msgs=[Msg(role="user", content="find ORD-58213")])
        await ws.offload_tool_result(
            session, {"id": "call_1", "name": "fetch", "output": "ORD-58213 failed\n"}
        )

    asyncio.run(write())
    return conversation_session(THREAD)


@pytest.mark.parametrize(
    "command",
    [
        ["show", THREAD],
        ["grep", "ORD-58213", THREAD],
        ["stats", THREAD],
        ["verify", THREAD],
        ["purge", "--dry-run", THREAD],
        ["export", THREAD, "out"],
        ["fork", THREAD, "--as", "retry"],
        ["compact", THREAD, "--wait", "0"],
    ],
    ids=lambda c: c[0],
)
def test_a_command_finds_a_session_by_the_hosts_own_id(
    tmp_path: Path, stored: str, command: list[str]
) -> None:
    done = ctxoffload(*command, "--workdir", "ws", cwd=tmp_path)
    if command[0] in ("fork", "compact"):
        # It found the session: what it refuses next is about the session itself (no saved
        # state to fork from, no window to compact to), named by its folder.
        why = "has no saved state" if command[0] == "fork" else "recorded no context window"
        assert done.returncode == 2 and f"session {stored!r} {why}" in done.stderr, done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert stored in done.stdout or command[0] == "verify", done.stdout
    if command[0] == "export":
        assert (tmp_path / "out" / "sessions" / stored / "tool_result-call_1.txt").is_file()


def test_the_folder_name_as_ls_lists_it_works_too(tmp_path: Path, stored: str) -> None:
    [row] = json.loads(ctxoffload("ls", "--json", "--workdir", "ws", cwd=tmp_path).stdout)
    assert row["session"] == stored
    done = ctxoffload("show", stored, "--workdir", "ws", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.split()[:2] == ["session", stored], done.stderr


def test_an_id_that_names_no_session_says_which_folder_it_looked_for(
    tmp_path: Path, stored: str
) -> None:
    done = ctxoffload("show", "team/bob:7", "--workdir", "ws", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    looked = conversation_session("team/bob:7")
    assert done.stderr == (
        f"ctxoffload show: no session 'team/bob:7' (a host's id, stored as {looked!r}) in "
        f"{str(tmp_path / 'ws')!r} (it has {stored}): `ctxoffload ls` lists the sessions\n"
    )


def test_a_path_given_as_a_session_reads_nothing_outside(tmp_path: Path, stored: str) -> None:
    """`../ws` is taken as a host's id like any other: a plain folder name, never a path."""
    secret = tmp_path / "ws" / "sessions" / stored
    done = ctxoffload("grep", "ORD", f"../ws/sessions/{stored}", "--workdir", "ws", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "" and "a host's id" in done.stderr
    assert secret.is_dir()
