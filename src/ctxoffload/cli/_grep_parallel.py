"""`ctxoffload grep` over many sessions on two cores: the first half searched here, the second
by a forked copy of this process, its lines printed after the first half's, byte for byte
what one process prints (ripgrep searches in parallel too; a workspace of 10,000 small
sessions costs about 0.16 ms of Python a session, which one core cannot bring to 2x GNU
grep's time).

The child searches with the same `WorkspaceSearch` (the same opens: no link followed, no
hard-linked file read, the records left out; the same inert output) and sends what it would
have printed down a pipe, in frames: its stdout bytes (`_OUT`) and its stderr text (`_ERR`,
made inert there as here) in the order it wrote them, and, between two sessions, once about
`_SEND_AT` bytes have gathered (and after its last), a commit (`_DONE`: sessions done,
matches, files skipped). The parent prints a frame only once it is committed, and only after
its own half: a child that dies is replaced by this process searching its sessions from the
first not committed, and no line is printed twice or lost.

While it searches its half, the parent takes what the child wrote from the pipe without
waiting (`_Child.drain`, every `_DRAIN_EVERY` sessions), so a child that prints more than the
pipe holds does not wait for the parent's half to end before it searches the rest of its own.

Memory stays bounded: the parent holds at most `_DRAINED_AT_MOST` bytes so, and past them the
child blocks on a full pipe (widened to 1 MB where allowed) until the parent reads it, so a
search that prints much runs at one process's pace instead of holding the second half's
output; and lines past `_HELD_AT_MOST` bytes since the last commit (a big file matching
everywhere) end the child's part there, its sessions from the first not committed left to
the parent, which prints as it goes.

Used for plain output only (no --json, no -C, whose `--` between hunks depends on the line
printed before), for an RE2 pattern (Python's `re` runs under an interval timer, which a
child does not inherit), when two CPUs are ours and one is idle now (`_busy`), when no other
thread runs (fork copies one thread), and for enough sessions to pay for the fork.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

from ._grep_sessions import WorkspaceSearch
from ._output import InertStream, raw_stream

TYPE_CHECKING = False  # `typing` costs ~8 ms of every command's start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = ["PARALLEL_FROM", "search_sessions"]

PARALLEL_FROM = 256
"""Fewer sessions than this are searched in this process alone: forking and merging cost
about 2 ms, a few hundred small sessions' search."""

# Frame kinds: a frame is its kind, its payload's length (4 bytes, big-endian), its payload.
_OUT, _ERR, _DONE = b"o", b"e", b"d"
_HEADER = 5
# Bytes the child gathers before it commits them and writes them down the pipe (one write
# and two frames for many sessions, not for each).
_SEND_AT = 1 << 16
_PIPE_SIZE = 1 << 20
# The most one session's output the child holds before it leaves the rest to the parent.
_HELD_AT_MOST = 8 << 20
# The most of the child's output the parent takes from the pipe while it searches its own
# half (`_Child.drain`), and how many of its sessions it searches between two looks.
_DRAINED_AT_MOST = 8 << 20
_DRAIN_EVERY = 64
# How the child's stderr text travels as bytes, and back.
_ENCODING, _ERRORS = "utf-8", "surrogateescape"


def search_sessions(search: WorkspaceSearch, sessions: list[str], *, parallel: bool) -> int:
    """Search `sessions` in order, as `search.session` does one by one; with `parallel`, and
    where it pays (see the module), the second half in a child process.

    Returns:
        How many files the child said were not searched (through its own `skip`): the
        parent's count does not see them.
    """
    half = len(sessions) // 2
    child = _Child.start(search, sessions[half:]) if parallel and _worth_two(sessions) else None
    if child is None:
        for session in sessions:
            search.session(session)
        return 0
    try:
        for start in range(0, half, _DRAIN_EVERY):
            for session in sessions[start : min(start + _DRAIN_EVERY, half)]:
                search.session(session)
            child.drain()
        done, skipped = child.print_committed()
    except BaseException:
        child.stop()
        raise
    for session in sessions[half + done :]:  # the child's, from the first it did not finish
        search.session(session)
    return skipped


def _worth_two(sessions: list[str]) -> bool:
    if len(sessions) < PARALLEL_FROM or not hasattr(os, "fork"):
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    if cpus < 2 or _busy(cpus):
        return False
    # Fork copies the calling thread only: with another running, a lock it held would stay
    # held in the child. A grep starts none (`threading` is loaded only by `re`'s deadline).
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


