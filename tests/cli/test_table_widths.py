"""The tables of `ls` and `stats` fit a terminal of 80 and of 120 columns, drawn by rich on a
terminal and as plain text in a pipe: headers are abbreviated or folded, cells fold at their
spaces, and columns are left out last to first by their stated priority, each named."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import install_hint, on_a_terminal

pytest.importorskip("rich", reason=f"no rich: {install_hint('cli')}")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


def _printed(workdir: Path, command: str, width: int | None, mode: str) -> list[str]:
    """The lines `ctxoffload COMMAND` prints with COLUMNS=width (unset: None), on a terminal
    (`rich`) or into a pipe (`plain`)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")}
    if width is not None:
        env["COLUMNS"] = str(width)
    argv = ["--workdir", str(workdir), command]
    if mode == "rich":
        code, out = on_a_terminal(argv, env)
        text = _ANSI.sub("", out.decode()).replace("\r\n", "\n")
    else:
        done = subprocess.run(
            [sys.executable, "-m", "ctxoffload", *argv], capture_output=True, text=True, env=env
        )
        code, text = done.returncode, done.stdout
    assert code == 0, text
    return text.splitlines()


def _wide(workdir: Path, command: str) -> tuple[list[str], list[str]]:
    """The headers and the first row of the table, printed whole (plain, no width given)."""
    lines = _printed(workdir, command, None, "plain")
    return re.split(r"\s{2,}", lines[0].strip()), re.split(r"\s{2,}", lines[1].strip())


def _whole(word: str, text: str) -> bool:
    """Whether `word` is in `text` and not cut from a longer one."""
    return re.search(rf"(?<![\w,./:-]){re.escape(word)}(?![\w,./:-])", text) is not None


def _check(lines: list[str], width: int, headers: list[str], row: list[str]) -> list[str]:
    """Every line fits; every cell of a column shown is there whole (folded at its spaces at
    most); what is left out is named. Returns the headers left out."""
    assert max(len(line) for line in lines) <= width, "\n".join(lines)
    text = "\n".join(lines)
    assert "…" not in text
    notes = [line for line in lines if "left out to fit" in line]
    left_out = [h for h in headers if notes and h in notes[0]]
    if notes:
        assert notes[0] == f"({', '.join(left_out)}: left out to fit {width} columns)"
    assert "session" not in left_out
    for header, cell in zip(headers, row, strict=True):
        if header in left_out:
            continue
        for word in cell.split():
            assert _whole(word, text), (header, cell, text)
    return left_out


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["rich", "plain"])
@pytest.mark.parametrize("width", [80, 120])
def test_stats_fits_the_terminal(demo: Any, width: int, mode: str) -> None:
    headers, row = _wide(demo.workdir, "stats")
    assert "summaries" in headers and len(headers) == 9
    lines = _printed(demo.workdir, "stats", width, mode)
    left_out = _check(lines, width, headers, row)
    if width == 120:
        assert left_out == []
        header = "\n".join(lines[:4])
        for word in ("session", "offloaded", "summaries"):
            assert _whole(word, header), header
    else:
        # The stated priority: what is left out goes from the last column back.
        assert left_out == headers[len(headers) - len(left_out) :]
        assert "summaries" not in left_out


@pytest.mark.parametrize("mode", ["rich", "plain"])
@pytest.mark.parametrize("width", [80, 120])
def test_ls_fits_the_terminal(demo: Any, width: int, mode: str) -> None:
    headers, row = _wide(demo.workdir, "ls")
    lines = _printed(demo.workdir, "ls", width, mode)
    assert _check(lines, width, headers, row) == []
    # The time of the last activity: its date and its time each whole (one line or two).
    date, clock = row[1].split()
    rows_with_time = [line for line in lines if _whole(date, line) or _whole(clock, line)]
    assert 1 <= len(rows_with_time) <= 2, "\n".join(lines)


@pytest.mark.parametrize("mode", ["rich", "plain"])
def test_a_long_session_id_is_shortened_in_its_middle_not_every_column_left_out(
    tmp_path: Path, mode: str
) -> None:
    """Never folded into pieces no one can copy: `HEAD…TAIL`, which `show` takes (issue 83)."""
    import asyncio

    from ctxoffload import LocalWorkspace, Msg

    long_id = "thread-" + "0123456789abcdef" * 7
    workspace = LocalWorkspace(tmp_path, fsync=False)
    asyncio.run(workspace.offload_context(long_id, msgs=[Msg(role="user", content="x")]))
    lines = _printed(tmp_path, "ls", 80, mode)
    assert max(len(line) for line in lines) <= 80
    notes = [line for line in lines if "left out" in line]
    assert notes in ([], ["(compr.: left out to fit 80 columns)"]), "\n".join(lines)
    pieces = [re.sub(r"[│┃]", " ", line).split()[0] for line in lines if "0123" in line]
    [shortened] = pieces
    head, tail = shortened.split("…")
    assert long_id.startswith(head) and long_id.endswith(tail) and len(head) > 8
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    argv = [sys.executable, "-m", "ctxoffload", "--workdir", str(tmp_path), "show", shortened]
    shown = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert shown.returncode == 0 and shown.stdout.split()[:2] == ["session", long_id]


@pytest.mark.parametrize("width", [1, 3, 4, 5, 6, 9])
def test_a_terminal_too_narrow_for_the_borders_still_shows_every_character(
    tmp_path: Path, width: int
) -> None:
    """rich squeezed a column it had no room for down to nothing (COLUMNS=3: `│ │`, the session
    gone); below the width rich's borders need, the table is plain text, folded."""
    import asyncio

    from ctxoffload import LocalWorkspace, Msg

    session = "nightly-job"
    workspace = LocalWorkspace(tmp_path, fsync=False)
    asyncio.run(workspace.offload_context(session, msgs=[Msg(role="user", content="x")]))
    lines = _printed(tmp_path, "ls", width, "rich")
    table = [line for line in lines if "left out to fit" not in line]
    assert max(len(line) for line in table) <= width, "\n".join(lines)
    pieces = [re.sub(r"[│┃]", " ", line).strip() for line in table]
    assert session in "".join(pieces), "\n".join(lines)
