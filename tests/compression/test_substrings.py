"""`Substrings`, the artifact index's test of whether a value is written inside one of many
lines: it agrees with `in` (never "yes" for a value that is not there, and "yes" for every
value that is, while no run of it is in more than `MOST_READ` lines), and a hostile set of
lines costs it a bounded number of lines read."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload.compression._index._substrings import MOST_READ, RUNS_AT, Substrings
from helpers import examples

_TEXT = st.text(alphabet="ab/._-0123é ", max_size=40)


@settings(max_examples=examples(400), deadline=None)
@given(
    lines=st.lists(_TEXT, max_size=12),
    values=st.lists(_TEXT, max_size=12),
    asked=st.sampled_from([0, 10**9]),
)
def test_a_value_is_found_exactly_where_in_finds_it(
    lines: list[str], values: list[str], asked: int
) -> None:
    """Kept as one text (little asked) or by runs (much asked), the same answers."""
    held = Substrings(lines, asked=asked)
    for value in [*values, *(line[2:9] for line in lines), *(line[1:] for line in lines)]:
        assert (value in held) == any(value in line for line in lines), (value, lines)
        longer = [at for at, line in enumerate(lines) if value in line and len(line) > len(value)]
        assert held.holding(value) == (longer if value else []), (value, lines)


@settings(max_examples=examples(100), deadline=None)
@given(
    first=st.lists(_TEXT, max_size=8),
    then=st.lists(_TEXT, max_size=8),
    value=_TEXT,
    asked=st.sampled_from([0, RUNS_AT]),
)
def test_lines_added_later_are_found_too(
    first: list[str], then: list[str], value: str, asked: int
) -> None:
    """Lines added after values were asked, kept as one text or by runs."""
    held = Substrings(first, asked=asked)
    assert (value in held) == any(value in line for line in first)
    for line in then:
        held.add(line)
    assert (value in held) == any(value in line for line in [*first, *then])


def test_paths_of_one_listing_are_told_apart() -> None:
    """A listing's paths share most of their runs: each is found, and a path that is not
    there, whose runs all are (its siblings'), is not."""
    paths = [f"pkg{n}/sub{k % 10}/module_{k}.py" for n in range(40) for k in range(50)]
    held = Substrings(paths[::2], asked=len(paths))
    assert all(path in held for path in paths[::2])
    assert not any(path in held for path in paths[1::2])
    assert "pkg3/sub8/module_8.py" in held and "sub8/module_8.py" in held


def test_lines_of_one_character_cost_at_most_the_lines_it_reads() -> None:
    """Lines made of one character, where every run is in every line: a value is read in at
    most `MOST_READ` lines a start, and "no" is the safe answer past them."""
    held = Substrings(("a" * (20 + n) for n in range(5_000)), asked=10**6)
    assert "a" * 30 in held
    assert "a" * 100_000 not in held
    assert len(held.holding("a" * 30)) <= 4 * MOST_READ


class _Line(str):
    """A line that counts how often it is read (`value in line`)."""

    reads = 0

    def __contains__(self, value: object) -> bool:
        _Line.reads += 1
        return super().__contains__(value)  # type: ignore[operator]


def test_short_values_are_found_without_reading_every_line() -> None:
    """Values shorter than the runs kept (ids such as `E1234`), each asked which longer lines
    hold it, among 2,000 ids and a file named after each: each is looked up among the pieces
    of its size, so that no line is read (every longer line read for each, it took four
    million reads)."""
    values = [f"{chr(65 + n // 1_000)}{n % 1_000:04d}" for n in range(2_000)]
    lines = [*values, *(f"logs/{v}.txt" for v in values)]
    held = Substrings([_Line(line) for line in lines], asked=10**6)
    _Line.reads = 0
    holders = [held.holding(v) for v in values]
    assert _Line.reads <= len(values)
    assert holders[7] == [2_007] and holders[1_100] == [3_100]
    assert all(len(found) == 1 for found in holders)
    assert "A0007" in held and "Z0007" not in held
