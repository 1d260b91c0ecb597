"""Where the messages that leave the context were stored (`Compressor.persist`), and
which of them were read back at their lines."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._depth import load_json
from ..messages import Msg

__all__ = ["Persisted", "lines_of", "read_back_report", "spans_field"]


def spans_field(spans: Sequence[tuple[int, int]]) -> dict[str, list[list[int]]]:
    """The event field `spans` (each run as `[first, last]`) beside `lines` when the lines
    are not consecutive, else no field: every event that names where messages went, so
    that its sentence names exactly their lines."""
    return {"spans": [list(r) for r in spans]} if len(spans) > 1 else {}


@dataclass(frozen=True)
class Persisted:
    """Where `Compressor.persist` put the messages that leave the context.

    Attributes:
        reference: the context log they were appended to; None without an offloader.
        line_span: the lines they took there, when the offloader says (a `ContextRef`):
            from the first to the last.
        spans: the lines they are on, as runs of consecutive lines: more than one when some
            were in the log already, at lines apart (resumed after a kill, with another
            split), so that a summary names only the lines it replaced.
        failure: what the offloader raised; then nothing was kept and nothing may leave.
        found_at: the line each message is on, by its id, found by matching the lines the
            offloader reads back to the messages (`lines_of`), never by where an append
            would have put it: a message in the log already (a run resumed after a kill)
            is where it was, which need not be in the batch's order. A message not found
            at its lines is absent; None when the offloader cannot read references back.
    """

    reference: str | None = None
    line_span: tuple[int, int] | None = None
    failure: Exception | None = None
    spans: tuple[tuple[int, int], ...] = ()
    found_at: Mapping[str, int] | None = None

    @property
    def lines(self) -> list[int] | None:
        """The line span as events record it, `[first, last]`, or None."""
        return list(self.line_span) if self.line_span else None

    @property
    def apart(self) -> dict[str, list[list[int]]]:
        """The event field `spans` of these lines (`spans_field`)."""
        return spans_field(self.spans)


def lines_of(
    rows: Sequence[bytes], spans: Sequence[tuple[int, int]], older: Sequence[Msg], first: int = 1
) -> dict[str, int]:
    """The line of `rows` (a context log from its line `first` on, split at its newlines)
    holding each message of `older`, among the lines of `spans`, by message id.

    A line is first looked for the message's own `"id":"..."` pair, in the spans' order: the
    messages of one batch are on its lines in order, so each search starts one line after the
    last found. A line that does not hold the expected id that way is read as JSON (what
    another writer's line or a message laid out otherwise needs).
    """
    wanted = {m.id: m for m in older}
    expected = [m.id for m in older]
    found: dict[str, int] = {}
    at = 0  # the next message of `older` expected, in order
    end = first + len(rows) - 1  # the number of the last row
    for start, last in spans:
        for number in range(max(start, first), min(last, end) + 1):
            row = rows[number - first]
            # Looked for from the line's end: a message's id follows its content.
            if at < len(expected) and row.rfind(_id_pair(expected[at])) >= 0:
                found[expected[at]] = number
                at += 1
                continue
            try:
                value = load_json(row)
            except ValueError:  # not JSON, or deeper than any workspace writes
                continue
            row_id = value.get("id") if isinstance(value, dict) else None
            if isinstance(row_id, str) and row_id in wanted:
                found[row_id] = number
                if at < len(expected) and row_id == expected[at]:
                    at += 1
    return found


def _id_pair(msg_id: str) -> bytes:
    """`"id":"..."` as a message's JSON line spells it (pydantic escapes as `json` does
    for what an id may hold; a plain id needs no escaping at all)."""
    if msg_id.isascii() and msg_id.isalnum():
        return b'"id":"' + msg_id.encode() + b'"'
    return b'"id":' + json.dumps(msg_id, ensure_ascii=False).encode()


def read_back_report(leaving: Sequence[Msg], lines: Mapping[str, int] | None) -> dict[str, int]:
    """The `recoverable` field of a compaction's event: how many messages left and, when the
    offloader could read them back, how many were at their lines."""
    report = {"messages": len(leaving)}
    if lines is not None:
        report["verified"] = sum(1 for m in leaving if m.id in lines)
    return report
