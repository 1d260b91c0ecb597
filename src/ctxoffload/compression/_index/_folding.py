"""The fold search of the artifact index: the index that names the most of what left within
its budget when paths fold into the tree of their directories and commands into the row of
their program and file (`_layout`), then as many of its folded entries kept whole as the
budget still holds (a plain substring search of the context finds those).

It works on an `ArtifactIndex` through what `FoldingIndex` names: its lists, its budget, and
its rendering and counting (each text counted once while the index is built).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Protocol

from ...tokens import TokenCounter
from ._artifacts import FoundArtifact
from ._order import Folding, Folds, Key, key_of
from ._search import IndexClock, at_most, most_within, slack
from ._substrings import Substrings

__all__ = ["FoldingIndex", "fold", "most_folded", "take_folded"]


class FoldingIndex(Protocol):
    """What the fold search reads and changes of the index it works for."""

    entries: list[FoundArtifact]
    in_summary: list[FoundArtifact]
    cut: list[FoundArtifact]
    folded: set[Key]
    budget: int
    show_calls: bool

    def render_with(
        self,
        entries: Sequence[FoundArtifact],
        cut: int,
        events_file: str | None,
        *,
        calls: bool = False,
    ) -> str: ...

    def _count(self, counter: TokenCounter, text: str) -> int: ...


# From how many named the fold search tries the fewest that name more first (`most_folded`):
# below it, one more command alone in its group may not fold where the two that make a row
# do, and such a search is short anyway.
_PROBED_FROM = 16


def most_folded(
    index: FoldingIndex,
    folds: Folds,
    counter: TokenCounter,
    events_file: str | None,
    clock: IndexClock,
    start: Folding | None = None,
) -> Folding | None:
    """The index that names the most of `folds` within the budget by folding paths into
    the tree of their directories and commands into the row of their program and file
    (`_layout`), every entry that can fold folded; None when it names no more than
    the index does now.

    The entries are taken in `folds.order`, each costing what it writes folded at least
    (`fold_costs`); how many is searched (`most_within`) from a quarter more than the
    index names now, or from where `start` (a folding of the same order within a smaller
    budget) says the budget ends, in a window of the order four times that, widened while
    what fits fills it. It is found to a hundredth of what the index names now. Without
    `start`, one more than the index names is tried first: when that does not fit, nothing
    does (the tokens grow with what is taken, as `most_within` takes them to), once it names
    `_PROBED_FROM` or more.
    """
    order = folds.order
    if not order:
        return None
    named = {key_of(f) for f in (*index.entries, *index.in_summary)}
    named_now = sum(key in named for key in folds.keys)
    bare = index._count(
        counter, index.render_with([], folds.total, events_file, calls=index.show_calls)
    )
    known = (0, bare)
    if start is not None and start.taken and start.tokens > bare:
        known = (start.taken, start.tokens)
        guess = int(start.taken * (index.budget - bare) / (start.tokens - bare))
    else:
        # (Folding rarely names many more than whole entries: a first measure near what
        # they name costs a small index, and the next aim comes from what it took.)
        guess = at_most((index.budget - bare) * folds.ratio, folds.weight)
        guess = min(guess, named_now + named_now // 4 + 16)
    best: list[Folding] = []  # the folding that names the most, once one fits

    def measure(taken: int) -> int:
        folding = fold(index, folds, taken, 0, counter, events_file)
        if folding.tokens <= index.budget and folding.named > (
            best[0].named if best else named_now
        ):
            best[:] = [folding]
        return folding.tokens

    window = min(len(order), 4 * guess + 256)
    low = named_now + 1
    folds.widen(window)
    if start is None and named_now >= _PROBED_FROM and low <= window and clock.step():
        # The fewest that name more, first: where even they do not fit folded (the header's
        # rules and the rows' heads cost more than folding saves on a small index: three
        # searches in four of the LangChain replay at 8,000 tokens), none of more does, and
        # the search ends after one index instead of three or four. Where they fit, the
        # search goes on from them.
        tokens = measure(low)
        if tokens > index.budget:
            return None
        known, low = (low, tokens), low + 1
    while True:
        folds.widen(window)
        most_within(
            measure,
            low,
            window,
            guess,
            index.budget,
            clock,
            known=known,
            weight=folds.weight,
            near=max(1, named_now // 100),
            slack=slack(index.budget),
        )
        reached = best[0].taken if best else 0
        if window >= len(order) or reached < window * 0.9 or clock.ran_out:
            break
        low, guess, window = reached + 1, reached, min(len(order), 2 * window)
    return best[0] if best else None


def take_folded(
    index: FoldingIndex,
    folds: Folds,
    found: Folding,
    summarised: int,
    counter: TokenCounter,
    events_file: str | None,
    clock: IndexClock,
) -> None:
    """Make `found` (`most_folded`) the index, with as many of its folded entries
    whole as the budget still holds (those whose folding saves the least; searched as
    `most_within` does), so that a plain substring search of the context finds the most
    of them; then place every artifact that left: written, named by the index's text
    (inside an entry, a row's head), or cut. `summarised`: how many of `in_summary` the
    summary's text names."""
    kept = [(0, found)]  # the most kept whole that fits, and its folding

    def measure(keep: int) -> int | None:
        folding = fold(index, folds, found.taken, keep, counter, events_file)
        if folding.named < found.named:
            return None
        if folding.tokens <= index.budget and keep > kept[0][0]:
            kept[:] = [(keep, folding)]
        return folding.tokens

    weight = list(itertools.accumulate((found.saving[at] for at in found.foldable_at), initial=0))
    most_within(
        measure,
        1,
        found.foldable,
        at_most((index.budget - found.tokens) * folds.ratio, weight),
        index.budget,
        clock,
        known=(0, found.tokens),
        weight=weight,
        near=max(1, found.foldable // 32),  # (a whole entry more or less matters little)
        slack=slack(index.budget),
    )
    chosen = kept[0][1]
    index.entries, index.folded = chosen.entries, chosen.folded
    written = {key_of(f) for f in chosen.entries}
    text = Substrings(chosen.text.split("\n"), asked=len(folds.waiting))
    index.cut = []
    named_by_text: list[FoundArtifact] = []
    for f in folds.waiting:
        if key_of(f) not in written:
            (named_by_text if text.names(f.value, f.kind) else index.cut).append(f)
    index.in_summary = index.in_summary[:summarised] + named_by_text


def fold(
    index: FoldingIndex,
    folds: Folds,
    taken: int,
    keep: int,
    counter: TokenCounter,
    events_file: str | None,
) -> Folding:
    """The first `taken` entries of `folds.order`, each that can fold folded but the
    `keep` whose folding saves the least (the rest of what the index weighed cut),
    counted exactly."""
    saving = folds.savings(taken)
    foldable = sorted((at for at in range(taken) if saving[at] > 0), key=saving.__getitem__)
    keys = folds.keys
    folded = {keys[at] for at in foldable[keep:]}
    # An entry inside the text another one holds (its value, or its pieces folded) is
    # named by it.
    inside = folds.inside(taken, folded)
    entries = [f for at, f in enumerate(folds.order[:taken]) if at not in inside]
    saved = index.folded
    index.folded = folded
    try:
        text = index.render_with(entries, folds.total - taken, events_file, calls=index.show_calls)
    finally:
        index.folded = saved
    # What comes next in the order and is named all the same: inside a value taken.
    beyond = len(folds.inside(taken, folded, beyond=True))
    tokens = index._count(counter, text)
    return Folding(entries, folded, text, taken + beyond, taken, foldable, saving, tokens)
