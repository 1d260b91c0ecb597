"""`ctxoffload watch` following a workspace while a real process writes to it."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Generous bounds so a loaded machine cannot hang the suite; they are not speed checks.
PATIENCE = 60.0


def _lines(stream: object) -> queue.Queue[str]:
    """Lines of a pipe as they come; the pump ends at EOF, when the process has exited."""
    found: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        try:
            for line in stream:  # type: ignore[attr-defined]
                found.put(line)
        except (ValueError, OSError):  # closed under us after a failure: nothing to read
            pass

    threading.Thread(target=pump, daemon=True).start()
    return found


@contextmanager
def _ctrl_c_reaches_children() -> Iterator[None]:
    """Children started inside get SIGINT as a terminal gives it, even if this process ignores it.

    A shell starts a background job (`pytest &`, nohup) with SIGINT ignored, and an ignored
    signal stays ignored across fork and exec: `watch` would never see the Ctrl-C these tests
    send, and each test would wait out its whole PATIENCE. A handled signal is reset to the
    default in the child, so SIGINT is handled here while the child starts.
    """
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _stop(watch: subprocess.Popen[str]) -> None:
    if watch.poll() is None:
        watch.kill()
    watch.wait()
    for stream in (watch.stdout, watch.stderr):
        if stream is not None:
            stream.close()


def _wait_for(lines: queue.Queue[str], needle: str, seen: list[str]) -> None:
    while not any(needle in line for line in seen):
        try:
            seen.append(lines.get(timeout=PATIENCE))
        except queue.Empty:
            raise AssertionError(f"{needle!r} never appeared; saw {seen!r}") from None


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


def test_watch_follows_a_live_writer_and_ends_on_ctrl_c(filled: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with _ctrl_c_reaches_children():
        watch = subprocess.Popen(
            [sys.executable, "-m", "ctxoffload", "watch", "--workdir", str(filled)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    try:
        out, err = _lines(watch.stdout), _lines(watch.stderr)
        seen_err: list[str] = []
        _wait_for(err, "watching all sessions", seen_err)
        writer = subprocess.run(
            [sys.executable, "-c", WRITER, str(filled)],
            capture_output=True,
            text=True,
            timeout=PATIENCE,
        )
        assert writer.returncode == 0, writer.stderr
        seen: list[str] = []
        _wait_for(out, "truncation 900->90 tokens tool_name=half_written", seen)
        _wait_for(out, "tool_result-call_77.txt", seen)
        _wait_for(out, "a message written live", seen)
        _wait_for(out, "brand-new", seen)
        # The half line was printed once, whole, and never as a torn line.
        assert sum("half_written" in line for line in seen) == 1
        assert not any("not JSON" in line for line in seen)
        # What was there before watch started is not repeated.
        assert not any("Find the failing order" in line for line in seen)
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=PATIENCE) == 0
        while not err.empty():
            seen_err.append(err.get())
        assert "Traceback" not in "".join(seen_err)
    finally:
        _stop(watch)


def test_watch_from_start_prints_what_is_there(filled: Path) -> None:
    with _ctrl_c_reaches_children():
        watch = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ctxoffload",
                "watch",
                "run-1",
                "--from-start",
                "--workdir",
                str(filled),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        seen: list[str] = []
        _wait_for(_lines(watch.stdout), "Find the failing order", seen)
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=PATIENCE) == 0
    finally:
        _stop(watch)
