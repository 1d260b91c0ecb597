"""`ls`, `stats` and `verify` on a workspace with one damaged session: the damage is said,
the other sessions are still reported, and a file that could not be read makes the exit
status 2 (an error), as it does for grep."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_workspace import unprivileged_prefix

Result = Any


@pytest.fixture
def unprivileged() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`run(*argv)`: `ctxoffload ARGV` in a child that cannot read a chmod-000 file."""
    prefix = unprivileged_prefix()

    def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, sys.executable, "-m", "ctxoffload", *map(str, argv)],
            capture_output=True,
            text=True,
        )

    return run


def _hard_link(path: Path, tmp_path: Path) -> None:
    os.link(path, tmp_path / f"second-name-of-{path.name}")


def _rows(out: str) -> dict[str, dict[str, Any]]:
    return {r["session"]: r for r in json.loads(out)}


# -- ls ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["events.jsonl", "context.jsonl"])
def test_ls_says_which_file_is_hard_linked_and_lists_every_session(
    filled: Path, tmp_path: Path, cli: Callable[..., Result], name: str
) -> None:
    path = filled / "sessions/run-1" / name
    _hard_link(path, tmp_path)
    result = cli("ls", "--workdir", filled)
    assert result.code == 2, result.err
    assert result.err.count("\n") == 1 and str(path) in result.err, result.err
    assert result.err.startswith("ctxoffload ls: warning: ")
    lines = result.out.splitlines()
    assert any(line.startswith("run-2 ") for line in lines)
    [one] = [line for line in lines if line.startswith("run-1 ")]
    assert "?" in one.split()
    rows = _rows(cli("ls", "--json", "--workdir", filled).out)
    assert rows["run-1"]["unreadable"] == [name] and rows["run-2"]["unreadable"] == []
    assert rows["run-2"]["message_lines"] == 0 and rows["run-1"]["tool_results"] == 2
    unknown = "compressions" if name == "events.jsonl" else "message_lines"
    assert rows["run-1"][unknown] is None


@pytest.mark.parametrize("name", ["events.jsonl", "context.jsonl", "state.json"])
def test_ls_goes_on_past_an_unreadable_file(
    filled: Path, unprivileged: Callable[..., Any], name: str
) -> None:
    path = filled / "sessions/run-1" / name
    path.chmod(0)
    done = unprivileged("ls", "--json", "--workdir", filled)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert f"cannot read {path}: Permission denied" in done.stderr
    rows = _rows(done.stdout)
    assert set(rows) == {"run-1", "run-2"} and rows["run-1"]["unreadable"] == [name]


def test_ls_goes_on_past_an_unreadable_session_folder(
    filled: Path, unprivileged: Callable[..., Any]
) -> None:
    folder = filled / "sessions/run-1"
    folder.chmod(0)
    try:
        done = unprivileged("ls", "--workdir", filled)
    finally:
        folder.chmod(0o755)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and str(folder) in done.stderr
    assert "run-1 " in done.stdout and "run-2 " in done.stdout


# -- stats ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["events.jsonl", "context.jsonl"])
def test_stats_says_which_file_is_hard_linked_and_counts_the_rest(
    filled: Path, tmp_path: Path, cli: Callable[..., Result], name: str
) -> None:
    path = filled / "sessions/run-1" / name
    _hard_link(path, tmp_path)
    result = cli("stats", "--workdir", filled)
    assert result.code == 2, result.err
    assert result.err.count("\n") == 1 and str(path) in result.err, result.err
    assert result.err.startswith("ctxoffload stats: warning: ")
    assert "all 2 sessions" in result.out
    report = json.loads(cli("stats", "--json", "--workdir", filled).out)
    rows = {r["session"]: r for r in report["sessions"]}
    assert rows["run-1"]["unreadable"] == [name] and rows["run-2"]["unreadable"] == []
    assert rows["run-2"]["bytes_offloaded"] > 0
    if name == "events.jsonl":
        assert rows["run-1"]["tokens_kept_out"] is None
        assert "?" in next(x for x in result.out.splitlines() if x.startswith("run-1 "))
        assert report["total"]["tokens_kept_out"] == rows["run-2"]["tokens_kept_out"]
    else:
        assert rows["run-1"]["tokens_kept_out"] == (9000 - 1000) + (30000 - 500)


@pytest.mark.parametrize("name", ["events.jsonl", "context.jsonl", "tool_result-call_2.txt"])
def test_stats_goes_on_past_an_unreadable_file(
    filled: Path, unprivileged: Callable[..., Any], name: str
) -> None:
    path = filled / "sessions/run-1" / name
    path.chmod(0)
    done = unprivileged("stats", "--json", "--workdir", filled)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert f"cannot read {path}: Permission denied" in done.stderr
    rows = {r["session"]: r for r in json.loads(done.stdout)["sessions"]}
    assert rows["run-1"]["unreadable"] == [name] and rows["run-2"]["unreadable"] == []


