"""Every door to the one search engine finds the same lines: the agent's Grep, the retrieval
tool's pattern search, `ctxoffload grep` (its engine, and ripgrep where it hands a file to it)
and the viewer's search, given the same pattern, file and flags (each door adapted: the agent's
tools take a fixed string as `escape(string)` and ignore case by `(?i)`), give the same line
numbers and the same text; a door that cuts a long line around its match gives a part of that
line. A byte that is not UTF-8 is U+FFFD to every pattern, as Read shows it; a binary file is
searched by none of them, and each door says so."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from ctxoffload import LocalWorkspace
from ctxoffload._search.sniff import binary_reason
from ctxoffload.cli._grep_ripgrep import ripgrep_path
from ctxoffload.cli.ui._model import UiModel
from ctxoffload.exceptions import CliError, InvalidContent
from ctxoffload.readback import FileToolbox, escape, retrieve_offloaded_content

LONG = "x" * 100_000 + " ERROR 7 at the end of a long line"


class Case(NamedTuple):
    content: bytes
    pattern: str
    fixed: bool = False
    ignore_case: bool = False
    context: int = 0


CASES = {
    "regex": Case(b"ok 1\nERROR 42 disk\nERRXX 3\nfine\nERROR 7 net\n", r"ERR(OR|XX) \d+"),
    "fixed string with metacharacters": Case(
        b"a.b(c) [x]{2}\naxb(c) [x]{2}\nq\na.b(c) [x]{2} again\n", "a.b(c) [x]{2}", fixed=True
    ),
    "ignore case": Case(b"Error one\nERROR two\nerror three\nnothing\n", "error", ignore_case=True),
    "not UTF-8": Case(b"caf\xe9 ERROR 1\nplain\n\xff\xfe ERROR 2 \x80\n", "ERROR [0-9]"),
    "very long line": Case(f"head\n{LONG}\ntail ERROR 8\n".encode(), r"ERROR \d"),
    "context lines": Case(
        b"1\n2\nERROR a\n4\n5\n6\n7\nERROR b\nERROR c\n10\n11\n12\n", "ERROR", context=1
    ),
    "carriage returns": Case(b"done\r\nnot done yet\r\ndone\n", "done$"),
    # A byte that is not UTF-8 is the U+FFFD Read shows for it: `.` or a negated class finds
    # it, and so does a U+FFFD copied from what Read showed.
    "not UTF-8, literal": Case(b"caf\xe9 ERROR 1\n\xff\xfe ERROR\xff\nplain\n", "ERROR"),
    "not UTF-8, dot": Case(b"ok \xff end\nok e end\nok  end\nplain\n", "ok . end"),
    "not UTF-8, negated class": Case(b"[\xff]\n[a]\n[\xc3]\n[]\n", r"^\[[^a]\]$"),
    "not UTF-8, U+FFFD": Case(b"caf\xe9\nplain\n\xef\xbf\xbd stored as UTF-8\n", "\ufffd"),
    "not UTF-8, fixed string": Case(b"a\xff.b\na?.b\na..b\n", "\ufffd.b", fixed=True),
}

# Binary by the one sniff (`_search.sniff.binary_reason`), though each holds a line "ERROR".
BINARY = {
    "NUL bytes": b"x\x00y ERROR\nERROR 2\n",
    "PNG": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06"
    b"\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\x0btEXtERROR\n1\n\x00\x00\x00\x00IEND\xaeB`\x82",
}


class Found(NamedTuple):
    number: int
    text: str
    is_match: bool


def _expected(case: Case) -> list[Found]:
    """What a plain line-by-line search of the decoded file finds (Python's re)."""
    flags = re.IGNORECASE if case.ignore_case else 0
    regex = re.compile(re.escape(case.pattern) if case.fixed else case.pattern, flags)
    lines = [
        line.removesuffix("\r") for line in case.content.decode("utf-8", "replace").split("\n")[:-1]
    ]
    matching = [i for i, line in enumerate(lines) if regex.search(line)]
    shown = sorted(
        {j for i in matching for j in range(i - case.context, i + case.context + 1)}
        & set(range(len(lines)))
    )
    return [Found(j + 1, lines[j], j in matching) for j in shown]


def _agent_pattern(case: Case) -> str:
    pattern = escape(case.pattern) if case.fixed else case.pattern
    return "(?i)" + pattern if case.ignore_case else pattern


def _grep_tool(case: Case, workdir: Path, file: Path) -> list[Found]:
    answer = FileToolbox([workdir]).grep(
        _agent_pattern(case), str(file), context_lines=case.context, max_matches=100
    )
    found = []
    for line in answer.splitlines():
        mark = re.match(r"(?:.*/)?tool_result-matrix\.txt([:-])(\d+)\1", line)
        if mark is not None:
            text = line[mark.end() :]
            found.append(Found(int(mark.group(2)), text, mark.group(1) == ":"))
    return found


def _retrieval_tool(case: Case, workdir: Path, file: Path) -> list[Found]:
    answer = asyncio.run(
        retrieve_offloaded_content(
            LocalWorkspace(workdir),
            str(file),
            pattern=_agent_pattern(case),
            context_lines=case.context,
            max_chars=200_000,
        )
    )
    found = []
    for line in answer.splitlines()[1:]:
        mark = re.match(r"([> ]) *(\d+)\t", line)
        if mark is not None:
            found.append(Found(int(mark.group(2)), line[mark.end() :], mark.group(1) == ">"))
    return found


def _flags(case: Case) -> list[str]:
    return ["-F"] * case.fixed + ["-i"] * case.ignore_case


def _ctxoffload_grep(case: Case, workdir: Path, file: Path) -> list[Found]:
    """Its --json matches; with context lines, its printed lines."""
    shows = ["-C", str(case.context), "--max-columns", "0"] if case.context else ["--json"]
    done = _run_grep(case, workdir, shows, "python")
    if not case.context:
        return [Found(hit["line"], hit["text"], True) for hit in json.loads(done.stdout)]
    return _printed(done.stdout, file)


def _ripgrep(case: Case, workdir: Path, file: Path) -> list[Found]:
    """Its printed lines, with ripgrep where it takes the file (no context lines, a pattern
    it reads as RE2 does, a file that is UTF-8 throughout), else its engine."""
    rg = ripgrep_path()
    assert rg is not None, "ripgrep is missing: pip install -e '.[test]' installs its wheel"
    shows = ["-C", str(case.context)] if case.context else []
    return _printed(_run_grep(case, workdir, [*shows, "--max-columns", "0"], rg).stdout, file)


def _run_grep(
    case: Case, workdir: Path, shows: list[str], engine: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxoffload",
            "--workdir",
            str(workdir),
            "grep",
            *_flags(case),
            *shows,
            "--",
            case.pattern,
            "s",
        ],
        capture_output=True,
        check=True,
        env=_env(engine),
    )


