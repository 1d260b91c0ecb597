"""Which rows of a context batch are new, and the lines its messages are on: the rule every
backend's `offload_context` follows, so they return the same `ContextRef` spans and record
the same `context` event fields for the same messages.

A message whose id is in the log already (same id, same content: see `message_key`) is not
written again; it stays where it is. The batch's other rows are appended in order, so its
messages can be on lines that are not consecutive: the span `(first, last)` then covers lines
of other messages too, and `runs` names only the batch's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["NewRows", "Span", "new_rows"]


class Span(tuple[int, int]):
    """A batch's line span `(first, last)` in a log, with `runs`: the lines its messages are
    on, as sorted runs `(first, last)` of consecutive lines.

    A message already in the log is not written again: it is where it was, so a batch that
    repeats some messages (an agent resumed after a kill, with another split) can be on lines
    that are not consecutive; `(first, last)` then covers lines of other messages too, and
    `runs` names only its own.
    """

    runs: tuple[tuple[int, int], ...]

    def __new__(cls, first: int, last: int, runs: Sequence[tuple[int, int]] | None = None) -> Span:
        span = super().__new__(cls, (first, last))
        span.runs = tuple(runs) if runs is not None else ((first, last),)
        return span

    @classmethod
    def of_lines(cls, lines: Sequence[int]) -> Span:
        """The span of messages on these lines (in any order, repeats allowed; at least one)."""
        runs: list[tuple[int, int]] = []
        for n in sorted(set(lines)):
            if runs and n == runs[-1][1] + 1:
                runs[-1] = (runs[-1][0], n)
            else:
                runs.append((n, n))
        return cls(runs[0][0], runs[-1][1], runs)

    def event_fields(self) -> dict[str, Any]:
        """The line fields of the batch's `context` event: `lines`, `[first, last]`, and,
        when its messages are on lines apart, `spans`, each run as `[first, last]`."""
        fields: dict[str, Any] = {"lines": [self[0], self[1]]}
        if len(self.runs) > 1:
            fields["spans"] = [list(run) for run in self.runs]
        return fields


class NewRows:
    """A batch split by `new_rows`: the lines to append, their ids, the lines of its messages
    found in the log already (`found`), and the batch's `span` once the new lines are
    appended at the line `new_rows` was given (`placed_at` for another)."""

    __slots__ = ("found", "ids", "lines", "span")

    def __init__(
        self, lines: list[bytes], ids: list[str | None], found: list[int], first: int
    ) -> None:
        self.lines = lines
        self.ids = ids
        self.found = found
        self.span = self.placed_at(first)

    def placed_at(self, first: int) -> Span:
        """The batch's span when its new lines start at line `first`: for a store that
        learns where its lines went only once they are written (a bucket's segments)."""
        if not self.found:
            return Span(first, first + len(self.lines) - 1)
        return Span.of_lines([*self.found, *range(first, first + len(self.lines))])


def new_rows(
    lines: Sequence[bytes],
    ids: Sequence[str | None] | None,
    logged: Sequence[Mapping[str, int]],
    first: int,
) -> NewRows:
    """Split a batch of context lines into the new ones and those already in the log.

    Args:
        lines: the batch's lines (at least one), one message each, oldest first.
        ids: each line's message key (`message_key`), or None for a message without one;
            None for a batch without keys.
        logged: where keys already are: message key -> its line, looked up in this order.
            A batch's own rows are not among them, so a message given twice in one batch
            is written twice, as a batch without ids would be.
        first: the line the first new row will get (the log's lines, plus one, plus any
            line the writer adds before the batch).

    Returns:
        The lines not in the log yet (with their ids) and the batch's `Span`: the lines
        found, and `first` onwards for the new ones.
    """
    keep: list[bytes] = []
    kept_ids: list[str | None] = []
    found: list[int] = []
    for i, line in enumerate(lines):
        msg_id = ids[i] if ids is not None else None
        line_no = None
        if msg_id is not None:
            for index in logged:
                line_no = index.get(msg_id)
                if line_no is not None:
                    break
        if line_no is not None:
            found.append(line_no)
        else:
            keep.append(line)
            kept_ids.append(msg_id)
    return NewRows(keep, kept_ids, found, first)
