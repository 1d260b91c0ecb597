"""`Substrings`, the artifact index's test of whether a value is written whole inside one of
many lines (`_whole`): it agrees with reading every place of every line (never "yes" for a
value not written whole there, and "yes" for every value that is, while no run of it is in
more than `MOST_READ` lines and no line holds it more than `MOST_PLACES` times before), and a
hostile set of lines costs it a bounded number of lines read."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload.compression._index._substrings import MOST_PLACES, RUNS_AT, Substrings
from ctxoffload.compression._index._whole import written_whole
from helpers import examples

_TEXT = st.text(alphabet="ab/._-0123é |`", max_size=40)
_KINDS = st.sampled_from(["path", "id", "url", "command"])


def _whole_places(line: str, value: str, kind: str) -> list[int]:
    """Every place `line` holds `value`, and for each whether it is written whole there."""
    places = [at for at in range(len(line) - len(value) + 1) if line.startswith(value, at)]
    return [int(written_whole(line, at, at + len(value), kind)) for at in places]


def _lines_naming(lines: list[str], value: str, kind: str) -> tuple[list[int], list[int]]:
    """The lines holding `value` written whole: all of them, and those where it is whole
    within the first `MOST_PLACES` places it is written at (which `Substrings` must find)."""
    every, surely = [], []
    for at, line in enumerate(lines):
        found = _whole_places(line, value, kind) if value and "\n" not in value else []
        if 1 in found:
            every.append(at)
            if found.index(1) < MOST_PLACES:
                surely.append(at)
    return every, surely


@pytest.mark.slow
@settings(max_examples=examples(400), deadline=None)
@given(
    lines=st.lists(_TEXT, max_size=12),
    values=st.lists(_TEXT, max_size=12),
    kind=_KINDS,
    asked=st.sampled_from([0, 10**9]),
)
def test_a_value_is_found_exactly_where_it_is_written_whole(
    lines: list[str], values: list[str], kind: str, asked: int
) -> None:
    """Kept as one text (little asked) or by runs (much asked), the same answers as reading
    every place of every line."""
    held = Substrings(lines, asked=asked)
    for value in [*values, *(line[2:9] for line in lines), *(line[1:] for line in lines)]:
        every, surely = _lines_naming(lines, value, kind)
        assert held.names(value, kind) <= bool(every), (value, kind, lines)
        assert held.names(value, kind) >= bool(surely), (value, kind, lines)
        holding = held.holding(value, kind)
        assert holding == sorted(holding)
        longer = {at for at in every if len(lines[at]) > len(value)}
        assert set(holding) <= longer, (value, kind, lines)
        assert {at for at in surely if at in longer} <= set(holding), (value, kind, lines)


@settings(max_examples=examples(100), deadline=None)
@given(
    first=st.lists(_TEXT, max_size=8),
    then=st.lists(_TEXT, max_size=8),
    value=_TEXT,
    kind=_KINDS,
    asked=st.sampled_from([0, RUNS_AT]),
)
def test_lines_added_later_are_found_too(
    first: list[str], then: list[str], value: str, kind: str, asked: int
) -> None:
    """Lines added after values were asked, kept as one text or by runs."""
    held = Substrings(first, asked=asked)
    assert held.names(value, kind) == bool(_lines_naming(first, value, kind)[1])
    for line in then:
        held.add(line)
    assert held.names(value, kind) == bool(_lines_naming([*first, *then], value, kind)[1])


def test_a_value_inside_a_longer_one_is_not_named_by_it() -> None:
    """`/mnt/vol1` is a piece of `/mnt/vol10`, `E1234` of `E12345`, `pytest -q` of
    `pytest -q tests/`: none is named by the longer value, kept as one text or by runs, until
    a line writes it whole."""
    for asked in (0, 10**6):
        held = Substrings(["/mnt/vol10", "E12345 /srv/E1234x", "pytest -q tests/"], asked=asked)
        for value, kind in (("/mnt/vol1", "path"), ("E1234", "id"), ("pytest -q", "command")):
            assert not held.names(value, kind) and held.holding(value, kind) == []
            held.add(f"x {value}: y")
            assert held.names(value, kind) and held.holding(value, kind) == [len(held) - 1]


def test_paths_of_one_listing_are_told_apart() -> None:
    """A listing's paths share most of their runs: each is found, and a path that is not
    there, whose runs all are (its siblings'), is not; nor is the end of a path held, a path
    of its own."""
    paths = [f"pkg{n}/sub{k % 10}/module_{k}.py" for n in range(40) for k in range(50)]
    held = Substrings(paths[::2], asked=len(paths))
    assert all(held.names(path, "path") for path in paths[::2])
    assert not any(held.names(path, "path") for path in paths[1::2])
    assert held.names("pkg3/sub8/module_8.py", "path")
    assert not held.names("sub8/module_8.py", "path")
    assert held.names("pkg3/sub8", "path")  # (the folder of a path held)


@pytest.mark.slow
def test_values_nested_in_one_another_are_each_named_by_none_of_the_others() -> None:
    """A thousand values each a piece of the next (`/v/1`, `/v/11`, `/v/111`, ...; ids
    `X100`, `X1000`, ...; `make`, `make x`, `make x x`, ...): no line holds another whole.
    Kept as one text, each is found itself (its own line is the first to hold it); kept by
    runs, a value whose every run is in every line may be answered "no" (past `MOST_READ`
    lines read), never "yes" for a line that does not write it whole."""
    for kind, values in (
        ("path", [f"/v/{'1' * n}" for n in range(1, 1_001)]),
        ("id", [f"X{'1' * n}" for n in range(3, 7)] + [f"X{n}" for n in range(200, 1_000)]),
        ("command", [" ".join(["make"] + ["x"] * n) for n in range(300)]),
    ):
        for asked in (0, 10**6):
            held = Substrings(values, asked=asked)
            assert all(held.holding(v, kind) == [] for v in values), kind
            if asked == 0:
                assert all(held.names(v, kind) for v in values), kind


def test_a_value_written_only_inside_longer_ones_many_times_is_safely_not_named() -> None:
    """A line that writes `/mnt/vol1` only inside `/mnt/vol10` a thousand times: "no" (each
    line read at `MOST_PLACES` places at most); one that writes it whole after a few of
    those: "yes"; after more than `MOST_PLACES` of them: "no", the safe answer (the value is
    then written again), never "yes" for a value not written whole."""
    for asked in (0, 10**6):
        held = Substrings(["/mnt/vol10 " * 1_000], asked=asked)
        assert not held.names("/mnt/vol1", "path")
        held.add("/mnt/vol10 " * 3 + "/mnt/vol1")
        assert held.names("/mnt/vol1", "path")
        late = Substrings(["/mnt/vol10 " * MOST_PLACES + "/mnt/vol1"], asked=asked)
        assert not late.names("/mnt/vol1", "path")


@pytest.mark.slow
def test_lines_of_one_character_cost_at_most_the_lines_it_reads() -> None:
    """Lines made of one character, where every run is in every line: a value is read in at
    most `MOST_READ` lines a start, and "no" is the safe answer past them."""
    held = Substrings(("a" * (20 + n) for n in range(5_000)), asked=10**6)
    assert held.names("a" * 30, "id")  # (line 10 is it, whole)
    assert not held.names("a" * 100_000, "id")
    assert held.holding("a" * 30, "id") == []  # (every longer line goes on with it)


class _Line(str):
    """A line that counts how often it is read (`find`)."""

    reads = 0

    def find(self, *args: object) -> int:  # type: ignore[override]
        _Line.reads += 1
        return super().find(*args)  # type: ignore[arg-type]


def test_short_values_are_found_without_reading_every_line() -> None:
    """Values shorter than the runs kept (ids such as `E1234`), each asked which longer lines
    hold it, among 2,000 ids and a file named after each: each is looked up among the pieces
    of its size, and only the lines holding it are read (every longer line read for each, it
    took four million reads)."""
    values = [f"{chr(65 + n // 1_000)}{n % 1_000:04d}" for n in range(2_000)]
    lines = [*values, *(f"logs/{v}.txt" for v in values)]
    held = Substrings([_Line(line) for line in lines], asked=10**6)
    _Line.reads = 0
    holders = [held.holding(v, "id") for v in values]
    assert _Line.reads <= 2 * len(values)
    assert holders[7] == [2_007] and holders[1_100] == [3_100]
    assert all(len(found) == 1 for found in holders)
    assert held.names("A0007", "id") and not held.names("Z0007", "id")
