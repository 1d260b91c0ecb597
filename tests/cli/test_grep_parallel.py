"""`ctxoffload grep` over many sessions in two processes: what it prints is byte for byte
what one process prints (stdout, stderr in between, exit status), sessions in order, with
every refusal kept in the child's half too; a child that dies, holds too much or cannot be
started leaves its sessions to the parent, and a parent that stops ends its child."""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace, Msg, ToolResultBlock
from ctxoffload.cli import _grep_parallel
from ctxoffload.cli._grep_sessions import WorkspaceSearch

SESSIONS = [f"s{n:03d}" for n in range(40)]
# The child searches the second half: s020 to s039.

# `ctxoffload grep ARGS` in a fresh interpreter, two processes from PARALLEL_FROM sessions
# (argv[1]); stdout and stderr go to one pipe, so their order is seen. How many forks were
# made is written to the file argv[2].
RUN = """
import os, sys
from ctxoffload.cli import _grep_parallel, main
_grep_parallel.PARALLEL_FROM = int(sys.argv[1])
_grep_parallel._busy = lambda cpus: False  # (the machine running the tests may be busy)
forks, fork = [], os.fork
def counted():
    pid = fork()
    if pid:
        forks.append(pid)
    return pid
os.fork = counted
code = main(sys.argv[3:])
with open(sys.argv[2], "w") as f:
    f.write(str(len(forks)))
sys.exit(code)
"""


def _hostile_workspace(tmp_path: Path) -> Path:
    """40 sessions, each with `needle` in a tool result and a message, and in both halves a
    binary file, a hard-linked file, a session folder and a file replaced by links to a
    folder outside, a record holding `needle`, an escape sequence in a line and in a file's
    name; and memories/."""
    workdir = tmp_path / "ws"
    ws = LocalWorkspace(workdir, fsync=False)

    async def fill() -> None:
        for name in SESSIONS:
            output = f"needle in {name}\nno match\n"
            await ws.offload_tool_result(name, ToolResultBlock(id="c1", name="f", output=output))
            await ws.offload_context(
                name,
                [Msg(role="user", content=f"needle said in {name}"), Msg(role="user", content="x")],
            )

    asyncio.run(fill())
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "tool_result-c1.txt").write_text("needle OUTSIDE\n")
    sessions = workdir / "sessions"
    for first, second in (("s005", "s025"), ("s006", "s026"), ("s007", "s027")):
        (sessions / first / "tool_result-bin.txt").write_bytes(b"needle\0binary\n")
        (sessions / second / "tool_result-bin.txt").write_bytes(b"needle\0binary\n")
    for name in ("s008", "s028"):
        os.link(sessions / name / "tool_result-c1.txt", tmp_path / f"second-name-{name}")
        (sessions / name / "state.json").write_text('{"needle": "STATE"}\n')
        (sessions / name / "tool_result-esc.txt").write_bytes(b"needle \x1b[2J\x1b]0;title\x07\n")
        (sessions / name / "tool_result-\x1b[31m.txt").write_bytes(b"needle in a named file\n")
    for name in ("s009", "s029"):
        for entry in (sessions / name).iterdir():
            entry.unlink()
        (sessions / name).rmdir()
        (sessions / name).symlink_to(outside, target_is_directory=True)
    for name in ("s010", "s030"):
        (sessions / name / "tool_result-c1.txt").unlink()
        (sessions / name / "tool_result-c1.txt").symlink_to(outside / "tool_result-c1.txt")
    (workdir / "memories").mkdir()
    (workdir / "memories" / "notes.md").write_text("needle remembered\n")
    return workdir


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    return _hostile_workspace(tmp_path)


def _run(tmp_path: Path, parallel_from: int, *args: str | Path) -> tuple[int, bytes, int]:
    """Exit status, stdout and stderr as one stream, and the forks made."""
    forks = tmp_path / f"forks-{parallel_from}"
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(parallel_from), str(forks), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
    )
    return done.returncode, done.stdout, int(forks.read_text())


@pytest.mark.parametrize(
    "args",
    [["needle"], ["needle", "--writers"], ["-i", "NEEDLE", "--events"], ["-F", "no match"]],
)
def test_two_processes_print_byte_for_byte_what_one_prints(
    hostile: Path, tmp_path: Path, args: list[str]
) -> None:
    code, out, forks = _run(tmp_path, 2, "grep", *args, "--workdir", hostile)
    assert forks == 1
    assert (code, out) == _run(tmp_path, 10_000, "grep", *args, "--workdir", hostile)[:2]
    assert b"OUTSIDE" not in out and b"STATE" not in out and b"\x1b" not in out
    if args == ["needle"]:
        assert code == 2  # the hard-linked files, said on stderr
        lines = out.decode().splitlines()
        sessions = [line.split("/sessions/")[1][:4] for line in lines if "/sessions/" in line]
        assert sessions == sorted(sessions) and "s039" in sessions
        assert lines[-1].endswith("memories/notes.md:1:needle remembered")
        assert sum("binary file" in line for line in lines) == 6
        assert sum("hard links" in line for line in lines) == 2


