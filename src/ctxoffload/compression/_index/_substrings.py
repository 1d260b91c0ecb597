"""Whether a value is written inside one of many lines: the artifact index asks it of every
artifact that left (is it in the summary's text, inside an entry the index holds, in a row it
wrote), up to 100,000 of them, against lines that hold up to a budget's worth of text.

`value in text` reads the text again for each value: 16 µs a path against 40 KB of other
paths, 1.6 s for 100,000 of them, and more as the text grows. `Substrings` keeps, for runs of
characters of each line, the lines holding them: the runs of 12 characters that start every
4th character, and of 5 that start every 2nd (for values shorter than 15). A value written in
a line at some place has, for one of the 4 (or 2) first characters it may start from, every
run from there on one of those places, so it is looked for only in the lines that hold the
rarest of those runs; a value none of whose starts has all its runs held (nearly every value
not there) is answered by a few look-ups, without reading a line; before those, whether a
value is there at all is asked of its first and last runs among every run of the lines,
wherever it starts (two look-ups for most values that are not). Values shorter than 6
characters are looked up among every piece of that size of the lines. A line is never
searched across its end: the values asked about are one line each.

It may answer "no" for a value that is there (never "yes" for one that is not): when even the
rarest run of a value is in more than `MOST_READ` lines, only that many are read. Every
caller takes "no" as the safe answer (the artifact is then written, or listed as cut, where
it was named already), so that lines made of the same few characters cost a bounded time.

Keeping a line's runs costs as much as reading it for a few thousand values, however long
it is: lines that fewer values will be asked about (`asked`, under `RUNS_AT`) are kept as
one text and read with `in` (a value is then found in at most `MOST_READ` lines too).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable

__all__ = ["MOST_READ", "RUNS_AT", "Substrings"]

# The runs indexed: their length and how far apart they start. Twelve characters tell apart
# the paths of one listing (`b7/module_117`); five, the ids and short names.
_LONG, _LONG_STEP = 12, 4
_SHORT, _SHORT_STEP = 5, 2
_TINY = _SHORT + _SHORT_STEP - 1  # values shorter than this are looked up whole

MOST_READ = 64
"""The most lines read for one value; past it, a value is answered "not found"."""

RUNS_AT = 4_096
"""The values asked about from which the lines are kept by their runs: `in` reads a character
in about 0.2 ns (5 GB/s), and keeping a line's runs takes about 0.7 µs a character (17 µs for
a path of 25), so that reading costs more only past about 4,000 values, whatever the size of
the lines (measured on the bench's paths)."""


def _post(runs: dict[str, list[int]], line: str, size: int, step: int, at: int) -> None:
    for run in {line[start : start + size] for start in range(0, len(line) - size + 1, step)}:
        held = runs.get(run)
        if held is None:
            runs[run] = [at]
        else:
            held.append(at)


class Substrings:
    """Lines, and whether a value is inside one of them.

    Args:
        lines: the first lines (more may be `add`ed).
        asked: about how many values will be asked about (see `RUNS_AT`).
    """

    __slots__ = (
        "_ends",
        "_lines",
        "_long",
        "_pieces",
        "_short",
        "_size",
        "_starts",
        "_tail",
        "_text",
    )

    def __init__(self, lines: Iterable[str] = (), *, asked: int = 0) -> None:
        self._lines: list[str] = []
        self._size = 0  # the characters of the lines, together
        # Kept as one text (each line after a newline, `_starts` where each starts; the lines
        # added since it was last asked in `_tail`, joined to it when it is asked: joining at
        # each line would copy the text each time) ...
        self._text: str | None = "" if asked < RUNS_AT else None
        self._tail: list[str] = []
        self._starts: list[int] = []
        # ... or by their runs, once reading the text for every value would cost more.
        self._long: dict[str, list[int]] = {}  # runs of `_LONG` characters: their lines
        self._short: dict[str, list[int]] = {}  # runs of `_SHORT` characters: their lines
        # For each size under `_TINY` asked about: every piece of that size, with the lines
        # that hold it (each line once).
        self._pieces: dict[int, dict[str, list[int]]] = {}
        # Every run of `_SHORT` and of `_LONG` characters, wherever it starts, once a value is
        # asked: a value is in a line only if its first and last runs are, so that most
        # values not there are answered by two look-ups.
        self._ends: set[str] | None = None
        for line in lines:
            self.add(line)

    def __len__(self) -> int:
        return len(self._lines)

    def add(self, line: str) -> None:
        """Add one line (a value written whole, a row, a line of the summary)."""
        at = len(self._lines)
        self._lines.append(line)
        self._size += len(line) + 1
        if self._text is not None:
            self._starts.append(self._size - len(line))
            self._tail.append(line)
            return
        self._index(line, at)

    def _index(self, line: str, at: int) -> None:
        if len(line) >= _LONG:
            _post(self._long, line, _LONG, _LONG_STEP, at)
        _post(self._short, line, _SHORT, _SHORT_STEP, at)
        for size, pieces in self._pieces.items():
            _post(pieces, line, size, 1, at)
        if self._ends is not None:
            self._add_ends(line)

    def _joined(self) -> str:
        """The lines as one text (each after a newline), while they are kept so."""
        assert self._text is not None
        if self._tail:
            self._text = "\n".join([self._text, *self._tail])
            self._tail = []
        return self._text

    def _pieces_of(self, size: int) -> dict[str, list[int]]:
        """Every piece of `size` characters of the lines, with the lines that hold it."""
        pieces = self._pieces.get(size)
        if pieces is None:
            pieces = self._pieces[size] = {}
            for at, line in enumerate(self._lines):
                _post(pieces, line, size, 1, at)
        return pieces

    def _add_ends(self, line: str) -> None:
        ends = self._ends
        assert ends is not None
        for size in (_SHORT, _LONG):
            ends.update(line[start : start + size] for start in range(len(line) - size + 1))

    def __contains__(self, value: str) -> bool:
        """Whether a line holds `value` ("" is in any line, as `in` says)."""
        if "\n" in value:
            return False  # (no line holds a line break)
        if self._text is not None:
            return value in self._joined() if value else bool(self._lines)
        if len(value) < _TINY:
            if not value:
                return bool(self._lines)
            return value in self._pieces_of(len(value))
        if self._ends is None:
            self._ends = set()
            for line in self._lines:
                self._add_ends(line)
        size = _LONG if len(value) >= _LONG else _SHORT
        if value[:size] not in self._ends or value[-size:] not in self._ends:
            return False
        return bool(self._read(value, longer=False))

    def holding(self, value: str) -> list[int]:
        """The lines longer than `value` that hold it (by their order of adding), up to
        `MOST_READ` of those that may (none for "" or a value holding a line break)."""
        if not value or "\n" in value:
            return []
        if self._text is not None:
            return self._read_text(value)
        if len(value) < _TINY:
            lines, size = self._lines, len(value)
            longer = (at for at in self._pieces_of(size).get(value, ()) if len(lines[at]) > size)
            return list(itertools.islice(longer, MOST_READ))
        return self._read(value, longer=True)

    def _read_text(self, value: str) -> list[int]:
        """`holding`, for lines kept as one text: each place `value` is written, in turn, until
        `MOST_READ` lines are found."""
        text, starts, lines = self._joined(), self._starts, self._lines
        found: list[int] = []
        place = text.find(value)
        while place >= 0 and len(found) < MOST_READ:
            at = bisect.bisect_right(starts, place) - 1
            if len(lines[at]) > len(value):
                found.append(at)
            # On to the next line: a line holding the value twice is one line.
            following = starts[at + 1] if at + 1 < len(starts) else len(text)
            place = text.find(value, following)
        return found

    def _read(self, value: str, *, longer: bool) -> list[int]:
        """The lines that hold `value` (`longer`: only those longer than it, all of them;
        otherwise the first found)."""
        size = len(value)
        if size >= _LONG + _LONG_STEP - 1:
            width, step, runs = _LONG, _LONG_STEP, self._long
        else:
            width, step, runs = _SHORT, _SHORT_STEP, self._short
        lines = self._lines
        found: list[int] = []
        for first in range(step):
            # Written at a place that puts its character `first` on a run's start, the
            # value has each run from there, every `step`, held by that line.
            rarest: list[int] | None = None
            for start in range(first, size - width + 1, step):
                held = runs.get(value[start : start + width])
                if held is None:
                    rarest = None
                    break
                if rarest is None or len(held) < len(rarest):
                    rarest = held
            if rarest is None:
                continue
            for at in rarest[:MOST_READ]:
                line = lines[at]
                if value in line and (not longer or len(line) > size) and at not in found:
                    found.append(at)
                    if not longer:
                        return found
        found.sort()
        return found
