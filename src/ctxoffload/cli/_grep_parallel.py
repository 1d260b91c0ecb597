"""`ctxoffload grep` over many sessions on two cores: the first part searched here, the rest
by a forked copy of this process, its lines printed after the first part's, byte for byte
what one process prints (ripgrep searches in parallel too; a workspace of 10,000 small
sessions costs about 0.16 ms of Python a session, which one core cannot bring to 2x GNU
grep's time).

The child searches with the same `WorkspaceSearch` (the same opens: no link followed, no
hard-linked file read, the records left out; the same inert output) and sends what it would
have printed down a pipe, in frames: its stdout bytes (`_OUT`) and its stderr text (`_ERR`,
made inert there as here) in the order it wrote them, and, between two sessions, once about
`_SEND_AT` bytes have gathered (and after its last), a commit (`_DONE`: sessions done,
matches, files skipped). The parent prints a frame only once it is committed, and only after
its own part: a child that dies is replaced by this process searching its sessions from the
first not committed, and no line is printed twice or lost.

While it searches its part, the parent takes what the child wrote from the pipe without
waiting (`_Child.drain`, every `_DRAIN_EVERY` sessions), so a child that prints more than the
pipe holds does not wait for the parent's part to end before it searches the rest of its own.

The two parts seldom take the same time (the machine is shared, the sessions differ): the
parent's is the smaller (`_PARENT_SHARE`), and the parent, done first, asks the child
(`_Child.take_over`, through a second pipe the child looks at every `_ASKED_EVERY`
sessions) to leave it the second half of the sessions the child has not searched yet. The
child says where it stops (`_STOP`) and stops there; the parent searches the rest, its lines
framed and held in memory as the child's are (`_search_held`), and prints them after the
child's; then asks again, for half of what the child has left then. A child that ends, or
has few sessions left, leaves none.

Memory stays bounded: the parent holds at most `_DRAINED_AT_MOST` bytes so (waiting for an
answer too: past them it takes nothing over), and past them the child blocks on a full pipe
(widened to 1 MB where allowed) until the parent reads it, so a search that prints much runs
at one process's pace instead of holding the second part's output; and lines past
`_HELD_AT_MOST` bytes since the last commit (a big file matching everywhere) end the child's
part there, its sessions from the first not committed left to the parent, which prints as
it goes. The parent holds at most as much of the sessions it took over; past that, it
searches the rest of them once the child's lines are printed.

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
    from collections.abc import Callable
    from typing import Any

    from ._grep_output import Printer

__all__ = ["PARALLEL_FROM", "search_sessions"]

PARALLEL_FROM = 256
"""Fewer sessions than this are searched in this process alone: forking and merging cost
about 2 ms, a few hundred small sessions' search."""

# Frame kinds: a frame is its kind, its payload's length (4 bytes, big-endian), its payload.
# `_STOP` is the child's answer to the parent taking over (written as soon as it is asked).
_OUT, _ERR, _DONE, _STOP = b"o", b"e", b"d", b"s"
_HEADER = 5
# Bytes the child gathers before it commits them and writes them down the pipe (one write
# and two frames for many sessions, not for each).
_SEND_AT = 1 << 16
_PIPE_SIZE = 1 << 20
# The most one session's output the child holds before it leaves the rest to the parent.
_HELD_AT_MOST = 8 << 20
# The most of the child's output the parent takes from the pipe while it searches its own
# part (`_Child.drain`), and how many of its sessions it searches between two looks.
_DRAINED_AT_MOST = 8 << 20
_DRAIN_EVERY = 64
# How many sessions the child searches between two looks at whether the parent asks to take
# over (one read a look), and the fewest it leaves: fewer are not worth holding lines for.
_ASKED_EVERY = 8
_TAKEN_AT_LEAST = 16
# The parent's share of the sessions: less than half, so that it is done first and takes
# over what the child has left (`_Child.take_over`), however the two are slowed; a child
# done first would wait for the parent, which nothing evens out. Two fifths are done first
# while the child runs up to 50% faster than the parent.
_PARENT_SHARE = 0.4
# How the child's stderr text travels as bytes, and back.
_ENCODING, _ERRORS = "utf-8", "surrogateescape"


