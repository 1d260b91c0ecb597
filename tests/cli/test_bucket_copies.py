"""The copies a command makes of a bucket belong to that run of the command (`main` makes a
`BucketCopies` for each run and removes what it holds when the run ends): the module that
makes them keeps nothing between runs, so one run ending cannot remove another's copy."""

from __future__ import annotations

from ctxoffload.cli import _bucket


def test_the_bucket_module_keeps_no_state() -> None:
    kept = {
        name: type(value).__name__
        for name, value in vars(_bucket).items()
        if not name.startswith("__") and isinstance(value, (dict, list, set))
    }
    assert kept == {}
