"""The artifact index's search for the most within its budget (`most_within`): it finds the
most `n` whose measure fits, in few measures, from any first guess, and stops when its
`IndexClock` runs out of steps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload.compression._index._search import IndexClock, most_within
from helpers import examples


@settings(max_examples=examples(200), deadline=None)
@given(
    costs=st.lists(st.integers(0, 40), min_size=1, max_size=300),
    budget=st.integers(0, 4_000),
    guess=st.integers(-5, 400),
    flat=st.booleans(),
)
def test_the_search_finds_the_most_within_the_budget(
    costs: list[int], budget: int, guess: int, flat: bool
) -> None:
    """`most_within` on tokens that grow with `n` (by steps of 0 to 40, flat runs too):
    the most `n` within the budget, in few measures, from any first guess; with a weight
    that is wrong (flat), the same answer."""
    tokens = [sum(costs[:n]) for n in range(len(costs) + 1)]
    high = len(costs)
    measured: list[int] = []

    def measure(n: int) -> int:
        assert 1 <= n <= high
        measured.append(n)
        return tokens[n]

    weight = [float(n // 7) for n in range(high + 2)] if flat else None
    most_within(measure, 1, high, guess, budget, IndexClock(), known=(0, tokens[0]), weight=weight)
    fits = [n for n in range(1, high + 1) if tokens[n] <= budget]
    most = max(fits, default=0)
    if most:
        assert most in measured or most == 0
    assert all(n <= most or tokens[n] > budget for n in measured)
    assert len(measured) <= 2 * high.bit_length() + 4
    # With three steps, it stops after three measures.
    measured.clear()
    most_within(measure, 1, high, guess, budget, IndexClock(steps=3), known=(0, tokens[0]))
    assert len(measured) <= 3


@settings(max_examples=examples(200), deadline=None)
@given(
    costs=st.lists(st.integers(0, 40), min_size=1, max_size=300),
    budget=st.integers(0, 4_000),
    guess=st.integers(-5, 400),
    slack=st.integers(1, 60),
)
def test_the_search_stops_at_a_measure_within_its_slack(
    costs: list[int], budget: int, guess: int, slack: int
) -> None:
    """With a slack, the search ends once a measure is within the budget by at most that
    many tokens: the most it found is then that close to full, or the most that fits."""
    tokens = [sum(costs[:n]) for n in range(len(costs) + 1)]
    measured: list[int] = []

    def measure(n: int) -> int:
        measured.append(n)
        return tokens[n]

    most_within(
        measure, 1, len(costs), guess, budget, IndexClock(), known=(0, tokens[0]), slack=slack
    )
    fits = [n for n in measured if tokens[n] <= budget]
    most = max((n for n in range(len(costs) + 1) if tokens[n] <= budget), default=0)
    best = max(fits, default=0)
    assert best == most or tokens[best] >= budget - slack