def _env(engine: str) -> dict[str, str]:
    """A bare environment naming the engine, and the source the tests import (PYTHONPATH)."""
    env = {"CTXOFFLOAD_GREP": engine, "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _printed(stdout: bytes, file: Path) -> list[Found]:
    """The lines `ctxoffload grep` printed for `file`, decoded as Read decodes them (a byte
    0x80-0x9f that is not UTF-8 is printed inert, as `\\x80`: terminal safety, not the
    search, so it is read back as the byte)."""
    found = []
    prefix = str(file).encode()
    for line in stdout.split(b"\n"):
        if line.startswith(prefix):
            sep, rest = line[len(prefix) : len(prefix) + 1], line[len(prefix) + 1 :]
            number, _, text = rest.partition(sep)
            text = re.sub(rb"\\x([89][0-9a-f])", lambda m: bytes.fromhex(m[1].decode()), text)
            found.append(Found(int(number), text.decode("utf-8", "replace"), sep == b":"))
    return found


def _viewer_search(case: Case, workdir: Path, file: Path) -> list[Found]:
    answer = UiModel(str(workdir)).search(
        case.pattern, "s", fixed=case.fixed, ignore_case=case.ignore_case
    )
    return [Found(row["line"], row["text"], True) for row in answer["matches"]]


DOORS = {
    "Grep": (_grep_tool, True),
    "retrieval": (_retrieval_tool, True),
    "ctxoffload grep": (_ctxoffload_grep, True),
    "ctxoffload grep, ripgrep": (_ripgrep, True),
    "viewer": (_viewer_search, False),  # no context lines: the matches alone
}


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("case", CASES)
def test_every_door_finds_the_same_lines(tmp_path: Path, case: str, door: str) -> None:
    searched = CASES[case]
    file = tmp_path / "sessions" / "s" / "tool_result-matrix.txt"
    file.parent.mkdir(parents=True)
    file.write_bytes(searched.content)
    search, shows_context = DOORS[door]
    expected = _expected(searched)
    if not shows_context:
        expected = [line for line in expected if line.is_match]
    found = search(searched, tmp_path, file)
    assert [(f.number, f.is_match) for f in found] == [(e.number, e.is_match) for e in expected]
    for got, want in zip(found, expected, strict=True):
        assert got.text == want.text or _a_cut_of(got.text, want.text), (got, want)


def _a_cut_of(shown: str, line: str) -> bool:
    """Whether `shown` is `line` cut around its match, as the agent's tools cut a long line:
    `…part… [line has N characters; showing a–b]`."""
    cut = re.fullmatch(r"…?(.*?)…? \[line has ([\d,]+) characters; showing [\d,]+–[\d,]+\]", shown)
    return (
        cut is not None and int(cut.group(2).replace(",", "")) == len(line) and cut.group(1) in line
    )


def _refusal(door: str, workdir: Path, file: Path, pattern: str) -> str:
    """What `door` says of `pattern`, where it refuses it; '' where it searched."""
    if door == "Grep":
        answer = FileToolbox([workdir]).grep(pattern, str(file))
        return answer if answer.startswith("Error:") else ""
    if door == "retrieval":
        try:
            asyncio.run(
                retrieve_offloaded_content(LocalWorkspace(workdir), str(file), pattern=pattern)
            )
        except InvalidContent as refused:
            return str(refused)
        return ""
    if door.startswith("ctxoffload grep"):
        done = _run_cli(door, workdir, pattern)
        return done.stderr.decode() if done.returncode == 2 else ""
    try:
        UiModel(str(workdir)).search(pattern, "s")
    except CliError as refused:
        return str(refused)
    return ""


def _run_cli(door: str, workdir: Path, pattern: str) -> subprocess.CompletedProcess[bytes]:
    engine = ripgrep_path() if door.endswith("ripgrep") else "python"
    return subprocess.run(
        [sys.executable, "-m", "ctxoffload", "--workdir", str(workdir), "grep", "--", pattern],
        capture_output=True,
        env=_env(str(engine)),
    )


def _said_of(door: str, workdir: Path, file: Path) -> str:
    """What `door` says when asked for "ERROR" in a binary `file`: each its own way, and
    none finds a line."""
    if door == "Grep":
        return FileToolbox([workdir]).grep("ERROR", str(file))
    if door == "retrieval":
        with pytest.raises(InvalidContent) as refused:
            asyncio.run(
                retrieve_offloaded_content(LocalWorkspace(workdir), str(file), pattern="ERROR")
            )
        return str(refused.value)
    if door.startswith("ctxoffload grep"):
        done = _run_cli(door, workdir, "ERROR")
        assert (done.returncode, done.stdout) == (1, b""), done  # nothing found, no error
        return done.stderr.decode()
    answer = UiModel(str(workdir)).search("ERROR", "s")
    assert answer["matches"] == [], answer
    return "\n".join(answer["notes"])


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("content", BINARY)
def test_no_door_searches_a_binary_file_and_each_says_why(
    tmp_path: Path, content: str, door: str
) -> None:
    file = tmp_path / "sessions" / "s" / "tool_result-matrix.txt"
    file.parent.mkdir(parents=True)
    file.write_bytes(BINARY[content])
    why = binary_reason(BINARY[content])
    assert why is not None
    said = _said_of(door, tmp_path, file)
    assert "binary" in said and why in said, said


@pytest.mark.parametrize("door", ["Grep", "retrieval", "viewer"])
def test_a_lone_surrogate_in_a_pattern_given_as_text_is_refused_alike(
    tmp_path: Path, door: str
) -> None:
    # A model's JSON (or a page) can spell one; no text holds it. (A command line cannot: a
    # byte that is not UTF-8 there is searched as itself.)
    file = tmp_path / "sessions" / "s" / "tool_result-matrix.txt"
    file.parent.mkdir(parents=True)
    file.write_bytes(b"ok \xff end\n")
    said = _refusal(door, tmp_path, file, "ok \udcff")
    assert "it holds a lone surrogate ('\\udcff')" in said, said


@pytest.mark.parametrize("door", DOORS)
def test_every_door_refuses_an_empty_pattern_alike(tmp_path: Path, door: str) -> None:
    # It would match every line: a file's whole text, which reading it gives, capped.
    file = tmp_path / "sessions" / "s" / "tool_result-matrix.txt"
    file.parent.mkdir(parents=True)
    file.write_bytes(b"one\ntwo\n")
    said = _refusal(door, tmp_path, file, "")
    assert "the pattern is empty" in said, said


# A context.jsonl as stored: a byte that is not UTF-8 (a torn or foreign write), and a message
# whose text JSON escapes.
LOG = (
    b'{"role": "user", "content": "ok \xff end"}\n'
    b'{"role": "assistant", "content": "say \\"hi\\"\\nline two"}\n'
    b'{"role": "tool", "content": "nothing here"}\n'
)
RAW = LOG.decode("utf-8", "replace").splitlines()


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ('"role"', {1: RAW[0], 2: RAW[1], 3: RAW[2]}),  # only inside the JSON: shown raw
        ('"content": "say', {2: RAW[1]}),
        ("ok . end", {1: None}),  # the byte that is not UTF-8 is U+FFFD
        ('say "hi"', {2: None}),  # as the model saw it, not as stored
        ("^line two$", {2: None}),
    ],
    ids=["key", "raw JSON", "not UTF-8", "escaped", "second line"],
)
def test_every_door_judges_a_context_log_line_alike(
    tmp_path: Path, door: str, pattern: str, expected: dict[int, str | None]
) -> None:
    """One function judges a context.jsonl line for every door: the same log lines match,
    and a line that matches only as raw JSON is shown raw by each (`None`: shown as its
    message's text, each door its own way)."""
    file = tmp_path / "sessions" / "s" / "context.jsonl"
    file.parent.mkdir(parents=True)
    file.write_bytes(LOG)
    found = _log_search(door, tmp_path, file, pattern)
    assert sorted(found) == sorted(expected), found
    for number, raw in expected.items():
        if raw is not None:
            assert found[number] == raw, (number, found[number])


