"""`ctxoffload watch` following a workspace while a real process writes to it."""

from __future__ import annotations

import asyncio
import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_workspace import unprivileged_prefix
from watching import PATIENCE, end_watch, start_watch, stop_watch

from helpers import pipe_lines, wait_for_line

WRITER = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from ctxoffload import LocalWorkspace, Msg, ToolResultBlock

    workdir = sys.argv[1]
    events = os.path.join(workdir, "sessions", "run-1", "events.jsonl")

    async def main():
        ws = LocalWorkspace(workdir, fsync=False)
        # Half a line first, as a writer caught mid-write would leave it.
        with open(events, "ab") as f:
            f.write(b'{"time":"2026-11-22T12:00:00.000+00:00","kind":"trunc')
        time.sleep(0.5)
        with open(events, "ab") as f:
            f.write(b'ation","tool_name":"half_written","tokens_before":900,"tokens_after":90}\\n')
        result = ToolResultBlock(id="call_77", name="live_tool", output="x")
        await ws.offload_tool_result("run-1", result)
        await ws.offload_context("run-1", msgs=[Msg(role="user", content="a message written live")])
        await ws.offload_context("brand-new", msgs=[Msg(role="assistant", content="new session")])

    asyncio.run(main())
    """
)


@pytest.mark.slow
def test_watch_follows_a_live_writer_and_ends_on_ctrl_c(filled: Path) -> None:
    watch = start_watch("--workdir", str(filled))
    try:
        out, err = pipe_lines(watch.stdout), pipe_lines(watch.stderr)
        seen_err: list[str] = []
        wait_for_line(err, "watching all sessions", seen_err)
        writer = subprocess.run(
            [sys.executable, "-c", WRITER, str(filled)],
            capture_output=True,
            text=True,
            timeout=PATIENCE,
        )
        assert writer.returncode == 0, writer.stderr
        seen: list[str] = []
        wait_for_line(out, "truncated half_written 900→90 tokens", seen)
        wait_for_line(out, "tool_result-call_77.txt", seen)
        wait_for_line(out, "a message written live", seen)
        wait_for_line(out, "brand-new", seen)
        # The half line was printed once, whole, and never as a torn line.
        assert sum("half_written" in line for line in seen) == 1
        assert not any("not JSON" in line for line in seen)
        # What was there before watch started is not repeated.
        assert not any("Find the failing order" in line for line in seen)
        assert "Traceback" not in end_watch(watch, err, seen_err)
    finally:
        stop_watch(watch)


def test_watch_from_start_prints_what_is_there(filled: Path) -> None:
    watch = start_watch("run-1", "--from-start", "--workdir", str(filled))
    try:
        seen: list[str] = []
        wait_for_line(pipe_lines(watch.stdout), "Find the failing order", seen)
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=PATIENCE) == 0
    finally:
        stop_watch(watch)


def _append_message(workdir: Path, session: str, text: str) -> None:
    """A message offloaded by the library itself, in a child process as a live agent would."""
    code = (
        "import asyncio, sys\n"
        "from ctxoffload import LocalWorkspace, Msg\n"
        "ws = LocalWorkspace(sys.argv[1], fsync=False)\n"
        "msg = Msg(role='user', content=sys.argv[3])\n"
        "asyncio.run(ws.offload_context(sys.argv[2], msgs=[msg]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(workdir), session, text],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert done.returncode == 0, done.stderr


# A whole line, appended with no commit record for it: what a writer killed between its
# append and its commit leaves (the next writer trims it).
NEVER_COMMITTED = b'{"role": "user", "content": "NEVER COMMITTED"}\n'

# An event appended by hand, so the test knows watch has looked since what came before it.
LOOKED_AT = (
    b'{"time":"2026-11-22T12:00:00.000+00:00","kind":"truncation","tool_name":"looked_at",'
    b'"tokens_before":9,"tokens_after":1}\n'
)


def _lines_of(workdir: Path, session: str) -> int:
    return len((workdir / "sessions" / session / "context.jsonl").read_bytes().splitlines())


@pytest.mark.slow
def test_watch_never_prints_a_batch_that_was_never_committed(filled: Path) -> None:
    session = filled / "sessions/run-1"
    committed = _lines_of(filled, "run-1")
    watch = start_watch("run-1", "--workdir", str(filled))
    try:
        out, err = pipe_lines(watch.stdout), pipe_lines(watch.stderr)
        wait_for_line(err, "watching session run-1", [])
        with open(session / "context.jsonl", "ab") as log:
            log.write(NEVER_COMMITTED)
        with open(session / "events.jsonl", "ab") as log:
            log.write(LOOKED_AT)
        seen: list[str] = []
        wait_for_line(out, "looked_at", seen)  # watch has looked past the uncommitted line
        _append_message(filled, "run-1", "real message A")  # trims it, then appends
        _append_message(filled, "run-1", "real message B")
        wait_for_line(out, "real message B", seen)
        said = end_watch(watch, err, [])
    finally:
        stop_watch(watch)
    messages = [line for line in seen if " context.jsonl line " in line and " [" in line]
    assert len(messages) == 2, seen
    assert f"context.jsonl line {committed + 1} [user] real message A" in messages[0]
    assert f"context.jsonl line {committed + 2} [user] real message B" in messages[1]
    assert not any("NEVER COMMITTED" in line or "not JSON" in line for line in seen), seen
    assert "Traceback" not in said


@pytest.mark.slow
def test_watch_reads_again_lines_rewritten_under_where_it_was(filled: Path, tmp_path: Path) -> None:
    """A line watch read while the log's commit record was away (the whole log counts then)
    is trimmed once the record is back, and a message written where it was: watch goes back
    to where the bytes it read still are, and prints that message under its own number."""
    session = filled / "sessions/run-1"
    committed = _lines_of(filled, "run-1")
    record = session / "context.jsonl.commit"
    watch = start_watch("run-1", "--workdir", str(filled))
    try:
        out, err = pipe_lines(watch.stdout), pipe_lines(watch.stderr)
        wait_for_line(err, "watching session run-1", [])
        record.rename(tmp_path / "record")
        with open(session / "context.jsonl", "ab") as log:
            log.write(NEVER_COMMITTED)
        seen: list[str] = []
        wait_for_line(out, "NEVER COMMITTED", seen)
        (tmp_path / "record").rename(record)
        _append_message(filled, "run-1", "real message A, longer than the line it replaces")
        _append_message(filled, "run-1", "real message B")
        wait_for_line(out, "real message B", seen)
        said = end_watch(watch, err, [])
    finally:
        stop_watch(watch)
    assert f"context.jsonl line {committed + 1} [user] NEVER COMMITTED" in seen[0], seen
    messages = [line for line in seen[1:] if " context.jsonl line " in line and " [" in line]
    assert len(messages) == 2, seen
    assert f"context.jsonl line {committed + 1} [user] real message A" in messages[0]
    assert f"context.jsonl line {committed + 2} [user] real message B" in messages[1]
    assert not any("not JSON" in line for line in seen), seen
    assert "Traceback" not in said


@pytest.mark.slow
def test_watch_refuses_a_hard_linked_log_once_and_goes_on(filled: Path, tmp_path: Path) -> None:
    events = filled / "sessions/run-1/events.jsonl"
    outside = tmp_path / "out.jsonl"
    outside.write_text(
        '{"time": "2026-11-22T12:00:00+00:00", "kind": "truncation", "tool_name": "SECRET"}\n'
    )
    events.unlink()
    os.link(outside, events)
    planted = filled / "sessions/run-1/tool_result-planted.txt"
    (tmp_path / "out.txt").write_text("SECRET\n")
    os.link(tmp_path / "out.txt", planted)  # a tool_result too: not even announced as new
    watch = start_watch("run-1", "--from-start", "--workdir", str(filled))
    try:
        out, err = pipe_lines(watch.stdout), pipe_lines(watch.stderr)
        seen: list[str] = []
        wait_for_line(out, "Find the failing order", seen)  # context.jsonl is still followed
        # (By hand: the library itself refuses to append to the hard-linked events.jsonl;
        # without its commit record, which would end before it, the whole log counts.)
        (filled / "sessions/run-1/context.jsonl.commit").unlink()
        with open(filled / "sessions/run-1/context.jsonl", "ab") as log:
            log.write(b'{"role": "user", "content": "written after the refusal"}\n')
        wait_for_line(out, "written after the refusal", seen)
        said = end_watch(watch, err, [])
    finally:
        stop_watch(watch)
    assert not any("SECRET" in line for line in seen)
    refusal = (
        f"ctxoffload watch: {events}: has 2 hard links: it may be shared with a file outside "
        "the workspace; not read\n"
    )
    assert said.count(refusal) == 1, said
    assert said.count(f"ctxoffload watch: {planted}: has 2 hard links") == 1, said
    assert not any("tool_result-planted" in line for line in seen)
    assert "Traceback" not in said


@pytest.mark.slow
def test_watch_reports_a_log_it_cannot_read_once_and_goes_on(filled: Path, tmp_path: Path) -> None:
    prefix = unprivileged_prefix()
    events = filled / "sessions/run-1/events.jsonl"
    events.chmod(0)
    watch = start_watch("run-1", "--from-start", "--workdir", str(filled), prefix=prefix)
    try:
        out, err = pipe_lines(watch.stdout), pipe_lines(watch.stderr)
        seen: list[str] = []
        wait_for_line(out, "Find the failing order", seen)
        _append_message(filled, "run-1", "written while events.jsonl is locked")
        wait_for_line(out, "written while events.jsonl is locked", seen)
        said = end_watch(watch, err, [])
    finally:
        stop_watch(watch)
    assert said.count(f"ctxoffload watch: cannot read {events}: Permission denied\n") == 1, said
    assert "Traceback" not in said


@pytest.mark.slow
def test_watch_waits_for_a_session_that_does_not_exist_yet(filled: Path) -> None:
    watch = start_watch("not-yet", "--wait", "--workdir", str(filled))
    try:
        out, err = pipe_lines(watch.stdout), pipe_lines(watch.stderr)
        seen_err: list[str] = []
        wait_for_line(err, "waiting for it", seen_err)
        _append_message(filled, "not-yet", "the first message of a new session")
        seen: list[str] = []
        wait_for_line(out, "the first message of a new session", seen)
        _append_message(filled, "run-1", "another session's message")
        _append_message(filled, "not-yet", "its second message")
        wait_for_line(out, "its second message", seen)
        said = end_watch(watch, err, seen_err)
    finally:
        stop_watch(watch)
    assert not any("another session's message" in line for line in seen)
    assert said.count("waiting for it") == 1 and "Traceback" not in said


@pytest.mark.slow
def test_watch_waits_for_a_host_conversation_by_the_hosts_own_id(filled: Path) -> None:
    """Started before a LangGraph thread's run, `watch 'team/alice:42' --wait` waits for the
    session the door will store the thread in, and follows it once it appears."""
    from ctxoffload._disk.ids import session_id_for

    stored = session_id_for("team/alice:42")
    watch = start_watch("team/alice:42", "--wait", "--workdir", str(filled))
    try:
        out, err = pipe_lines(watch.stdout), pipe_lines(watch.stderr)
        seen_err: list[str] = []
        wait_for_line(err, f"(a host's id, stored as {stored!r})", seen_err)
        _append_message(filled, stored, "the thread's first message")
        wait_for_line(out, "the thread's first message", [])
        said = end_watch(watch, err, seen_err)
    finally:
        stop_watch(watch)
    assert said.count("waiting for it") == 1 and "Traceback" not in said


def test_watch_waits_only_when_asked_and_only_for_a_folder(
    filled: Path, cli: Callable[..., Any]
) -> None:
    missing = cli("watch", "not-yet", "--workdir", filled)
    assert (missing.code, missing.out) == (2, "")
    assert missing.err == (
        f"ctxoffload watch: no session 'not-yet' in {str(filled)!r} (it has run-1, run-2): "
        "`ctxoffload ls` lists the sessions; --wait waits for it to appear\n"
    )
    for session in ("../etc", "a/b", ".hidden"):  # a host's id: no folder of its name
        bad = cli("watch", session, "--workdir", filled)
        assert (bad.code, bad.out) == (2, "") and bad.err.count("\n") == 1, bad
        assert f"no session {session!r} (a host's id, stored as " in bad.err
    (filled / "sessions/a-file").write_text("x")
    held = cli("watch", "a-file", "--wait", "--workdir", filled)
    assert held.code == 2 and "no session 'a-file'" in held.err and "--wait" not in held.err


def _swap_for_link(folder: Path, outside: Path) -> None:
    """`folder` (a session folder, or sessions/) becomes a link to `outside`, a folder outside
    the workspace that holds a session's files with a secret in each."""
    outside.mkdir()
    secret = "SECRET-outside-7f3a"
    (outside / "context.jsonl").write_text(f'{{"role": "user", "content": "{secret}"}}\n')
    (outside / "events.jsonl").write_text(f'{{"kind": "truncation", "tool_name": "{secret}"}}\n')
    (outside / f"tool_result-{secret}.txt").write_text(secret + "\n")
    for name in ("run-1", "run-2"):  # for a swapped sessions/: sessions inside the link too
        (outside / name).mkdir()
        (outside / name / "context.jsonl").write_text(
            f'{{"role": "user", "content": "{secret}"}}\n'
        )
    folder.rename(folder.with_name(folder.name + ".moved"))
    folder.symlink_to(outside, target_is_directory=True)


