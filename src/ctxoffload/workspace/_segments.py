"""Append-only JSONL logs on a store without append: ordered immutable segments.

A log `sessions/<id>/context.jsonl` is the concatenation, in order, of the objects

    sessions/<id>/context.jsonl.d/<seq:012d>.jsonl      seq = 0, 1, 2, ...

each holding the whole batch of one append, created with put-if-absent. The key depends
on the sequence number only, so two writers (on any machines) that want the same seq
collide and exactly one wins; the loser moves on to the next seq. A segment is one PUT,
so a reader sees a batch whole or not at all.

Line numbers stay global: each segment carries its line count (`lines`) in its metadata,
and its first line number (`first-line`) when its writer knew it. A writer knows where the
log ends from its own last append, so an append is one request. A writer that loses the race
for a seq does not stop to read the winner's metadata: it asks for the next seq at once,
without `first-line`, and only after it has won does it learn its line numbers, by reading
the metadata of the segments before its own back to one that has `first-line` (usually the
one just before). So a writer that lost is exactly as fast as the one that won for the next
seq, and no writer starves while others append in a tight loop (with a read of the winner's
metadata before each retry, a loser was always one request behind: 1 in 8 writers gave up
after losing 300 times in a row).

A writer that knows nothing of a log (a new process) starts from a hint,
`<log>.d/tail.json` (a recent seq and the line after it), rewritten every `TAIL_EVERY`
segments, lists the keys after it and reads the newest one's metadata, so an append costs the
same with 1,000 segments before it as with none; a stale hint is only slower. A writer that
keeps losing (it is far behind) lists the keys after the seq it lost and jumps to the end.

Hints and metadata are starting points, never the truth (a bucket is writable by hand and
by other tools). The tail hint only says where to start listing; a hint out of range or
ahead of the log is ignored. A writer works out where the log ends from the segments
themselves: the newest one's lines are counted in its bytes, and a stated `first-line` is
taken only when the next segment below it that states one (or the log's start) leads,
with the `lines` between, exactly there; a `lines` outside 1..size is counted in the
bytes. Anything that does not fit (a gap, a mismatch) makes the writer count every line of
the log, as readers number them.
Seqs have 12 digits, the only names readers list: a log whose next seq would not fit
refuses the append instead of writing a segment nobody would read.

A request that succeeded but whose answer was lost is retried and then collides with
itself: each segment names its batch (`batch` metadata), and a writer whose retried request
finds an object at the seq reads it, and takes its own batch there as its success, so a
batch is never written twice.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import time
import uuid
from collections import deque
from dataclasses import dataclass

from .._disk.commit import take_lines
from ..exceptions import OffloadError
from ._store_client import StoreClient, gather_limited

__all__ = ["MAX_SEQ", "TAIL_EVERY", "SegmentLog", "segment_key", "segment_log"]

TAIL_EVERY = 64
# Segment names have 12 digits: the last seq a reader lists.
MAX_SEQ = 10**12 - 1
_SEGMENT = re.compile(r"(\d{12})\.jsonl")
_READ_CONCURRENCY = 32
_LOSSES_BEFORE_LISTING = 4
# How many of its latest segments per log a writer remembers, to read their lines alone.
_WRITTEN = 8


def segment_key(log_key: str, seq: int) -> str:
    """The key of segment `seq` (0..`MAX_SEQ`) of the log `log_key`."""
    if not 0 <= seq <= MAX_SEQ:
        raise ValueError(f"segment seq {seq} is outside 0..{MAX_SEQ}")
    return f"{log_key}.d/{seq:012d}.jsonl"


def segment_log(key: str) -> str | None:
    """The log whose segment `key` is (`<log>.d/<seq>.jsonl` gives `<log>`), or None."""
    folder, _, name = key.rpartition("/")
    if folder.endswith(".d") and _SEGMENT.fullmatch(name):
        return folder[: -len(".d")]
    return None


def _stated(attributes: dict[str, str], name: str) -> int | None:
    """A metadata value that is a plain positive integer, else None (missing or garbage)."""
    text = attributes.get(name, "")
    if not (text.isascii() and text.isdigit()) or len(text) > 15:
        return None
    value = int(text)
    return value if value >= 1 else None


def _tail_key(log_key: str) -> str:
    return f"{log_key}.d/tail.json"


def _hinted_seq(hint: bytes | None) -> int:
    """The seq a tail hint names, if it is one a segment can have; else -1 (list it all)."""
    if hint is None:
        return -1
    try:
        seq = json.loads(hint)["seq"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return -1
    if isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq <= MAX_SEQ:
        return seq
    return -1


@dataclass(frozen=True)
class _End:
    """Where a log ends as far as one writer knows: its last seq (-1: none) and next line."""

    seq: int
    next_line: int


class SegmentLog:
    """Appends to and reads segmented logs through one `StoreClient`.

    Args:
        client: the store.
        writer_id: names this writer in each segment's metadata (for people debugging).
    """

    def __init__(self, client: StoreClient, writer_id: str) -> None:
        self.client = client
        self.writer_id = writer_id
        self._ends: dict[str, _End] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # Per log: (first line, last line, seq) of the latest segments this writer appended.
        self._written: dict[str, deque[tuple[int, int, int]]] = {}
        # Per log: (seq, next line) where this object's latest read of every segment after
        # a known one ended (`read_lines`), so a follower reads only the segments since.
        self._read_ends: dict[str, tuple[int, int]] = {}

    def forget(self, log_key: str) -> None:
        """Drop what this writer knows of a log (after the session was purged)."""
        self._ends.pop(log_key, None)
        self._written.pop(log_key, None)
        self._read_ends.pop(log_key, None)

    async def append(self, log_key: str, payload: bytes) -> tuple[int, int]:
        """Append `payload` (whole lines) as one segment.

        Returns:
            The first and last line numbers (1-based, global) the payload got.

        Raises:
            OffloadError: the store failed past its deadline; nothing was appended.
        """
        lines = payload.count(b"\n")
        batch = uuid.uuid4().hex
        # Tasks of one process take turns per log: they would only collide with each other.
        lock = self._locks.setdefault(log_key, asyncio.Lock())
        async with lock:
            known = self._ends.get(log_key) or await self._catch_up(log_key, None)
            seq = known.seq + 1
            first: int | None = known.next_line  # None: not known until the seq is won
            losses = 0
            # Every call below is bounded by the client's deadline; so is the whole race, so a
            # writer that keeps losing gives up with OffloadError (the content stays in the
            # caller's context) instead of looping.
            give_up = time.monotonic() + self.client.deadline
            while True:
                if seq > MAX_SEQ:
                    raise OffloadError(
                        f"cannot append to {self.client.reference(log_key)}: its newest segment "
                        f"is at seq {MAX_SEQ:012d}, the last one readers list; nothing was "
                        "appended: move the segments after the log's real end out of "
                        f"{self.client.reference(log_key)}.d/, or write to a new session",
                        self.client.reference(log_key),
                    )
                attributes = {
                    "Content-Type": "application/x-ndjson",
                    "lines": str(lines),
                    "batch": batch,
                    "writer": self.writer_id,
                }
                if first is not None:
                    attributes["first-line"] = str(first)
                created, retried = await self.client.create(
                    segment_key(log_key, seq), payload, attributes
                )
                if created:
                    break
                if retried:
                    found = await self.client.attributes(segment_key(log_key, seq))
                    if found is not None and found.get("batch") == batch:
                        break  # our own earlier attempt had succeeded; its answer was lost
                losses += 1
                if time.monotonic() > give_up:
                    raise OffloadError(
                        f"could not append to {self.client.reference(log_key)}: lost the race "
                        f"for the next segment {losses} times within {self.client.deadline:g} s; "
                        "nothing was appended, retry later",
                        self.client.reference(log_key),
                    )
                # Another writer holds this seq: try the next one at once. After a few losses
                # in a row this writer is behind (its last append was long ago): one listing
                # finds the end.
                seq, first = seq + 1, None
                if losses % _LOSSES_BEFORE_LISTING == 0:
                    newer = await self._newer_seqs(log_key, seq - 1)
                    if newer:
                        seq = max(newer) + 1
            if first is None:
                first = await self._first_line(log_key, seq, known)
            self._ends[log_key] = _End(seq, first + lines)
            written = self._written.setdefault(log_key, deque(maxlen=_WRITTEN))
            written.append((first, first + lines - 1, seq))
        if seq % TAIL_EVERY == 0:
            await self._write_tail(log_key, seq, first + lines)
        return first, first + lines - 1

    async def _first_line(self, log_key: str, seq: int, known: _End) -> int:
        """The first line number of segment `seq`: where the segments before it end."""
        return await self._end_after(log_key, seq - 1, known)

    async def _end_after(self, log_key: str, newest: int, known: _End | None) -> int:
        """The line after segment `newest`, from the segments, not trusting their metadata.

        Walks back from `newest`, adding up lines (the newest's counted in its bytes, the
        others' `lines` when within 1..size, else counted too). The first segment that
        states its first line claims where the log ends; the claim stands once a second
        one (or the log's start, or where this writer knows the log ends, `known`) leads to
        the same end. A gap or a contradiction counts the whole log, as readers number it.
        One HEAD per segment walked: under contention, segments whose writer lost a race
        state no first line, so the walk goes back to the second one that does.
        """
        total = 0  # the lines of the segments walked, `at`+1 .. `newest`
        claim: int | None = None
        at = newest
        while True:
            start: int | None = None
            if at < 0:
                start = 1
            elif known is not None and at == known.seq:
                start = known.next_line
            if start is not None:
                if claim is not None and claim != start + total:
                    return await self._count_before(log_key, newest + 1)
                return start + total
            found = await self.client.head(segment_key(log_key, at))
            if found is None:
                return await self._count_before(log_key, newest + 1)
            attributes, size = found
            lines = _stated(attributes, "lines")
            if at == newest or lines is None or lines > size:
                lines = await self._count(log_key, at)
                if lines is None:
                    return await self._count_before(log_key, newest + 1)
            total += lines
            first = _stated(attributes, "first-line")
            if first is not None:
                end = first + total
                if first < at + 1 or (claim is not None and claim != end):
                    return await self._count_before(log_key, newest + 1)
                if claim is not None:
                    return end
                claim = end
            at -= 1

    async def _count(self, log_key: str, seq: int) -> int | None:
        """The lines of segment `seq`, counted in its bytes (None if it is gone)."""
        body = await self.client.get(segment_key(log_key, seq))
        return None if body is None else body.count(b"\n")

    async def _count_before(self, log_key: str, seq: int) -> int:
        """The line after every segment before `seq`, counted as readers number them."""
        keys = [key for s, key in await self.segments(log_key) if s < seq]
        bodies = await gather_limited(
            [functools.partial(self.client.get, key) for key in keys], _READ_CONCURRENCY
        )
        return 1 + sum(body.count(b"\n") for body in bodies if body is not None)

    async def _write_tail(self, log_key: str, seq: int, next_line: int) -> None:
        # Only a hint: a failure costs a later fresh writer a longer listing, nothing else.
        try:
            body = json.dumps({"seq": seq, "next_line": next_line}).encode()
            await self.client.put(_tail_key(log_key), body, {"Content-Type": "application/json"})
        except OffloadError:
            pass

    async def _newer_seqs(self, log_key: str, seq: int) -> list[int]:
        """The seqs of the segments after `seq` (all of them when `seq` is -1)."""
        after = segment_key(log_key, seq) if seq >= 0 else None
        newer = [
            int(m.group(1))
            for info in await self.client.list_objects(f"{log_key}.d", after=after)
            if (m := _SEGMENT.fullmatch(info.key.rsplit("/", 1)[-1]))
        ]
        return [s for s in newer if s > seq]

    async def _catch_up(self, log_key: str, known: _End | None) -> _End:
        """Where the log ends now, listing only the keys after what is already known.

        A fresh writer (`known` None) starts listing after the tail hint's seq; the hint
        says nothing else that is believed, and one out of range is ignored.
        """
        start = -1 if known is None else known.seq
        if known is None:
            hint = await self.client.get(_tail_key(log_key))
            start = _hinted_seq(hint)
        newer = await self._newer_seqs(log_key, start)
        if newer:
            newest = max(newer)
        elif known is not None:
            return known
        elif start < 0:
            return _End(-1, 1)
        else:
            newest = start  # the hint's segment: checked like any other below
            if await self.client.head(segment_key(log_key, newest)) is None:
                # A hint ahead of the log (or the log was purged): start from the listing.
                segments = await self.segments(log_key)
                if not segments:
                    return _End(-1, 1)
                newest = segments[-1][0]
        return _End(newest, await self._end_after(log_key, newest, known))

    async def segments(self, log_key: str) -> list[tuple[int, str]]:
        """The (seq, key) of every segment of a log, in order."""
        found: list[tuple[int, str]] = []
        for info in await self.client.list_objects(f"{log_key}.d"):
            m = _SEGMENT.fullmatch(info.key.rsplit("/", 1)[-1])
            if m is not None:
                found.append((int(m.group(1)), info.key))
        found.sort()
        return found

    async def read_lines(self, log_key: str, first: int, last: int) -> bytes | None:
        """Lines `first` to `last` of a log when one segment this writer appended holds them
        all (that segment alone is read), or when `first` is the line just after one this
        writer appended or after where its latest read of the log ended (the segments after
        that one are read: a follower pays for what came since). None otherwise (read the
        log whole), or when a segment is gone or holds another count of lines than it was
        written with."""
        written = self._written.get(log_key, ())
        for start, end, seq in reversed(written):
            if start <= first and last <= end:
                body = await self.client.get(segment_key(log_key, seq))
                if body is None or body.count(b"\n") != end - start + 1:
                    return None
                return take_lines((body,), first - start, last - first + 1)
        after = [(seq, end + 1) for _, end, seq in written]
        if log_key in self._read_ends:
            after.append(self._read_ends[log_key])
        known = max((seq for seq, next_line in after if next_line == first), default=None)
        if known is None:
            return None
        newer = sorted(await self._newer_seqs(log_key, known))
        bodies = await gather_limited(
            [functools.partial(self.client.get, segment_key(log_key, s)) for s in newer],
            _READ_CONCURRENCY,
        )
        if any(body is None or not body.endswith(b"\n") for body in bodies):
            return None  # removed since the listing (a purge), or not whole lines
        data = b"".join(b for b in bodies if b is not None)
        count = last - first + 1
        if newer and data.count(b"\n") <= count:
            self._read_ends[log_key] = (newer[-1], first + data.count(b"\n"))
        return take_lines((data,), 0, count)

    async def read(self, log_key: str) -> bytes:
        """The whole log: every segment's bytes, in order (b"" if there is none). Where it
        ends is remembered, so a follower's next `read_lines` reads only the segments after
        it."""
        segments = await self.segments(log_key)
        parts = await gather_limited(
            [functools.partial(self.client.get, key) for _, key in segments], _READ_CONCURRENCY
        )
        if segments and all(p is not None and p.endswith(b"\n") for p in parts):
            lines = sum(p.count(b"\n") for p in parts if p is not None)
            self._read_ends[log_key] = (segments[-1][0], lines + 1)
        # A segment removed between the listing and the read (a purge) reads as nothing.
        return b"".join(p for p in parts if p is not None)

    async def check(self, log_key: str) -> list[str]:
        """Problems of one log: a missing seq, or a stated first line out of place.

        Reads every segment's metadata (one HEAD each) and its line count from its bytes.
        """
        problems: list[str] = []
        segments = await self.segments(log_key)
        expected_line = 1
        for index, (seq, key) in enumerate(segments):
            if seq != index:
                problems.append(
                    f"{self.client.reference(log_key)}: segment {index} is missing (the next "
                    f"is {seq}); readers skip the gap, so line numbers after it are shifted"
                )
                break
            body = await self.client.get(key)
            attributes = await self.client.attributes(key)
            if body is None or attributes is None:
                continue  # removed since the listing
            lines = body.count(b"\n")
            stated = attributes.get("first-line")
            if attributes.get("lines") != str(lines):
                problems.append(
                    f"{self.client.reference(key)}: holds {lines} lines, its metadata says "
                    f"{attributes.get('lines')!r}"
                )
            if stated is not None and stated != str(expected_line):
                problems.append(
                    f"{self.client.reference(key)}: states first line {stated}, "
                    f"lies at line {expected_line}"
                )
            expected_line += lines
        return problems
