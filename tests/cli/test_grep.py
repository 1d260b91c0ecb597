"""`ctxoffload grep` on a real workspace, including patterns chosen to hurt."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_workspace import FAILING_LINE
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload import LocalWorkspace, ToolResultBlock
from ctxoffload._search.matcher import compile_matcher, required_literal
from ctxoffload.cli.ui._model import UiModel
from ctxoffload.exceptions import InvalidContent
from ctxoffload.readback import escape, memory_tool
from helpers import examples


def test_grep_names_file_and_line(filled: Path, cli: Callable[..., Any]) -> None:
    result = cli("grep", "ORD-58213", "--workdir", filled)
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines == [
        f"{filled}/sessions/{s}/tool_result-call_1.txt:{FAILING_LINE}:"
        f"{FAILING_LINE:05d} ERROR export-worker-7 order_id=ORD-58213 disk quota exceeded"
        for s in ("run-1", "run-2")
    ]


def test_grep_one_session(filled: Path, cli: Callable[..., Any]) -> None:
    out = cli("grep", "ORD-58213", "run-2", "--workdir", filled).out
    assert "run-2" in out and "run-1" not in out


def test_grep_with_context_lines(filled: Path, cli: Callable[..., Any]) -> None:
    out = cli("grep", "-C", "1", "ORD-5821[3]|ORD-10003$", "run-1", "--workdir", filled).out
    numbers = [
        (line.split(".txt")[1][0], line.split(".txt")[1][1:].split(":")[0].split("-")[0])
        for line in out.splitlines()
        if ".txt" in line
    ]
    assert numbers == [
        ("-", "2"),
        (":", "3"),
        ("-", "4"),
        ("-", str(FAILING_LINE - 1)),
        (":", str(FAILING_LINE)),
        ("-", str(FAILING_LINE + 1)),
    ]
    assert out.splitlines()[3] == "--"


def test_grep_ignore_case_and_fixed_strings(filled: Path, cli: Callable[..., Any]) -> None:
    assert cli("grep", "order_id=ord-58213", "run-1", "--workdir", filled).code == 1
    assert cli("grep", "-i", "order_id=ord-58213", "run-1", "--workdir", filled).code == 0
    invalid = cli("grep", "quota (exceeded", "run-1", "--workdir", filled)
    assert invalid.code == 2 and "invalid regular expression" in invalid.err
    assert invalid.err.count("\n") == 1
    assert cli("grep", "-F", "ORD-58213 disk quota exceeded", "--workdir", filled).code == 0
    assert cli("grep", "-F", "ORD-5821.", "--workdir", filled).code == 1


def test_grep_matches_decoded_message_text(filled: Path, cli: Callable[..., Any]) -> None:
    # In context.jsonl this text is JSON-escaped ("\"quoted\"", "\u2713" may be escaped, and
    # it follows "line one\n" on the same line): only decoded matching finds it at ^.
    result = cli("grep", '^the "quoted" needle \u2713 on line two$', "--workdir", filled)
    assert result.code == 0
    assert result.out == (
        f'{filled}/sessions/run-1/context.jsonl:3:the "quoted" needle \u2713 on line two\n'
    )


def test_a_match_across_lines_is_no_line_match(filled: Path, cli: Callable[..., Any]) -> None:
    assert cli("grep", r"ORD-10001\n00002", "--workdir", filled).code == 1


def test_no_match_is_exit_1_and_prints_nothing(filled: Path, cli: Callable[..., Any]) -> None:
    result = cli("grep", "no such text anywhere", "--workdir", filled)
    assert (result.code, result.out, result.err) == (1, "", "")


def test_grep_json(filled: Path, cli: Callable[..., Any]) -> None:
    hits = json.loads(cli("grep", "ORD-58213", "run-1", "--json", "--workdir", filled).out)
    assert hits == [
        {
            "session": "run-1",
            "file": f"{filled}/sessions/run-1/tool_result-call_1.txt",
            "line": FAILING_LINE,
            "text": f"{FAILING_LINE:05d} ERROR export-worker-7 order_id=ORD-58213 "
            "disk quota exceeded",
        }
    ]


def test_grep_events_only_when_asked(filled: Path, cli: Callable[..., Any]) -> None:
    assert cli("grep", '"kind":"compression"', "--workdir", filled).code == 1
    assert cli("grep", '"kind":"compression"', "--events", "--workdir", filled).code == 0


async def remember(workdir: Path, path: str, text: str) -> None:
    """Keep a memory file through the memory tool, as an agent does."""
    memory = memory_tool(LocalWorkspace(workdir, fsync=False), session_id="run-1")
    answer = await memory(command="create", path=path, file_text=text)
    assert not answer.startswith("Error"), answer


def test_grep_searches_the_memories_too(filled: Path, cli: Callable[..., Any]) -> None:
    asyncio.run(remember(filled, "/memories/user.md", "prefers\nexports on ORD-58213 paused\n"))
    asyncio.run(remember(filled, "/memories/notes/jobs.md", "nightly: ORD-58213\n"))
    # What a memory writer killed mid-write leaves: staging, never searched.
    (filled / "memories" / ".tmp-user.md-2f9c").write_text("ORD-58213 half written\n")
    result = cli("grep", "-F", "ORD-58213", "--workdir", filled)
    assert result.code == 0, result.err
    assert result.out.splitlines()[-2:] == [
        f"{filled}/memories/notes/jobs.md:1:nightly: ORD-58213",
        f"{filled}/memories/user.md:2:exports on ORD-58213 paused",
    ]
    hits = json.loads(cli("grep", "paused", "--json", "--workdir", filled).out)
    assert hits == [
        {
            "session": None,
            "file": f"{filled}/memories/user.md",
            "line": 2,
            "text": "exports on ORD-58213 paused",
        }
    ]
    # The viewer's search is `ctxoffload grep --json`: it finds them too.
    found = UiModel(str(filled)).search("paused")["matches"]
    assert [(hit["path"], hit["line"], hit["session"]) for hit in found] == [
        ("memories/user.md", 2, None)
    ]
    # Memories belong to no session: naming one searches that session alone.
    assert "memories" not in cli("grep", "ORD-58213", "run-1", "--workdir", filled).out


def test_grep_leaves_the_records_out(filled: Path, cli: Callable[..., Any]) -> None:
    session = filled / "sessions" / "run-1"
    (session / ".tmp-tool_result-call_9.txt-1a2b").write_text("NEEDLE-7 half written\n")
    (session / "context.jsonl.commit").write_text('{"NEEDLE-7": 1}\n')
    # A file someone put in a session folder is content, searched like the rest.
    (session / "notes.txt").write_text("NEEDLE-7 by hand\n")
    assert cli("grep", "NEEDLE-7", "--workdir", filled).out == (
        f"{session}/notes.txt:1:NEEDLE-7 by hand\n"
    )
    assert cli("grep", "session_id", "--workdir", filled).code == 1  # state.json: a record


@pytest.fixture
def hostile(filled: Path) -> Path:
    """A session whose tool result makes backtracking regex engines explode."""
    ws = LocalWorkspace(filled, fsync=False)
    text = "\n".join(["a" * 40 + "!"] * 20)
    asyncio.run(ws.offload_tool_result("evil", ToolResultBlock(id="call_1", output=text)))
    return filled


def test_a_catastrophic_pattern_finishes(hostile: Path, cli: Callable[..., Any]) -> None:
    pytest.importorskip("re2", reason="no google-re2, a dependency of ctxoffload: pip install -e .")
    result = cli("grep", "(a+)+$", "evil", "--workdir", hostile)
    assert result.code == 1  # every line ends in "!": no match, and no hang


def test_a_pattern_only_python_re_runs_is_stopped_at_the_deadline(
    hostile: Path, cli: Callable[..., Any]
) -> None:
    # A backreference: RE2 refuses it, so Python's re runs it, and it backtracks for ages.
    # (The group keeps "!x" from being a literal the search could look for first.)
    result = cli("grep", r"(a+)+\1(!x)", "evil", "--timeout", "0.5", "--workdir", hostile)
    assert result.code == 2
    assert "ran longer than 0.5 s" in result.err and result.err.count("\n") == 1


def test_a_backtracking_pattern_runs_only_on_lines_holding_its_literal(
    hostile: Path, cli: Callable[..., Any]
) -> None:
    # Every match holds "!x" and no line does: the pattern never runs, so it cannot hang.
    result = cli("grep", r"(a+)+\1!x", "evil", "--timeout", "30", "--workdir", hostile)
    assert result.code == 1 and result.err == ""


def test_the_matcher_prefers_re2() -> None:
    pytest.importorskip("re2", reason="no google-re2, a dependency of ctxoffload: pip install -e .")
    assert compile_matcher("a+b").engine == "re2"
    # `ctxoffload grep` runs what RE2 refuses in Python's re, under its deadline.
    assert compile_matcher(r"(a)\1", backtracking=True).engine == "re"
    with pytest.raises(InvalidContent, match=r"backreferences .* are not supported"):
        compile_matcher(r"(a)\1")  # the agent's tools refuse it
    assert compile_matcher("x.y", fixed=True).matches_line(b"x.y")
    assert not compile_matcher("x.y", fixed=True).matches_line(b"xzy")
    assert compile_matcher("ABC", ignore_case=True).matches_line(b"xabcx")


def test_negative_context_is_a_usage_error(filled: Path, cli: Callable[..., Any]) -> None:
    assert cli("grep", "-C", "-1", "x", "--workdir", filled).code == 2


def test_a_pattern_that_is_not_utf8_is_searched_as_bytes(filled: Path) -> None:
    (filled / "sessions/run-2/tool_result-raw.txt").write_bytes(b"caf\xe9 latin-1 line\n")
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "grep", b"caf\xe9", "run-2"],
        capture_output=True,
        cwd=filled,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(b"tool_result-raw.txt:1:caf\xe9 latin-1 line\n")


# Without -C, files are searched in pieces cut at line ends. With pieces a few bytes long,
# every line crosses a piece boundary somewhere, lines are longer than a piece, and the last
# line may lack its newline: the lines reported must still be exactly those of a plain
# line-by-line match, with their numbers.
@settings(max_examples=examples(150), deadline=None)
@given(
    text=st.text(alphabet="ab\nxé\r", max_size=300),
    pattern=st.sampled_from(
        [
            *("a", "ab", "b+x", "^a", "a$", "x\\nb", "é", "(?s)a.b", "ab+x", "a[bx]bé", "xa.b$"),
            # A line is read without its trailing "\r", as the agent's Grep reads it.
            *("a.$", "b\\s", "\r", "x\rb", "[^a]$"),
            # Empty matches: none after the last newline, which ends no line.
            *("^$", "b*$", "^"),
            # Patterns that read the ends of the whole text, or turn multi-line mode off:
            # in a buffer of many lines they would match at its ends only.
            *("\\A(a|x)", "(b|x)\\z", "(?-m)^(a|b)", "(?i-m:B$)", "\\Aa\\z"),
        ]
    ),
    piece=st.sampled_from([1, 2, 5, 16, 4096]),
)
def test_searching_in_pieces_reports_exactly_the_matching_lines(
    text: str, pattern: str, piece: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from ctxoffload._search import engine as _search

    path = tmp_path_factory.mktemp("pieces") / "tool_result-x.txt"
    data = text.encode()
    path.write_bytes(data)
    matcher = compile_matcher(pattern)
    # Split at "\n" only, each line without its trailing "\r" (the agent's `line_text`).
    lines = [line[:-1] if line.endswith(b"\r") else line for line in data.split(b"\n")]
    if data.endswith(b"\n") or not data:
        lines.pop()  # "" after the last newline, or in an empty file, is no line
    expected = [(n, line) for n, line in enumerate(lines, 1) if matcher.matches_line(line)]
    saved = _search._PIECE
    _search._PIECE = piece
    try:
        with path.open("rb", buffering=0) as f:
            hits = list(_search.search_lines(f, matcher))
        assert [(n, line) for n, line, _ in hits] == expected
        assert all(is_match for _, _, is_match in hits)
        # With context lines: the same matches, whatever the pieces.
        with path.open("rb", buffering=0) as f:
            hits = list(_search.search_lines(f, matcher, context=1))
    finally:
        _search._PIECE = saved
    assert [(n, line) for n, line, is_match in hits if is_match] == expected


# Pieces a pattern is made of: literals (plain and escaped), classes, groups with and
# without alternation, quantifiers (braces too), anchors and escapes that are not literals.
_TOKENS = [
    "a",
    "b",
    "-",
    "=",
    " ",
    "é",
    "\\.",
    "\\-",
    ".",
    "[ab]",
    "[^a]",
    "(a|b)",
    "(ab)",
    "*",
    "+",
    "?",
    "{2}",
    "{0,2}",
    "{1,}",
    "^",
    "$",
    "|",
    "\\d",
    "\\b",
    "1",
    # Escapes that spell a character with what follows them: `a` three ways, a class;
    # `escape`'s space and `é`, which Python's re reads as a byte in a pattern of bytes.
    "\\x20",
    "\\xe9",
    "\\x61",
    "\\141",
    "\\x{61}",
    "\\pL",
    "\\1",
]


@pytest.mark.slow
@settings(max_examples=examples(400), deadline=None)
@given(
    tokens=st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=8),
    lines=st.lists(st.text(alphabet="ab-= .1é", max_size=12), min_size=1, max_size=25),
)
def test_every_line_a_pattern_matches_holds_its_required_literal(
    tokens: list[str], lines: list[str]
) -> None:
    # The literal lets grep skip lines without it; a literal some match lacks would lose
    # that match. Checked against both engines on lines made of the same characters.
    import re

    pattern = "".join(tokens)
    literal = required_literal(pattern)
    if literal is None:
        return
    engines = []
    try:
        engines.append(re.compile(pattern))
    except re.error:
        return
    try:
        import re2  # type: ignore[import-untyped]
    except ImportError:
        pass
    else:
        options = re2.Options()
        options.log_errors = False
        with contextlib.suppress(re2.error):
            engines.append(re2.compile(pattern, options=options))
    for line in [*lines, "".join(lines), literal]:
        for engine in engines:
            if engine.search(line):
                assert literal in line, (pattern, literal, line, engine)


def test_required_literals_of_typical_patterns() -> None:
    assert required_literal("order_id=ORD-5[0-9]{4} ") == "order_id=ORD-5"
    assert required_literal(r"\d+ rows=\.") == " rows=."
    assert required_literal("(foo|bar)bazz") == "bazz"
    assert required_literal("ab*") == "a"
    assert required_literal(r"\d+ ok\tdone") == "done"
    nones = ["foo|bar", "(?i)abc", "[[:alpha:]]x", r"\Qab\E*", "a{x}", "[ab]", ".*"]
    assert required_literal(r"\101BC-17") == "BC-17"  # \101 is "A"
    assert required_literal(r"(a+)\1!x") == "!x"  # \1 is what the group matched
    # `escape` spells whitespace as \xHH: an ASCII character, read alike by both engines.
    assert required_literal(escape("ORD-12345 rows=")) == "ORD-12345 rows="
    assert required_literal(r"\x41BC-17") == "ABC-17"
    assert required_literal(r"ab\x20*cde") == "cde"  # the quantifier takes the space
    nones += [r"\xe9", r"\x4", r"\pLBC-17", r"\x{41}BC-17", r"\p{Greek}xyz"]
    for none in nones:
        assert required_literal(none) is None, none


def test_negative_max_columns_is_a_usage_error(filled: Path, cli: Callable[..., Any]) -> None:
    result = cli("grep", "--max-columns", "-1", "ORD-58213", "--workdir", filled)
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        "ctxoffload grep: --max-columns -1 is negative: give a number of bytes >= 0 "
        "(0: never cut)\n"
    )
    # 0 never cuts; 10 cuts after 10 characters and says how many bytes were left out.
    whole = cli("grep", "--max-columns", "0", "ORD-58213", "run-1", "--workdir", filled)
    assert whole.code == 0 and whole.out.endswith("disk quota exceeded\n")
    cut = cli("grep", "--max-columns", "10", "ORD-58213", "run-1", "--workdir", filled)
    line = f"{FAILING_LINE:05d} ERROR export-worker-7 order_id=ORD-58213 disk quota exceeded"
    assert cut.out.endswith(f":{line[:10]} [... {len(line) - 10} more bytes]\n")


def test_negative_timeout_is_a_usage_error_and_0_is_no_deadline(
    hostile: Path, cli: Callable[..., Any]
) -> None:
    for value in ("-1", "-0.5", "nan", "inf"):
        result = cli("grep", "--timeout", value, "x", "--workdir", hostile)
        assert (result.code, result.out) == (2, ""), value
        assert result.err == (
            f"ctxoffload grep: --timeout {value}: give a number of seconds from 0 to "
            "100,000,000 (0: no deadline)\n"
        )
    # 0: Python's re runs a backreference with no deadline (this one is quick).
    result = cli("grep", "--timeout", "0", r"(ORD-5)8213.*\1", "--workdir", hostile)
    assert result.code == 1 and result.err == ""


def test_grep_help_says_what_0_means(cli: Callable[..., Any]) -> None:
    text = " ".join(cli("grep", "--help").out.split())
    assert "0: never cut" in text and "0: no deadline" in text and "default 30" in text


def test_the_deadline_message_offers_re2_only_when_it_is_missing(
    hostile: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("re2", reason="no google-re2, a dependency of ctxoffload: pip install -e .")
    args = ("grep", r"(a+)+\1(!x)", "evil", "--timeout", "0.3", "--workdir", hostile)
    with_re2 = cli(*args)
    assert with_re2.code == 2 and with_re2.err.count("\n") == 1
    assert "pip install" not in with_re2.err and "install google-re2" not in with_re2.err
    assert "RE2, which is installed, cannot run it (backreferences" in with_re2.err
    monkeypatch.setitem(sys.modules, "re2", None)  # as if google-re2 were not installed
    without = cli(*args)
    assert without.code == 2 and without.err.count("\n") == 1
    assert "install google-re2 (pip install google-re2)" in without.err


def test_a_cut_line_never_ends_inside_a_utf8_character(tmp_path: Path) -> None:
    import asyncio
    import subprocess
    import sys

    from ctxoffload import LocalWorkspace, ToolResultBlock

    line = "needle " + "é€" * 50  # 2- and 3-byte characters after 7 ASCII bytes
    workdir = tmp_path / "ws"
    block = ToolResultBlock(id="c1", name="t", output=line + "\n")
    asyncio.run(LocalWorkspace(workdir, fsync=False).offload_tool_result("s", block))
    raw = line.encode()
    command = [sys.executable, "-m", "ctxoffload", "grep", "needle", "s"]
    for columns in range(7, 18):  # every offset into the 5-byte "é€" repeat
        done = subprocess.run(
            [*command, "--max-columns", str(columns), "--workdir", str(workdir)],
            capture_output=True,
        )
        assert done.returncode == 0, done.stderr
        text = done.stdout.decode("utf-8")  # strict: a split character raises here
        shown, _, rest = text.split(":", 2)[2].partition(" [... ")
        assert columns - 2 <= len(shown.encode()) <= columns
        assert raw.startswith(shown.encode())
        assert rest == f"{len(raw) - len(shown.encode()):,} more bytes]\n"


def test_grep_skips_the_lines_of_a_batch_never_committed(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    import asyncio

    from ctxoffload import LocalWorkspace, Msg

    workdir = tmp_path / "ws"
    ws = LocalWorkspace(workdir, fsync=False)
    asyncio.run(ws.offload_context("s", msgs=[Msg(role="user", content="needle committed")]))
    log = workdir / "sessions" / "s" / "context.jsonl"
    with open(log, "ab") as f:  # a writer killed between its write and its commit record
        f.write(b'{"role":"user","content":"needle never committed"}\n')
    result = cli("grep", "needle", "--workdir", workdir)
    assert result.code == 0, result
    assert "needle committed" in result.out and "never committed" not in result.out
    # Without a commit record (an older log), every line counts.
    (log.parent / "context.jsonl.commit").unlink()
    assert "never committed" in cli("grep", "needle", "--workdir", workdir).out


def _tool_call_session(workdir: Path) -> None:
    """A session whose context.jsonl holds a tool call with quotes in its argument (stored
    JSON-escaped) and its result."""
    import asyncio

    from ctxoffload import LocalWorkspace, Msg, ToolCallBlock, ToolResultBlock

    code = 'import sys\nprint("FAILURE: disk")\nsys.exit(1)'
    msgs = [
        Msg(role="user", content="Run the check."),
        Msg(
            role="assistant", content=[ToolCallBlock(id="c1", name="python", input={"code": code})]
        ),
        Msg(role="tool", content=[ToolResultBlock(id="c1", name="python", output="FAILURE: disk")]),
    ]
    asyncio.run(LocalWorkspace(workdir, fsync=False).offload_context("s", msgs=msgs))


def test_grep_finds_a_tool_call_argument_as_the_model_wrote_it(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    workdir = tmp_path / "ws"
    _tool_call_session(workdir)
    log = f"{workdir}/sessions/s/context.jsonl"
    assert b'print(\\"FAILURE' in (workdir / "sessions/s/context.jsonl").read_bytes()
    for argv in (['print\\("FAILURE', "s"], ["-F", 'print("FAILURE: disk")', "s"]):
        found = cli("grep", *argv, "--workdir", workdir)
        assert (found.code, found.err) == (0, ""), found
        assert found.out == f'{log}:2:print("FAILURE: disk")\n'
    # -C stays within the message: the argument's other lines, the call, the header.
    around = cli("grep", "-C", "9", "-F", 'print("FAILURE', "s", "--workdir", workdir)
    assert around.out.splitlines() == [
        f"{log}-2-[assistant]",
        f"{log}-2--> tool call python (id c1)",
        f"{log}-2-  code: import sys",
        f'{log}:2:print("FAILURE: disk")',
        f"{log}-2-sys.exit(1)",
    ]
    # Two matches in one message: the context of each, every line once.
    both = cli("grep", "-C", "1", "-F", "sys", "s", "--workdir", workdir)
    assert both.out.splitlines() == [
        f"{log}-2--> tool call python (id c1)",
        f"{log}:2:  code: import sys",
        f'{log}-2-print("FAILURE: disk")',
        f"{log}:2:sys.exit(1)",
    ]
    # The call's header is a line of the message too, as the agent's Grep sees it.
    header = cli("grep", "--json", "-F", "-> tool call python", "--workdir", workdir)
    assert [(h["line"], h["text"]) for h in json.loads(header.out)] == [
        (2, "-> tool call python (id c1)")
    ]


def test_grep_falls_back_to_the_raw_json_line(tmp_path: Path, cli: Callable[..., Any]) -> None:
    # A pattern on the stored JSON itself, no decoded line has: the line is shown raw.
    workdir = tmp_path / "ws"
    _tool_call_session(workdir)
    found = cli("grep", "-F", '"role":"tool"', "s", "--workdir", workdir)
    assert found.code == 0, found
    [line] = found.out.splitlines()
    assert line.startswith(f"{workdir}/sessions/s/context.jsonl:3:{{") and '"role":"tool"' in line


def test_grep_of_memories_follows_no_link_and_stops_at_a_depth(
    filled: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    memories = filled / "memories"
    memories.mkdir()
    (tmp_path / "outside.md").write_text("NEEDLE-9 outside the workspace\n")
    (memories / "linked.md").symlink_to(tmp_path / "outside.md")
    (memories / "linked-folder").symlink_to(tmp_path, target_is_directory=True)
    shallow = memories.joinpath(*["d"] * 10)
    shallow.mkdir(parents=True)
    (shallow / "kept.md").write_text("NEEDLE-9 ten folders down\n")
    # A chain of folders deeper than any the memory tool makes (its paths stop at 1,024
    # characters): each is opened from the workdir down, so the walk stops somewhere.
    deep = memories.joinpath(*["e"] * 70)
    deep.mkdir(parents=True)
    (deep / "deep.md").write_text("NEEDLE-9 seventy folders down\n")
    result = cli("grep", "NEEDLE-9", "--workdir", filled)
    assert result.out.splitlines() == [f"{shallow}/kept.md:1:NEEDLE-9 ten folders down"]
    assert result.code == 2  # not everything was searched, as for a file not read
    assert result.err.count("\n") == 1
    assert "deeper than 64 folders" in result.err and "memories/e/e/" in result.err
