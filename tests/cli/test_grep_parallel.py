"""`ctxoffload grep` over many sessions in two processes: what it prints is byte for byte
what one process prints (stdout, stderr in between, exit status), sessions in order, with
every refusal kept in the child's half too; a child that dies, holds too much or cannot be
started leaves its sessions to the parent, and a parent that stops ends its child.

Each search runs in a fresh interpreter (`_run`): a process with other threads never forks
(a pytest-xdist worker has some), and the faults (`fault_*`, below) are set in it.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace, ToolResultBlock
from ctxoffload.cli import _grep_parallel
from ctxoffload.cli._grep_sessions import WorkspaceSearch
from helpers import needle_sessions

SESSIONS = [f"s{n:03d}" for n in range(40)]
# The child searches the second part: s016 to s039 (`_PARENT_SHARE`).

# `ctxoffload grep ARGS` in a fresh interpreter, two processes from PARALLEL_FROM sessions
# (argv[1]) however busy the machine, with the fault argv[3] set (`fault_NAME` of this
# module, given the workdir); stdout and stderr go to one pipe, so their order is seen. The
# forks made, and whether each child was reaped, are written to the file argv[2].
RUN = """
import os, sys
from ctxoffload.cli import _grep_parallel, main
_grep_parallel.PARALLEL_FROM = int(sys.argv[1])
_grep_parallel._busy = lambda cpus: False
forks, fork = [], os.fork
def counted():
    pid = fork()
    if pid:
        forks.append(pid)
    return pid
os.fork = counted
if sys.argv[3] != "none":
    sys.path[:0] = [TESTS, os.path.dirname(TESTS)]  # (it imports the tests' helpers)
    import test_grep_parallel
    getattr(test_grep_parallel, "fault_" + sys.argv[3])(sys.argv[sys.argv.index("--workdir") + 1])
