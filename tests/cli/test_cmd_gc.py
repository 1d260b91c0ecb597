"""`ctxoffload gc`: sizes and durations, the error paths, and the real thing end to end."""

from __future__ import annotations

import asyncio
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


def _demo_with_a_fork(workdir: Path, cli: Callable[..., Any]) -> None:
    """The issue's workspace: `ctxoffload demo`, then `fork nightly-job --step 4 --as
    nightly-retry`, whose messages name nightly-job's files."""
    assert cli("demo", "--workdir", workdir).code == 0
    forked = cli(
        "fork", "nightly-job", "--step", "4", "--as", "nightly-retry", "--workdir", workdir
    )
    assert forked.code == 0, forked.err
    assert (
        str(workdir / "sessions/nightly-job")
        in (workdir / "sessions/nightly-retry/state.json").read_text()
    )


@pytest.mark.slow
def test_gc_keeps_the_origin_of_a_fork_and_says_why(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "d"
    _demo_with_a_fork(workdir, cli)
    _age(workdir / "sessions/nightly-job", 10)
    dry = cli("gc", "--older-than", "7d", "--dry-run", "--workdir", workdir)
    assert dry.code == 0
    why = "session 'nightly-retry' references its files"
    assert f"would keep session nightly-job: {why}" in dry.out
    assert "would remove 0 sessions" in dry.out
    report = json.loads(cli("gc", "--older-than", "7d", "--json", "--workdir", workdir).out)
    assert report["sessions_removed"] == []
    assert report["sessions_kept"] == {
        "nightly-job": "session 'nightly-retry' references its files"
    }
    verified = cli("verify", "--workdir", workdir)
    assert verified.code == 0, verified.out


@pytest.mark.slow
def test_gc_to_a_budget_after_a_fork_leaves_no_reference_naming_no_file(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "d"
    _demo_with_a_fork(workdir, cli)
    result = cli("gc", "--max-bytes", "1M", "--workdir", workdir)
    assert result.code == 0
    # Only removing both fits the budget: the fork goes first, then what it named.
    assert result.out.index("removed session nightly-retry") < result.out.index(
        "removed session nightly-job"
    )
    verified = cli("verify", "--workdir", workdir)
    assert verified.code == 0, verified.out


def test_gc_shows_a_lease_holders_name_inert(filled: Path, cli: Callable[..., Any]) -> None:
    ws = LocalWorkspace(filled)
    lease = asyncio.run(ws.acquire_lease("run-1", agent="evil\x1b]0;owned\x07"))
    try:
        result = cli("gc", "--max-bytes", "0", "--dry-run", "--workdir", filled)
    finally:
        asyncio.run(lease.release())
    assert "would keep session run-1: its lease is held by agent 'evil\\x1b]0;owned\\x07'" in (
        result.out
    )
    assert "\x1b" not in result.out


@pytest.mark.parametrize("kind", ["folder", "sqlite", "bucket"])
def test_gc_says_which_unnamed_data_files_it_keeps_being_recent(
    kind: str, new_workspace: Callable[[str], tuple[str, Any]], cli: Callable[..., Any]
) -> None:
    """`--max-bytes` removes the session that named an image stored a moment ago: the image is
    kept (a writer may not have named it yet), and gc says so, in its text and its JSON."""
    from ctxoffload import Msg
    from helpers import image_block

    workdir, workspace = new_workspace(kind)
    asyncio.run(
        workspace.offload_context("run-1", msgs=[Msg(role="user", content=[image_block()])])
    )
    report = json.loads(
        cli("gc", "--max-bytes", "1", "--dry-run", "--json", "--workdir", workdir).out
    )
    assert report["sessions_removed"] == ["run-1"] and report["data_removed"] == []
    [(name, why)] = report["data_kept"].items()
    assert name.endswith(".png") and "changed within the last 60 minutes" in why
    said = cli("gc", "--max-bytes", "1", "--dry-run", "--workdir", workdir).out
    assert f"would keep data file {name}: no session names it" in said
