"""Every command reads a workspace through the one reader and says what it did not read in
the same words: a hard-linked file is refused with one line, a link, FIFO or socket in place
of a workspace file is passed over (`verify` reports it), and "is this a workspace?" has one
answer."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SECRET = "SECRET-5a4b3c"
HARD_LINKED = "has 2 hard links: it may be shared with a file outside the workspace; not read"

# Each command that reads a session's events.jsonl, and whether it names that file itself
# (cat is asked for it, so it refuses it rather than passing it over).
READERS: dict[str, tuple[list[str], bool]] = {
    "ls": (["ls", "--json"], False),
    "stats": (["stats", "--json", "run-1"], False),
    "show": (["show", "run-1"], False),
    "grep": (["grep", "--events", SECRET, "run-1"], False),
    "cat": (["cat", "sessions/run-1/events.jsonl"], True),
}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the workspace, holding an event with a secret in it."""
    path = tmp_path / "outside.jsonl"
    event = {"time": "2026-11-22T12:00:00+00:00", "kind": "session_start", "agent": SECRET}
    path.write_text(json.dumps(event) + "\n")
    return path


@pytest.fixture
def unix_socket(filled: Path) -> Iterator[Callable[[Path], None]]:
    """`bind(path)`: a UNIX socket bound at `path`, closed after the test."""
    bound: list[socket.socket] = []

    def bind(path: Path) -> None:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        bound.append(server)

    yield bind
    for server in bound:
        server.close()


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_hard_linked_file_is_refused_in_the_same_words_by_every_command(
    filled: Path, outside: Path, cli: Callable[..., Any], command: str
) -> None:
    events = filled / "sessions/run-1/events.jsonl"
    events.unlink()
    os.link(outside, events)
    argv, _ = READERS[command]
    result = cli(*argv, "--workdir", filled)
    assert SECRET not in result.out
    assert f"{events}: {HARD_LINKED}" in result.err, result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err


@pytest.mark.parametrize("kind", ["symbolic link", "FIFO", "socket"])
@pytest.mark.parametrize("command", sorted(READERS))
def test_a_link_fifo_or_socket_is_passed_over_by_every_command(
    filled: Path,
    outside: Path,
    cli: Callable[..., Any],
    unix_socket: Callable[[Path], None],
    command: str,
    kind: str,
) -> None:
    events = filled / "sessions/run-1/events.jsonl"
    events.unlink()
    if kind == "symbolic link":
        events.symlink_to(outside)
    elif kind == "FIFO":
        os.mkfifo(events)  # opened without blocking, then refused
    else:
        unix_socket(events)  # cannot even be opened (ENXIO): refused all the same
    argv, names_it = READERS[command]
    result = cli(*argv, "--workdir", filled)
    assert SECRET not in result.out and "Traceback" not in result.err
    if names_it:
        assert (result.code, result.out) == (2, "") and result.err.count("\n") == 1
        assert "names no file inside the workspace" in result.err
    else:
        # As if it were not there: nothing said, nothing read.
        assert result.err == "" and result.code in (0, 1), result
    problems = json.loads(cli("verify", "--json", "--workdir", filled).out)["problems"]
    what = {"symbolic link": "is a symbolic link", "FIFO": "is a FIFO", "socket": "is a socket"}
    assert [p["path"] for p in problems if p["problem"].startswith(what[kind])] == [str(events)]


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("missing", "workdir {w!r} does not exist"),
        ("file", "workdir {w!r} is not a folder"),
        ("plain folder", "{w!r} is not a ctxoffload workspace (it has no sessions/ folder)"),
    ],
)
@pytest.mark.parametrize(
    "argv",
    [
        ["ls"],
        ["stats"],
        ["show", "s"],
        ["cat", "sessions/s/context.jsonl"],
        ["grep", "x"],
        ["verify"],
        ["gc", "--older-than", "7d"],
        ["watch"],
    ],
    ids=lambda argv: argv[0],
)
def test_every_command_says_alike_that_a_folder_is_no_workspace(
    tmp_path: Path, cli: Callable[..., Any], kind: str, says: str, argv: list[str]
) -> None:
    workdir = tmp_path / "w"
    if kind == "file":
        workdir.write_text("x")
    elif kind == "plain folder":
        workdir.mkdir()
    result = cli(*argv, "--workdir", workdir)
    assert (result.code, result.out) == (2, "")
    expected = f"ctxoffload {argv[0]}: {says.format(w=str(workdir))}: pass --workdir DIR\n"
    assert result.err == expected


def test_without_workdir_the_advice_names_the_variable_too(
    tmp_path: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CTXOFFLOAD_WORKDIR", raising=False)
    result = cli("ls")
    assert result.err.endswith(": pass --workdir DIR or set CTXOFFLOAD_WORKDIR\n"), result.err


def test_show_prints_the_record_around_a_damaged_line(
    filled: Path, cli: Callable[..., Any]
) -> None:
    events = filled / "sessions/run-1/events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    events.write_bytes(lines[0] + b"{not json\n" + b"".join(lines[1:]))
    damaged = cli("show", "run-1", "--workdir", filled)
    assert damaged.code == 1  # problems found
    assert damaged.err == (
        f"ctxoffload show: warning: {events} line 2 is not valid JSON: skipped; "
        "`ctxoffload verify` checks the workspace\n"
    )
    events.write_bytes(b"".join(lines))
    whole = cli("show", "run-1", "--workdir", filled)
    assert (whole.code, whole.err) == (0, "")
    assert damaged.out == whole.out  # every event before and after it is still shown