def _append_outside(outside: Path) -> None:
    """More lines written where the link points, as an agent there would write them."""
    line = '{"role": "user", "content": "SECRET-outside-7f3a again"}\n'
    for log in (outside / "context.jsonl", outside / "run-1" / "context.jsonl"):
        with open(log, "a") as f:
            f.write(line)


@pytest.mark.slow
def test_watch_refuses_a_session_folder_swapped_for_a_link(filled: Path, tmp_path: Path) -> None:
    watch = start_watch("run-1", "--workdir", str(filled))
    try:
        out, err = pipe_lines(watch.stdout), pipe_lines(watch.stderr)
        seen: list[str] = []
        seen_err: list[str] = []
        wait_for_line(err, "watching session run-1", seen_err)
        _append_message(filled, "run-1", "before the swap")
        wait_for_line(out, "before the swap", seen)
        outside = tmp_path / "outside"
        _swap_for_link(filled / "sessions" / "run-1", outside)
        _append_outside(outside)
        # The next look refuses the link and says so, once.
        wait_for_line(err, "sessions/run-1 is a symbolic link", seen_err)
        _append_outside(outside)
        said = end_watch(watch, err, seen_err)
        while not out.empty():
            seen.append(out.get())
    finally:
        stop_watch(watch)
    assert "SECRET" not in "".join(seen) + said
    assert said.count("sessions/run-1 is a symbolic link") == 1, said


