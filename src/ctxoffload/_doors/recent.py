"""What a door keeps per session or per host object of a server's life, bounded.

A door object is built once and serves one conversation after another, for as long as its
process lives: a table keyed by session or by a host's object that only ever gains entries
grows without end (and keeps what its entries hold alive). `RecentKeys` keeps the most
recent keys only; `weak_entry` lets an entry go with the host object it is for.
"""

from __future__ import annotations

import collections
import weakref
from collections.abc import Hashable, Iterator
from typing import Any

__all__ = ["KEPT", "RecentKeys", "weak_entry"]

KEPT = 4_096
"""The keys a `RecentKeys` keeps by default: far more sessions than one process has live."""


class RecentKeys:
    """A set of the `kept` keys added most recently (the oldest go first). Not thread-safe:
    its callers hold their own lock.

    Args:
        kept: the most keys kept.
    """

    __slots__ = ("_keys", "kept")

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._keys: collections.OrderedDict[Hashable, None] = collections.OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[Hashable]:
        """The keys, the oldest first."""
        return iter(self._keys)

    def add(self, key: Hashable) -> None:
        """Keep `key` as the most recent."""
        keys = self._keys
        keys[key] = None
        keys.move_to_end(key)
        while len(keys) > self.kept:
            keys.popitem(last=False)

    def discard(self, key: Hashable) -> None:
        """Forget `key`, if it is kept."""
        self._keys.pop(key, None)


def weak_entry(owner: Any, table: dict[Any, Any], key: Hashable) -> weakref.ref[Any] | None:
    """A weak reference to `owner` that removes `table[key]` when `owner` is collected, if
    that entry still holds this reference as its first item (a later entry for another
    object under the same key stays); None for an object that cannot be held weakly. Called
    by the collector wherever it runs: a dict's get and del, nothing that waits."""

    def forget(ref: weakref.ref[Any]) -> None:
        entry = table.get(key)
        if entry is not None and entry[0] is ref:
            table.pop(key, None)

    try:
        return weakref.ref(owner, forget)
    except TypeError:
        return None
