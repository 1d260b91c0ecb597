"""Where the messages that leave the context were stored (`Compressor.persist`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Persisted", "spans_text"]


def spans_text(spans: Iterable[tuple[int, int]]) -> str:
    """Line spans as people and models read them, in order, adjacent or overlapping ones
    merged: `"1-40, 52-60"` (a single line as `"7"`); `""` for none. Every text that names
    where messages went in a context log spells its lines so."""
    merged: list[list[int]] = []
    for first, last in sorted(spans):
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in merged)


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
    """

    reference: str | None = None
    line_span: tuple[int, int] | None = None
    failure: Exception | None = None
    spans: tuple[tuple[int, int], ...] = ()

    @property
    def lines(self) -> list[int] | None:
        """The line span as events record it, `[first, last]`, or None."""
        return list(self.line_span) if self.line_span else None

    @property
    def apart(self) -> dict[str, list[list[int]]]:
        """The event field `spans` (each run as `[first, last]`) when the lines are not
        consecutive, else no field."""
        return {"spans": [list(r) for r in self.spans]} if len(self.spans) > 1 else {}

    def line_of_each(self, count: int) -> list[int | None]:
        """The line of each of the `count` messages persisted, in their order: known when
        they took one run of `count` lines (all written now, in order); None for each when
        some were in the log already, at lines of their own, rather than a wrong number."""
        if len(self.spans) == 1 and self.spans[0][1] - self.spans[0][0] + 1 == count:
            first = self.spans[0][0]
            return [first + n for n in range(count)]
        return [None] * count
