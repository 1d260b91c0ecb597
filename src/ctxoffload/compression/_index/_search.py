"""How the artifact index searches for the layout that names the most within its budget:
few indexes rendered and counted (`most_within`), each a step of an `IndexClock`, which a
compaction gives what is left of its `summary_timeout`."""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence

__all__ = ["IndexClock", "at_most", "most_within", "slack"]


class IndexClock:
    """How long an index may search for the layout that names the most: until a time on
    `time.monotonic()`'s clock, within a number of steps (each index rendered and counted
    whole while searching is one), both, or neither (no limit).

    Out of time or steps, `ArtifactIndex.build` keeps the best index it has found that fits
    its budget. Fitting the budget counted exactly is never skipped.

    Args:
        deadline: the `time.monotonic()` by which the search stops.
        steps: the most indexes the search renders and counts.
    """

    __slots__ = ("deadline", "ran_out", "steps")

    def __init__(self, deadline: float | None = None, steps: int | None = None) -> None:
        self.deadline = deadline
        self.steps = steps
        self.ran_out = False

    def step(self) -> bool:
        """Take one step: whether one was left (never again once one was refused)."""
        if self.ran_out:
            return False
        if self.steps is not None:
            if self.steps <= 0:
                self.ran_out = True
                return False
            self.steps -= 1
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.ran_out = True
            return False
        return True


def most_within(
    measure: Callable[[int], int | None],
    low: int,
    high: int,
    guess: int,
    budget: int,
    clock: IndexClock,
    *,
    known: tuple[int, int],
    weight: Sequence[float] | None = None,
    near: int = 1,
    slack: int = 0,
    enough: Callable[[], bool] | None = None,
) -> None:
    """Search `low..high` for the most `n` whose `measure(n)` (the tokens of an index built
    with `n`, counted exactly; None when that index is refused for another reason) is within
    `budget`, the tokens growing with `n`. `known`: an `n` below `low` and its tokens;
    `weight`: what each `n` is expected to cost, growing with it (`weight[n]`, from 0 to
    `high + 1`; `n` itself when None); `near`: how close to the most is close enough;
    `slack`: how few tokens under the budget a measure may leave and be close enough;
    `enough`: asked after each measure, whether the caller found what it needs.

    Each measure is a step of `clock` (the search stops when it runs out) and renders an
    index, so it takes few: from `guess`, each next `n` is where the tokens measured say the
    budget ends, read on a line through the nearest measures on either side of it (or the
    last and `known`) against `weight`, an end that stayed while the other moved twice
    counting half; or the middle of the range left when the last one did not halve it:
    four to eight measures where halving alone takes twelve. The caller keeps what it
    found as it measures.
    """
    if low > high:
        return

    def cost(n: int) -> float:
        return float(n) if weight is None else weight[min(max(n, 0), len(weight) - 1)]

    below: tuple[int, float | None] = (low - 1, known[1] if known[0] == low - 1 else None)
    above: tuple[int, float | None] = (high + 1, None)
    last: tuple[int, float] = known
    at = min(max(guess, low), high)
    width, moved = high - low + 2, ""
    while above[0] - below[0] > near and clock.step():
        tokens = measure(at)
        if (enough is not None and enough()) or (
            slack and tokens is not None and budget - slack <= tokens <= budget
        ):
            return
        side = "below" if tokens is not None and tokens <= budget else "above"
        if side == "below":
            below = (at, tokens)
        else:
            above = (at, tokens)
        if moved == side and (other := below if side == "above" else above)[1] is not None:
            # The same end moved twice: the other's measure counts half (the Illinois rule),
            # so that a curve flat then steep is not crept along.
            half = budget + (other[1] - budget) / 2
            below, above = (
                (below, (above[0], half)) if side == "below" else ((below[0], half), above)
            )
        moved = side
        low_n, low_t = below
        high_n, high_t = above
        if high_n - low_n <= near:
            return
        if tokens is None or 2 * (high_n - low_n) > width:
            # A measure refused, or the last aim did not halve the range: halve it.
            aim = (low_n + high_n) // 2
        else:
            if low_t is not None and high_t is not None and high_t > low_t:
                start, start_t, end, end_t = low_n, low_t, high_n, high_t
            else:
                start, start_t, end, end_t = last[0], last[1], at, tokens
            spread = cost(end) - cost(start)
            slope = (end_t - start_t) / spread if spread else 0.0
            target = cost(start) + (budget - start_t) / max(slope, 1e-9)
            aim = at_most(target, weight) if weight is not None else int(target)
        width = high_n - low_n
        if tokens is not None:
            last = (at, tokens)
        at = min(max(aim, low_n + 1), high_n - 1)


def at_most(target: float, weight: Sequence[float]) -> int:
    """The most `n` whose `weight[n]` is at most `target` (-1 for none)."""
    return bisect.bisect_right(weight, target) - 1


def slack(budget: int) -> int:
    """How few tokens under its budget an index may leave and be as good as full: a
    two-hundredth of it, up to what five entries take."""
    return max(1, min(48, budget // 200))
