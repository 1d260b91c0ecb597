"""`ctxoffload cat`: what it says of lines it cannot show, and of ranges past the end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

MESSAGE = b'{"role": "user", "content": "hello"}\n'


def test_only_an_unfinished_last_line_is_called_torn(filled: Path, cli: Callable[..., Any]) -> None:
    log = filled / "sessions/run-2/context.jsonl"
    log.write_bytes(MESSAGE + b"{corrupt in the middle\n" + MESSAGE + b'{"role": "us')
    out = cli("cat", log, "--workdir", filled).out.splitlines()
    assert out[2] == "     2\t(not JSON: a corrupt line) {corrupt in the middle"
    assert out[-1] == '     4\t(not JSON: a torn line) {"role": "us'
    # A bad last line that did end with its newline was written whole: corrupt, not torn.
    log.write_bytes(MESSAGE + b"{corrupt at the end\n")
    out = cli("cat", log, "--workdir", filled).out.splitlines()
    assert out[-1] == "     2\t(not JSON: a corrupt line) {corrupt at the end"


def test_a_range_past_the_end_says_how_long_the_file_is(
    filled: Path, cli: Callable[..., Any]
) -> None:
    ref = filled / "sessions/run-1/tool_result-call_1.txt"
    past = cli("cat", ref, "--lines", "99999:100000", "--workdir", filled)
    assert (past.code, past.out) == (1, "")
    assert past.err == (
        f"ctxoffload cat: {ref} has 2,000 lines: --lines 99999:100000 starts after its end\n"
    )
    # A range that only runs past the end prints what there is, and says nothing.
    partly = cli("cat", ref, "--lines", "1999:2005", "--workdir", filled)
    assert (partly.code, len(partly.out.splitlines()), partly.err) == (0, 2, "")
    # An empty file printed whole is no error; one line is one line.
    empty = filled / "sessions/run-2/context.jsonl"
    empty.write_bytes(b"")
    assert cli("cat", empty, "--workdir", filled).code == 0
    empty.write_bytes(MESSAGE)
    one = cli("cat", empty, "--lines", "2", "--workdir", filled)
    assert one.code == 1 and one.err.endswith(" has 1 line: --lines 2 starts after its end\n")


def test_cat_help_tells_the_exit_status_of_a_range_past_the_end(
    cli: Callable[..., Any],
) -> None:
    text = " ".join(cli("cat", "--help").out.split())
    assert "Exit 1 when --lines starts after the end of the file" in text


def test_cat_marks_the_lines_of_a_batch_never_committed(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    import asyncio

    from ctxoffload import LocalWorkspace, Msg

    workdir = tmp_path / "ws"
    ws = LocalWorkspace(workdir, fsync=False)
    asyncio.run(ws.offload_context("s", msgs=[Msg(role="user", content="kept")]))
    log = workdir / "sessions" / "s" / "context.jsonl"
    with open(log, "ab") as f:  # a writer killed between its write and its commit record
        f.write(b'{"role":"user","content":"lost"}\n')
    shown = cli("cat", "sessions/s/context.jsonl", "--workdir", workdir)
    assert shown.code == 0, shown
    assert shown.out.splitlines()[0] == "     1\t[user]"
    assert shown.out.splitlines()[2] == "     2\t(not committed: readers skip it) [user]"
    raw = cli("cat", "sessions/s/context.jsonl", "--raw", "--lines", "2", "--workdir", workdir)
    assert raw.out.startswith("     2\t(not committed: readers skip it) {")


def test_an_absolute_path_finds_its_workspace_from_any_folder(
    filled: Path, tmp_path: Path, cli: Callable[..., Any], monkeypatch: Any
) -> None:
    """The path a notice printed is enough, wherever the command runs."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("CTXOFFLOAD_WORKDIR", raising=False)
    result = filled / "sessions/run-1/tool_result-call_1.txt"
    for reference in (str(result), result.as_uri()):
        found = cli("cat", reference, "--lines", "1:2")
        assert (found.code, found.err) == (0, ""), found
        assert found.out.splitlines()[0].endswith(result.read_text().splitlines()[0])
    context = cli("cat", filled / "sessions/run-1/context.jsonl", "--lines", "1")
    assert context.code == 0 and "Find the failing order" in context.out
    # A workdir that is given still decides: the path is outside it.
    (elsewhere / "sessions").mkdir()
    refused = cli("cat", result, "--workdir", elsewhere)
    assert refused.code == 2 and "names no file inside the workspace" in refused.err
    # A path in no workspace is said as before.
    stray = tmp_path / "stray.txt"
    stray.write_text("x")
    monkeypatch.chdir(tmp_path)
    assert "is not a ctxoffload workspace" in cli("cat", stray).err