@pytest.mark.slow
def test_watch_refuses_sessions_swapped_for_a_link(filled: Path, tmp_path: Path) -> None:
    watch = start_watch("--workdir", str(filled))
    try:
        out, err = pipe_lines(watch.stdout), pipe_lines(watch.stderr)
        seen: list[str] = []
        seen_err: list[str] = []
        wait_for_line(err, "watching all sessions", seen_err)
        _append_message(filled, "run-1", "before the swap")
        wait_for_line(out, "before the swap", seen)
        outside = tmp_path / "outside"
        _swap_for_link(filled / "sessions", outside)
        _append_outside(outside)
        wait_for_line(err, "/sessions is a symbolic link", seen_err)
        _append_outside(outside)
        said = end_watch(watch, err, seen_err)
        while not out.empty():
            seen.append(out.get())
    finally:
        stop_watch(watch)
    assert "SECRET" not in "".join(seen) + said


# -- what watch prints is what show prints ---------------------------------------------------


def _watched(watch: subprocess.Popen[str], last: str) -> list[str]:
    """Everything watch printed until a line holding `last`, then Ctrl-C."""
    out, err = pipe_lines(watch.stdout), pipe_lines(watch.stderr)
    seen: list[str] = []
    try:
        wait_for_line(out, last, seen)
        watch.send_signal(signal.SIGINT)
        code = watch.wait(timeout=PATIENCE)
        said = []
        while True:  # the pump ends at EOF, now that watch has exited
            try:
                said.append(err.get(timeout=5))
            except queue.Empty:
                break
        assert code == 0, (code, said)
        while not out.empty():
            seen.append(out.get())
    finally:
        stop_watch(watch)
    assert "Traceback" not in "".join(said), said
    return [line.rstrip("\n") for line in seen]