def test_stats_of_one_session_says_one_session(filled: Path, cli: Callable[..., Result]) -> None:
    out = cli("stats", "run-1", "--workdir", filled).out.splitlines()
    assert out[-1].startswith("1 session ")
    assert "sessions" not in out[-1]
    assert cli("stats", "--workdir", filled).out.splitlines()[-1].startswith("all 2 sessions ")


# -- verify -----------------------------------------------------------------------------------


def _report(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.mark.parametrize(
    "name",
    [
        "sessions/run-1/events.jsonl",
        "sessions/run-1/context.jsonl",
        "sessions/run-1/state.json",
        "sessions/run-1/tool_result-call_2.txt",
        "sessions/run-1/context.jsonl.commit",
        "data",
    ],
)
def test_verify_says_a_file_cannot_be_read_and_checks_the_rest(
    filled: Path, unprivileged: Callable[..., Any], name: str
) -> None:
    path = next((filled / "data").iterdir()) if name == "data" else filled / name
    path.chmod(0)
    report = _report(unprivileged("verify", "--json", "--workdir", filled))
    assert report["problems"] == [{"path": str(path), "problem": "cannot read: Permission denied"}]
    assert report["checked"]["jsonl_lines"] > 0
    text = unprivileged("verify", "--workdir", filled)
    assert f"problem: {path}: cannot read: Permission denied" in text.stdout


def test_verify_reports_a_damaged_commit_record(filled: Path, cli: Callable[..., Result]) -> None:
    record = filled / "sessions/run-1/context.jsonl.commit"
    record.write_bytes(b"garbage\n")
    result = cli("verify", "--json", "--workdir", filled)
    assert result.code == 1
    [problem] = json.loads(result.out)["problems"]
    assert problem["path"] == str(record)
    assert problem["problem"].startswith("not a valid commit record")


def test_verify_reports_a_commit_record_past_the_end_of_the_log(
    filled: Path, cli: Callable[..., Result]
) -> None:
    context = filled / "sessions/run-1/context.jsonl"
    lines = context.read_bytes().splitlines(keepends=True)
    context.write_bytes(b"".join(lines[:-1]))
    result = cli("verify", "--json", "--workdir", filled)
    assert result.code == 1
    problems = [p["problem"] for p in json.loads(result.out)["problems"]]
    assert any("bytes of context.jsonl committed, but it holds only" in p for p in problems)


def test_verify_warns_of_complete_lines_past_the_commit(
    filled: Path, cli: Callable[..., Result]
) -> None:
    context = filled / "sessions/run-1/context.jsonl"
    with open(context, "ab") as f:
        f.write(b'{"role": "user", "content": "never acknowledged"}\n' * 2)
    result = cli("verify", "--workdir", filled)
    assert result.code == 0, result.out
    assert (
        f"warning: {context}: lines 5-6 are past the committed length (a batch never "
        "committed: a writer killed before its commit, or lines added by hand); readers "
        "skip them and the next append removes them"
    ) in result.out.splitlines()


def test_verify_reports_a_reference_outside_the_workspace(
    filled: Path, cli: Callable[..., Result]
) -> None:
    events = filled / "sessions/run-2/events.jsonl"
    with open(events, "ab") as f:
        for reference in ("/etc/passwd", f"{filled}/sessions/run-2/../../../x", "file:///etc/x"):
            event = {"kind": "truncation", "reference": reference}
            f.write(json.dumps(event).encode() + b"\n")
    result = cli("verify", "--json", "--workdir", filled)
    assert result.code == 1
    problems = [(p["path"], p["problem"]) for p in json.loads(result.out)["problems"]]
    assert problems == [
        (f"{events}:{n}", f"reference {ref!r} names a file outside the workspace")
        for n, ref in zip(
            range(3, 6),
            ["/etc/passwd", f"{filled}/sessions/run-2/../../../x", "file:///etc/x"],
            strict=True,
        )
    ], problems


def test_verify_takes_relative_and_file_url_references_inside(
    filled: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(filled.parent)
    events = filled / "sessions/run-2/events.jsonl"
    with open(events, "ab") as f:
        for reference in (
            f"file://{filled}/sessions/run-2/tool_result-call_1.txt",
            f"{filled.name}/sessions/run-2/tool_result-call_1.txt",
            "sessions/run-2/tool_result-call_1.txt",
        ):
            f.write(json.dumps({"kind": "x", "reference": reference}).encode() + b"\n")
    result = cli("verify", "--workdir", filled.name)
    assert result.code == 0, result.out


def test_gc_says_one_session_in_the_singular(filled: Path, cli: Callable[..., Result]) -> None:
    old = filled / "sessions/run-1"
    for path in [old, *old.iterdir()]:
        os.utime(path, (1, 1))
    result = cli("gc", "--older-than", "7d", "--dry-run", "--workdir", filled)
    assert result.code == 0, result.err
    assert result.out.splitlines()[-1].startswith("would remove 1 session and 0 data files: ")


def test_verify_of_a_copied_workspace_warns_once_per_log(
    filled: Path, tmp_path: Path, cli: Callable[..., Result]
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(filled, copy)
    result = cli("verify", "--json", "--workdir", copy)
    assert result.code == 0, result.out
    warnings = json.loads(result.out)["warnings"]
    events = copy / "sessions/run-1/events.jsonl"
    assert {"path": str(events), "warning": _moved(5, filled, copy)} in warnings
    assert all(w["path"].endswith("events.jsonl") for w in warnings)


def _moved(n: int, old: Path, new: Path) -> str:
    return (
        f"{n} references name files of the workspace at {str(old)!r}, not at {str(new)!r} "
        "(moved or copied?): checked here by their path inside the workspace"
    )


def test_ls_counts_only_the_committed_lines_of_a_log(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    import asyncio

    from ctxoffload import LocalWorkspace, Msg

    workdir = tmp_path / "ws"
    ws = LocalWorkspace(workdir, fsync=False)
    asyncio.run(ws.offload_context("s", msgs=[Msg(role="user", content=f"m{i}") for i in range(5)]))
    log = workdir / "sessions" / "s" / "context.jsonl"

    def lines() -> int:
        result = cli("ls", "--json", "--workdir", workdir)
        assert result.code == 0, result
        [session] = json.loads(result.out)
        return int(session["message_lines"])

    assert lines() == 5
    # A batch written but never committed (its writer killed before the record): readers
    # skip it, and so does the count.
    with open(log, "ab") as f:
        f.write(b'{"role":"user","content":"never committed"}\n')
    assert lines() == 5
    # Without a record, every line of the file is committed.
    (log.parent / "context.jsonl.commit").unlink()
    assert lines() == 6


def test_ls_neither_counts_nor_sizes_a_hard_linked_file(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    import asyncio

    from ctxoffload import LocalWorkspace, ToolResultBlock

    workdir = tmp_path / "ws"
    ws = LocalWorkspace(workdir, fsync=False)
    block = ToolResultBlock(id="c1", name="t", output="x\n" * 10)
    asyncio.run(ws.offload_tool_result("s", block))
    before = json.loads(cli("ls", "--json", "--workdir", workdir).out)[0]
    outside = tmp_path / "secret.txt"
    outside.write_bytes(b"s" * 5000)
    os.link(outside, workdir / "sessions" / "s" / "tool_result-planted.txt")
    result = cli("ls", "--json", "--workdir", workdir)
    after = json.loads(result.out)[0]
    assert (after["tool_results"], after["bytes"]) == (before["tool_results"], before["bytes"])
    assert "tool_result-planted.txt" in after["unreadable"]
    assert result.err.count("\n") == 1 and "has 2 hard links" in result.err


def test_a_session_folder_replaced_by_a_link_is_said_refused_not_missing(
    filled: Path, tmp_path: Path, cli: Callable[..., Result]
) -> None:
    """A link in sessions/ named as a session was left out of `ls` and `stats` without a
    word, and `show`, `stats` and `grep` called it missing ("no session 'linked'") while a
    person listing the folder sees it. Each says it is a link, refused; nothing is read
    through it."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(filled / "sessions/run-1", elsewhere)
    link = filled / "sessions/linked"
    link.symlink_to(elsewhere, target_is_directory=True)
    said = "is a symbolic link, not a session folder: refused, never followed"
    listed = cli("ls", "--workdir", filled)
    assert listed.code == 2 and listed.err.count("\n") == 1, listed.err
    assert str(link) in listed.err and said in listed.err and "it is not listed" in listed.err
    assert "linked" not in listed.out
    counted = cli("stats", "--workdir", filled)
    assert counted.code == 2 and str(link) in counted.err and said in counted.err
    for argv in (("show", "linked"), ("stats", "linked"), ("grep", "line", "linked")):
        result = cli(*argv, "--workdir", filled)
        assert result.code == 2, (argv, result.err)
        assert str(link) in result.err and said in result.err, (argv, result.err)
        assert "no session" not in result.err and str(elsewhere) not in result.out