def test_a_session_named_sessions_is_no_workspace_of_its_own(
    tmp_path: Path, cli: Callable[..., Any], monkeypatch: Any
) -> None:
    import asyncio

    from ctxoffload import LocalWorkspace, Msg

    workdir = tmp_path / "ws"
    asyncio.run(
        LocalWorkspace(workdir).offload_context("sessions", msgs=[Msg(role="user", content="hi")])
    )
    (workdir / "sessions/sessions/sessions").mkdir()  # a folder no workspace writes
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CTXOFFLOAD_WORKDIR", raising=False)
    found = cli("cat", workdir / "sessions/sessions/context.jsonl")
    assert found.code == 0 and "hi" in found.out, found


def test_a_file_url_holding_an_encoded_nul_is_refused_in_one_line(
    filled: Path, cli: Callable[..., Any], monkeypatch: Any
) -> None:
    """`%00` decodes to a NUL no path can hold: the reference names no file (no traceback)."""
    monkeypatch.delenv("CTXOFFLOAD_WORKDIR", raising=False)
    result = filled / "sessions/run-1/tool_result-call_1.txt"
    for url in (result.as_uri() + "%00", result.as_uri() + "%00.txt"):
        for where in ((), ("--workdir", filled)):
            refused = cli("cat", url, *where)
            assert refused.code == 2, refused
            assert refused.err == (
                f"ctxoffload cat: reference {url!r} names no file inside the workspace "
                f"{str(filled)!r}: pass a path this workspace returned\n"
            )


def test_a_path_in_no_workspace_is_said_of_the_path_not_only_of_the_current_folder(
    filled: Path, tmp_path: Path, cli: Callable[..., Any], monkeypatch: Any
) -> None:
    """A session's folder (no file), or a path outside every workspace: the error names the
    path given, not only the folder the command happened to run in."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("CTXOFFLOAD_WORKDIR", raising=False)
    for reference in (f"{filled}/sessions/run-1/", "/", (filled / "stray").as_uri()):
        refused = cli("cat", reference)
        assert refused.code == 2, refused
        assert refused.err.startswith(
            f"ctxoffload cat: reference {reference!r} names no file of a workspace "
        ), refused.err
        assert f"{str(elsewhere)!r} is not a ctxoffload workspace" in refused.err


def test_cat_calls_binary_what_the_agents_read_calls_binary(
    filled: Path, cli: Callable[..., Any]
) -> None:
    # No NUL byte, but mostly bytes that are not UTF-8 or control characters (compressed or
    # encrypted data): binary by the one rule (`binary_reason`), as the agent's Read says.
    noise = bytes(range(1, 256)) * 4
    (filled / "sessions/run-1/tool_result-noise.txt").write_bytes(noise)
    result = cli("cat", filled / "sessions/run-1/tool_result-noise.txt", "--workdir", filled)
    assert result.code == 0 and f"binary file, {len(noise):,} bytes" in result.out
    # Text in a legacy encoding is still text.
    (filled / "sessions/run-1/tool_result-latin.txt").write_bytes("déjà vu\n".encode("latin-1"))
    result = cli("cat", filled / "sessions/run-1/tool_result-latin.txt", "--workdir", filled)
    assert result.code == 0 and "binary" not in result.out


def test_a_bare_file_name_is_answered_with_its_path_in_the_session(
    filled: Path, cli: Callable[..., Any]
) -> None:
    """A newcomer copies `tool_result-call_1.txt` from a listing: the refusal names the
    session's file of that name, to pass instead; nothing is read."""
    result = cli("cat", "tool_result-call_1.txt", "--workdir", filled)
    assert result.code == 2 and result.out == ""
    assert result.err.endswith(
        "; the sessions hold tool_result-call_1.txt: sessions/run-1/tool_result-call_1.txt, "
        "sessions/run-2/tool_result-call_1.txt\n"
    ), result.err
    assert cli("cat", "sessions/run-1/tool_result-call_1.txt", "--workdir", filled).code == 0
    assert "the sessions hold" not in cli("cat", "nothing.txt", "--workdir", filled).err
