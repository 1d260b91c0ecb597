"""Whether a value is written whole inside one of many lines (`_whole`: `/mnt/vol1` is not
written whole in `/mnt/vol10`): the artifact index asks it of every artifact that left (is
it in the summary's text, inside an entry the index holds, in a row it wrote), up to 100,000
of them, against lines that hold up to a budget's worth of text.

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
searched across its end: the values asked about are one line each. In each line read, the
places the value is written are looked at until one is whole.

It may answer "no" for a value that is there (never "yes" for one that is not): when even the
rarest run of a value is in more than `MOST_READ` lines, only that many are read, and in
each line only the first `MOST_PLACES` places where it is written inside longer values. Every
caller takes "no" as the safe answer (the artifact is then written, or listed as cut, where
it was named already), so that lines made of the same few characters cost a bounded time.

Keeping a line's runs costs as much as reading it for a few thousand values, however long
it is: lines that fewer values will be asked about (`asked`, under `RUNS_AT`) are kept as
one text and read with `str.find` (a value is then read in at most `MOST_READ` lines, and
`MOST_PLACES` places of each, too).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable

from ._whole import uncut, whole_at

__all__ = ["MOST_PLACES", "MOST_READ", "RUNS_AT", "Substrings"]

# The runs indexed: their length and how far apart they start. Twelve characters tell apart
# the paths of one listing (`b7/module_117`); five, the ids and short names.
_LONG, _LONG_STEP = 12, 4
_SHORT, _SHORT_STEP = 5, 2
_TINY = _SHORT + _SHORT_STEP - 1  # values shorter than this are looked up whole

MOST_READ = 64
"""The most lines read for one value; past it, a value is answered "not found"."""

MOST_PLACES = 8
"""The most places of one line a value is looked at, written there as a piece of longer
values (`/mnt/vol1` in `/mnt/vol10`); past it, "not found" there."""

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

    def names(self, value: str, kind: str) -> bool:
        """Whether a line holds `value`, an artifact of `kind`, written whole (`_whole`: not
        as a piece of a longer value)."""
        needle, open_end = uncut(value)
        if not needle or "\n" in needle:
            return False  # (no line holds a line break)
        if self._text is not None:
            return bool(self._read_text(needle, kind, open_end, longer=None))
        if len(needle) >= _TINY:
            if self._ends is None:
                self._ends = set()
                for line in self._lines:
                    self._add_ends(line)
            size = _LONG if len(needle) >= _LONG else _SHORT
            if needle[:size] not in self._ends or needle[-size:] not in self._ends:
                return False
        return bool(self._read(needle, kind, open_end, longer=None))

    def holding(self, value: str, kind: str) -> list[int]:
        """The lines longer than `value` that hold it written whole (by their order of
        adding), up to `MOST_READ` of those that may (none for "" or a value holding a line
        break)."""
        needle, open_end = uncut(value)
        if not needle or "\n" in needle:
            return []
        if self._text is not None:
            return self._read_text(needle, kind, open_end, longer=len(value))
        return self._read(needle, kind, open_end, longer=len(value))

    def _read_text(
        self, needle: str, kind: str, open_end: bool, *, longer: int | None
    ) -> list[int]:
        """`_read`, for lines kept as one text: each line that holds `needle`, in turn, its
        first `MOST_PLACES` places read, until `MOST_READ` lines are read."""
        text, starts, lines = self._joined(), self._starts, self._lines
        found: list[int] = []
        place = text.find(needle)
        for _ in range(MOST_READ):
            if place < 0:
                break
            at = bisect.bisect_right(starts, place) - 1
            # (Each line but the last ends at the line break before the next one's start.)
            end = starts[at + 1] - 1 if at + 1 < len(starts) else len(text)
            if (longer is None or len(lines[at]) > longer) and whole_at(
                text, needle, kind, place, end, open_end=open_end, places=MOST_PLACES
            ) >= 0:
                found.append(at)
                if longer is None:
                    break
            # On to the next line: a line holding the value twice is one line.
            place = text.find(needle, end)
        return found

    def _read(self, needle: str, kind: str, open_end: bool, *, longer: int | None) -> list[int]:
        """The lines that hold `needle` written whole (`longer`: all of those longer than
        that many characters; None: the first found)."""
        lines = self._lines

        def holds(at: int) -> bool:
            line = lines[at]
            return (longer is None or len(line) > longer) and whole_at(
                line, needle, kind, open_end=open_end, places=MOST_PLACES
            ) >= 0

        size = len(needle)
        found: list[int] = []
        if size < _TINY:
            # Among the lines holding it as a piece of that size (each once).
            pieces = self._pieces_of(size).get(needle, ())
            some = (at for at in pieces if longer is None or len(lines[at]) > longer)
            for at in itertools.islice(some, MOST_READ):
                if holds(at):
                    found.append(at)
                    if longer is None:
                        break
            return found
        if size >= _LONG + _LONG_STEP - 1:
            width, step, runs = _LONG, _LONG_STEP, self._long
        else:
            width, step, runs = _SHORT, _SHORT_STEP, self._short
        for first in range(step):
            # Written at a place that puts its character `first` on a run's start, the
            # value has each run from there, every `step`, held by that line.
            rarest: list[int] | None = None
            for start in range(first, size - width + 1, step):
                held = runs.get(needle[start : start + width])
                if held is None:
                    rarest = None
                    break
                if rarest is None or len(held) < len(rarest):
                    rarest = held
            if rarest is None:
                continue
            for at in rarest[:MOST_READ]:
                if at not in found and holds(at):
                    found.append(at)
                    if longer is None:
                        return found
        found.sort()
        return found
