"""`ctxoffload grep` over many sessions: each session's folder is opened in sessions/ (held
for the whole search) and each small file read in one call and searched in memory. The lines
printed are those of the file-by-file search: no link followed, the records left out, a
letter the log stores escaped found, a line the commit record leaves out or a torn last line
never shown, and a file of any size searched alike."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import needle_sessions


def test_a_linked_session_and_a_linked_file_are_passed_over(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "ws"
    needle_sessions(workdir, ["a", "b", "c"])
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "tool_result-c1.txt").write_text("needle outside\n")
    sessions = workdir / "sessions"
    # b: the session's folder replaced by a link to a folder outside.
    for entry in (sessions / "b").iterdir():
        entry.unlink()
    (sessions / "b").rmdir()
    (sessions / "b").symlink_to(outside, target_is_directory=True)
    # c: its tool result replaced by a link to a file outside.
    (sessions / "c" / "tool_result-c1.txt").unlink()
    (sessions / "c" / "tool_result-c1.txt").symlink_to(outside / "tool_result-c1.txt")
    result = cli("grep", "needle", "--workdir", workdir)
    assert "outside" not in result.out
    assert result.out == (
        f"{sessions}/a/tool_result-c1.txt:1:needle in a\n"
        f"{sessions}/a/context.jsonl:1:needle said in a\n"
        f"{sessions}/c/context.jsonl:1:needle said in c\n"
    )


def test_a_hard_linked_file_is_refused_and_the_other_sessions_searched(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "ws"
    needle_sessions(workdir, ["a", "b"])
    os.link(workdir / "sessions" / "a" / "tool_result-c1.txt", tmp_path / "second-name")
    result = cli("grep", "needle", "--workdir", workdir)
    assert result.code == 2
    assert "a/tool_result-c1.txt: has 2 hard links" in result.err
    assert f"{workdir}/sessions/b/tool_result-c1.txt:1:needle in b\n" in result.out


def test_a_letter_stored_as_a_json_escape_is_found_as_the_model_saw_it(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "ws"
    needle_sessions(workdir, ["a"])
    log = workdir / "sessions" / "a" / "context.jsonl"
    (log.parent / "context.jsonl.commit").unlink()  # a log written by hand: all of it counts
    log.write_bytes(
        b'{"role":"user","content":"thanks"}\n'
        b'{"role":"user","content":"say \\u006eeedle \\"now\\""}\n'
        b'{"role":"user","content":"caf\\u00e9 needl\\u00e9"}\n'
    )
    result = cli("grep", "needle", "--workdir", workdir)
    assert f'{log}:2:say needle "now"\n' in result.out
    assert cli("grep", "-F", 'needle "now"', "--workdir", workdir).out == (
        f'{log}:2:say needle "now"\n'
    )
    assert cli("grep", "needlé", "--workdir", workdir).out == f"{log}:3:café needlé\n"


def test_a_torn_last_line_is_never_shown(tmp_path: Path, cli: Callable[..., Any]) -> None:
    workdir = tmp_path / "ws"
    needle_sessions(workdir, ["a"])
    log = workdir / "sessions" / "a" / "context.jsonl"
    with open(log, "ab") as f:  # a write a kill cut before its newline
        f.write(b'{"role":"user","content":"needle TORN-9')
    out = cli("grep", "needle", "--workdir", workdir).out
    assert "TORN-9" not in out and "needle said in a" in out
    (log.parent / "context.jsonl.commit").unlink()  # no record: still no torn line
    out = cli("grep", "needle", "--workdir", workdir).out
    assert "TORN-9" not in out and "needle said in a" in out


def test_the_records_are_never_searched(tmp_path: Path, cli: Callable[..., Any]) -> None:
    workdir = tmp_path / "ws"
    needle_sessions(workdir, ["a"])
    session = workdir / "sessions" / "a"
    (session / "context.jsonl.commit").write_text("needle RECORD-9\n")
    (session / "state.json").write_text('{"needle": "STATE-9"}\n')
    (session / ".tmp-tool_result-c2.txt-1a2b").write_text("needle HALF-9\n")
    out = cli("grep", "needle", "--workdir", workdir).out
    assert "RECORD-9" not in out and "HALF-9" not in out and "STATE-9" not in out
    assert "events.jsonl" not in out and out.count("\n") == 2


@pytest.mark.parametrize("size", [100, 65_535, 65_536, 200_000])
def test_a_file_is_searched_alike_whatever_its_size(
    tmp_path: Path, cli: Callable[..., Any], size: int
) -> None:
    """Under 64 KB a file is read whole; from there on it is read in pieces (or given to
    ripgrep): the same lines either way, the last one without its newline included."""
    workdir = tmp_path / "ws"
    needle_sessions(workdir, ["a"])
    path = workdir / "sessions" / "a" / "tool_result-c1.txt"
    filler = b"hay\r\n"
    body = filler * ((size - 20) // len(filler))
    data = (b"needle first\n" + body + b"last needle")[:size]
    path.write_bytes(data)
    count = data.count(b"\n")
    assert cli("grep", "needle", "a", "--workdir", workdir).out == (
        f"{path}:1:needle first\n"
        + (f"{path}:{count + 1}:last needle\n" if data.endswith(b"last needle") else "")
        + f"{workdir}/sessions/a/context.jsonl:1:needle said in a\n"
    )
    assert cli("grep", "^hay$", "a", "--workdir", workdir).out.count("\n") == count - 1


def test_a_search_of_many_sessions_holds_few_descriptors(tmp_path: Path) -> None:
    """Each session's folder is let go once searched: 150 sessions are searched with 40
    descriptors at most (a folder kept open for each would run out)."""
    workdir = tmp_path / "ws"
    needle_sessions(workdir, [f"s{n:03d}" for n in range(150)])
    limited = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40)); "
        "from ctxoffload.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", limited, "grep", "needle", "--workdir", str(workdir)],
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(b"\n") == 300


def _hostile_workspace(tmp_path: Path) -> Path:
    """Sessions whose files each ask the quick way of `WorkspaceSearch.session` (`open_plain`)
    to leave them to `_file`, or to read them as `_lines` does: links, hard links, a FIFO, a
    binary file, an uncommitted batch and a torn line, an escaped letter, terminal escapes,
    bytes that are not UTF-8."""
    workdir = tmp_path / "ws"
    names = ["plain", "link", "hard", "fifo", "binary", "uncommitted", "escaped", "escapes"]
    needle_sessions(workdir, [*names, "loglink", "loghard"])
    sessions = workdir / "sessions"
    outside = tmp_path / "outside.txt"
    outside.write_text("needle OUTSIDE-9\n")
    (sessions / "link" / "tool_result-c1.txt").unlink()
    (sessions / "link" / "tool_result-c1.txt").symlink_to(outside)
    os.link(sessions / "hard" / "tool_result-c1.txt", tmp_path / "second-name")
    os.mkfifo(sessions / "fifo" / "tool_result-c2.txt")  # opened without blocking, passed over
    (sessions / "binary" / "tool_result-c1.txt").write_bytes(b"needle\0BINARY-9\n")
    log = sessions / "uncommitted" / "context.jsonl"
    with open(log, "ab") as f:  # a whole batch past the commit record, then a torn line
        f.write(b'{"role":"user","content":"needle UNCOMMITTED-9"}\n{"role":"user","con')
    (sessions / "escaped" / "context.jsonl.commit").unlink()  # a log written by hand
    (sessions / "escaped" / "context.jsonl").write_bytes(
        b'{"role":"user","content":"h\\u0065llo \\u006eeedle \\u001b[2Jcleared"}\n'
    )
    (sessions / "escapes" / "tool_result-c1.txt").write_bytes(
        b"needle \x1b]0;title\x07 \x1b[31mred\r\nneedle \xff\xfe not utf-8\n"
    )
    (sessions / "loglink" / "context.jsonl").rename(tmp_path / "log.jsonl")
    (sessions / "loglink" / "context.jsonl").symlink_to(tmp_path / "log.jsonl")
    os.link(sessions / "loghard" / "context.jsonl", tmp_path / "log-second-name")
    return workdir


def _searched(
    workdir: Path,
    *,
    quick: bool,
    pattern: str = "needle",
    shown_as: Callable[[str], str] | None = None,
) -> tuple[bytes, list[str]]:
    """What `WorkspaceSearch` prints for every session, with its quick way or without it;
    `shown_as`: how paths are shown (`PATHS_SHOWN_AS`, which every command's run sets)."""
    import io

    from ctxoffload._search.matcher import compile_matcher
    from ctxoffload.cli._access import session_ids
    from ctxoffload.cli._grep_output import GrepQuery, Printer
    from ctxoffload.cli._grep_sessions import WorkspaceSearch
    from ctxoffload.cli._output import PATHS_SHOWN_AS

    printer = Printer(False, 2000, 0)
    printer.out = io.BytesIO()  # type: ignore[assignment]
    said: list[str] = []
    printer.note = said.append  # type: ignore[method-assign]
    matcher = compile_matcher(pattern, backtracking=True, escaped_bytes=True)
    token = PATHS_SHOWN_AS.set(shown_as)
    try:
        with WorkspaceSearch(str(workdir), GrepQuery(pattern), matcher, printer, said.append) as s:
            assert s._quick  # (the way under test)
            s._quick = quick
            for session in session_ids(str(workdir)):
                s.session(session)
    finally:
        PATHS_SHOWN_AS.reset(token)
    return printer.out.getvalue(), said  # type: ignore[attr-defined]


@pytest.mark.parametrize("ripgrep", ["as installed", "python"])
@pytest.mark.parametrize("pattern", ["needle", "hello", "cleared", "31m", "not utf"])
def test_the_quick_way_prints_what_the_file_by_file_search_prints(
    tmp_path: Path, pattern: str, ripgrep: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ripgrep (the `fast` extra) and without it (`CTXOFFLOAD_GREP=python`)."""
    if ripgrep == "python":
        monkeypatch.setenv("CTXOFFLOAD_GREP", "python")
    workdir = _hostile_workspace(tmp_path)
    assert _searched(workdir, quick=True, pattern=pattern) == _searched(
        workdir, quick=False, pattern=pattern
    )


def test_the_quick_way_is_taken_where_paths_are_shown_otherwise(tmp_path: Path) -> None:
    """Every command's run says how paths are shown (`main`: a bucket's copy as its URI), so
    the quick way is taken then too, and shows each path as the file-by-file search does."""
    workdir = _hostile_workspace(tmp_path)
    local = f"{workdir}/"

    def as_uri(path: str) -> str:  # (as `BucketCopies.display` spells a path in a copy)
        return "s3://bucket/" + path[len(local) :] if path.startswith(local) else path

    quick = _searched(workdir, quick=True, shown_as=as_uri)
    assert quick == _searched(workdir, quick=False, shown_as=as_uri)
    out, said = quick
    assert b"s3://bucket/sessions/plain/tool_result-c1.txt:1:needle in plain\n" in out
    assert local.encode() not in out
    assert said and all("s3://bucket/sessions/" in line for line in said)


def test_the_quick_way_keeps_every_safety(tmp_path: Path) -> None:
    workdir = _hostile_workspace(tmp_path)
    out, said = _searched(workdir, quick=True)
    sessions = workdir / "sessions"
    for secret in (b"OUTSIDE-9", b"BINARY-9", b"UNCOMMITTED-9", b"\x1b", b"\x07", b"\r\n"):
        assert secret not in out
    assert f"{sessions}/escaped/context.jsonl:1:hello needle \\x1b[2Jcleared\n".encode() in out
    assert f"{sessions}/escapes/tool_result-c1.txt:1:needle \\x1b]0;title".encode() in out
    assert b"escapes/tool_result-c1.txt:2:needle \xff\xfe not utf-8\n" in out  # (as grep)
    assert f"{sessions}/loglink/tool_result-c1.txt:1:needle in loglink\n".encode() in out
    assert b"loglink/context.jsonl" not in out and b"loghard/context.jsonl" not in out
    assert b"/hard/tool_result-c1.txt" not in out
    assert f"{sessions}/uncommitted/context.jsonl:1:needle said in uncommitted\n".encode() in out
    assert [line.split(": ", 1)[1] for line in said] == [
        "binary file (NUL bytes in its first 8 KB), not searched",
        "has 2 hard links: it may be shared with a file outside the workspace; not read",
        "has 2 hard links: it may be shared with a file outside the workspace; not read",
    ]


def test_a_line_is_made_inert_part_by_part_when_any_part_is_not_plain(tmp_path: Path) -> None:
    """A line is looked at whole (`path:number:text`): a file named with an escape whose
    line is plain, and a plainly named file whose line holds controls, each print as their
    parts made inert one by one (a tab, and a byte 0xa0-0xff that is not UTF-8, written as
    they are, as GNU grep writes them)."""
    workdir = tmp_path / "ws"
    needle_sessions(workdir, ["a", "b"])
    sessions = workdir / "sessions"
    (sessions / "a" / "tool_result-\x1b[31m.txt").write_bytes(b"needle plain\ttab\n")
    (sessions / "b" / "tool_result-c1.txt").write_bytes(b"needle \x9b \xc2\x9b \xe9t\xe9\tx\n")
    out, said = _searched(workdir, quick=True)
    assert said == []
    assert f"{sessions}/a/tool_result-\\x1b[31m.txt:1:needle plain\ttab\n".encode() in out
    shown = f"{sessions}/b/tool_result-c1.txt:1:needle \\x9b \\u009b ".encode()
    assert shown + b"\xe9t\xe9\tx\n" in out
    assert f"{sessions}/a/context.jsonl:1:needle said in a\n".encode() in out


def test_the_names_searched_are_judged_by_the_records_rule_however_many() -> None:
    from ctxoffload._disk.layout import is_session_record
    from ctxoffload.cli._grep_sessions import _NAMES_KEPT, _SearchedNames

    searched = _SearchedNames()
    names = [f"tool_result-c{n}.txt" for n in range(_NAMES_KEPT + 50)]
    records = ["context.jsonl.commit", "events.jsonl", "state.json", ".tmp-tool_result-c1.txt-1"]
    for _ in range(2):  # judged, then found again (or judged again past the bound)
        for name in [*names, *records, "context.jsonl"]:
            assert searched[name] is (name != "context.jsonl" and not is_session_record(name))
    assert len(searched) == _NAMES_KEPT
