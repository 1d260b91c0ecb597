"""Append-only JSONL logs on a store without append: ordered immutable segments.

A log `sessions/<id>/context.jsonl` is the concatenation, in order, of the objects

    sessions/<id>/context.jsonl.d/<seq:012d>.jsonl      seq = 0, 1, 2, ...

each holding the whole batch of one append, created with put-if-absent. The key depends
on the sequence number only, so two writers (on any machines) that want the same seq
collide and exactly one wins; the loser moves on to the next seq. A segment is one PUT,
so a reader sees a batch whole or not at all.

Line numbers stay global: each segment carries its first line number and its line count
in its metadata (`first-line`, `lines`). A writer knows where the log ends from its own
last append (then an append is one request), and otherwise catches up by listing the keys
after the last seq it knows and reading the metadata of the newest one (one HEAD), so an
append costs the same with 1,000 segments before it as with none. A fresh writer starts
from a hint, `<log>.d/tail.json` (a recent seq and the line after it), rewritten every
`TAIL_EVERY` segments, so it lists at most that many keys; a stale hint is only slower.

A request that succeeded but whose answer was lost is retried and then collides with
itself: each segment names its batch (`batch` metadata), and a writer that finds its own
batch at the seq it lost takes that as its success, so a batch is never written twice.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import re
import time
import uuid
from dataclasses import dataclass

from ..exceptions import OffloadError
from ._store_client import StoreClient, gather_limited

__all__ = ["TAIL_EVERY", "SegmentLog", "segment_key"]

TAIL_EVERY = 64
_SEGMENT = re.compile(r"(\d{12})\.jsonl")
_READ_CONCURRENCY = 32


def segment_key(log_key: str, seq: int) -> str:
    """The key of segment `seq` of the log `log_key`."""
    return f"{log_key}.d/{seq:012d}.jsonl"


def _after(seq: int, attributes: dict[str, str]) -> _End | None:
    """Where the log ends after segment `seq`, from its metadata (None if unreadable)."""
    try:
        return _End(seq, int(attributes["first-line"]) + int(attributes["lines"]))
    except (KeyError, ValueError):
        return None


def _tail_key(log_key: str) -> str:
    return f"{log_key}.d/tail.json"


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

    def forget(self, log_key: str) -> None:
        """Drop what this writer knows of a log (after the session was purged)."""
        self._ends.pop(log_key, None)

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
            end = self._ends.get(log_key) or await self._catch_up(log_key, None)
            losses = 0
            # Every call below is bounded by the client's deadline; so is the whole race, so a
            # writer that keeps losing gives up with OffloadError (the content stays in the
            # caller's context) instead of looping.
            give_up = time.monotonic() + self.client.deadline
            while True:
                seq = end.seq + 1
                attributes = {
                    "Content-Type": "application/x-ndjson",
                    "first-line": str(end.next_line),
                    "lines": str(lines),
                    "batch": batch,
                    "writer": self.writer_id,
                }
                if await self.client.put_new(segment_key(log_key, seq), payload, attributes):
                    first = end.next_line
                    break
                winner = await self.client.attributes(segment_key(log_key, seq))
                if winner is not None and winner.get("batch") == batch:
                    # Our own earlier attempt had succeeded; its answer was lost.
                    first = int(winner["first-line"])
                    break
                # Another writer won this seq. Its metadata says where the log ends after it,
                # so the next try is seq + 1 without a listing (writers racing are rarely
                # more than a segment or two apart). Jitter that grows with each lost round
                # keeps a crowd of writers from colliding again and again.
                losses += 1
                if time.monotonic() > give_up:
                    raise OffloadError(
                        f"could not append to {self.client.reference(log_key)}: lost the race "
                        f"for the next segment {losses} times within {self.client.deadline:g} s; "
                        "nothing was appended, retry later",
                        self.client.reference(log_key),
                    )
                # The exponent is capped: past 2**6 the jitter is at its 0.1 s ceiling anyway.
                await asyncio.sleep(random.random() * min(0.002 * 2 ** min(losses, 6), 0.1))
                after_winner = _after(seq, winner) if winner is not None else None
                end = after_winner or await self._catch_up(log_key, None)
            self._ends[log_key] = _End(seq, first + lines)
        if seq % TAIL_EVERY == 0:
            await self._write_tail(log_key, seq, first + lines)
        return first, first + lines - 1

    async def _write_tail(self, log_key: str, seq: int, next_line: int) -> None:
        # Only a hint: a failure costs a later fresh writer a longer listing, nothing else.
        try:
            body = json.dumps({"seq": seq, "next_line": next_line}).encode()
            await self.client.put(_tail_key(log_key), body, {"Content-Type": "application/json"})
        except OffloadError:
            pass

    async def _catch_up(self, log_key: str, known: _End | None) -> _End:
        """Where the log ends now, listing only the keys after what is already known."""
        if known is None:
            known = _End(-1, 1)
            hint = await self.client.get(_tail_key(log_key))
            if hint is not None:
                try:
                    parsed = json.loads(hint)
                    known = _End(int(parsed["seq"]), int(parsed["next_line"]))
                except (ValueError, KeyError, TypeError):
                    pass
        after = segment_key(log_key, known.seq) if known.seq >= 0 else None
        newer = [
            int(m.group(1))
            for info in await self.client.list_objects(f"{log_key}.d", after=after)
            if (m := _SEGMENT.fullmatch(info.key.rsplit("/", 1)[-1]))
        ]
        newer = [seq for seq in newer if seq > known.seq]
        if not newer:
            return known
        newest = max(newer)
        key = segment_key(log_key, newest)
        attributes = await self.client.attributes(key)
        end = _after(newest, attributes) if attributes is not None else None
        if end is None:
            raise OffloadError(
                f"segment {self.client.reference(key)} has no readable first-line/lines "
                "metadata: it was not written by ctxoffload; move it out of the log",
                self.client.reference(key),
            )
        return end

    async def segments(self, log_key: str) -> list[tuple[int, str]]:
        """The (seq, key) of every segment of a log, in order."""
        found: list[tuple[int, str]] = []
        for info in await self.client.list_objects(f"{log_key}.d"):
            m = _SEGMENT.fullmatch(info.key.rsplit("/", 1)[-1])
            if m is not None:
                found.append((int(m.group(1)), info.key))
        found.sort()
        return found

    async def read(self, log_key: str) -> bytes:
        """The whole log: every segment's bytes, in order (b"" if there is none)."""
        keys = [key for _, key in await self.segments(log_key)]
        parts = await gather_limited(
            [functools.partial(self.client.get, key) for key in keys], _READ_CONCURRENCY
        )
        # A segment removed between the listing and the read (a purge) reads as nothing.
        return b"".join(p for p in parts if p is not None)
