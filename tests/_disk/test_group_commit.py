"""Group commit: threads appending to one log share a write and an fsync, and lose nothing by it.

Everything runs on real files in tmp_path. Two things are instrumented, and only these:
`os.fsync` is wrapped (it still syncs) to count the syncs of each file and to record, at each,
how much of the file it covers, and to take half a millisecond more, as a slow disk would (so
that threads do pile up behind a sync even on tmpfs). A full disk cannot be staged in
tmp_path, so the ENOSPC tests use a subclass whose `_write` writes part of a too-big payload,
cuts the file back as the real one does, and raises ENOSPC. To make a group form on purpose,
the test holds the log's flock itself while the batches queue up.
"""

from __future__ import annotations

import dis
import errno
import fcntl
import functools
import inspect
import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ctxoffload._disk.commit import decode_commit_record, read_log
from ctxoffload._disk.jsonl import JsonlAppender
from ctxoffload._disk.layout import COMMIT_SUFFIX
from ctxoffload._disk.rows import row_line_and_key

SpawnPython = Callable[..., "subprocess.Popen[str]"]
Lines = list[bytes]
Ids = list[str | None] | None
Outcome = tuple[int, int] | BaseException

LOG = "context.jsonl"


@pytest.fixture
def dir_fd(tmp_path: Path) -> Iterator[int]:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def _rows(*rows: dict[str, Any]) -> tuple[Lines, Ids]:
    """Lines and message keys of context rows, as LocalWorkspace makes them."""
    pairs = [row_line_and_key(row) for row in rows]
    return [line for line, _ in pairs], [key for _, key in pairs]


def _msg(msg_id: str | None, text: str = "") -> dict[str, Any]:
    row: dict[str, Any] = {"role": "user", "content": text or f"content of {msg_id}"}
    if msg_id is not None:
        row["id"] = msg_id
    return row


@dataclass
class _Covered:
    size: int = 0  # bytes of the file written before an fsync of it returned
    record: int = 0  # for a commit record: the committed length it held when synced


@dataclass
class _FsyncWatch:
    """Stands in for os.fsync: syncs, slowly, and notes per file what each sync covered."""

    real: Callable[[int], None]
    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: Counter[tuple[int, int]] = field(default_factory=Counter)
    covered: dict[tuple[int, int], _Covered] = field(default_factory=dict)

    def __call__(self, fd: int) -> None:
        # Whatever is in the file before the sync starts is on disk once it returns.
        st = os.fstat(fd)
        record = decode_commit_record(os.pread(fd, 64, 0))
        self.real(fd)
        time.sleep(0.0005)
        with self.lock:
            key = (st.st_dev, st.st_ino)
            self.calls[key] += 1
            seen = self.covered.setdefault(key, _Covered())
            seen.size = max(seen.size, st.st_size)
            if record is not None:
                seen.record = max(seen.record, record[0])

    def snapshot(self) -> dict[tuple[int, int], _Covered]:
        with self.lock:
            return {k: _Covered(v.size, v.record) for k, v in self.covered.items()}

    @staticmethod
    def key(path: Path) -> tuple[int, int]:
        st = os.stat(path)
        return st.st_dev, st.st_ino


@pytest.fixture
def fsync_watch(monkeypatch: pytest.MonkeyPatch) -> _FsyncWatch:
    watch = _FsyncWatch(os.fsync)
    monkeypatch.setattr(os, "fsync", watch)
    return watch


def _queued(appender: JsonlAppender, shown: str) -> int:
    queue = appender._queues.get(shown)
    return 0 if queue is None else len(queue.batches)


def _has_queued(appender: JsonlAppender, shown: str, count: int) -> bool:
    return _queued(appender, shown) == count