def _as_show_prints(lines: list[str], session: str) -> tuple[list[str], list[str]]:
    """watch's lines of events, with the session taken out after each time (as show prints
    them); and its other lines (messages of context.jsonl, new files)."""
    at = re.compile(rf"^(\d\d:\d\d:\d\d) {re.escape(session)} ")
    prefix = f"{'':8} {session} "  # before a sentence show prints alone
    alone = f"{prefix}no Agent or door began this record"
    lines = [line[len(prefix) :] if line.startswith(alone) else line for line in lines]
    events = [at.sub(r"\1 ", line) for line in lines if not line.startswith(" " * 9)]
    others = [line for line in lines if line.startswith(" " * 9)]
    return events, others


def _timeline(cli: Callable[..., Any], workdir: Path, session: str) -> list[str]:
    """The lines `show` prints for the events of a session (its timeline, without the
    header and the lists of sub-agents and data files after it)."""
    shown = cli("show", session, "--workdir", workdir)
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()[1:]
    for end in ("sub-agents:", "data files:"):
        if end in lines:
            lines = lines[: lines.index(end)]
    return lines


def _check_order(lines: list[str], session: str) -> None:
    """Each message of context.jsonl comes before the line of the compression that moved it
    there, after the one before; each new file just before the truncation that names it."""
    span = re.compile(r"context\.jsonl lines (\d+)-(\d+)")
    row = re.compile(rf"^ {{9}}{re.escape(session)} context\.jsonl line (\d+) ")
    done = 0  # the last line of context.jsonl a compression printed so far named
    rows = 0
    for i, line in enumerate(lines):
        if found := row.match(line):
            assert int(found[1]) == done + rows + 1, (line, lines)
            rows += 1
        elif " new file " in line:
            # The truncation's line, then where its whole output is.
            name = line.rsplit("/", 1)[1]
            assert "truncated" in lines[i + 1] and lines[i + 2].endswith(name), lines[i : i + 3]
        elif " compressed " in line and (found := span.search(lines[i + 1])):
            # The compression's line, then the lines of context.jsonl it moved them to.
            assert (int(found[1]), int(found[2])) == (done + 1, done + rows), (line, lines)
            done, rows = int(found[2]), 0
    assert done > 0 and rows == 0