code = main(sys.argv[4:])
def reaped(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False
with open(sys.argv[2], "w") as f:
    f.write(f"{len(forks)} {all(map(reaped, forks))}")
sys.exit(code)
""".replace("TESTS", repr(str(Path(__file__).parent)))


def _hostile_workspace(tmp_path: Path) -> Path:
    """40 sessions, each with `needle` in a tool result and a message, and in both halves a
    binary file, a hard-linked file, a session folder and a file replaced by links to a
    folder outside, a record holding `needle`, an escape sequence in a line and in a file's
    name; and memories/."""
    workdir = tmp_path / "ws"
    needle_sessions(workdir, SESSIONS)
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


def _run(
    tmp_path: Path, parallel_from: int, *args: str | Path, fault: str = "none"
) -> tuple[int, bytes, int]:
    """Exit status, stdout and stderr as one stream, and the forks made (each reaped)."""
    forks = tmp_path / f"forks-{parallel_from}-{fault}"
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(parallel_from), str(forks), fault, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
    )
    made, reaped = forks.read_text().split()
    assert reaped == "True"
    return done.returncode, done.stdout, int(made)


def _one_process(tmp_path: Path, workdir: Path) -> tuple[int, bytes]:
    return _run(tmp_path, 10**9, "grep", "needle", "--workdir", workdir)[:2]


@pytest.mark.parametrize(
    "args",
    [["needle"], ["needle", "--writers"], ["-i", "NEEDLE", "--events"], ["-F", "no match"]],
)
def test_two_processes_print_byte_for_byte_what_one_prints(
    hostile: Path, tmp_path: Path, args: list[str]
) -> None:
    code, out, forks = _run(tmp_path, 2, "grep", *args, "--workdir", hostile)
    assert forks == 1
    assert (code, out) == _run(tmp_path, 10**9, "grep", *args, "--workdir", hostile)[:2]
    assert b"OUTSIDE" not in out and b"STATE" not in out and b"\x1b" not in out
    if args == ["needle"]:
        assert code == 2  # the hard-linked files, said on stderr
        lines = out.decode().splitlines()
        sessions = [line.split("/sessions/")[1][:4] for line in lines if "/sessions/" in line]
        assert sessions == sorted(sessions) and "s039" in sessions
        assert lines[-1].endswith("memories/notes.md:1:needle remembered")
        assert sum("binary file" in line for line in lines) == 6
        assert sum("hard links" in line for line in lines) == 2


def _many_lines(tmp_path: Path, count: int = 300) -> Path:
    """`count` sessions of 20 lines of 200 bytes and more (4 KB), each with `needle`: the
    child's part of 300 prints more than a pipe holds."""
    workdir = tmp_path / "ws"
    ws = LocalWorkspace(workdir, fsync=False)
    names = [f"s{n:04d}" for n in range(count)]

    async def fill() -> None:
        for name in names:
            output = "".join(f"needle {name} {i} {'x' * 200}\n" for i in range(20))
            await ws.offload_tool_result(name, ToolResultBlock(id="c1", name="f", output=output))

    asyncio.run(fill())
    return workdir


def test_the_lines_of_each_session_stay_in_order_across_many(tmp_path: Path) -> None:
    """More output than one frame of the child's, in session order."""
    workdir = _many_lines(tmp_path)
    names = [f"s{n:04d}" for n in range(300)]
    code, out, forks = _run(tmp_path, 2, "grep", "needle", "--workdir", workdir)
    assert forks == 1 and code == 0
    assert out == _run(tmp_path, 10**9, "grep", "needle", "--workdir", workdir)[1]
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


# What the faults change, in the fresh interpreter that `_run` starts (never in this one).
_PATCH = pytest.MonkeyPatch()


def _swap(workdir: Path, name: str) -> None:
    """Session `name`'s folder moved away, a link to the folder outside in its place."""
    sessions = workdir / "sessions"
    os.rename(sessions / name, workdir.parent / f"moved-{name}")
    (sessions / name).symlink_to(workdir.parent / "outside", target_is_directory=True)


def fault_swap(workdir: str) -> None:
    """s002 (the parent's) and s022 (the child's) swapped for a link just before each is
    searched, s003 and s023 as their context.jsonl is about to be."""
    session, file = WorkspaceSearch.session, WorkspaceSearch._file

    def swapping_session(self: WorkspaceSearch, name: str) -> None:
        if name in ("s002", "s022"):
            _swap(Path(workdir), name)
        session(self, name)

    def swapping_file(self: WorkspaceSearch, folder: Any, name: str, *rest: Any) -> None:
        if name == "context.jsonl" and folder.parts[-1] in ("s003", "s023"):
            _swap(Path(workdir), folder.parts[-1])
        file(self, folder, name, *rest)

    _PATCH.setattr(WorkspaceSearch, "session", swapping_session)
    _PATCH.setattr(WorkspaceSearch, "_file", swapping_file)


def test_a_session_folder_swapped_for_a_link_during_the_search_is_not_followed(
    hostile: Path, tmp_path: Path
) -> None:
    """The folders swapped before they are opened are passed over; those swapped once
    opened are searched through the folder already held."""
    expected = _one_process(tmp_path, hostile)[1].decode()
    _, out, forks = _run(tmp_path, 2, "grep", "needle", "--workdir", hostile, fault="swap")
    assert forks == 1
    assert b"OUTSIDE" not in out
    dropped = [line for line in expected.splitlines() if "/s002/" in line or "/s022/" in line]
    assert len(dropped) == 4
    assert out.decode().splitlines() == [
        line for line in expected.splitlines() if line not in dropped
    ]
    assert "s003/context.jsonl:1:needle said in s003" in out.decode()
    assert "s023/context.jsonl:1:needle said in s023" in out.decode()


def _dying(workdir: str) -> None:
    parent, file = os.getpid(), WorkspaceSearch._file

    def dying_file(self: WorkspaceSearch, folder: Any, name: str, *rest: Any) -> None:
        if os.getpid() != parent and name == "context.jsonl" and folder.parts[-1] == "s031":
            os._exit(9)
        file(self, folder, name, *rest)

    _PATCH.setattr(WorkspaceSearch, "_file", dying_file)


def fault_dies(workdir: str) -> None:
    """The child dies in s031, after printing its tool result's line, having committed
    nothing."""
    _dying(workdir)


def fault_dies_committed(workdir: str) -> None:
    """The child dies in s031 as in `fault_dies`, having committed each session before."""
    _grep_parallel._SEND_AT = 1
    _dying(workdir)


@pytest.mark.parametrize("fault", ["dies", "dies_committed"])
def test_a_child_that_dies_leaves_its_sessions_to_the_parent(
    hostile: Path, tmp_path: Path, fault: str
) -> None:
    """The parent searches from the first session not committed, and prints the line of
    s031's tool result once."""
    code, out, forks = _run(tmp_path, 2, "grep", "needle", "--workdir", hostile, fault=fault)
    assert forks == 1
    assert (code, out) == _one_process(tmp_path, hostile)
    assert out.count(b"needle in s031") == 1


def _ended(pid: int) -> bool:
    """Whether process `pid` has exited (a zombie not yet reaped)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"


def fault_parent_waits_for_the_child(workdir: str) -> None:
    """After its half, the parent drains the pipe until the child has ended (a minute at
    most), and writes down whether it did: a child whose output the parent does not take
    while it searches waits on the full pipe and never ends before the parent reads it."""
    _PATCH.setattr(_grep_parallel, "_PIPE_SIZE", 1 << 16)  # a pipe of 64 KB, not 1 MB
    drain = _grep_parallel._Child.drain

    def drain_until_it_ends(child: Any) -> None:
        drain(child)
        deadline = time.monotonic() + 60
        while not _ended(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
            drain(child)
        with open(os.path.join(os.path.dirname(workdir), "child-ended"), "w") as f:
            f.write(str(_ended(child.pid)))

    _PATCH.setattr(_grep_parallel._Child, "drain", drain_until_it_ends)


def fault_drains_little(workdir: str) -> None:
    _PATCH.setattr(_grep_parallel, "_DRAINED_AT_MOST", 1000)  # less than one frame


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")
def test_the_child_ends_while_the_parent_searches_its_half(tmp_path: Path) -> None:
    """The parent takes the child's output from the pipe while it searches its own half
    (`_Child.drain`), so a child printing more than the pipe holds is not held up until
    the parent has done; its lines are printed as one process prints them."""
    workdir = _many_lines(tmp_path)
    code, out, forks = _run(
        tmp_path, 2, "grep", "needle", "--workdir", workdir, fault="parent_waits_for_the_child"
    )
    assert (tmp_path / "child-ended").read_text() == "True"
    assert forks == 1
    assert (code, out) == _one_process(tmp_path, workdir)


def test_the_parent_holds_at_most_so_much_of_the_childs_output(tmp_path: Path) -> None:
    workdir = _many_lines(tmp_path)
    code, out, forks = _run(
        tmp_path, 2, "grep", "needle", "--workdir", workdir, fault="drains_little"
    )
    assert forks == 1
    assert (code, out) == _one_process(tmp_path, workdir)


def fault_too_much(workdir: str) -> None:
    _grep_parallel._HELD_AT_MOST = 100  # less than one session's lines


def fault_too_much_said(workdir: str) -> None:
    """`fault_too_much`, the child's exit status written down beside the workspace."""
    fault_too_much(workdir)
    exit_now = os._exit

    def exit_said(status: int) -> None:
        with open(os.path.join(os.path.dirname(workdir), "child-status"), "w") as f:
            f.write(str(status))
        exit_now(status)

    _PATCH.setattr(os, "_exit", exit_said)


def test_a_session_printing_more_than_the_child_holds_is_left_to_the_parent(
    hostile: Path, tmp_path: Path
) -> None:
    """The child stops there, as it was made to (status 0: it did not die of it), and the
    parent searches the sessions it did not commit."""
    code, out, forks = _run(
        tmp_path, 2, "grep", "needle", "--workdir", hostile, fault="too_much_said"
    )
    assert forks == 1
    assert (tmp_path / "child-status").read_text() == "0"
    assert (code, out) == _one_process(tmp_path, hostile)


def _taken_over(workdir: str, *, dies: bool = False, holds: int = 0) -> None:
    """The child slow (50 ms a session), asked every session and leaving as few as one:
    the parent, done with its half first, takes over the second half of what the child has
    left. Each process writes down the sessions it searches (`searched`, beside the
    workspace). `dies`: the child dies at the first session after it answered; `holds`: the
    parent holds at most so many bytes of the sessions it took over."""
    _grep_parallel._ASKED_EVERY = 1
    _grep_parallel._TAKEN_AT_LEAST = 1
    parent, session, answer, fork = (
        os.getpid(),
        WorkspaceSearch.session,
        _grep_parallel._answer,
        os.fork,
    )
    searched = os.path.join(os.path.dirname(workdir), "searched")
    answered: list[int] = []

    def slow_session(self: WorkspaceSearch, name: str) -> None:
        if os.getpid() != parent:
            if answered and dies:
                os._exit(9)
            time.sleep(0.05)
        with open(searched, "a") as f:
            f.write(f"{os.getpid() == parent} {name}\n")
        session(self, name)

    def said_answer(asked: int, *rest: Any) -> tuple[int, int]:
        last, still_asked = answer(asked, *rest)
        if still_asked < 0:
            answered.append(last)
        return last, still_asked

    def forked() -> int:
        pid = fork()
        if pid and holds:
            _grep_parallel._HELD_AT_MOST = holds
        return pid

    _PATCH.setattr(WorkspaceSearch, "session", slow_session)
    _PATCH.setattr(_grep_parallel, "_answer", said_answer)
    _PATCH.setattr(os, "fork", forked)


def fault_taken_over(workdir: str) -> None:
    _taken_over(workdir)


def fault_taken_over_dies(workdir: str) -> None:
    _taken_over(workdir, dies=True)


def fault_taken_over_holds_little(workdir: str) -> None:
    _taken_over(workdir, holds=100)  # less than one session's lines


@pytest.mark.parametrize("fault", ["taken_over", "taken_over_dies", "taken_over_holds_little"])
def test_a_parent_done_first_takes_over_the_rest_of_the_childs_sessions(
    hostile: Path, tmp_path: Path, fault: str
) -> None:
    """The parent searches some of the child's sessions itself, in pieces taken over while
    the child searches on; each session is searched once (a child that dies past its
    answer leaves the parent those it did not finish), and the lines are those one process
    prints, in its order (the parent's held lines printed after the child's; past what it
    may hold, searched once the child's are printed)."""
    code, out, forks = _run(tmp_path, 2, "grep", "needle", "--workdir", hostile, fault=fault)
    assert forks == 1
    assert (code, out) == _one_process(tmp_path, hostile)
    searched = [line.split() for line in (tmp_path / "searched").read_text().splitlines()]
    listed = [name for name in SESSIONS[16:] if name != "s029"]  # (s029: a link, not listed)
    theirs = [name for by_parent, name in searched if name >= "s016"]
    taken = [name for by_parent, name in searched if by_parent == "True" and name >= "s016"]
    assert "s039" in taken
    if fault == "taken_over":
        assert sorted(theirs) == listed  # each once
        # The last ones, taken in pieces (the last piece first), the child searching on.
        assert sorted(taken) == listed[-len(taken) :] and len(taken) < len(listed)
    else:  # (those not committed by the child, or not held by the parent, searched again)
        assert set(theirs) == set(listed)
    if fault == "taken_over_holds_little":  # held, then searched again once printing
        assert len(set(taken)) < len(taken)


def fault_answer_waited_for_too_long(workdir: str) -> None:
    """The child slow (0.1 s a session), committing each session and asked every 4: while
    the parent waits for its answer, it sends more than the parent holds from the pipe.
    Each process writes down, in one file and in the order searched, the sessions it
    searches."""
    _grep_parallel._ASKED_EVERY = 4
    _grep_parallel._TAKEN_AT_LEAST = 1
    _grep_parallel._SEND_AT = 1
    _grep_parallel._DRAINED_AT_MOST = 6000  # (a session of `_many_lines` prints 4 KB)
    parent, session = os.getpid(), WorkspaceSearch.session
    searched = os.path.join(os.path.dirname(workdir), "searched")

    def slow_session(self: WorkspaceSearch, name: str) -> None:
        if os.getpid() != parent:
            time.sleep(0.1)
        with open(searched, "a") as f:
            f.write(f"{os.getpid() == parent} {name}\n")
        session(self, name)

    _PATCH.setattr(WorkspaceSearch, "session", slow_session)


def test_a_child_sending_much_while_its_answer_is_awaited_is_not_waited_for(
    tmp_path: Path,
) -> None:
    """The parent holds no more of the child's output while it waits for the answer than
    while it searches: past `_DRAINED_AT_MOST` it stops waiting and takes nothing over. The
    child still stops where it answers; the parent searches the rest once the child's lines
    are printed, after every session the child searched."""
    workdir = _many_lines(tmp_path, 40)  # the child's: s0016 to s0039
    code, out, forks = _run(
        tmp_path, 2, "grep", "needle", "--workdir", workdir, fault="answer_waited_for_too_long"
    )
    assert forks == 1
    assert (code, out) == _one_process(tmp_path, workdir)
    searched = [line.split() for line in (tmp_path / "searched").read_text().splitlines()]
    theirs = [(by_parent, name) for by_parent, name in searched if name >= "s0016"]
    by_child = [name for by_parent, name in theirs if by_parent == "False"]
    by_parent = [name for by_parent, name in theirs if by_parent == "True"]
    assert by_parent and by_parent[-1] == "s0039"  # (the child stopped where it answered)
    assert sorted(by_child + by_parent) == [f"s{n:04d}" for n in range(16, 40)]
    assert theirs == [("False", n) for n in by_child] + [("True", n) for n in by_parent]


def _refused(*args: Any) -> Any:
    raise OSError(errno.EMFILE, "refused")


def fault_no_pipe(workdir: str) -> None:
    _PATCH.setattr(os, "pipe", _refused)


def fault_no_fork(workdir: str) -> None:
    _PATCH.setattr(os, "fork", _refused)


def fault_busy(workdir: str) -> None:
    _PATCH.setattr(_grep_parallel, "_busy", lambda cpus: True)


@pytest.mark.parametrize("fault", ["no_pipe", "no_fork", "busy"])
def test_without_a_pipe_a_process_or_an_idle_cpu_one_process_searches_all(
    hostile: Path, tmp_path: Path, fault: str
) -> None:
    code, out, forks = _run(tmp_path, 2, "grep", "needle", "--workdir", hostile, fault=fault)
    assert forks == 0
    assert (code, out) == _one_process(tmp_path, hostile)


def _interrupted(waiting: bool) -> None:
    parent, session, read = os.getpid(), WorkspaceSearch.session, os.read

    def interrupted_session(self: WorkspaceSearch, name: str) -> None:
        if os.getpid() == parent and name == "s004" and not waiting:
            raise KeyboardInterrupt
        if os.getpid() != parent and name == "s025":
            time.sleep(60)
        session(self, name)

    def interrupted_read(fd: int, size: int) -> bytes:
        if os.getpid() == parent:
            raise KeyboardInterrupt
        return read(fd, size)

    _PATCH.setattr(WorkspaceSearch, "session", interrupted_session)
    if waiting:
        _PATCH.setattr(os, "read", interrupted_read)


def fault_ctrl_c_searching(workdir: str) -> None:
    _interrupted(waiting=False)


def fault_ctrl_c_waiting(workdir: str) -> None:
    _interrupted(waiting=True)


@pytest.mark.parametrize("fault", ["ctrl_c_searching", "ctrl_c_waiting"])
def test_a_parent_stopped_by_ctrl_c_ends_its_child(
    hostile: Path, tmp_path: Path, fault: str
) -> None:
    """Ctrl-C in the parent's half, or while it waits for a child stuck in s025 (a minute,
    were it not ended): the child is ended and reaped (`_run` checks), not waited for."""
    code, out, forks = _run(tmp_path, 2, "grep", "needle", "--workdir", hostile, fault=fault)
    assert (code, forks) == (130, 1)
    assert b"s016" not in out


@pytest.mark.parametrize("args", [["--json", "needle"], ["-C", "1", "needle"]])
def test_json_and_context_lines_stay_in_one_process(
    hostile: Path, tmp_path: Path, args: list[str]
) -> None:
    assert _run(tmp_path, 2, "grep", *args, "--workdir", hostile)[2] == 0


def test_the_machine_is_busy_when_as_many_tasks_run_as_there_are_cpus() -> None:
    with open("/proc/loadavg", "rb") as f:
        runnable = int(f.read().split()[3].split(b"/")[0])
    assert runnable >= 1  # this test itself
    assert _grep_parallel._busy(1)  # one CPU: this process takes it
    assert not _grep_parallel._busy(10_000)