def test_the_lines_of_each_session_stay_in_order_across_many(tmp_path: Path) -> None:
    """More output than one frame of the child's, in session order."""
    workdir = tmp_path / "ws"
    ws = LocalWorkspace(workdir, fsync=False)
    names = [f"s{n:04d}" for n in range(300)]

    async def fill() -> None:
        for name in names:
            output = "".join(f"needle {name} {i} {'x' * 200}\n" for i in range(20))
            await ws.offload_tool_result(name, ToolResultBlock(id="c1", name="f", output=output))

    asyncio.run(fill())
    code, out, forks = _run(tmp_path, 2, "grep", "needle", "--workdir", workdir)
    assert forks == 1 and code == 0
    assert out == _run(tmp_path, 10_000, "grep", "needle", "--workdir", workdir)[1]
    assert len(out) > 1 << 20  # past the pipe and many frames
    found = [line.split(b" ")[1:3] for line in out.splitlines()]
    assert found == [[n.encode(), str(i).encode()] for n in names for i in range(20)]


def test_a_search_in_two_processes_holds_few_descriptors(hostile: Path) -> None:
    limited = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40)); "
        "from ctxoffload.cli import _grep_parallel, main; _grep_parallel.PARALLEL_FROM = 2; "
        "_grep_parallel._busy = lambda cpus: False; "
        "sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", limited, "grep", "needle", "--workdir", str(hostile)],
        capture_output=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert b"Too many open files" not in done.stderr
    assert done.stdout.count(b"needle said in") == 38  # (two session folders are links)