@pytest.mark.slow
def test_watch_from_start_prints_what_show_prints_in_order(
    demo: Any, cli: Callable[..., Any]
) -> None:
    session = "nightly-job"
    shown = _timeline(cli, demo.workdir, session)
    watch = start_watch(session, "--from-start", "--workdir", str(demo.workdir))
    printed = _watched(watch, shown[-1][9:])
    events, others = _as_show_prints(printed, session)
    assert events == shown
    compressions = sum(bool(re.match(r"\d\d:\d\d:\d\d compressed ", line)) for line in shown)
    assert sum(" summary message " in line for line in events) == compressions > 1
    _check_order(printed, session)
    assert len([line for line in others if " new file " in line]) == 9


@pytest.mark.slow
def test_watch_prints_a_live_agent_as_show_prints_it_after(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir, session = tmp_path / "ws", "live-job"
    (workdir / "sessions").mkdir(parents=True)
    watch = start_watch(session, "--wait", "--workdir", str(workdir))
    err = pipe_lines(watch.stderr)
    wait_for_line(err, "waiting for it", [])
    command = ["demo", "--workdir", str(workdir), "--session", session]
    demo = subprocess.run(
        [sys.executable, "-m", "ctxoffload", *command],
        capture_output=True,
        text=True,
        timeout=PATIENCE * 4,
    )
    assert demo.returncode == 0, demo.stderr
    shown = _timeline(cli, workdir, session)
    out = pipe_lines(watch.stdout)
    seen: list[str] = []
    try:
        wait_for_line(out, shown[-1][9:], seen)
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=PATIENCE) == 0
        while not out.empty():
            seen.append(out.get())
    finally:
        stop_watch(watch)
    printed = [line.rstrip("\n") for line in seen]
    events, _ = _as_show_prints(printed, session)
    assert events == shown
    _check_order(printed, session)