def search_sessions(search: WorkspaceSearch, sessions: list[str], *, parallel: bool) -> int:
    """Search `sessions` in order, as `search.session` does one by one; with `parallel`, and
    where it pays (see the module), the second part in a child process.

    Returns:
        How many files the child said were not searched (through its own `skip`): the
        parent's count does not see them.
    """
    mine = int(len(sessions) * _PARENT_SHARE)
    theirs = sessions[mine:]
    child = _Child.start(search, theirs) if parallel and _worth_two(sessions) else None
    if child is None:
        for session in sessions:
            search.session(session)
        return 0
    try:
        for start in range(0, mine, _DRAIN_EVERY):
            for session in sessions[start : min(start + _DRAIN_EVERY, mine)]:
                search.session(session)
            child.drain()
        # The child's sessions from `end` on are searched here, in pieces taken over one
        # after the other while the child searches on (`held`: the last piece first).
        end, room = len(theirs), _HELD_AT_MOST
        held: list[tuple[int, int, bytearray]] = []
        while room > 0:
            stop = child.take_over()
            if stop >= end:
                break
            kept, whole = _search_held(search, theirs[stop:end], child, room)
            held.append((stop, end, kept))
            end, room = stop, room - len(kept)
            if not whole:
                break
        done, skipped = child.print_committed()
    except BaseException:
        child.stop()
        raise
    for session in theirs[done:end]:  # the child's, from the first it did not finish
        search.session(session)
    for start, stop, kept in reversed(held):
        printed = _FramePrinter(search.printer)
        printed.feed(kept)
        skipped += printed.skipped
        for session in theirs[start + printed.done : stop]:  # those it held no lines of
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
    """The forked process searching the second part, and the read end of its pipe."""

    def __init__(
        self, pid: int, pipe: int, control: int, search: WorkspaceSearch, count: int
    ) -> None:
        self.pid = pid
        self.pipe = pipe
        self.control = control  # the write end of the pipe `take_over` asks through
        self.search = search
        self.count = count  # the child's sessions
        # What `drain` took from the pipe, not yet printed; read without waiting until
        # `print_committed`; and how far `take_over` has looked through it for `_STOP`.
        self.drained = bytearray()
        self.scanned = 0
        self.ended = False  # the pipe's end was read: the child has nothing more to say
        os.set_blocking(pipe, False)

    @classmethod
    def start(cls, search: WorkspaceSearch, sessions: list[str]) -> _Child | None:
        """Fork the child searching `sessions`; None when no pipe or process can be had
        (a descriptor or process limit): the parent then searches them itself."""
        pipes: list[int] = []
        try:
            for _ in range(2):
                pipes += os.pipe()
        except OSError:
            for fd in pipes:
                os.close(fd)
            return None
        read_end, write_end, asked, ask = pipes
        _widen(write_end)
        # What is buffered is written once, by the parent: the child's copy is dropped.
        search.printer.out.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError:
            for fd in pipes:
                os.close(fd)
            return None
        if pid == 0:  # the child: never returns
            status = 1
            try:
                os.close(read_end)
                os.close(ask)
                os.set_blocking(asked, False)
                _search_and_send(search, sessions, write_end, asked)
                status = 0
            finally:
                os._exit(status)
        os.close(write_end)
        os.close(asked)
        return cls(pid, read_end, ask, search, len(sessions))

    def print_committed(self) -> tuple[int, int]:
        """Print what the child committed, as it comes; then reap it. (On an error or
        Ctrl-C here, `stop` ends it: a child that was sent no signal is not waited for.)

        Returns:
            How many of its sessions it committed, and how many files it skipped in them.
        """
        printed = _FramePrinter(self.search.printer)
        # What `drain` took first, then the pipe, waited on, to its end.
        buffer, self.drained = self.drained, bytearray()
        os.set_blocking(self.pipe, True)
        chunk = b""
        while True:
            buffer += chunk
            del buffer[: printed.feed(buffer)]
            if self.ended:
                break
            chunk = os.read(self.pipe, _PIPE_SIZE)
            self.ended = not chunk
        self._close()
        self._reap()
        return printed.done, printed.skipped

    def take_over(self) -> int:
        """Ask the child to leave to this process the second half of the sessions it has not
        searched yet, once this process's part is done; wait for its answer (`_STOP`).

        Returns:
            How many of its sessions the child searches: all of them when it has ended (or
            ends before it answers), has fewer than twice `_TAKEN_AT_LEAST` left, or has
            sent more than this process holds from the pipe (`_DRAINED_AT_MOST`), before it
            is asked or while its answer is waited for. (Not waited for, it still stops
            where it answers: the sessions after are then searched by this process once the
            child's lines are printed, as those of a child that ended early.)
        """
        if self.ended or len(self.drained) >= _DRAINED_AT_MOST:
            return self.count
        try:
            os.write(self.control, b"?")
        except OSError:  # (it has ended and closed its end)
            return self.count
        os.set_blocking(self.pipe, True)
        try:
            while True:
                stop = self._stop_said()
                if stop is not None:
                    return stop
                if len(self.drained) >= _DRAINED_AT_MOST:
                    return self.count
                chunk = os.read(self.pipe, _PIPE_SIZE)
                if not chunk:
                    self.ended = True
                    return self.count
                self.drained += chunk
        finally:
            if not self.ended:
                os.set_blocking(self.pipe, False)

    def _stop_said(self) -> int | None:
        """The child's `_STOP` answer, if it is in what was drained (looked for once)."""
        buffer, pos = self.drained, self.scanned
        while len(buffer) - pos >= _HEADER:
            end = pos + _HEADER + int.from_bytes(buffer[pos + 1 : pos + _HEADER], "big")
            if end > len(buffer):
                break
            if buffer[pos] == _STOP[0]:
                self.scanned = end
                return int(buffer[pos + _HEADER : end])
            pos = end
        self.scanned = pos
        return None

    def drain(self) -> None:
        """Take what the child has written to the pipe, without waiting, while this process
        searches its own part: a child whose output fills the pipe would otherwise wait for
        the parent's part to end, and search the rest of its own only then (a workspace of
        10,000 small sessions printed under a long folder: a tenth of the search's time).
        At most `_DRAINED_AT_MOST` bytes are held so; past that the child waits, and the
        search runs at one process's pace instead of holding its output."""
        while not self.ended and len(self.drained) < _DRAINED_AT_MOST:
            try:
                chunk = os.read(self.pipe, _PIPE_SIZE)
            except BlockingIOError:  # nothing more written yet
                return
            if not chunk:  # its end
                self.ended = True
                return
            self.drained += chunk

    def stop(self) -> None:
        """End the child (the parent stops on an error or Ctrl-C) and reap it."""
        self._close()
        if self.pid:
            import signal  # (on this way out only: it loads `enum`)

            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self._reap()

    def _close(self) -> None:
        for fd in (self.pipe, self.control):
            if fd >= 0:
                os.close(fd)
        self.pipe = self.control = -1

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


