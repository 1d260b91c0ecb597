"""The order the artifact index takes the artifacts that left in (`in_order`), and what its
search for the most it names folded weighs (`Folds`, `Folding`): each artifact by its position
in that order, what it writes folded, and which values hold each other."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ._artifacts import FoundArtifact
from ._layout import LINE, goes_in_tree, group_of, group_pieces
from ._substrings import Substrings
from ._whole import names_in

__all__ = ["Folding", "Folds", "Key", "fold_costs", "in_order", "key_of", "order_of"]

Key = tuple[str, str]
"""An artifact's `(kind, value)`."""


def key_of(found: FoundArtifact) -> Key:
    """What tells `found` apart from every other artifact: its kind and value."""
    return found.kind, found.value


class Folds:
    """What the fold searches among: the artifacts the index weighs in the order it takes
    them folded (`in_order`, at what each writes folded), each known by its position in
    that order; and, for a window of it, the values that hold each other (`inside`), found
    once for every index the search renders.

    Args:
        waiting: every artifact the index weighs, in its order whole.
    """

    def __init__(self, waiting: Sequence[FoundArtifact]) -> None:
        self.waiting = waiting
        self.total = len(waiting)
        tree = [goes_in_tree(f) for f in waiting]
        groups = [group_of(f) if f.kind == "command" else None for f in waiting]
        costs = fold_costs(waiting, tree, groups)
        order = order_of(waiting, costs)
        self._arrange([waiting[at] for at in order], [(tree[at], groups[at]) for at in order])

    def _arrange(
        self,
        order: list[FoundArtifact],
        shapes: list[tuple[bool, tuple[str, str, str] | None]],
    ) -> None:
        """Take `order`, with whether each goes in the tree and each command's group."""
        self.order = order
        self._shapes = shapes
        self.keys = [(f.kind, f.value) for f in order]
        self.ratio = 3.0  # characters a token, in the index as it is before folding (`build`)
        # What folding each saves: a path in the tree all but its name; a command its
        # program and file, when another command shares them (`savings`). And what the first
        # `n` write folded, about (each alone): where the search for how many are taken
        # starts, and what it reads its measures against.
        self.tree_saving: list[int] = []
        self.command: list[tuple[str, str] | None] = []
        self.command_saving: list[int] = []
        self.weight = [0]
        written = 0
        for f, (in_tree, group) in zip(order, shapes, strict=True):
            value = f.value
            saved = value.rfind("/") if in_tree else 0
            self.tree_saving.append(saved)
            self.command.append(group[:2] if group is not None and group[0] != LINE else None)
            self.command_saving.append(len(value) - len(group[2]) if group is not None else 0)
            written += len(value) - saved + 2
            self.weight.append(written)
        self._values = Substrings(asked=len(order))  # the values of the window, in order
        self._holders: list[list[int]] = []  # for each of the window, the longer that hold it
        self._held: list[int] = []  # those of the window some longer value holds
        # What each position writes folded (`group_pieces`), worked out once for every
        # fold the search tries.
        self._folded_pieces: dict[int, list[str]] = {}

    def fresh(self) -> Folds:
        """The same, of what left with this compaction only (what is carried is cut): itself
        when nothing is carried."""
        if all(f.fresh for f in self.order):
            return self
        fresh = Folds.__new__(Folds)
        fresh.waiting, fresh.total = self.waiting, self.total
        # (The carried entries sort after the fresh ones, on lines of their own: the order
        # of the fresh ones among themselves is the same.)
        kept = [at for at, f in enumerate(self.order) if f.fresh]
        fresh._arrange([self.order[at] for at in kept], [self._shapes[at] for at in kept])
        return fresh

    def overflows(self, budget: int) -> bool:
        """Whether the whole order, folded, surely takes more than `budget` tokens: what it
        writes at least is twice what the budget holds at `ratio`."""
        return self.weight[-1] > 2 * self.ratio * budget

    def widen(self, window: int) -> None:
        """Find the values that hold each other among the first `window` of the order."""
        start = len(self._values)
        if window <= start:
            return
        for found in self.order[start:window]:
            self._values.add(found.value)
        # Every value of the window asked again: those added may hold the earlier ones.
        self._holders = [self._values.holding(f.value, f.kind) for f in self.order[:window]]
        self._held = [at for at, holders in enumerate(self._holders) if holders]

    def savings(self, taken: int) -> list[int]:
        """What folding each of the first `taken` saves, in characters (0: it cannot fold):
        a command saves only when another of those taken shares its program and file."""
        shared = Counter(group for group in self.command[:taken] if group is not None)
        return [
            self.tree_saving[at]
            or (self.command_saving[at] if (group := self.command[at]) and shared[group] > 1 else 0)
            for at in range(taken)
        ]

    def _folded(self, at: int) -> list[str]:
        """`group_pieces` of the entry at `at`, folded."""
        pieces = self._folded_pieces.get(at)
        if pieces is None:
            pieces = self._folded_pieces[at] = group_pieces(self.order[at], True)
        return pieces

    def inside(self, taken: int, folded: set[Key], *, beyond: bool = False) -> set[int]:
        """The positions among the first `taken` (`beyond`: among as many after them, and
        64 more) whose value one of the first `taken` holds, in what the index writes of it:
        its value whole, or folded the pieces of `group_pieces`."""
        low, high = (taken, 2 * taken + 64) if beyond else (0, taken)
        found: set[int] = set()
        for at in self._held:
            if not low <= at < high:
                continue
            kind, value = self.keys[at]
            for holder in self._holders[at]:
                if holder < taken and (
                    self.keys[holder] not in folded
                    or any(names_in(piece, value, kind) for piece in self._folded(holder))
                ):
                    found.add(at)
                    break
        return found