@pytest.mark.slow
def test_watch_prints_a_summary_no_message_holds_once_under_its_compression(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    """A Compressor without an Agent logs the summary as an event only: watch prints it once,
    under the compression, with each of its lines whole."""
    from ctxoffload import LocalWorkspace, Msg

    async def write() -> None:
        ws = LocalWorkspace(tmp_path, fsync=False)
        ref = await ws.offload_context("s-1", msgs=[Msg(role="user", content="old")])
        fields = {"task_overview": "find the order", "next_steps": "grep the log"}
        span = [ref.first_line, ref.last_line]
        await ws.record_event("s-1", "summary", reference=str(ref), lines=span, **fields)
        await ws.record_event(
            "s-1", "compression", reference=str(ref), lines=span, tokens_before=9, tokens_after=1
        )

    asyncio.run(write())
    shown = _timeline(cli, tmp_path, "s-1")
    assert shown[-2:] == ["      task_overview: find the order", "      next_steps: grep the log"]
    printed = _watched(start_watch("s-1", "--from-start", "--workdir", str(tmp_path)), "next_steps")
    events, others = _as_show_prints(printed, "s-1")
    assert events == shown
    assert others == [f"{'':8} s-1 context.jsonl line 1 [user] old"]


# Every Ctrl-C raised inside a string exec, as one that lands while a namedtuple or a dataclass
# is being made (watchfiles imports `platform` on its first call) is raised there.
_CTRL_C_IN_A_STRING_EXEC = """\
import signal

def _interrupted(signum, frame):
    exec("raise KeyboardInterrupt")

signal.signal(signal.SIGINT, _interrupted)
"""


@pytest.mark.slow
def test_ctrl_c_that_lands_in_a_string_exec_still_ends_watch_with_0(
    filled: Path, tmp_path: Path
) -> None:
    """The issue's flake (exit -2, not 0): CPython remembers a KeyboardInterrupt that ended a
    string exec even once watch has caught it, and under `python -m` then kills the process
    with SIGINT at exit. Here every Ctrl-C ends one, so the rare case is the only case."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_CTRL_C_IN_A_STRING_EXEC)
    path = [str(hook), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    watch = start_watch(
        "run-1", "--workdir", str(filled), env={"PYTHONPATH": os.pathsep.join(path)}
    )
    try:
        pipe_lines(watch.stdout)  # read as it comes: a full pipe would stop watch
        err = pipe_lines(watch.stderr)
        wait_for_line(err, "Ctrl-C to stop", [])
        said = end_watch(watch, err, [])
    finally:
        stop_watch(watch)
    assert "Traceback" not in said, said


def test_ctrl_c_while_watch_reads_where_each_file_ends_is_exit_0(
    filled: Path, cli: Callable[..., Any], monkeypatch: Any
) -> None:
    """Before the first look (a workspace of many sessions takes a while to list), Ctrl-C
    ends watch as documented too: exit 0, not `interrupted` and 130."""
    from ctxoffload._disk.read import Folder

    def interrupted(self: Any) -> list[str]:
        raise KeyboardInterrupt

    monkeypatch.setattr(Folder, "sessions", interrupted)
    ended = cli("watch", "--workdir", filled)
    assert (ended.code, ended.err) == (0, ""), ended
