"""`ctxoffload export` stopped at its dangerous moments, in a real child process whose
`os.rename`, `os.replace` and `os.link` signal it or end it (`os._exit`, as a kill -9
would) at a chosen call: Ctrl-C and SIGTERM end it as "interrupted" (130) with no staging
folder left, a kill leaves every file readable with one link, and the rerun finishes the
job (or names what is left to export), after which `verify` finds nothing wrong and DIR
holds what an export never stopped writes."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace, Msg
from helpers import snapshot_tree

SESSIONS = ["run-1", "run-2"]  # what the `filled` workspace holds
PLACED = 3  # the renames into DIR that put an export in place: a data/ file, two sessions

STOPPER = r"""
import os, re, signal, sys, time

# As a terminal's Ctrl-C meets a command, whatever the test runner's process ignores.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
action, where, count = sys.argv[1], re.compile(sys.argv[2]), int(sys.argv[3])
calls = 0


def stopping(real):
    def call(*args, **kwargs):
        global calls
        fd = kwargs.get("dst_dir_fd")
        folder = os.readlink(f"/proc/self/fd/{fd}") if fd is not None else str(args[1])
        if not where.search(folder):
            return real(*args, **kwargs)
        calls += 1
        if calls != count:
            return real(*args, **kwargs)
        if action == "exit":  # a kill -9 right after this call
            real(*args, **kwargs)
            os._exit(137)
        if action == "wait":  # until the test removes the mark
            mark = os.environ["STOPPER_MARK"]
            open(mark, "w").close()
            while os.path.exists(mark):
                time.sleep(0.01)
            return real(*args, **kwargs)
        # A signal just before this call, which takes a while: time for whatever the
        # signal sets off to race it.
        os.kill(os.getpid(), getattr(signal, action))
        time.sleep(0.5)
        return real(*args, **kwargs)

    return call


os.rename = stopping(os.rename)
os.replace = stopping(os.replace)
os.link = stopping(os.link)
from ctxoffload.cli import main