@dataclass(slots=True)
class Folding:
    """An index with entries folded: its entries, those folded, its text, how many it names,
    how many of the fold's order it took, the positions of those that could fold (the least
    saving first), what folding each of those taken saves (in characters), and its
    tokens."""

    entries: list[FoundArtifact]
    folded: set[Key]
    text: str
    named: int
    taken: int
    foldable_at: list[int]
    saving: list[int]
    tokens: int

    @property
    def foldable(self) -> int:
        """How many of those taken could fold."""
        return len(self.foldable_at)


def fold_costs(
    found: Sequence[FoundArtifact],
    tree: Sequence[bool],
    groups: Sequence[tuple[str, str, str] | None],
) -> list[int]:
    """What each of `found` writes at least folded, in characters: a path in the tree (where
    `tree` says) its name (its directories may be a row's head, written once), a command its
    middle when another command shares its program and file (`groups`: each command's
    `group_of`), any other whole."""
    shared = Counter(group[:2] for group in groups if group is not None and group[0] != LINE)
    costs: list[int] = []
    for f, in_tree, group in zip(found, tree, groups, strict=True):
        if in_tree:
            costs.append(len(f.value) - f.value.rfind("/"))
        elif group is not None and group[0] != LINE and shared[group[:2]] >= 2:
            costs.append(len(group[2]))
        else:
            costs.append(len(f.value))
    return costs


def in_order(found: Sequence[FoundArtifact], costs: Sequence[int]) -> list[FoundArtifact]:
    """`found` in the order the index takes it (`order_of`)."""
    return [found[at] for at in order_of(found, costs)]


def order_of(found: Sequence[FoundArtifact], costs: Sequence[int]) -> list[int]:
    """The positions of `found` in the order the index takes it, within its budget: the
    files the workspace stored first (each holds what left), then what left with this
    compaction before what the index it replaces carried, what left named twice or more
    before what was named once; then each line of the context file in turn gives its
    cheapest entry not yet taken (`costs`, one for each of `found`), so that every message
    that left is named before a listing of hundreds fills the budget, and among those the
    cheapest (the most names within the budget), the newest first among equals."""
    by_line: dict[int | None, list[int]] = {}
    for at, f in enumerate(found):
        by_line.setdefault(f.line, []).append(at)
    turn = [0] * len(found)
    for group in by_line.values():
        group.sort(key=costs.__getitem__)
        for n, at in enumerate(group):
            turn[at] = n
    keys = [
        (
            not f.stored,
            not f.fresh,
            -min(f.mentions, 2),
            turn[at],
            costs[at],
            -f.recency,
        )
        for at, f in enumerate(found)
    ]
    return sorted(range(len(found)), key=keys.__getitem__)