def _in_threads(write: Callable[[int], None], count: int) -> None:
    """Run `write(0)` .. `write(count - 1)` each on a thread of its own, all at once; wait for
    them (none may hang)."""
    threads = [threading.Thread(target=write, args=(t,), daemon=True) for t in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive()


def _wait_for(predicate: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def _append_as_one_group(
    appender: JsonlAppender,
    dir_fd: int,
    shown: str,
    batches: Sequence[tuple[Lines, Ids]],
    *,
    commit: bool,
) -> list[Outcome]:
    """Append `batches` from one thread each, queued in this order behind a held flock.

    The first caller leads; it waits for the flock the test holds until all are queued, so
    its group is every batch, in order.
    """
    outcomes: list[Outcome | None] = [None] * len(batches)

    def run(i: int, lines: Lines, ids: Ids) -> None:
        try:
            outcomes[i] = appender.append(dir_fd, LOG, shown, lines, ids, commit=commit)
        except BaseException as exc:
            outcomes[i] = exc

    holder = os.open(shown, os.O_RDWR | os.O_CREAT)
    threads = []
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        for i, (lines, ids) in enumerate(batches):
            thread = threading.Thread(target=run, args=(i, lines, ids), daemon=True)
            thread.start()
            threads.append(thread)
            _wait_for(functools.partial(_has_queued, appender, shown, i + 1))
    finally:
        os.close(holder)  # releases the flock
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    assert _queued(appender, shown) == 0
    return [outcome for outcome in outcomes if outcome is not None]


def _append_one_by_one(
    appender: JsonlAppender,
    dir_fd: int,
    shown: str,
    batches: Sequence[tuple[Lines, Ids]],
    *,
    commit: bool,
) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for lines, ids in batches:
        try:
            outcomes.append(appender.append(dir_fd, LOG, shown, lines, ids, commit=commit))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


def _same(a: list[Outcome], b: list[Outcome]) -> bool:
    def norm(o: Outcome) -> object:
        return (type(o).__name__, getattr(o, "errno", None)) if isinstance(o, BaseException) else o

    return [norm(o) for o in a] == [norm(o) for o in b]


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


# Scenarios for "a group does what appending its batches one after another does". Each starts
# from a state set up by `setup(appender, dir_fd, shown)` and appends `batches`.
def _nothing(appender: JsonlAppender, dir_fd: int, shown: str) -> None:
    pass


def _committed_a(appender: JsonlAppender, dir_fd: int, shown: str) -> None:
    appender.append(dir_fd, LOG, shown, *_rows(_msg("a"), _msg(None, "no id")), commit=True)


def _old_log_with_torn_end(appender: JsonlAppender, dir_fd: int, shown: str) -> None:
    # A log from before commit records whose writer died just before the last newline: the
    # line is whole JSON, and once a writer closes it, it is a message like any other.
    torn = row_line_and_key(_msg("t", "torn"))[0][:-1]
    Path(shown).write_bytes(row_line_and_key(_msg("old", "old"))[0] + torn)


@dataclass
class _Scenario:
    setup: Callable[[JsonlAppender, int, str], None]
    batches: list[tuple[Lines, Ids]]
    spans: list[tuple[int, int]]  # what each batch gets back
    ids: list[str | None]  # the ids in the log after them and a last batch of "b" and "z"


SCENARIOS = {
    "ids-shared-between-batches": _Scenario(
        _nothing,
        [
            _rows(_msg("a"), _msg("b")),
            _rows(_msg("b"), _msg("c")),
            _rows(_msg("a"), _msg("b"), _msg("c")),  # nothing new: the span where they are
            _rows(_msg("d"), _msg("d"), _msg("a")),  # a repeat inside one batch is kept
            _rows(_msg(None, "no id"), _msg(None, "no id")),
            _rows(_msg("d"), _msg("e")),
        ],
        [(1, 2), (2, 3), (1, 3), (1, 5), (6, 7), (4, 8)],
        ["a", "b", "c", "d", "d", None, None, "e", "z"],
    ),
    "after-a-committed-batch": _Scenario(
        _committed_a,
        [_rows(_msg(None, "x")), _rows(_msg("a"), _msg("b")), _rows(_msg("b"))],
        [(3, 3), (1, 4), (4, 4)],
        ["a", None, None, "b", "z"],
    ),
    "old-log-torn-at-the-end": _Scenario(
        _old_log_with_torn_end,
        [
            # No ids: no index yet; the next batch must read the ids of the whole log,
            # including the torn line this batch closes and lines not yet on disk.
            ([row_line_and_key(_msg(None, "first"))[0], row_line_and_key(_msg("n1"))[0]], None),
            _rows(_msg("t", "torn"), _msg("n1"), _msg("old", "old"), _msg("n2")),
            _rows(_msg("n2")),
        ],
        [(3, 4), (1, 5), (5, 5)],
        ["old", "t", None, "n1", "n2", "b", "z"],
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_group_writes_the_bytes_and_spans_of_appending_one_by_one(
    tmp_path: Path, fsync_watch: _FsyncWatch, name: str
) -> None:
    scenario = SCENARIOS[name]
    results = {}
    for mode in ("grouped", "one_by_one"):
        directory = tmp_path / mode
        directory.mkdir()
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            appender = JsonlAppender(group=mode == "grouped")
            shown = str(directory / LOG)
            scenario.setup(appender, fd, shown)
            Path(shown).touch()
            before = fsync_watch.calls[_FsyncWatch.key(Path(shown))]
            append = _append_as_one_group if mode == "grouped" else _append_one_by_one
            outcomes = append(appender, fd, shown, scenario.batches, commit=True)
            syncs = fsync_watch.calls[_FsyncWatch.key(Path(shown))] - before
            # What the appender remembers of the log is right for the next append too.
            after = appender.append(fd, LOG, shown, *_rows(_msg("b"), _msg("z")), commit=True)
            ids = [row.get("id") for row in read_log(fd, LOG, shown, commit=True)]
        finally:
            os.close(fd)
        results[mode] = (outcomes, _files(directory), after, ids, syncs)
    grouped, one_by_one = results["grouped"], results["one_by_one"]
    assert grouped[:4] == one_by_one[:4]
    assert grouped[0] == scenario.spans
    assert grouped[3] == scenario.ids
    assert grouped[4] == 1  # one fsync for the whole group


def test_concurrently_grouped_batches_write_a_shared_message_once(
    tmp_path: Path, dir_fd: int, fsync_watch: _FsyncWatch
) -> None:
    appender = JsonlAppender()
    shown = str(tmp_path / LOG)
    batches = [_rows(_msg("shared"), _msg(f"own{i}")) for i in range(6)]
    outcomes = _append_as_one_group(appender, dir_fd, shown, batches, commit=True)
    assert outcomes == [(1, 2), (1, 3), (1, 4), (1, 5), (1, 6), (1, 7)]
    ids = [row["id"] for row in read_log(dir_fd, LOG, shown, commit=True)]
    assert ids == ["shared"] + [f"own{i}" for i in range(6)]
    assert fsync_watch.calls[_FsyncWatch.key(Path(shown))] == 1


THREADS = 16
BATCHES = 50


@pytest.mark.slow
@pytest.mark.parametrize("commit", [True, False], ids=["committed", "plain"])
def test_many_threads_find_each_batch_at_its_span_and_synced_before_it_returned(
    tmp_path: Path, dir_fd: int, fsync_watch: _FsyncWatch, commit: bool
) -> None:
    appender = JsonlAppender()
    shown = str(tmp_path / LOG)
    returned: dict[tuple[int, int], tuple[Lines, tuple[int, int], dict[Any, _Covered]]] = {}
    errors: list[BaseException] = []

    def write(thread: int) -> None:
        rng = random.Random(thread)
        try:
            for seq in range(BATCHES):
                n = rng.choice([1, 1, 2, 3, 5, 8, 13])
                pad = rng.choice([10, 100, 1000, 5000]) if seq % 25 else 150_000
                rows = [
                    {"id": f"t{thread}-b{seq}-{i}", "role": "user", "content": "x" * (pad + i)}
                    for i in range(n)
                ]
                if commit:
                    lines, ids = _rows(*rows)
                else:
                    lines, ids = [row_line_and_key(row)[0] for row in rows], None
                span = appender.append(dir_fd, LOG, shown, lines, ids, commit=commit)
                returned[thread, seq] = (lines, span, fsync_watch.snapshot())
        except BaseException as exc:
            errors.append(exc)

    _in_threads(write, THREADS)
    assert errors == []

    data = Path(shown).read_bytes()
    file_lines = data.split(b"\n")[:-1]
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    log_key = _FsyncWatch.key(Path(shown))
    record_key = _FsyncWatch.key(Path(shown + COMMIT_SUFFIX)) if commit else None
    covered_lines: set[int] = set()
    for lines, (first, last), seen in returned.values():
        assert last - first + 1 == len(lines)
        assert file_lines[first - 1 : last] == [line[:-1] for line in lines]
        # Synced (and committed) before append returned.
        assert ends[last - 1] <= seen[log_key].size
        if record_key is not None:
            assert ends[last - 1] <= seen[record_key].record
        assert covered_lines.isdisjoint(range(first, last + 1))
        covered_lines.update(range(first, last + 1))
    # No line lost, none twice, nothing else in the file.
    assert covered_lines == set(range(1, len(file_lines) + 1))
    assert len(read_log(dir_fd, LOG, shown, commit=commit)) == len(file_lines)
    syncs = fsync_watch.calls[log_key]
    assert syncs < THREADS * BATCHES * 3 // 4, f"{syncs} fsyncs for {THREADS * BATCHES} batches"
    if record_key is not None:
        assert fsync_watch.calls[record_key] == syncs
        record = decode_commit_record((tmp_path / (LOG + COMMIT_SUFFIX)).read_bytes())
        assert record == (len(data), len(file_lines))


@dataclass
class _SmallDisk(JsonlAppender):
    """A disk with `room` bytes free: a bigger write gets part of the way, then ENOSPC.

    (`_write` is the one method replaced: it writes what fits, cuts the file back as the
    real one does on failure, and raises.)
    """

    room: int = 0
    group: bool = True
    writes: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(group=self.group)

    def _write(
        self,
        key: str,
        fd: int,
        payload: bytes,
        size: int,
        *,
        commit: tuple[int, int] | None = None,
        sync: bool = True,
    ) -> None:
        self.writes.append(len(payload))
        if len(payload) <= self.room:
            super()._write(key, fd, payload, size, commit=commit, sync=sync)
            return
        try:
            os.write(fd, payload[: self.room])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except BaseException:
            self._cut_back(key, fd, size)
            raise


@pytest.mark.parametrize("commit", [True, False], ids=["committed", "plain"])
def test_a_batch_too_big_for_the_disk_fails_alone_and_the_rest_of_its_group_lands(
    tmp_path: Path, commit: bool
) -> None:
    small_a = _rows(_msg("a1"), _msg("a2"))
    huge = _rows(*(_msg(f"h{i}", "h" * 1000) for i in range(40)))
    small_c = _rows(_msg("c1"))
    batches = [small_a, huge, small_c]
    results = {}
    for mode in ("grouped", "one_by_one"):
        directory = tmp_path / mode
        directory.mkdir()
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            appender = _SmallDisk(room=10_000, group=mode == "grouped")
            shown = str(directory / LOG)
            Path(shown).touch()
            append = _append_as_one_group if mode == "grouped" else _append_one_by_one
            outcomes = append(appender, fd, shown, batches, commit=commit)
            rows = read_log(fd, LOG, shown, commit=commit)
        finally:
            os.close(fd)
        results[mode] = (outcomes, _files(directory), rows, appender.writes)
    outcomes, files, rows, writes = results["grouped"]
    assert outcomes[0] == (1, 2)
    assert isinstance(outcomes[1], OSError) and outcomes[1].errno == errno.ENOSPC
    assert outcomes[2] == (3, 3)
    assert [row["id"] for row in rows] == ["a1", "a2", "c1"]
    # The group was tried in one write first, then each batch alone.
    sizes = [sum(map(len, lines)) for lines, _ in batches]
    assert writes == [sum(sizes), *sizes]
    assert _same(outcomes, results["one_by_one"][0])
    assert files == results["one_by_one"][1]


@dataclass
class _InterruptedOnce(JsonlAppender):
    """The first write gets part of the way and is interrupted (KeyboardInterrupt)."""

    interrupted: bool = False

    def __post_init__(self) -> None:
        super().__init__()

    def _write(
        self, key: str, fd: int, payload: bytes, size: int, *, commit: tuple[int, int] | None = None
    ) -> None:
        if self.interrupted:
            super()._write(key, fd, payload, size, commit=commit)
            return
        self.interrupted = True
        try:
            os.write(fd, payload[: len(payload) // 2])
            raise KeyboardInterrupt
        except BaseException:
            self._cut_back(key, fd, size)
            raise


def test_a_leader_interrupted_mid_write_leaves_no_follower_waiting(
    tmp_path: Path, dir_fd: int
) -> None:
    appender = _InterruptedOnce()
    shown = str(tmp_path / LOG)
    batches = [_rows(_msg("a")), _rows(_msg("b1"), _msg("b2")), _rows(_msg("c"))]
    outcomes = _append_as_one_group(appender, dir_fd, shown, batches, commit=True)
    assert isinstance(outcomes[0], KeyboardInterrupt)
    # The next in the queue led the rest.
    assert outcomes[1:] == [(1, 2), (3, 3)]
    assert [row["id"] for row in read_log(dir_fd, LOG, shown, commit=True)] == ["b1", "b2", "c"]
    assert decode_commit_record((tmp_path / (LOG + COMMIT_SUFFIX)).read_bytes()) == (
        os.path.getsize(shown),
        3,
    )


class _Interrupted(BaseException):
    pass


def test_a_follower_interrupted_while_waiting_leaves_the_queue(tmp_path: Path, dir_fd: int) -> None:
    appender = JsonlAppender()
    shown = str(tmp_path / LOG)
    results: dict[str, tuple[int, int]] = {}

    def run(name: str) -> None:
        results[name] = appender.append(dir_fd, LOG, shown, *_rows(_msg(name)), commit=True)

    interrupted = threading.Event()

    def interrupt_main_once_queued() -> None:
        _wait_for(lambda: _queued(appender, shown) == 2)
        # A signal that lands after the main thread's last check and before it blocks in the
        # wait is seen only when it wakes (never): send it again until it was raised.
        while not interrupted.is_set():
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)
            interrupted.wait(0.05)

    def on_signal(signum: int, frame: object) -> None:
        if not interrupted.is_set():
            interrupted.set()
            raise _Interrupted

    previous = signal.signal(signal.SIGUSR1, on_signal)
    holder = os.open(shown, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)
    leader = threading.Thread(target=run, args=("a",), daemon=True)
    follower = threading.Thread(target=run, args=("c",), daemon=True)
    try:
        leader.start()
        _wait_for(lambda: _queued(appender, shown) == 1)
        killer = threading.Thread(target=interrupt_main_once_queued, daemon=True)
        killer.start()
        with pytest.raises(_Interrupted):
            appender.append(dir_fd, LOG, shown, *_rows(_msg("b")), commit=True)
        killer.join()
        assert _queued(appender, shown) == 1
        follower.start()
        _wait_for(lambda: _queued(appender, shown) == 2)
    finally:
        os.close(holder)
        signal.signal(signal.SIGUSR1, previous)
    leader.join(timeout=30)
    follower.join(timeout=30)
    assert results == {"a": (1, 1), "c": (2, 2)}
    assert [row["id"] for row in read_log(dir_fd, LOG, shown, commit=True)] == ["a", "c"]
    assert _queued(appender, shown) == 0


def test_an_interrupt_at_any_step_before_the_cleanup_strands_no_batch(
    tmp_path: Path, dir_fd: int
) -> None:
    """A signal's handler (KeyboardInterrupt) runs where the interpreter checks for pending
    signals, among them right after each call returns. One raised after each call of
    `_queue_up` before its `finally` (past it, no Python code can promise its cleanup) leaves
    no batch in the queue: the next writer is not left waiting for a leader that is gone,
    and every batch an append acknowledged is in the log."""
    appender = JsonlAppender()
    shown = str(tmp_path / LOG)
    code = JsonlAppender._queue_up.__code__
    source, first = inspect.getsourcelines(JsonlAppender._queue_up)
    cleanup = first + next(n for n, line in enumerate(source) if line.strip() == "finally:")
    steps = list(dis.get_instructions(code))
    checks = {after.offset for call, after in itertools.pairwise(steps) if call.opname == "CALL"}
    acknowledged: list[str] = []

    def append_once(name: str) -> None:
        appender.append(dir_fd, LOG, shown, *_rows(_msg(name)), commit=True)
        acknowledged.append(name)

    def interrupting_at(step: int) -> Callable[..., Any]:
        """A tracer raising `_Interrupted` at the `step`-th check (0 the first)."""
        seen = 0

        def tracer(frame: Any, event: str, arg: Any) -> Any:
            nonlocal seen
            if event == "call":
                if frame.f_code is not code:
                    return None
                frame.f_trace_opcodes = True
                return tracer
            if event == "opcode" and frame.f_lasti in checks and frame.f_lineno < cleanup:
                seen += 1
                if seen == step + 1:
                    raise _Interrupted
            return tracer

        return tracer

    step = 0
    while True:
        tracer = interrupting_at(step)
        sys.settrace(tracer)
        try:
            append_once(f"i{step}")
            interrupted = False
        except _Interrupted:
            interrupted = True
        finally:
            sys.settrace(None)
        assert _queued(appender, shown) == 0, f"a batch stranded by an interrupt at step {step}"
        # The next writer, on another thread, is not left waiting.
        writer = threading.Thread(target=append_once, args=(f"n{step}",), daemon=True)
        writer.start()
        writer.join(timeout=60)
        assert not writer.is_alive(), f"the next writer waits for ever after step {step}"
        if not interrupted:
            break  # every step before the cleanup was tried
        step += 1
    assert step >= 3
    ids = [row["id"] for row in read_log(dir_fd, LOG, shown, commit=True)]
    assert [i for i in ids if i in acknowledged] == acknowledged


# Many threads append batches to one committed log until the process is killed; each batch is
# acknowledged ("tag first last") with one write to an O_APPEND file once append returned.
# Every tenth batch carries a 300 kB line, so a kill often lands in the middle of a write.
KILLED_WHILE_APPENDING = """
import os, sys, threading
from ctxoffload._disk.jsonl import JsonlAppender
from ctxoffload._disk.rows import row_line_and_key

workdir, acks, round_no = sys.argv[1], sys.argv[2], sys.argv[3]
dir_fd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
ack_fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
appender = JsonlAppender()
shown = os.path.join(workdir, "context.jsonl")

def write(thread):
    seq = 0
    while True:
        tag = f"r{round_no}-t{thread}-b{seq}"
        n = 1 + (seq * 7 + thread) % 9
        pad = 300_000 if (seq + thread) % 10 == 0 else 100
        pairs = [row_line_and_key({"id": f"{tag}-{i}", "batch": tag, "i": i, "n": n,
                                   "content": "x" * (pad if i == 0 else 50)})
                 for i in range(n)]
        first, last = appender.append(dir_fd, "context.jsonl", shown, [p[0] for p in pairs],
                                      [p[1] for p in pairs], commit=True)
        os.write(ack_fd, f"{tag} {first} {last}\\n".encode())
        seq += 1

for t in range(12):
    threading.Thread(target=write, args=(t,), daemon=True).start()
threading.Event().wait()
"""


def _acks(path: Path) -> dict[str, tuple[int, int]]:
    if not path.exists():
        return {}
    acked = {}
    for line in path.read_text().splitlines(keepends=True):
        if line.endswith("\n"):
            tag, first, last = line.split()
            acked[tag] = (int(first), int(last))
    return acked


def _check_log(rows: list[Any], acked: dict[str, tuple[int, int]]) -> None:
    positions: dict[str, list[int]] = defaultdict(list)
    for line_no, row in enumerate(rows, 1):
        positions[row["batch"]].append(line_no)
        assert row["i"] == len(positions[row["batch"]]) - 1, "a batch out of order or repeated"
    for tag, lines in positions.items():
        n = rows[lines[0] - 1]["n"]
        # Whole (no partial batch is visible) and in one piece.
        assert lines == list(range(lines[0], lines[0] + n)), tag
    for tag, (first, last) in acked.items():
        assert positions.get(tag) == list(range(first, last + 1)), f"acknowledged {tag} lost"


@pytest.mark.slow
def test_a_process_killed_while_its_threads_append_loses_no_acknowledged_batch(
    tmp_path: Path, dir_fd: int, spawn_python: SpawnPython
) -> None:
    shown = str(tmp_path / LOG)
    acks = tmp_path.parent / f"{tmp_path.name}-acks"
    rng = random.Random(20240611)
    acked: dict[str, tuple[int, int]] = {}
    for round_no in range(4):
        before = len(_acks(acks))
        child = spawn_python(KILLED_WHILE_APPENDING, str(tmp_path), str(acks), str(round_no))
        deadline = time.monotonic() + 60
        while len(_acks(acks)) < before + 30 and child.poll() is None:
            assert time.monotonic() < deadline, "the child acknowledged too little"
            time.sleep(0.005)
        time.sleep(rng.random() * 0.05)
        child.send_signal(signal.SIGKILL)
        _, err = child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL, err
        acked = _acks(acks)
        _check_log(read_log(dir_fd, LOG, shown, commit=True), acked)
    assert len(acked) >= 120
    # A new writer trims what the last one left uncommitted and carries on.
    appender = JsonlAppender()
    lines, ids = _rows({"id": "after", "batch": "after", "i": 0, "n": 1})
    first, last = appender.append(dir_fd, LOG, shown, lines, ids, commit=True)
    rows = read_log(dir_fd, LOG, shown, commit=True)
    assert first == last == len(rows) and rows[-1]["batch"] == "after"
    assert read_log(dir_fd, LOG, shown) == rows  # nothing beyond the committed length is left
    _check_log(rows, {**acked, "after": (first, last)})
    # A batch acknowledged before the kill, appended again, is found where it was.
    tag, (first, last) = next(iter(acked.items()))
    again = [row for row in rows if row["batch"] == tag]
    assert appender.append(dir_fd, LOG, shown, *_rows(*again), commit=True) == (first, last)


def test_without_fsync_threads_still_find_each_batch_at_its_span(
    tmp_path: Path, dir_fd: int
) -> None:
    # With fsync off each batch is written alone (nothing to share); the rest holds.
    appender = JsonlAppender(fsync=False)
    shown = str(tmp_path / LOG)
    returned: dict[tuple[int, int], tuple[Lines, tuple[int, int]]] = {}

    def write(thread: int) -> None:
        for seq in range(30):
            lines, ids = _rows(*(_msg(f"t{thread}-{seq}-{i}") for i in range(1 + seq % 4)))
            returned[thread, seq] = (
                lines,
                appender.append(dir_fd, LOG, shown, lines, ids, commit=True),
            )

    _in_threads(write, 8)
    file_lines = Path(shown).read_bytes().split(b"\n")[:-1]
    assert len(returned) == 8 * 30
    assert sum(len(lines) for lines, _ in returned.values()) == len(file_lines)
    for lines, (first, last) in returned.values():
        assert file_lines[first - 1 : last] == [line[:-1] for line in lines]


def test_a_batch_appended_without_sync_is_read_at_its_span_and_never_synced_alone(
    tmp_path: Path, dir_fd: int, fsync_watch: _FsyncWatch
) -> None:
    appender = JsonlAppender()
    shown = str(tmp_path / "events.jsonl")
    spans = [
        appender.append(dir_fd, "events.jsonl", shown, [b'{"n": %d}\n' % i] * 2, sync=False)
        for i in range(5)
    ]
    assert spans == [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)]
    assert [row["n"] for row in read_log(dir_fd, "events.jsonl", shown)] == [
        0,
        0,
        1,
        1,
        2,
        2,
        3,
        3,
        4,
        4,
    ]
    key = _FsyncWatch.key(Path(shown))
    assert fsync_watch.calls[key] == 0
    # The next synced append syncs the whole file: the lines before it are durable with it.
    assert appender.append(dir_fd, "events.jsonl", shown, [b'{"n": 5}\n']) == (11, 11)
    assert fsync_watch.calls[key] == 1
    assert fsync_watch.covered[key].size == Path(shown).stat().st_size


def test_a_committed_batch_is_always_synced(tmp_path: Path, dir_fd: int) -> None:
    # The commit record must never name bytes that a crash of the machine could take back.
    appender = JsonlAppender()
    with pytest.raises(ValueError, match="always synced"):
        appender.append(
            dir_fd, LOG, str(tmp_path / LOG), *_rows(_msg("a")), commit=True, sync=False
        )
    assert not (tmp_path / LOG).exists()


def test_threads_appending_synced_and_unsynced_batches_lose_none_and_sync_what_came_before(
    tmp_path: Path, dir_fd: int, fsync_watch: _FsyncWatch
) -> None:
    # A session's events.jsonl: the records of model calls (unsynced) and the events of drops
    # (synced) from several threads at once. Each batch is at its span; a synced batch, once
    # it returns, is durable with every batch its thread appended before it.
    appender = JsonlAppender()
    shown = str(tmp_path / "events.jsonl")
    returned: dict[tuple[int, int], tuple[Lines, tuple[int, int], bool, dict[Any, _Covered]]] = {}
    errors: list[BaseException] = []

    def write(thread: int) -> None:
        rng = random.Random(thread)
        try:
            for seq in range(60):
                lines = [
                    b'{"t": %d, "s": %d, "i": %d, "pad": "%s"}\n'
                    % (thread, seq, i, b"x" * rng.choice([5, 300, 9000]))
                    for i in range(rng.choice([1, 2, 5]))
                ]
                sync = rng.random() < 0.3
                span = appender.append(dir_fd, "events.jsonl", shown, lines, sync=sync)
                returned[thread, seq] = (lines, span, sync, fsync_watch.snapshot())
        except BaseException as exc:
            errors.append(exc)

    _in_threads(write, 8)
    assert errors == []
    data = Path(shown).read_bytes()
    file_lines = data.split(b"\n")[:-1]
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    key = _FsyncWatch.key(Path(shown))
    covered: set[int] = set()
    for (thread, seq), (lines, (first, last), sync, seen) in returned.items():
        assert file_lines[first - 1 : last] == [line[:-1] for line in lines]
        assert covered.isdisjoint(range(first, last + 1))
        covered.update(range(first, last + 1))
        if sync:
            for earlier in range(seq + 1):
                assert ends[returned[thread, earlier][1][1] - 1] <= seen[key].size
    assert covered == set(range(1, len(file_lines) + 1))
    synced = sum(sync for _, _, sync, _ in returned.values())
    assert 0 < fsync_watch.calls[key] <= synced


@pytest.mark.parametrize("fsync", [True, False])
def test_an_appender_serving_many_logs_stays_bounded_and_appends_right_after_forgetting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: bool
) -> None:
    """A server's workspace appends to the logs of one session after another for as long as
    it runs. The appender kept, per log, its lock, queue, what it saw, its marks and read
    ends, for good (about 4 KB a session). It keeps the `PATHS_KEPT` seen last; a log it
    forgot is appended to as a new process would: spans where the lines are, and a message
    already in a committed log not written twice, while threads append to other logs."""
    from ctxoffload._disk import jsonl

    monkeypatch.setattr(jsonl, "PATHS_KEPT", 4)
    appender = JsonlAppender(fsync=fsync)
    folders = [tmp_path / f"s{number}" for number in range(12)]
    fds = []
    for folder in folders:
        folder.mkdir()
        fds.append(os.open(folder, os.O_RDONLY | os.O_DIRECTORY))
    try:
        returned: dict[tuple[int, int], tuple[Lines, tuple[int, int]]] = {}

        def write(thread: int) -> None:
            for seq in range(4):
                for number in range(thread, 12, 3):  # each thread its own logs, in turn
                    lines, ids = _rows(_msg(f"s{number}-{seq}"), _msg(None, f"note {seq}"))
                    shown = str(folders[number] / LOG)
                    span = appender.append(fds[number], LOG, shown, lines, ids, commit=True)
                    returned[number, seq] = (lines, span)

        _in_threads(write, 3)
        # A message the first log holds already, sent again once the appender forgot that log.
        again, again_ids = _rows(_msg("s0-0"))
        span = appender.append(fds[0], LOG, str(folders[0] / LOG), again, again_ids, commit=True)
        for table in ("_locks", "_queues", "_known", "_marks"):
            assert len(getattr(appender, table)) <= 4, table
        first_log = (folders[0] / LOG).read_bytes().split(b"\n")[:-1]
        assert span == (1, 1) and len(first_log) == 8  # found where it is, not written again
        for (number, _seq), (lines, (first, last)) in returned.items():
            file_lines = (folders[number] / LOG).read_bytes().split(b"\n")[:-1]
            assert file_lines[first - 1 : last] == [line[:-1] for line in lines]
            assert len(file_lines) == 8
    finally:
        for fd in fds:
            os.close(fd)