sys.exit(main(sys.argv[4:]))
"""

STAGING = r"/\.tmp-export-[^/]*/sessions/"
"""Where an export rewrites the sessions it copied (`os.replace`), before they are moved
into place."""


def into(dest: Path) -> str:
    """Where an export's move into place renames: DIR's data/ and sessions/."""
    return rf"^{re.escape(os.path.realpath(dest))}/(data|sessions)$"


def stopped_export(
    source: Path, dest: Path, action: str, where: str, count: int, **kwargs: Any
) -> subprocess.Popen[str]:
    """`ctxoffload --workdir SOURCE export --all DEST`, stopped by `action` at the `count`th
    rename or link into a folder that `where` matches."""
    command = [sys.executable, "-c", STOPPER, action, where, str(count)]
    command += ["--workdir", str(source), "export", "--all", str(dest)]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs
    )


def ended(process: subprocess.Popen[str]) -> tuple[int, str]:
    """The exit status and stderr of a stopped export."""
    _, err = process.communicate(timeout=120)
    return process.returncode, err


def staging_left(dest: Path) -> list[str]:
    return [name for name in os.listdir(dest) if name.startswith(".tmp-")]


@pytest.fixture
def whole(filled: Path, tmp_path: Path, cli: Callable[..., Any]) -> dict[str, bytes | None]:
    """What an export of every session of `filled` that nothing stopped writes into
    `tmp_path/out` (made, read, then removed for the test to export there again)."""
    import shutil

    assert cli("--workdir", filled, "export", "--all", tmp_path / "out").code == 0
    tree = snapshot_tree(tmp_path / "out")
    shutil.rmtree(tmp_path / "out")
    return tree


def assert_readable(dest: Path, cli: Callable[..., Any]) -> None:
    """`verify` finds nothing wrong in DIR, and every data/ file there reads back."""
    checked = cli("--workdir", dest, "verify")
    assert checked.code == 0, checked.out + checked.err
    ws = LocalWorkspace(dest)
    for name in os.listdir(dest / "data") if (dest / "data").exists() else []:
        assert os.stat(dest / "data" / name).st_nlink == 1
        assert asyncio.run(ws.read_reference(f"{dest}/data/{name}"))


def rerun(source: Path, dest: Path, cli: Callable[..., Any]) -> None:
    """The same export again: done, or refused because some sessions are there and the
    export its message says to run done."""
    again = cli("--workdir", source, "export", "--all", dest)
    if again.code == 2 and "an interrupted export that put them there is done" in again.err:
        return
    named = re.search(r"export the \d+ other\(s\) by name \(([^)]*)\)", again.err)
    if again.code == 2 and named:
        again = cli("--workdir", source, "export", *named.group(1).split(), dest)
    assert again.code == 0, again.err


@pytest.mark.parametrize("count", range(1, PLACED + 1))
def test_ctrl_c_while_export_moves_into_place_finishes_the_move_then_stops(
    filled: Path,
    tmp_path: Path,
    cli: Callable[..., Any],
    whole: dict[str, bytes | None],
    count: int,
) -> None:
    # Ctrl-C before the count-th rename into DIR: the move is finished, then the export
    # ends as interrupted; before, the staging folder was removed under the move (a
    # worker thread's), and a session came without its data/ file.
    dest = tmp_path / "out"
    status, err = ended(stopped_export(filled, dest, "SIGINT", into(dest), count))
    assert (status, err) == (130, "ctxoffload export: interrupted\n")
    assert staging_left(dest) == []
    assert_readable(dest, cli)
    assert snapshot_tree(dest) == whole
    again = cli("--workdir", filled, "export", "--all", dest)
    assert again.code == 2 and "an interrupted export that put them there is done" in again.err
    assert snapshot_tree(dest) == whole


@pytest.mark.parametrize("count", range(1, PLACED + 1))
def test_a_kill_while_export_moves_into_place_leaves_every_file_readable(
    filled: Path,
    tmp_path: Path,
    cli: Callable[..., Any],
    whole: dict[str, bytes | None],
    count: int,
) -> None:
    # Killed right after the count-th rename into DIR: what is there reads (one link per
    # data/ file, never a second one into the staging folder), and the rerun finishes it.
    dest = tmp_path / "out"
    status, _ = ended(stopped_export(filled, dest, "exit", into(dest), count))
    assert status == 137
    assert_readable(dest, cli)
    rerun(filled, dest, cli)
    assert staging_left(dest) == []
    assert_readable(dest, cli)
    assert snapshot_tree(dest) == whole


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_sigterm_or_ctrl_c_while_export_copies_ends_it_with_no_staging_folder_left(
    filled: Path,
    tmp_path: Path,
    cli: Callable[..., Any],
    whole: dict[str, bytes | None],
    signal_name: str,
) -> None:
    dest = tmp_path / "out"
    status, err = ended(stopped_export(filled, dest, signal_name, STAGING, 1))
    assert (status, err) == (130, "ctxoffload export: interrupted\n")
    assert staging_left(dest) == []
    assert cli("--workdir", filled, "export", "--all", dest).code == 0
    assert_readable(dest, cli)
    assert snapshot_tree(dest) == whole


@pytest.mark.parametrize("into_a_workspace", [False, True])
def test_the_staging_folder_of_a_killed_export_is_removed_by_the_next(
    filled: Path,
    tmp_path: Path,
    cli: Callable[..., Any],
    whole: dict[str, bytes | None],
    into_a_workspace: bool,
) -> None:
    dest = tmp_path / "out"
    if into_a_workspace:  # a session of its own, which the exports leave as it is
        asyncio.run(LocalWorkspace(dest).offload_context("mine", [Msg(role="user", content="m")]))
    before = snapshot_tree(dest)
    status, _ = ended(stopped_export(filled, dest, "exit", STAGING, 1))
    assert status == 137 and len(staging_left(dest)) == 1
    assert cli("--workdir", filled, "export", "--all", dest).code == 0
    assert staging_left(dest) == []
    assert_readable(dest, cli)
    after = snapshot_tree(dest)
    assert {path: after[path] for path in before} == before
    assert {path: body for path, body in after.items() if path not in before} == {
        path: body for path, body in whole.items() if path not in before
    }


def test_the_staging_folder_of_a_live_export_is_left_to_it(
    filled: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    # One export waits in the middle of its copy; another into the same folder neither
    # takes its staging folder for a dead one's nor the folder for a non-empty one.
    dest, mark = tmp_path / "out", tmp_path / "paused"
    first = stopped_export(
        filled, dest, "wait", STAGING, 1, env={**os.environ, "STOPPER_MARK": str(mark)}
    )
    deadline = time.monotonic() + 120
    while not mark.exists():
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    [staging] = staging_left(dest)
    other = tmp_path / "other"
    asyncio.run(LocalWorkspace(other).offload_context("other-run", [Msg(role="user", content="m")]))
    assert cli("--workdir", other, "export", "other-run", dest).code == 0
    assert staging_left(dest) == [staging]
    mark.unlink()
    status, err = ended(first)
    assert status == 0, err
    assert sorted(os.listdir(dest / "sessions")) == sorted([*SESSIONS, "other-run"])
    assert staging_left(dest) == []
    assert_readable(dest, cli)