class _FramePrinter:
    """Prints frames (the child's from its pipe, or those `_search_held` kept) as they are
    committed: stdout bytes and stderr text in the order written, each commit's up to its
    `_DONE`; what follows the last commit is never printed."""

    def __init__(self, printer: Printer) -> None:
        self.printer = printer
        self.stderr = _raw_stderr()  # (the text was made inert where it was written)
        self.pending: list[tuple[int, bytes]] = []
        self.done = self.skipped = 0  # as the last commit says

    def feed(self, buffer: bytearray) -> int:
        """Print the frames of `buffer` committed so far; how many of its bytes were read
        (a frame cut by its end is left for the next call)."""
        out, pending = self.printer.out, self.pending
        pos, size = 0, len(buffer)
        while size - pos >= _HEADER:
            end = pos + _HEADER + int.from_bytes(buffer[pos + 1 : pos + _HEADER], "big")
            if end > size:
                break
            kind, payload = buffer[pos], bytes(buffer[pos + _HEADER : end])
            pos = end
            if kind == _STOP[0]:  # (an answer `take_over` read already)
                continue
            if kind != _DONE[0]:
                pending.append((kind, payload))
                continue
            for pending_kind, data in pending:
                if pending_kind == _OUT[0]:
                    out.write(data)
                else:
                    out.flush()
                    self.stderr.write(data.decode(_ENCODING, _ERRORS))
                    self.stderr.flush()
            pending.clear()
            done, matches, self.skipped = map(int, payload.split())
            # (`matches` counts from the start of the frames: what is new since the last)
            self.printer.matches += matches - self._matches
            self._matches, self.done = matches, done
        return pos

    _matches = 0


class _Frames:
    """What a search framed prints (the child's, or what the parent holds): its stdout
    bytes and stderr text in the order written, and the commits between them, each handed
    to `send` with the frames before it."""

    def __init__(self, send: Callable[[bytearray], None]) -> None:
        self.send = send
        self.sent = bytearray()  # frames not yet committed and sent
        self.held = _HeldOutput(self.sent)  # the stdout, up to its next frame
        # Printed into through a buffer (C): the lines reach `held` in one call of Python for
        # each `_SEND_AT` bytes (or at a commit), not in one call each, nor one a session
        # (5% of the child's instructions, callgrind).
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
        """Bytes printed since the last commit and passed on by the buffer (which passes
        them on once it holds `_SEND_AT`: a search commits after the session that filled
        it)."""
        return len(self.held.data) + len(self.sent)

    def commit(self, done: int, matches: int, skipped: int) -> None:
        """Commit what was printed up to the end of session number `done`, and send it."""
        self.take_out()
        self.frame(_DONE, b"%d %d %d" % (done, matches, skipped))
        self.send(self.sent)
        self.sent.clear()


def _write_all(pipe: int, data: bytes | bytearray) -> None:
    with memoryview(data) as view:
        written = 0
        while written < len(view):
            written += os.write(pipe, view[written:])


class _TooMuchHeld(Exception):
    """More was printed since the last commit than may be held (`_HELD_AT_MOST`)."""