def _log_search(door: str, workdir: Path, file: Path, pattern: str) -> dict[int, str]:
    """The log lines `door` finds for `pattern`, each with the text it shows first."""
    found: dict[int, str] = {}
    if door == "Grep":
        answer = FileToolbox([workdir]).grep(pattern, str(file), max_matches=100)
        for line in answer.splitlines():
            mark = re.match(r"(?:.*/)?context\.jsonl:(\d+):", line)
            if mark is not None:
                found.setdefault(int(mark.group(1)), line[mark.end() :])
    elif door == "retrieval":
        answer = asyncio.run(
            retrieve_offloaded_content(LocalWorkspace(workdir), str(file), pattern=pattern)
        )
        for line in answer.splitlines()[1:]:
            mark = re.match(r"> *(\d+)\t", line)
            if mark is not None:
                found.setdefault(int(mark.group(1)), line[mark.end() :])
    elif door.startswith("ctxoffload grep"):
        done = _run_cli(door, workdir, pattern)
        for line in done.stdout.split(b"\n"):
            if line.startswith(str(file).encode() + b":"):
                number, _, text = line[len(str(file)) + 1 :].partition(b":")
                found.setdefault(int(number), text.decode("utf-8", "replace"))
    else:
        for row in UiModel(str(workdir)).search(pattern, "s")["matches"]:
            found.setdefault(row["line"], row["text"])
    return found