def _busy(cpus: int) -> bool:
    """Whether no CPU is idle for the child now: as many other tasks are runnable as there
    are CPUs but ours (/proc/loadavg's count, which counts this process too). Measured on 2
    CPUs with others busy, two processes then took 20-40% more wall time than one, not less:
    they share one scheduling group's time (autogroup), and each half costs more CPU beside
    the other than alone. The count of this instant, not the load average, whose last
    minute holds this command's own earlier runs (a bench, a loop in a script)."""
    try:
        with open("/proc/loadavg", "rb") as f:
            runnable = int(f.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return False
    return runnable >= cpus  # (this process is one of them)


class _Child:
    """The forked process searching the second half, and the read end of its pipe."""

    def __init__(self, pid: int, pipe: int, search: WorkspaceSearch) -> None:
        self.pid = pid
        self.pipe = pipe
        self.search = search
        # What `drain` took from the pipe, not yet printed; read without waiting until
        # `print_committed`.
        self.drained = bytearray()
        os.set_blocking(pipe, False)

    @classmethod
    def start(cls, search: WorkspaceSearch, sessions: list[str]) -> _Child | None:
        """Fork the child searching `sessions`; None when no pipe or process can be had
        (a descriptor or process limit): the parent then searches them itself."""
        try:
            read_end, write_end = os.pipe()
        except OSError:
            return None
        _widen(write_end)
        # What is buffered is written once, by the parent: the child's copy is dropped.
        search.printer.out.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:  # the child: never returns
            status = 1
            try:
                os.close(read_end)
                _search_and_send(search, sessions, write_end)
                status = 0
            finally:
                os._exit(status)
        os.close(write_end)
        return cls(pid, read_end, search)

    def print_committed(self) -> tuple[int, int]:
        """Print what the child committed, as it comes; then reap it. (On an error or
        Ctrl-C here, `stop` ends it: a child that was sent no signal is not waited for.)

        Returns:
            How many of its sessions it committed, and how many files it skipped in them.
        """
        printer = self.search.printer
        out = printer.out
        stderr = _raw_stderr()
        pending: list[tuple[int, bytes]] = []
        done = matches = skipped = 0
        # What `drain` took first, then the pipe, waited on, to its end.
        buffer, self.drained = self.drained, bytearray()
        os.set_blocking(self.pipe, True)
        chunk = b""
        while True:
            buffer += chunk
            pos, size = 0, len(buffer)
            while size - pos >= _HEADER:
                end = pos + _HEADER + int.from_bytes(buffer[pos + 1 : pos + _HEADER], "big")
                if end > size:
                    break
                kind, payload = buffer[pos], bytes(buffer[pos + _HEADER : end])
                pos = end
                if kind != _DONE[0]:
                    pending.append((kind, payload))
                    continue
                for pending_kind, data in pending:
                    if pending_kind == _OUT[0]:
                        out.write(data)
                    else:
                        out.flush()
                        stderr.write(data.decode(_ENCODING, _ERRORS))
                        stderr.flush()
                pending.clear()
                done, matches, skipped = map(int, payload.split())
            del buffer[:pos]
            chunk = os.read(self.pipe, _PIPE_SIZE)
            if not chunk:
                break
        os.close(self.pipe)
        self.pipe = -1
        self._reap()
        printer.matches += matches
        return done, skipped

    def drain(self) -> None:
        """Take what the child has written to the pipe, without waiting, while this process
        searches its own half: a child whose output fills the pipe would otherwise wait for
        the parent's half to end, and search the rest of its own only then (a workspace of
        10,000 small sessions printed under a long folder: a tenth of the search's time).
        At most `_DRAINED_AT_MOST` bytes are held so; past that the child waits, and the
        search runs at one process's pace instead of holding its output."""
        while len(self.drained) < _DRAINED_AT_MOST:
            try:
                chunk = os.read(self.pipe, _PIPE_SIZE)
            except BlockingIOError:  # nothing more written yet
                return
            if not chunk:  # its end: `print_committed` reads it there too
                return
            self.drained += chunk

    def stop(self) -> None:
        """End the child (the parent stops on an error or Ctrl-C) and reap it."""
        if self.pipe >= 0:
            os.close(self.pipe)
            self.pipe = -1
        if self.pid:
            import signal  # (on this way out only: it loads `enum`)

            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self._reap()

    def _reap(self) -> None:
        if self.pid:
            os.waitpid(self.pid, 0)
            self.pid = 0


def _widen(fd: int) -> None:
    """Give the pipe `_PIPE_SIZE` bytes where the system allows: the child runs ahead by
    that much output before it waits for the parent."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)  # type: ignore[attr-defined,unused-ignore]
    except (ImportError, AttributeError, OSError):
        pass


def _raw_stderr() -> Any:
    """The stream beneath the inert stderr: the child's text was made inert already."""
    return raw_stream(sys.stderr)


class _Frames:
    """What the child sends: its stdout bytes and stderr text in the order written, and the
    commits between them."""

    def __init__(self, pipe: int) -> None:
        self.pipe = pipe
        self.sent = bytearray()  # frames not yet committed and written down the pipe
        self.held = _HeldOutput(self.sent)  # the child's stdout, up to its next frame
        # Printed into through a buffer (C): the lines of a session reach `held`, in one
        # call of Python, when `gathered` asks after it, not in one call each.
        self.out = io.BufferedWriter(self.held, _SEND_AT)

    def frame(self, kind: bytes, payload: bytes) -> None:
        self.sent += kind + len(payload).to_bytes(4, "big") + payload

    def take_out(self) -> None:
        """Frame the stdout bytes written since the last frame."""
        self.out.flush()
        held = self.held.data
        if held:
            self.frame(_OUT, bytes(held))
            held.clear()

    def gathered(self) -> int:
        """Bytes printed since the last commit."""
        self.out.flush()
        return len(self.held.data) + len(self.sent)

    def commit(self, done: int, matches: int, skipped: int) -> None:
        """Commit what was printed up to the end of session number `done`, and send it."""
        self.take_out()
        self.frame(_DONE, b"%d %d %d" % (done, matches, skipped))
        with memoryview(self.sent) as view:
            written = 0
            while written < len(view):
                written += os.write(self.pipe, view[written:])
        self.sent.clear()


class _TooMuchHeld(Exception):
    """One session printed more than the child may hold (`_HELD_AT_MOST`)."""


class _HeldOutput(io.RawIOBase):
    """The child's stdout between two frames (`data`), beneath its buffer, refusing to hold,
    with the frames `sent` gathered since the last commit, more than `_HELD_AT_MOST` bytes
    (and the buffer's `_SEND_AT` above it)."""

    def __init__(self, sent: bytearray) -> None:
        super().__init__()
        self.sent = sent
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if len(self.data) + len(self.sent) + len(data) > _HELD_AT_MOST:
            raise _TooMuchHeld
        self.data += data
        return len(data)


class _FramedStderr(io.StringIO):
    """The child's stderr: each write framed after the stdout bytes written before it."""

    def __init__(self, frames: _Frames) -> None:
        super().__init__()
        self.frames = frames

    def write(self, text: str) -> int:
        data = text.encode(_ENCODING, _ERRORS)
        if self.frames.gathered() + len(data) > _HELD_AT_MOST:
            raise _TooMuchHeld
        self.frames.take_out()
        self.frames.frame(_ERR, data)
        return len(text)


def _search_and_send(search: WorkspaceSearch, sessions: list[str], pipe: int) -> None:
    """The child's work: search `sessions`, sending what it prints down `pipe` (see the
    module)."""
    frames = _Frames(pipe)
    printer = search.printer
    printer.out = frames.out
    printer.matches = 0
    sys.stdout = InertStream(io.StringIO())  # nothing may reach descriptor 1 from here
    sys.stderr = InertStream(_FramedStderr(frames))
    said = search.skip
    skipped = 0

    def skip(message: str) -> None:
        nonlocal skipped
        skipped += 1
        said(message)

    search.skip = skip
    last = len(sessions)
    for number, session in enumerate(sessions, start=1):
        try:
            search.session(session)
            gathered = frames.gathered()  # (its buffer emptied: it may hold too much)
        except _TooMuchHeld:  # the parent searches the sessions since the last commit again
            return
        if number == last or gathered >= _SEND_AT:
            frames.commit(number, printer.matches, skipped)
