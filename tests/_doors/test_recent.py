"""The bounded tables a door keeps for a server's life (`ctxoffload._doors.recent`)."""

from __future__ import annotations

import gc
from typing import Any

from ctxoffload._doors.recent import RecentKeys, weak_entry


def test_recent_keys_keep_the_most_recent_and_a_key_added_again_is_recent() -> None:
    keys = RecentKeys(3)
    for key in ("s1", "s2", "s3"):
        keys.add(key)
    keys.add("s1")  # used again: the most recent now
    keys.add("s4")  # the oldest, s2, goes
    assert [k in keys for k in ("s1", "s2", "s3", "s4")] == [True, False, True, True]
    assert len(keys) == 3
    keys.discard("s3")
    keys.discard("never there")
    assert len(keys) == 2 and "s3" not in keys


def test_a_weak_entry_leaves_with_its_object_but_not_a_later_entry_under_its_key() -> None:
    class Tool:
        pass

    table: dict[Any, Any] = {}
    first = Tool()
    table["k"] = (weak_entry(first, table, "k"), "schema 1")
    second = Tool()
    held = weak_entry(second, table, "k")
    table["k"] = (held, "schema 2")  # the key reused for another object
    del first
    gc.collect()
    assert table == {"k": (held, "schema 2")}  # the first's going leaves the second's entry
    del second
    gc.collect()
    assert table == {}
    assert weak_entry({"a dict": "cannot be held weakly"}, table, "d") is None
