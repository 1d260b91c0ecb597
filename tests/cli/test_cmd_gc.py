"""`ctxoffload gc`: sizes and durations, the error paths, and the real thing end to end."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace
from ctxoffload.cli._cmd_gc import parse_duration, parse_size
from ctxoffload.exceptions import CliError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("7d", 7 * 86400),
        ("12h", 12 * 3600),
        ("30m", 1800),
        ("45s", 45),
        ("90", 90),
        ("1.5h", 5400),
        ("2w", 14 * 86400),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("500M", 500 * 2**20),
        ("2G", 2 * 2**30),
        ("10k", 10 * 1024),
        ("1048576", 2**20),
        ("3MB", 3 * 2**20),
        ("1GiB", 2**30),
        ("1.5K", 1536),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "d7", "7y", "-1d", "7 days", "1e3s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(CliError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["", "M", "5X", "-5M", "two gigs"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(CliError, match="is not a size"):
        parse_size(text)


def test_a_bad_duration_on_the_command_line(filled: Path, cli: Callable[..., Any]) -> None:
    result = cli("gc", "--older-than", "a week", "--workdir", filled)
    assert result.code == 2 and result.err.count("\n") == 1 and "not a duration" in result.err


def test_gc_needs_something_to_do(filled: Path, cli: Callable[..., Any]) -> None:
    result = cli("gc", "--workdir", filled)
    assert result.code == 2 and "--older-than" in result.err


def test_gc_without_the_library_method_says_so(
    filled: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxoffload.workspace

    class OldLocalWorkspace(LocalWorkspace):
        """A workspace of a version without gc: it is no `GarbageCollector`."""

        gc = None

    monkeypatch.setattr(ctxoffload.workspace, "LocalWorkspace", OldLocalWorkspace)
    result = cli("gc", "--older-than", "7d", "--workdir", filled)
    assert result.code == 2 and "no OldLocalWorkspace.gc" in result.err
    assert result.err.count("\n") == 1


def _age(folder: Path, days: float) -> None:
    then = time.time() - days * 86400
    for path in [folder, *folder.rglob("*")]:
        os.utime(path, (then, then), follow_symlinks=False)


def test_gc_removes_old_sessions_then_unreferenced_data(
    filled: Path, cli: Callable[..., Any]
) -> None:
    _age(filled / "sessions/run-1", 10)
    _age(filled / "sessions/run-2", 10)
    # A data file stored in the last hour is kept even unreferenced (a writer may not have
    # logged it yet): this one is old.
    _age(filled / "data", 10)
    data = sorted(p.name for p in (filled / "data").iterdir())
    dry = json.loads(
        cli("gc", "--older-than", "7d", "--dry-run", "--json", "--workdir", filled).out
    )
    assert dry["dry_run"] and sorted(dry["sessions_removed"]) == ["run-1", "run-2"]
    assert sorted((filled / "sessions").iterdir()) != []  # nothing removed yet
    result = cli("gc", "--older-than", "7d", "--workdir", filled)
    assert result.code == 0
    assert "removed session run-1" in result.out and "removed session run-2" in result.out
    assert not [p for p in (filled / "sessions").iterdir() if not p.name.startswith(".")]
    assert sorted(p.name for p in (filled / "data").iterdir()) == []
    assert data  # there was a data file to collect


def test_gc_keeps_what_a_young_session_references(filled: Path, cli: Callable[..., Any]) -> None:
    _age(filled / "sessions/run-1", 10)
    result = cli("gc", "--older-than", "7d", "--json", "--workdir", filled)
    report = json.loads(result.out)
    assert report["sessions_removed"] == ["run-1"]
    assert report["data_removed"] == []  # run-2 still references the image
    assert len(list((filled / "data").iterdir())) == 1