@pytest.fixture
def two_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Two processes from 2 sessions on, however busy the machine; the children forked,
    by pid."""
    monkeypatch.setattr(_grep_parallel, "PARALLEL_FROM", 2)
    monkeypatch.setattr(_grep_parallel, "_busy", lambda cpus: False)
    forks: list[int] = []
    fork = os.fork

    def counted() -> int:
        pid = fork()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", counted)
    yield forks
    for pid in forks:  # each was reaped by the search
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _one_process(cli: Callable[..., Any], workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setattr(_grep_parallel, "PARALLEL_FROM", 10_000)
        return cli("grep", "needle", "--workdir", workdir)


def test_a_session_folder_swapped_for_a_link_during_the_search_is_not_followed(
    hostile: Path,
    tmp_path: Path,
    cli: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    two_processes: list[int],
) -> None:
    """s002 (the parent's) and s022 (the child's) are swapped for a link to a folder outside
    just before each is searched, s003 and s023 as their context.jsonl is about to be: the
    first is passed over, the second searched through the folder already held."""
    sessions = hostile / "sessions"
    expected = _one_process(cli, hostile, monkeypatch)
    outside = tmp_path / "outside"
    session, file = WorkspaceSearch.session, WorkspaceSearch._file

    def swap(name: str) -> None:
        os.rename(sessions / name, tmp_path / f"moved-{name}")
        (sessions / name).symlink_to(outside, target_is_directory=True)

    def swapping_session(self: WorkspaceSearch, name: str) -> None:
        if name in ("s002", "s022"):
            swap(name)
        session(self, name)

    def swapping_file(self: WorkspaceSearch, folder: Any, name: str, *rest: Any) -> None:
        if name == "context.jsonl" and folder.parts[-1] in ("s003", "s023"):
            swap(folder.parts[-1])
        file(self, folder, name, *rest)

    monkeypatch.setattr(WorkspaceSearch, "session", swapping_session)
    monkeypatch.setattr(WorkspaceSearch, "_file", swapping_file)
    result = cli("grep", "needle", "--workdir", hostile)
    assert len(two_processes) == 1
    assert "OUTSIDE" not in result.out
    dropped = [line for line in expected.out.splitlines() if "/s002/" in line or "/s022/" in line]
    assert len(dropped) == 4
    assert result.out.splitlines() == [
        line for line in expected.out.splitlines() if line not in dropped
    ]
    assert "s003/context.jsonl:1:needle said in s003" in result.out
    assert "s023/context.jsonl:1:needle said in s023" in result.out


@pytest.mark.parametrize("send_at", [1, 1 << 16])
def test_a_child_that_dies_leaves_its_sessions_to_the_parent(
    hostile: Path,
    cli: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    two_processes: list[int],
    send_at: int,
) -> None:
    """The child dies in s031, after printing its tool result's line, having committed each
    session before (`send_at` 1) or none: the parent searches from the first it did not
    commit, and prints that line once."""
    expected = _one_process(cli, hostile, monkeypatch)
    monkeypatch.setattr(_grep_parallel, "_SEND_AT", send_at)
    parent, file = os.getpid(), WorkspaceSearch._file

    def dying_file(self: WorkspaceSearch, folder: Any, name: str, *rest: Any) -> None:
        if os.getpid() != parent and name == "context.jsonl" and folder.parts[-1] == "s031":
            os._exit(9)
        file(self, folder, name, *rest)

    monkeypatch.setattr(WorkspaceSearch, "_file", dying_file)
    result = cli("grep", "needle", "--workdir", hostile)
    assert len(two_processes) == 1
    assert (result.code, result.out, result.err) == (expected.code, expected.out, expected.err)
    assert result.out.count("needle in s031") == 1


def test_a_session_printing_more_than_the_child_holds_is_left_to_the_parent(
    hostile: Path,
    cli: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    two_processes: list[int],
) -> None:
    expected = _one_process(cli, hostile, monkeypatch)
    monkeypatch.setattr(_grep_parallel, "_HELD_AT_MOST", 100)  # less than one session's lines
    result = cli("grep", "needle", "--workdir", hostile)
    assert len(two_processes) == 1
    assert (result.code, result.out, result.err) == (expected.code, expected.out, expected.err)


@pytest.mark.parametrize("refused", ["pipe", "fork"])
def test_without_a_pipe_or_a_process_one_process_searches_all(
    hostile: Path,
    cli: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    two_processes: list[int],
    refused: str,
) -> None:
    expected = _one_process(cli, hostile, monkeypatch)

    def refuse(*args: Any) -> Any:
        raise OSError(errno.EMFILE if refused == "pipe" else errno.EAGAIN, "refused")

    monkeypatch.setattr(os, refused, refuse)
    result = cli("grep", "needle", "--workdir", hostile)
    assert (result.code, result.out, result.err) == (expected.code, expected.out, expected.err)


@pytest.mark.parametrize("when", ["searching", "waiting"])
def test_a_parent_stopped_by_ctrl_c_ends_its_child(
    hostile: Path,
    cli: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    two_processes: list[int],
    when: str,
) -> None:
    """Ctrl-C in the parent's half, or while it waits for a child stuck in s025 (a minute,
    were it not ended): the child is ended and reaped, not waited for."""
    parent, session, read = os.getpid(), WorkspaceSearch.session, os.read

    def interrupted(self: WorkspaceSearch, name: str) -> None:
        if os.getpid() == parent and name == "s004" and when == "searching":
            raise KeyboardInterrupt
        if os.getpid() != parent and name == "s025":
            time.sleep(60)
        session(self, name)

    def interrupted_read(fd: int, size: int) -> bytes:
        if os.getpid() == parent:
            raise KeyboardInterrupt
        return read(fd, size)

    monkeypatch.setattr(WorkspaceSearch, "session", interrupted)
    if when == "waiting":
        monkeypatch.setattr(os, "read", interrupted_read)
    result = cli("grep", "needle", "--workdir", hostile)
    assert result.code == 130
    assert len(two_processes) == 1  # and reaped (the fixture checks)
    assert "s020" not in result.out


def test_json_and_context_lines_stay_in_one_process(
    hostile: Path, cli: Callable[..., Any], two_processes: list[int]
) -> None:
    cli("grep", "--json", "needle", "--workdir", hostile)
    cli("grep", "-C", "1", "needle", "--workdir", hostile)
    assert two_processes == []


def test_no_second_process_when_no_cpu_is_idle(
    hostile: Path,
    cli: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    two_processes: list[int],
) -> None:
    expected = _one_process(cli, hostile, monkeypatch)
    monkeypatch.setattr(_grep_parallel, "_busy", lambda cpus: True)
    result = cli("grep", "needle", "--workdir", hostile)
    assert two_processes == []
    assert (result.code, result.out, result.err) == (expected.code, expected.out, expected.err)


def test_the_machine_is_busy_when_as_many_tasks_run_as_there_are_cpus() -> None:
    with open("/proc/loadavg", "rb") as f:
        runnable = int(f.read().split()[3].split(b"/")[0])
    assert runnable >= 1  # this test itself
    assert _grep_parallel._busy(1)  # one CPU: this process takes it
    assert not _grep_parallel._busy(10_000)