class _HeldOutput(io.RawIOBase):
    """The stdout between two frames (`data`), beneath its buffer, refusing to hold, with
    the frames `sent` gathered since the last commit, more than `_HELD_AT_MOST` bytes (and
    the buffer's `_SEND_AT` above it)."""

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
    """The stderr of a search framed: each write framed after the stdout bytes written
    before it."""

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


class _Framed:
    """For the length of a `with` block, what `search` prints goes into `frames`: its
    printer's stdout, sys.stdout (nothing may reach descriptor 1) and sys.stderr; matches
    are counted from 0, and each file not searched in `skipped` (said through the printer,
    as `skip` says it, and counted here: the parent counts only what it prints). Put back
    as they were after (the parent goes on printing)."""

    def __init__(self, search: WorkspaceSearch, frames: _Frames) -> None:
        self.search = search
        self.frames = frames
        self.skipped = 0

    def __enter__(self) -> _Framed:
        search, printer = self.search, self.search.printer
        self.saved = (printer.out, printer.matches, sys.stdout, sys.stderr, search.skip)
        printer.out = self.frames.out
        printer.matches = 0
        sys.stdout = InertStream(io.StringIO())
        sys.stderr = InertStream(_FramedStderr(self.frames))

        def skip(message: str) -> None:
            self.skipped += 1
            printer.note(message)

        search.skip = skip
        return self

    def __exit__(self, *exc: object) -> None:
        printer = self.search.printer
        printer.out, printer.matches, sys.stdout, sys.stderr, self.search.skip = self.saved


def _search_and_send(search: WorkspaceSearch, sessions: list[str], pipe: int, asked: int) -> None:
    """The child's work: search `sessions`, sending what it prints down `pipe` (see the
    module); every `_ASKED_EVERY` sessions, look whether the parent asks on `asked` to take
    over (`_answer`). A search that holds too much ends at its last commit: the parent
    searches the sessions after it."""

    def between(number: int, last: int) -> int:
        nonlocal asked
        if asked >= 0 and not number % _ASKED_EVERY:  # (asked again after each piece)
            last, asked = _answer(asked, pipe, number, last)
        return last

    _search_framed(search, sessions, _Frames(lambda sent: _write_all(pipe, sent)), between)


def _search_framed(
    search: WorkspaceSearch,
    sessions: list[str],
    frames: _Frames,
    between: Callable[[int, int], int],
) -> bool:
    """Search `sessions` in order with what `search` prints framed into `frames` (the
    child's, sent down its pipe, or a piece the parent took over, held), committed after
    the last session and after each that fills `_SEND_AT`. `between(number, last)` runs
    after each session and returns the number of the last one to search (the child's
    shrinks when the parent takes over).

    Returns:
        Whether every session was searched and committed: False once more was printed
        since the last commit than may be held (`_TooMuchHeld`).
    """
    printer = search.printer
    with _Framed(search, frames) as framed:
        last, number = len(sessions), 0
        while number < last:
            number += 1
            try:
                search.session(sessions[number - 1])
                last = between(number, last)
                if number == last or frames.gathered() >= _SEND_AT:
                    frames.commit(number, printer.matches, framed.skipped)
            except _TooMuchHeld:
                return False
    return True


def _answer(asked: int, pipe: int, number: int, last: int) -> tuple[int, int]:
    """Whether the parent asks to take over (a byte on `asked`), the child being done with
    `number` of its `last` sessions; when it asks, say (`_STOP`, at once) and return where
    the child stops: half of what is left is left to the parent, unless too few are.

    Returns:
        The session the child searches last, and `asked`, or -1 once the parent will not
        ask again (it closed its end, or too few are left)."""
    try:
        if not os.read(asked, 1):
            return last, -1  # (the parent has ended its part: it will not ask)
    except BlockingIOError:
        return last, asked
    left = last - number
    stop = number + (left + 1) // 2 if left >= 2 * _TAKEN_AT_LEAST else last
    payload = b"%d" % stop
    _write_all(pipe, _STOP + len(payload).to_bytes(4, "big") + payload)
    return stop, asked if stop < last else -1


def _search_held(
    search: WorkspaceSearch, sessions: list[str], child: _Child, room: int
) -> tuple[bytearray, bool]:
    """The parent's search of the child's last `sessions` (`_Child.take_over`), framed as
    the child's and held, to be printed after the child's (`_FramePrinter`); the child's
    pipe drained meanwhile. Up to `room` bytes are held: the sessions past the last commit
    within them are left out, to be searched once the child's lines are printed.

    Returns:
        The frames, and whether they hold every session.
    """
    kept = bytearray()

    def keep(sent: bytearray) -> None:
        if len(kept) + len(sent) > room:
            raise _TooMuchHeld
        kept.extend(sent)

    def between(number: int, last: int) -> int:
        if not number % _DRAIN_EVERY:
            child.drain()
        return last

    return kept, _search_framed(search, sessions, _Frames(keep), between)
